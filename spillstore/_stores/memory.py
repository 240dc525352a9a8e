"""The in-memory store: the whole contract in RAM, for tests and hosts without a disk."""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable

from spillstore._core.cache import BoundedCache
from spillstore._core.index import DEFAULT_RETAINED_TAIL_BYTES, DEFAULT_RETENTION_BYTES
from spillstore._errors import StoreError
from spillstore._stores.backend import BytesReader, DataReader
from spillstore._stores.base import Store
from spillstore._stores.errors import expired_error, not_found_error
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink

__all__ = ["MemoryStore"]

TOMBSTONES_KEPT = 100_000
"""Removed ids remembered (to say "expired" rather than "not found"), the most recently
removed or read kept."""


class _MemorySink(Sink):
    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._parts: list[bytes] = []

    def write(self, data: bytes | memoryview) -> None:
        self._parts.append(bytes(data))

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        data = b"".join(self._parts)
        self._parts = []
        if len(data) != meta.stored_bytes:
            raise StoreError(f"spill {meta.spill_id}: {len(data)} bytes written, expected more")
        return self._store._publish(meta, data, index)

    def discard(self) -> None:
        self._parts = []


class MemoryStore(Store):
    """A store that keeps spills in this process's memory (thread-safe).

    Same contract as the local store, minus paths: ``meta.path`` is None and
    ``resolve`` accepts ids only. Removed ids are remembered (100,000 of them) so
    reading one raises :class:`~spillstore.SpillExpired`.

    Args:
        clock: epoch seconds, for ``created_at`` and ``gc`` (default ``time.time``).
        retention_bytes: default retention cap (None: keep everything).
        retained_tail_bytes: default tail kept past the cap.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        retention_bytes: int | None = DEFAULT_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
    ) -> None:
        super().__init__(
            clock=clock, retention_bytes=retention_bytes, retained_tail_bytes=retained_tail_bytes
        )
        self._lock = threading.Lock()
        self._spills: dict[str, tuple[SpillMeta, bytes, bytes]] = {}
        self._tombstones: BoundedCache[str, tuple[str, float]] = BoundedCache(TOMBSTONES_KEPT)

    def _publish(self, meta: SpillMeta, data: bytes, index: bytes) -> SpillMeta:
        with self._lock:
            existing = self._spills.get(meta.spill_id)
            if existing is not None:
                return existing[0]
            self._spills[meta.spill_id] = (meta, data, index)
            self._tombstones.pop(meta.spill_id)
        return meta

    def _create(self, session: str) -> Sink:
        return _MemorySink(self)

    def _stat(self, spill_id: str) -> SpillMeta:
        with self._lock:
            entry = self._spills.get(spill_id)
            if entry is not None:
                return entry[0]
            tombstone = self._tombstones.get(spill_id)
        if tombstone is not None:
            raise expired_error(spill_id, *tombstone)
        raise not_found_error(spill_id)

    def _entry(self, meta: SpillMeta) -> tuple[SpillMeta, bytes, bytes]:
        with self._lock:
            entry = self._spills.get(meta.spill_id)
            tombstone = self._tombstones.get(meta.spill_id)
        if entry is None:
            raise expired_error(meta.spill_id, *(tombstone or (None, None)))
        return entry

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        with self._lock:
            return [
                meta
                for meta, _, _ in self._spills.values()
                if session is None or meta.session == session
            ]

    def _open(self, meta: SpillMeta) -> DataReader:
        return BytesReader(self._entry(meta)[1])

    def _read_index(self, meta: SpillMeta) -> bytes:
        return self._entry(meta)[2]

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        with self._lock:
            removed = self._spills.pop(meta.spill_id, None) is not None
            if removed:
                self._tombstones.put(meta.spill_id, (reason, now))
        return removed
