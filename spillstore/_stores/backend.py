"""The backend protocol: what a store implements, and the state every store keeps.

A backend (local directory, memory, S3) subclasses :class:`~spillstore.Store` and
implements the six primitives declared here: ``_create`` (start a spill, returning a
:class:`~spillstore._stores.writer.Sink`), ``_stat``, ``_list``, ``_open`` (returning a
:class:`DataReader`), ``_read_index`` and ``_remove``. It may override the hooks below
them (a cross-process cleaner lock, leftovers of dead writers, housekeeping after
``gc``, spill paths, adopting a file without a copy, reading many spills in one pass).
Every public operation is built on these, once, in the layers above, each a subclass of
the one before::

    Backend        the primitives and hooks, the store's defaults (and USE_STORE_DEFAULT),
                   the line-index cache (here)
    CleanupOps     delete, clean and gc (cleanup.py)
    Store          writer, put, adopt, stat, list, the reads, resolve (base.py)
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import enum
import logging
import mmap
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar, Final

from spillstore._core.cache import BoundedCache
from spillstore._core.gc_plan import GcEntry
from spillstore._core.index import (
    DEFAULT_RETAINED_TAIL_BYTES,
    DEFAULT_RETENTION_BYTES,
    LineIndex,
    validate_retention,
)
from spillstore._core.paging import ReadFn, physical
from spillstore._errors import PathOutsideStore, SpillstoreError, StoreError
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink, SpillWriter

__all__ = [
    "INDEX_CACHE_SIZE",
    "USE_STORE_DEFAULT",
    "Backend",
    "BytesReader",
    "DataReader",
    "MappedReader",
    "Retention",
    "UseStoreDefault",
]

logger = logging.getLogger("spillstore")

INDEX_CACHE_SIZE: Final = 32
"""Line indexes kept in memory per store (the spills paged most recently)."""


class DataReader(abc.ABC):
    """Reads one spill's stored data by *physical* offset (the data file's own bytes)."""

    @abc.abstractmethod
    def read(self, start: int, end: int) -> bytes:
        """Return the stored bytes ``[start, end)`` of the data file."""

    @abc.abstractmethod
    def buffer(self) -> bytes | memoryview:
        """Return the whole stored data as a buffer (an mmap view for local files)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the reader's resources."""

    def __enter__(self) -> DataReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MappedReader(DataReader):
    """A reader whose buffer is a read-only ``mmap`` of a file (Grep scans it in place)."""

    _mmap: mmap.mmap | None = None

    def _map(self, fd: int) -> memoryview:
        """Map the file ``fd`` (once) and return a view of all of it."""
        if self._mmap is None:
            self._mmap = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        return memoryview(self._mmap)

    def close(self) -> None:
        """Unmap the file, unless a caller still holds a view (then it is unmapped when freed)."""
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:
                logger.debug("spill mmap still exported; left to the garbage collector")
            self._mmap = None


class BytesReader(DataReader):
    """A reader over stored data already in memory."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, start: int, end: int) -> bytes:
        return self._data[start:end]

    def buffer(self) -> bytes:
        return self._data


class UseStoreDefault(enum.Enum):
    """Sentinel type: "not passed, use the store's default" (None means *off*)."""

    default = "USE_STORE_DEFAULT"


USE_STORE_DEFAULT: Final = UseStoreDefault.default
"""Pass (or leave) this to use the store's configured retention."""

Retention = int | None | UseStoreDefault


class Backend(abc.ABC):
    """The primitives and hooks a store implements, and the state every store keeps.

    The constructor's arguments are documented on :class:`~spillstore.Store`.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        retention_bytes: int | None = DEFAULT_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
    ) -> None:
        validate_retention(retention_bytes, retained_tail_bytes)
        self._clock = clock
        self._retention_bytes = retention_bytes
        self._retained_tail_bytes = retained_tail_bytes
        self._indexes: BoundedCache[tuple[str, str, float], LineIndex] = BoundedCache(
            INDEX_CACHE_SIZE
        )
        self._local_cleaner = threading.Lock()

    _LISTED_IN_ORDER: ClassVar[bool] = False
    """Whether ``_list`` already returns spills oldest first (by ``created_at``, then id)."""

    # ----------------------------------------------------------------- primitives

    @abc.abstractmethod
    def _create(self, session: str) -> Sink:
        """Start a new spill in ``session``."""

    @abc.abstractmethod
    def _stat(self, spill_id: str) -> SpillMeta:
        """Return a visible spill's metadata.

        Raises:
            SpillExpired: it existed and was removed.
            SpillNotFound: it never existed.
        """

    @abc.abstractmethod
    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        """Return the visible spills of ``session`` (all sessions when None)."""

    @abc.abstractmethod
    def _open(self, meta: SpillMeta) -> DataReader:
        """Open a spill's stored data for reading.

        Raises:
            SpillExpired: it was removed since ``meta`` was read.
            StoreError: the data does not match its metadata.
        """

    @abc.abstractmethod
    def _read_index(self, meta: SpillMeta) -> bytes:
        """Return the serialized line index of a spill."""

    @abc.abstractmethod
    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        """Remove a spill, leaving a tombstone; return whether this call removed it.

        A spill already removed by someone else is not an error (return False).
        """

    # ----------------------------------------------------------------- hooks

    @contextlib.contextmanager
    def _cleaner_lock(self) -> Iterator[None]:
        """Hold the lock that lets one cleaner run at a time."""
        with self._local_cleaner:
            yield

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], bool]]]:
        """Return leftovers of dead writers older than ``grace``, with their removers.

        A remover may decide again, from a fresh view, and returns whether it removed
        the leftover (only removed ones are reported).
        """
        return []

    def _data_keys(self) -> dict[str, str]:
        """Spills that share their stored data with others, by id: the key of the data
        (``gc`` counts shared bytes once). Default: none share."""
        return {}

    def _scan_data(
        self, metas: Iterable[SpillMeta]
    ) -> Iterator[tuple[SpillMeta, bytes | memoryview | SpillstoreError]]:
        """Yield each spill's stored data in turn (``reader.buffer()``), or the error
        opening or fetching it raised; each buffer is released when the next spill is
        asked for.

        A backend that can read many spills more cheaply than one :meth:`_open` each (a
        directory held open) overrides this; its errors must read as :meth:`_open`'s.
        """
        for meta in metas:
            with contextlib.ExitStack() as held:
                try:  # a backend may find the data gone only when it fetches it
                    buffer = held.enter_context(self._open(meta)).buffer()
                except SpillstoreError as exc:
                    yield meta, exc
                    continue
                try:
                    yield meta, buffer
                finally:
                    if isinstance(buffer, memoryview):
                        with contextlib.suppress(BufferError):  # a caller exported a view
                            buffer.release()

    def _after_gc(self, *, now: float) -> None:  # noqa: B027 - optional hook
        """Housekeeping after a real (not dry-run) ``gc``: prune old tombstones, etc."""

    def _spill_id_of_path(self, path: str) -> str:
        """Return the spill id whose data file is ``path``.

        Raises:
            PathOutsideStore: this store has no paths, or the path is not a spill.
        """
        raise PathOutsideStore(
            f"{type(self).__name__} has no files; refer to spills by id", path=path
        )

    def _adopt_in_place(
        self, path: str, *, session: str, retention_bytes: int | None
    ) -> tuple[Sink, int] | None:
        """Take the file ``path`` into the store without a copy, or return None to copy it.

        Returns a sink that already holds the file's bytes, and a descriptor to read
        them once (to hash, count and index them); the spill is then written with no
        retention cut, so a store takes in place only files within ``retention_bytes``.
        """
        return None

    # ----------------------------------------------------------------- defaults

    def _retention(
        self, retention_bytes: Retention, retained_tail_bytes: int | UseStoreDefault
    ) -> tuple[int | None, int]:
        """Resolve a call's cap and tail against the store's defaults, and check them.

        A default tail never exceeds the cap it is used with.
        """
        cap = (
            self._retention_bytes
            if isinstance(retention_bytes, UseStoreDefault)
            else retention_bytes
        )
        if isinstance(retained_tail_bytes, UseStoreDefault):
            tail = self._retained_tail_bytes if cap is None else min(self._retained_tail_bytes, cap)
        else:
            tail = retained_tail_bytes
        validate_retention(cap, tail)
        return cap, tail

    def _spill_writer(
        self, sink: Sink, names: tuple[str, str, str], cap: int | None, tail: int
    ) -> SpillWriter:
        """A writer into ``sink``; ``names`` are the session, tool name and call id."""
        session, tool_name, tool_call_id = names
        return SpillWriter(
            sink,
            session=session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            retention_bytes=cap,
            retained_tail_bytes=tail,
            created_at=self._clock,
            on_commit=self._remember_index,
        )

    # ----------------------------------------------------------------- line indexes

    def _remember_index(self, meta: SpillMeta, index: LineIndex) -> None:
        self._indexes.put((meta.spill_id, meta.sha256, meta.created_at), index)

    def _index_for(self, meta: SpillMeta) -> LineIndex:
        cached = self._indexes.get((meta.spill_id, meta.sha256, meta.created_at))
        if cached is not None:
            return cached
        raw = self._read_index(meta)
        try:
            index = LineIndex.from_bytes(raw, meta.stored_ranges)
        except ValueError as exc:
            raise StoreError(f"the line index of spill {meta.spill_id} is corrupt") from exc
        if not index.describes(meta.total_bytes, meta.total_lines):
            raise StoreError(f"the line index of spill {meta.spill_id} does not match it")
        self._remember_index(meta, index)
        return index

    @staticmethod
    def _reader_fn(meta: SpillMeta, reader: DataReader) -> ReadFn:
        def read(start: int, end: int) -> bytes:
            return reader.read(*physical(meta.stored_ranges, start, end))

        return read
