"""Exceptions raised by spillstore.

Errors the *developer* got wrong raise; errors the *model* should act on (a bad offset,
an expired spill, an invalid pattern) become short tool results in the recovery tools,
built from these same classes.

The tree::

    SpillstoreError
    ├── ConfigError(ValueError)             bad settings, caps or arguments
    ├── UsageError(RuntimeError)            the API used against its contract (a finished writer)
    ├── InvalidSpillId(ValueError)          an id that is not one spillstore makes
    ├── PathOutsideStore(ValueError)        a path that does not resolve inside the store
    ├── RequestRefused(ValueError)          a tool request the model must fix (a bad regex)
    ├── SpillNotFound(LookupError)          no spill with that id
    │   └── SpillExpired                    it existed, and was deleted or collected
    ├── RangeNotStored(LookupError)         the range falls in the gap the retention cap cut
    ├── StoreError(OSError)                 the backend failed (disk full, EIO, EACCES, ...)
    │   └── UnsafeStoreRoot                 the root is a symlink, foreign, or writable by others
    └── UpstreamUnavailable(ConnectionError)  the MCP proxy's upstream cannot take requests

Every error survives a pickle round-trip with its message and attributes (errors cross
process boundaries in worker pools and test runners).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "InvalidSpillId",
    "PathOutsideStore",
    "RangeNotStored",
    "RequestRefused",
    "SpillExpired",
    "SpillNotFound",
    "SpillstoreError",
    "StoreError",
    "UnsafeStoreRoot",
    "UpstreamUnavailable",
    "UsageError",
]


class SpillstoreError(Exception):
    """Base class of every error spillstore raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The subclasses take their data as keyword-only arguments, which the default
        # reduce (``cls(*args)``) cannot pass: rebuild from args, then restore the data.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[SpillstoreError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigError(SpillstoreError, ValueError):
    """A setting, cap or argument is invalid.

    Attributes:
        field: the settings field at fault, when there is one.
        env_var: the environment variable that sets that field, when there is one.
    """

    def __init__(self, message: str, *, field: str | None = None, env_var: str | None = None):
        super().__init__(message)
        self.field = field
        self.env_var = env_var


class UsageError(SpillstoreError, RuntimeError):
    """The API was used against its contract.

    An object used out of turn (a finished writer or accumulator, a proxy not entered),
    or a host's callback that returned the wrong thing (a loop model that returned no
    ``ModelTurn``).
    """


class InvalidSpillId(SpillstoreError, ValueError):
    """A spill id is malformed (not one that spillstore could have made)."""

    def __init__(self, message: str, *, spill_id: str):
        super().__init__(message)
        self.spill_id = spill_id


class PathOutsideStore(SpillstoreError, ValueError):
    """A path does not resolve to a regular spill file inside the store."""

    def __init__(self, message: str, *, path: str):
        super().__init__(message)
        self.path = path


class RequestRefused(SpillstoreError, ValueError):
    """A tool request the model must fix (a bad pattern, an impossible page).

    The message is the model-facing text; the recovery tools return it as an error result.
    """


class SpillNotFound(SpillstoreError, LookupError):
    """No spill exists with this id."""

    def __init__(self, message: str, *, spill_id: str):
        super().__init__(message)
        self.spill_id = spill_id


class SpillExpired(SpillNotFound):
    """The spill existed but was deleted or garbage-collected."""


class RangeNotStored(SpillstoreError, LookupError):
    """A requested byte range lies (partly) in the part the retention cap did not keep.

    Attributes:
        start, end: the unstored original byte range ``[start, end)`` that was hit.
    """

    def __init__(self, message: str, *, spill_id: str, start: int, end: int):
        super().__init__(message)
        self.spill_id = spill_id
        self.start = start
        self.end = end


class StoreError(SpillstoreError, OSError):
    """The storage backend failed; nothing partial was left visible."""


class UnsafeStoreRoot(StoreError):
    """The store root is a symlink, owned by another user, or group/world-writable."""


class UpstreamUnavailable(SpillstoreError, ConnectionError):
    """The MCP proxy's upstream server cannot take requests (it failed to start, or is gone)."""
