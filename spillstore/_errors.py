"""Exceptions raised by spillstore.

Errors the *developer* got wrong raise; errors the *model* should act on (a bad offset,
an expired spill, an invalid pattern) become short tool results in the recovery tools,
built from these same classes.

The tree::

    SpillstoreError
    ├── ConfigError(ValueError)             bad settings, caps or arguments
    ├── InvalidSpillId(ValueError)          an id that is not one spillstore makes
    ├── PathOutsideStore(ValueError)        a path that does not resolve inside the store
    ├── SpillNotFound(LookupError)          no spill with that id
    │   └── SpillExpired                    it existed, and was deleted or collected
    ├── RangeNotStored(LookupError)         the range falls in the gap the retention cap cut
    └── StoreError(OSError)                 the backend failed (disk full, EIO, EACCES, ...)
        └── UnsafeStoreRoot                 the root is a symlink, foreign, or writable by others
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "InvalidSpillId",
    "PathOutsideStore",
    "RangeNotStored",
    "SpillExpired",
    "SpillNotFound",
    "SpillstoreError",
    "StoreError",
    "UnsafeStoreRoot",
]


class SpillstoreError(Exception):
    """Base class of every error spillstore raises on purpose."""


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
