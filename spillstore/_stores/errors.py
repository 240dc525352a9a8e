"""The errors every backend raises alike: "not found", "expired", and failed I/O.

A read of a spill that never existed and of one that was removed must say different
things (the second says why and when), in the same words for every backend; and a
failing system call becomes one :class:`~spillstore.StoreError`, chained to its cause
(house-style 11).
"""

from __future__ import annotations

import datetime
from typing import ClassVar

from spillstore._errors import SpillExpired, SpillNotFound, StoreError

__all__ = ["expired_error", "map_os_errors", "not_found_error"]

_REMOVAL_REASONS = {
    "delete": "deleted",
    "age": "collected by gc as older than max_age",
    "total_bytes": "collected by gc to keep the store under max_total_bytes",
    "max_files": "collected by gc to keep the store under max_files",
    "session": "removed when its session was cleaned",
    "check": "removed by spillstore check --fix as damaged",
}


def not_found_error(spill_id: str) -> SpillNotFound:
    """Build the :class:`SpillNotFound` for an id the store never held."""
    return SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)


def expired_error(spill_id: str, reason: str | None, removed_at: float | None) -> SpillExpired:
    """Build the :class:`SpillExpired` for a removed spill, saying why and when.

    ``reason`` and ``removed_at`` come from the spill's tombstone; both are None when
    the store only knows the spill was there and is not any more.
    """
    why = _REMOVAL_REASONS.get(reason or "", "removed")
    when = ""
    if removed_at is not None:
        stamp = datetime.datetime.fromtimestamp(removed_at, datetime.UTC)
        when = f" at {stamp.isoformat(timespec='seconds')}"
    return SpillExpired(
        f"spill {spill_id} has expired: it was {why}{when}, and can no longer be read",
        spill_id=spill_id,
    )


class map_os_errors:  # lower case: a context manager used like a function
    """Translate ``OSError`` into one :class:`StoreError` saying what failed, chained.

    A class rather than a generator (``contextlib.contextmanager``): it wraps every
    system call of a read, and this costs a third as much. A subclass maps another kind
    of error (``_KIND``, worded by ``_error``).
    """

    __slots__ = ("_action",)
    _KIND: ClassVar[type[Exception]] = OSError

    def __init__(self, action: str) -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, self._KIND) and not isinstance(exc, StoreError):
            raise self._error(exc) from exc

    def _error(self, exc: Exception) -> StoreError:
        assert isinstance(exc, OSError)
        return StoreError(exc.errno, f"{self._action}: {exc.strerror or exc}")
