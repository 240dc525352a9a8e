"""A small bounded cache: the least recently used entry goes first. Pure: no I/O.

Stores keep a few such caches (sessions by id, line indexes, tombstones, metadata);
they share this one class, which is safe to use from several threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from spillstore._core.checks import check_int

__all__ = ["BoundedCache"]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class BoundedCache(Generic[_K, _V]):
    """A mapping of at most ``max_entries`` items, evicting the least recently used.

    Args:
        max_entries: the most items kept, at least 1.
    """

    def __init__(self, max_entries: int) -> None:
        self._max = check_int("max_entries", max_entries, minimum=1)
        self._items: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        """Return the value for ``key`` (marking it recently used), or ``None``."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        """Store ``value`` under ``key``, evicting the least recently used beyond the cap."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def pop(self, key: _K) -> _V | None:
        """Remove ``key``; return its value, or ``None`` if it was not cached."""
        with self._lock:
            return self._items.pop(key, None)
