"""The store protocol, and every decision the backends share.

A backend implements six small primitives (:class:`Store`'s abstract ``_create``,
``_stat``, ``_list``, ``_open``, ``_read_index`` and ``_remove``, plus a :class:`Sink`
and a :class:`DataReader`). Everything else lives here, once: streaming with bounded
memory, the retention cut, hashing and line counting, the line index, ranged and
line-based reads in *original* offsets, path resolution, ``gc`` and ``clean`` planning,
and the async twins. ``LocalStore``, ``MemoryStore`` and a later ``S3Store`` therefore
make the same decisions, and one contract suite tests them all.

Async twins (``aput``, ``astat``, ...) run the sync method in a worker thread with
``anyio.to_thread.run_sync``: one hop per operation, no second implementation
(house-style 3). anyio was chosen over aiofiles because ``aiofiles.os`` breaks under
pyfakefs while ``anyio.to_thread`` does not, and anyio already comes with ``mcp``.
"""

from __future__ import annotations

import abc
import builtins
import codecs
import contextlib
import datetime
import enum
import functools
import hashlib
import logging
import os
import queue
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio.to_thread

from spillstore._core.gc_plan import (
    DEFAULT_GRACE_SECONDS,
    GcCandidate,
    GcEntry,
    GcReason,
    GcReport,
    plan_gc,
    validate_gc_limits,
)
from spillstore._core.utf8 import ENCODE_ERRORS
from spillstore._errors import (
    ConfigError,
    InvalidSpillId,
    PathOutsideStore,
    RangeNotStored,
    SpillExpired,
    SpillstoreError,
    StoreError,
    UsageError,
)
from spillstore._stores.meta import (
    DEFAULT_RETAINED_TAIL_BYTES,
    DEFAULT_RETENTION_BYTES,
    IndexBuilder,
    LineIndex,
    LinePage,
    SpillMeta,
    cut_head,
    is_spill_id,
    make_spill_id,
    nth_newline,
    validate_retention,
    validate_session,
    validate_spill_id,
)

__all__ = [
    "USE_STORE_DEFAULT",
    "AsyncSpillWriter",
    "DataReader",
    "Sink",
    "SpillWriter",
    "Store",
    "UseStoreDefault",
    "expired_error",
    "map_os_errors",
]

logger = logging.getLogger("spillstore")

PIECE_BYTES: Final = 1 << 20
"""Large inputs are processed in pieces of this many bytes (bounded memory)."""

PIECE_CHARS: Final = 1 << 18
"""A ``str`` is encoded this many characters at a time (at most 1 MiB of UTF-8)."""

PIPELINE_MIN_BYTES: Final = 1 << 20
"""Outputs larger than this hash and write in a second thread, overlapping the work."""

ASYNC_BATCH_BYTES: Final = 256 * 1024
"""The async writer hands chunks to its thread in batches of about this size."""

INDEX_CACHE_SIZE: Final = 32

_T = TypeVar("_T")


class UseStoreDefault(enum.Enum):
    """Sentinel type: "not passed, use the store's default" (None means *off*)."""

    default = "USE_STORE_DEFAULT"


USE_STORE_DEFAULT: Final = UseStoreDefault.default
"""Pass (or leave) this to use the store's configured retention."""

Retention = int | None | UseStoreDefault


class Sink(abc.ABC):
    """Where a backend receives one spill's stored bytes while it is being written.

    ``write`` may be called from a worker thread (never concurrently with another call).
    ``publish`` makes the spill visible atomically, with its metadata and index, and
    returns the metadata as stored. ``discard`` removes everything written; it must be
    safe to call after a failed ``write`` or ``publish`` and more than once.
    """

    @abc.abstractmethod
    def write(self, data: bytes | memoryview) -> None:
        """Append bytes to the data being written."""

    @abc.abstractmethod
    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        """Make the spill visible under ``meta.spill_id``; return the stored metadata.

        If a spill with that id already exists (ids are content-derived, so it holds the
        same content), return its metadata instead; never overwrite it.
        """

    @abc.abstractmethod
    def discard(self) -> None:
        """Remove what was written; nothing of this spill stays visible or on disk."""


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


# --------------------------------------------------------------------------- writing


class _Worker:
    """One stage of the pipeline: a thread applying ``step`` to queued items, in order."""

    def __init__(self, step: Callable[[Any], object], pipeline: _Pipeline, name: str) -> None:
        self._step = step
        self._pipeline = pipeline
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=4)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: object) -> None:
        self._queue.put(item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._pipeline.error is None:
                try:
                    self._step(item)
                except BaseException as exc:  # handed to the caller's thread
                    self._pipeline.error = exc

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()


class _Pipeline:
    """Hashes every piece and writes the stored part; in two threads once large.

    ``hashlib`` (on large buffers) and file writes both release the GIL, so hashing
    piece *i*, writing piece *i* and the caller encoding and counting piece *i+1* run at
    the same time. Bounded queues keep memory flat; order is kept within each stage.
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._sha = hashlib.sha256()
        self._inline = 0
        self._workers: tuple[_Worker, _Worker] | None = None
        self.error: BaseException | None = None

    def submit(self, piece: bytes | memoryview, part: bytes | memoryview) -> None:
        if self.error is not None:
            raise self.error
        if self._workers is None:
            if self._inline + len(piece) <= PIPELINE_MIN_BYTES:
                self._inline += len(piece)
                if piece:
                    self._sha.update(piece)
                if part:
                    self._sink.write(part)
                return
            self._workers = (
                _Worker(self._sha.update, self, "spillstore-hash"),
                _Worker(self._sink.write, self, "spillstore-write"),
            )
        if piece:
            self._workers[0].put(piece)
        if part:
            self._workers[1].put(part)

    def _stop(self) -> None:
        if self._workers is not None:
            for worker in self._workers:
                worker.stop()
            self._workers = None

    def finish(self) -> str:
        """Wait for the workers; re-raise their error; return the sha256 hex digest."""
        self._stop()
        if self.error is not None:
            raise self.error
        return self._sha.hexdigest()

    def abort(self) -> None:
        """Stop the workers, dropping whatever is queued."""
        self._stop()


class _Utf8Check:
    """Incremental strict UTF-8 validation, on bounded windows, without copies.

    ``codecs.utf_8_decode`` on 128 KiB memoryview windows runs about 3x faster than an
    incremental decoder fed 1 MiB pieces (which concatenates and allocates large strs).
    A sequence cut between two pieces is carried over (at most 3 bytes).
    """

    WINDOW = 128 * 1024

    def __init__(self) -> None:
        self.valid = True
        self._carry = b""

    @property
    def pending(self) -> bool:
        """Whether a multi-byte sequence is waiting for its next bytes."""
        return bool(self._carry)

    def feed(self, piece: bytes | memoryview) -> None:
        if not self.valid:
            return
        view = memoryview(piece)
        start = 0
        try:
            if self._carry:
                joined = self._carry + bytes(view[: 4 - len(self._carry)])
                _, used = codecs.utf_8_decode(joined, "strict", False)
                if used == 0:
                    self._carry = joined
                    return
                start = used - len(self._carry)
                self._carry = b""
            while start < len(view):
                end = min(start + self.WINDOW, len(view))
                _, used = codecs.utf_8_decode(view[start:end], "strict", False)
                if end == len(view):
                    self._carry = bytes(view[start + used : end])
                    return
                start += used
        except UnicodeDecodeError:
            self.valid = False

    def finish(self) -> bool:
        """Return whether everything fed was valid UTF-8 (an unfinished sequence is not)."""
        return self.valid and not self._carry


def _check_open(state: str) -> None:
    if state != "open":
        raise UsageError(f"this spill writer is already {state}")


class SpillWriter:
    """Streams one output into the store with bounded memory; use as a context manager.

    ``write`` takes ``bytes`` (or any bytes-like) and ``str`` chunks in order; a ``str``
    is encoded as UTF-8 with each lone surrogate becoming U+FFFD (3 bytes). ``commit``
    makes the spill visible and returns its metadata; leaving the ``with`` block without
    committing (or calling ``abort``) removes everything written. Not thread-safe: one
    producer per writer.

    Memory stays bounded whatever the output size: bytes before the head cut go straight
    to the backend, only the retained tail (``retained_tail_bytes`` + 4) is kept in a
    ring, and sha256, byte and newline counts and the line index are computed as the
    bytes pass.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        retention_bytes: int | None,
        retained_tail_bytes: int,
        created_at: Callable[[], float],
        on_commit: Callable[[SpillMeta, LineIndex], None] | None = None,
    ) -> None:
        self._sink = sink
        self._session = session
        self._tool_name = tool_name
        self._tool_call_id = tool_call_id
        self._builder = IndexBuilder(retention_bytes, retained_tail_bytes)
        self._pipeline = _Pipeline(sink)
        self._utf8 = _Utf8Check()
        self._created_at = created_at
        self._on_commit = on_commit
        self._state = "open"

    @property
    def total_bytes(self) -> int:
        """Bytes written so far (UTF-8)."""
        return self._builder.total_bytes

    def __enter__(self) -> SpillWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state == "open":
            self.abort()

    def write(self, chunk: bytes | bytearray | memoryview | str) -> None:
        """Append a chunk of the output.

        Raises:
            StoreError: the backend failed; the writer is then aborted.
            ConfigError: the writer was already committed or aborted.
        """
        _check_open(self._state)
        try:
            if isinstance(chunk, str):
                for start in range(0, len(chunk), PIECE_CHARS):
                    encoded = chunk[start : start + PIECE_CHARS].encode("utf-8", ENCODE_ERRORS)
                    self._feed(encoded, 0, len(encoded), from_str=True)
            elif isinstance(chunk, bytes):
                if len(chunk) <= PIECE_BYTES:
                    self._feed(chunk, 0, len(chunk), from_str=False)
                else:
                    # Windows of one big bytes: no copies; one isascii() for all of it.
                    ascii_only = chunk.isascii()
                    for start in range(0, len(chunk), PIECE_BYTES):
                        end = min(start + PIECE_BYTES, len(chunk))
                        self._feed(chunk, start, end, from_str=ascii_only)
            elif isinstance(chunk, bytearray | memoryview):
                view = memoryview(chunk).cast("B")
                for start in range(0, len(view), PIECE_BYTES):
                    piece = bytes(view[start : start + PIECE_BYTES])
                    self._feed(piece, 0, len(piece), from_str=False)
            else:
                raise ConfigError(f"spill chunks must be bytes or str, not {type(chunk).__name__}")
        except BaseException:
            self.abort()
            raise

    def _feed(self, data: bytes, lo: int, hi: int, *, from_str: bool) -> None:
        # from_str: known valid UTF-8 (an encoded str, or ASCII), so skip the check
        # unless an earlier bytes chunk left a sequence unfinished.
        whole = lo == 0 and hi == len(data)
        piece: bytes | memoryview = data if whole else memoryview(data)[lo:hi]
        utf8 = self._utf8
        if utf8.valid and (utf8.pending or not (from_str or (whole and data.isascii()))):
            utf8.feed(piece)
        part = self._builder.feed(data, lo, hi)
        self._pipeline.submit(piece, part)

    def commit(self, *, suffix: str | None = None, media_notes: Sequence[str] = ()) -> SpillMeta:
        """Finish the spill and make it visible; return its metadata.

        Raises:
            StoreError: the backend failed; nothing of this spill is left visible.
        """
        _check_open(self._state)
        try:
            cut = self._builder.finish()
            for part in cut.final_parts:
                self._pipeline.submit(b"", part)
            sha256 = self._pipeline.finish()
            notes = tuple(media_notes)
            spill_id = make_spill_id(
                session=self._session,
                tool_name=self._tool_name,
                tool_call_id=self._tool_call_id,
                sha256=sha256,
                total_bytes=cut.total_bytes,
                stored_ranges=cut.stored_ranges,
                suffix=suffix,
                media_notes=notes,
            )
            meta = SpillMeta(
                spill_id=spill_id,
                session=self._session,
                tool_name=self._tool_name,
                tool_call_id=self._tool_call_id,
                total_bytes=cut.total_bytes,
                total_lines=cut.total_lines,
                stored_ranges=cut.stored_ranges,
                sha256=sha256,
                created_at=self._created_at(),
                suffix=suffix,
                media_notes=notes,
                invalid_utf8=not self._utf8.finish(),
            )
            published = self._sink.publish(meta, cut.index.to_bytes())
        except BaseException:
            self.abort()
            raise
        self._state = "committed"
        if self._on_commit is not None:
            self._on_commit(published, cut.index)
        return published

    def abort(self) -> None:
        """Drop the spill: nothing written stays visible or on disk. Idempotent."""
        if self._state != "open":
            return
        self._state = "aborted"
        self._pipeline.abort()
        self._sink.discard()


class AsyncSpillWriter:
    """The async twin of :class:`SpillWriter`: ``await write(...)``, ``await commit()``.

    Small chunks are batched (about 256 KiB) so a stream of many little chunks costs a
    few thread hops, not one per chunk; each hop runs the sync writer in a worker thread.
    Use as ``async with``; leaving without committing aborts.
    """

    def __init__(self, writer: SpillWriter) -> None:
        self._writer = writer
        self._pending: list[bytes | bytearray | memoryview | str] = []
        self._pending_size = 0

    @property
    def total_bytes(self) -> int:
        """Bytes handed to the sync writer so far (batched chunks not included)."""
        return self._writer.total_bytes

    async def __aenter__(self) -> AsyncSpillWriter:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._writer._state == "open":
            await self.abort()

    async def write(self, chunk: bytes | bytearray | memoryview | str) -> None:
        """Append a chunk (see :meth:`SpillWriter.write`)."""
        _check_open(self._writer._state)
        if not isinstance(chunk, str | bytes | bytearray | memoryview):
            raise ConfigError(f"spill chunks must be bytes or str, not {type(chunk).__name__}")
        self._pending.append(chunk)
        self._pending_size += len(chunk)
        if self._pending_size >= ASYNC_BATCH_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        batch, self._pending, self._pending_size = self._pending, [], 0
        if batch:
            await anyio.to_thread.run_sync(_write_all, self._writer, batch)

    async def commit(
        self, *, suffix: str | None = None, media_notes: Sequence[str] = ()
    ) -> SpillMeta:
        """Finish and publish the spill (see :meth:`SpillWriter.commit`)."""
        await self._flush()
        return await anyio.to_thread.run_sync(
            functools.partial(self._writer.commit, suffix=suffix, media_notes=media_notes)
        )

    async def abort(self) -> None:
        """Drop the spill (see :meth:`SpillWriter.abort`)."""
        self._pending, self._pending_size = [], 0
        await anyio.to_thread.run_sync(self._writer.abort)


def _write_all(writer: SpillWriter, chunks: Iterable[bytes | bytearray | memoryview | str]) -> None:
    for chunk in chunks:
        writer.write(chunk)


# --------------------------------------------------------------------------- reading


def _physical(meta: SpillMeta, start: int, end: int) -> tuple[int, int]:
    """Map an original range lying in one stored range to data-file offsets."""
    base = 0
    for range_start, range_end in meta.stored_ranges:
        if range_start <= start and end <= range_end:
            return base + start - range_start, base + end - range_start
        base += range_end - range_start
    raise AssertionError(f"[{start}, {end}) is not inside one stored range")


def _not_stored(meta: SpillMeta, start: int, end: int) -> RangeNotStored | None:
    for gap_start, gap_end in meta.gaps:
        if gap_start < end and start < gap_end:
            lo, hi = max(start, gap_start), min(end, gap_end)
            kept = " and ".join(f"[{a}, {b})" for a, b in meta.stored_ranges) or "nothing"
            return RangeNotStored(
                f"bytes [{lo}, {hi}) of spill {meta.spill_id} were not stored: the "
                f"retention cap kept {kept} of {meta.total_bytes} bytes",
                spill_id=meta.spill_id,
                start=lo,
                end=hi,
            )
    return None


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}; got {value!r}", field=name)
    return value


ReadFn = Callable[[int, int], bytes]


def _offset_after_newline(index: LineIndex, read: ReadFn, k: int) -> tuple[int | None, int]:
    """Return (offset right after newline ``k``, or None if unstored; its interval start)."""
    if k == 0:
        return 0, 0
    i = index.interval_of_newline(k)
    lo, hi = index.offsets[i], index.offsets[i + 1]
    if index.stored[i]:
        position = nth_newline(read(lo, hi), k - index.newlines[i])
        return lo + position + 1, lo
    if hi - lo == 1:
        return hi, lo
    return None, lo


def read_page(
    meta: SpillMeta,
    index: LineIndex,
    read: ReadFn,
    *,
    first_line: int,
    count: int,
    max_bytes: int | None,
) -> LinePage:
    """Read up to ``count`` lines from ``first_line``; ``read`` returns original bytes.

    The logic of :meth:`Store.read_lines`, with the I/O passed in.
    """
    total_bytes, total_lines = meta.total_bytes, meta.total_lines
    ranges = meta.stored_ranges

    def empty(gap: tuple[int, int] | None = None) -> LinePage:
        return LinePage(
            spill_id=meta.spill_id,
            first_line=first_line,
            last_line=first_line - 1,
            start_byte=total_bytes,
            end_byte=total_bytes,
            data=b"",
            total_lines=total_lines,
            total_bytes=total_bytes,
            gap=gap,
        )

    if first_line > total_lines:
        return empty()
    start, probe = _offset_after_newline(index, read, first_line - 1)
    line_no, first_partial = first_line, False
    skipped: tuple[int, int] | None = None
    if start is None or not any(a <= start < b for a, b in ranges):
        position = probe if start is None else start
        skipped = next(g for g in meta.gaps if g[0] <= position < g[1])
        if skipped[1] >= total_bytes:
            return empty(skipped)
        start = skipped[1]
        line_no = index.newlines_at(start) + 1
        first_partial = index.newlines_at(start - 1) == index.newlines_at(start)
    range_end = next(b for a, b in ranges if a <= start < b)
    last_wanted = min(line_no + count - 1, total_lines)
    end = range_end
    known_last: int | None = None  # the last line, when the index located its end
    if last_wanted <= index.total_newlines:
        i = index.interval_of_newline(last_wanted)
        lo, hi = index.offsets[i], index.offsets[i + 1]
        if hi <= range_end:
            end = lo + nth_newline(read(lo, hi), last_wanted - index.newlines[i]) + 1
            known_last = last_wanted
    stop_gap: tuple[int, int] | None = None
    if end == range_end and range_end < total_bytes:
        stop_gap = next(g for g in meta.gaps if g[0] == range_end)
    if max_bytes is not None and end - start > max_bytes:
        limit = start + max_bytes
        window = read(start, limit + 1)
        newline = window.rfind(b"\n", 0, max_bytes)
        end = start + newline + 1 if newline >= 0 else cut_head(window, start, limit)
        data = window[: end - start]
        stop_gap = None
        known_last = None
    else:
        data = read(start, end)
    ends_newline = data.endswith(b"\n")
    if known_last is None:
        last_line = line_no + data.count(b"\n") - (1 if ends_newline else 0)
    else:
        last_line = known_last
    last_partial = not ends_newline and end < total_bytes
    gap = stop_gap or skipped
    if end >= total_bytes:
        next_byte = None
    elif stop_gap is not None:
        next_byte = stop_gap[1] if stop_gap[1] < total_bytes else None
    else:
        next_byte = end
    next_line = last_line + 1 if last_line < total_lines else None
    return LinePage(
        spill_id=meta.spill_id,
        first_line=line_no,
        last_line=last_line,
        start_byte=start,
        end_byte=end,
        data=data,
        total_lines=total_lines,
        total_bytes=total_bytes,
        first_line_partial=first_partial,
        last_line_partial=last_partial,
        gap=gap,
        next_line=next_line,
        next_byte=next_byte,
    )


# --------------------------------------------------------------------------- the store


class Store(abc.ABC):
    """A spill store: the backend protocol plus the shared API built on it.

    Subclasses implement the primitives ``_create``, ``_stat``, ``_list``, ``_open``,
    ``_read_index`` and ``_remove`` (and may override the hooks ``_cleaner_lock``,
    ``_orphans``, ``_spill_id_of_path``, ``_adopt_in_place`` and ``_after_gc``). Every
    public method below, and its ``a``-prefixed async twin, is shared.

    Args:
        clock: returns epoch seconds; used for ``created_at`` and as ``gc``'s ``now``.
        retention_bytes: default retention cap (None: store everything).
        retained_tail_bytes: default tail kept when an output exceeds the cap.
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
        self._index_cache: OrderedDict[tuple[str, str, float], LineIndex] = OrderedDict()
        self._index_lock = threading.Lock()
        self._local_cleaner = threading.Lock()

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
    ) -> builtins.list[tuple[GcEntry, Callable[[], None]]]:
        """Return leftovers of dead writers older than ``grace``, with their removers."""
        return []

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
        self,
        path: str,
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        suffix: str | None,
        media_notes: tuple[str, ...],
        retention_bytes: int | None,
        move: bool,
    ) -> SpillMeta | None:
        """Turn ``path`` into a spill without copying it, or return None if impossible."""
        return None

    # ----------------------------------------------------------------- helpers

    def _retention(
        self, retention_bytes: Retention, retained_tail_bytes: int | UseStoreDefault
    ) -> tuple[int | None, int]:
        cap = (
            self._retention_bytes
            if isinstance(retention_bytes, UseStoreDefault)
            else retention_bytes
        )
        tail = (
            self._retained_tail_bytes
            if isinstance(retained_tail_bytes, UseStoreDefault)
            else retained_tail_bytes
        )
        if cap is not None and isinstance(retained_tail_bytes, UseStoreDefault):
            tail = min(tail, cap)
        validate_retention(cap, tail)
        return cap, tail

    def _remember_index(self, meta: SpillMeta, index: LineIndex) -> None:
        key = (meta.spill_id, meta.sha256, meta.created_at)
        with self._index_lock:
            self._index_cache[key] = index
            self._index_cache.move_to_end(key)
            while len(self._index_cache) > INDEX_CACHE_SIZE:
                self._index_cache.popitem(last=False)

    def _index_for(self, meta: SpillMeta) -> LineIndex:
        key = (meta.spill_id, meta.sha256, meta.created_at)
        with self._index_lock:
            cached = self._index_cache.get(key)
            if cached is not None:
                self._index_cache.move_to_end(key)
                return cached
        raw = self._read_index(meta)
        try:
            index = LineIndex.from_bytes(raw, meta.stored_ranges)
        except ValueError as exc:
            raise StoreError(f"the line index of spill {meta.spill_id} is corrupt") from exc
        newline_lines = index.total_newlines
        if index.total_bytes != meta.total_bytes or not (
            newline_lines <= meta.total_lines <= newline_lines + 1
        ):
            raise StoreError(f"the line index of spill {meta.spill_id} does not match it")
        self._remember_index(meta, index)
        return index

    @staticmethod
    def _reader_fn(meta: SpillMeta, reader: DataReader) -> ReadFn:
        def read(start: int, end: int) -> bytes:
            return reader.read(*_physical(meta, start, end))

        return read

    # ----------------------------------------------------------------- writing

    def writer(
        self,
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        retention_bytes: Retention = USE_STORE_DEFAULT,
        retained_tail_bytes: int | UseStoreDefault = USE_STORE_DEFAULT,
    ) -> SpillWriter:
        """Start streaming an output into a new spill.

        Args:
            session: the session it belongs to (``[A-Za-z0-9._-]``, 1-64 chars).
            tool_name: the producing tool (sanitized into the id's readable stem).
            tool_call_id: the call id (recorded, never used in a path).
            retention_bytes: the cap for this output (None: keep everything).
            retained_tail_bytes: bytes kept from the end when the cap is exceeded.

        Returns:
            A :class:`SpillWriter`; use it as a context manager.

        Raises:
            ConfigError: bad session or retention values.
            StoreError: the backend could not start a spill.
        """
        validate_session(session)
        for name, value in (("tool_name", tool_name), ("tool_call_id", tool_call_id)):
            if not isinstance(value, str):
                raise ConfigError(f"{name} must be a str; got {value!r}", field=name)
        cap, tail = self._retention(retention_bytes, retained_tail_bytes)
        return SpillWriter(
            self._create(session),
            session=session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            retention_bytes=cap,
            retained_tail_bytes=tail,
            created_at=self._clock,
            on_commit=self._remember_index,
        )

    def put(
        self,
        data: bytes | bytearray | memoryview | str | Iterable[bytes | str],
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        suffix: str | None = None,
        media_notes: Sequence[str] = (),
        retention_bytes: Retention = USE_STORE_DEFAULT,
        retained_tail_bytes: int | UseStoreDefault = USE_STORE_DEFAULT,
    ) -> SpillMeta:
        """Store an output given whole or as an iterable of chunks; return its metadata.

        An identical put (same session, tool, call id, content, retention, suffix and
        media notes) returns the existing spill: ids are derived from content.

        Raises:
            ConfigError: bad arguments.
            StoreError: the backend failed; nothing partial is visible.
        """
        with self.writer(
            session=session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            retention_bytes=retention_bytes,
            retained_tail_bytes=retained_tail_bytes,
        ) as w:
            if isinstance(data, str | bytes | bytearray | memoryview):
                w.write(data)
            else:
                for chunk in data:
                    w.write(chunk)
            return w.commit(suffix=suffix, media_notes=media_notes)

    def adopt(
        self,
        path: str | os.PathLike[str],
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        suffix: str | None = None,
        media_notes: Sequence[str] = (),
        retention_bytes: Retention = USE_STORE_DEFAULT,
        retained_tail_bytes: int | UseStoreDefault = USE_STORE_DEFAULT,
        move: bool = False,
    ) -> SpillMeta:
        """Make a tool's existing output file a spill, without a second copy if possible.

        The local store *hard-links* the file into the store (or, with ``move=True``,
        moves it there) when it is a regular file owned by this user, on the same
        filesystem as the store, and within the retention cap; the file is read once to
        hash, count and index it, and its identity is recorded so a later change by the
        tool is detected rather than served. Otherwise (another filesystem, too large,
        another backend) the file is stream-copied with the retention cap, and with
        ``move=True`` the original is removed afterwards.

        Raises:
            StoreError: the file cannot be read, is not a regular file, changed while it
                was adopted, or the backend failed.
        """
        validate_session(session)
        cap, tail = self._retention(retention_bytes, retained_tail_bytes)
        source = os.path.realpath(os.fspath(path))
        notes = tuple(media_notes)
        meta = self._adopt_in_place(
            source,
            session=session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            suffix=suffix,
            media_notes=notes,
            retention_bytes=cap,
            move=move,
        )
        if meta is not None:
            return meta
        with map_os_errors(f"cannot adopt {source}"):
            fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            with map_os_errors(f"cannot adopt {source}"):
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise StoreError(f"cannot adopt {source}: not a regular file")
            with self.writer(
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                retention_bytes=cap,
                retained_tail_bytes=tail,
            ) as w:
                while True:
                    with map_os_errors(f"cannot read {source}"):
                        piece = os.read(fd, PIECE_BYTES)
                    if not piece:
                        break
                    w.write(piece)
                meta = w.commit(suffix=suffix, media_notes=notes)
        finally:
            os.close(fd)
        if move:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(source)
        return meta

    # ----------------------------------------------------------------- reading

    def stat(self, spill_id: str) -> SpillMeta:
        """Return a spill's metadata.

        Raises:
            InvalidSpillId: not an id spillstore makes.
            SpillExpired: it was deleted or collected.
            SpillNotFound: it never existed.
        """
        return self._stat(validate_spill_id(spill_id))

    def list(self, session: str | None = None) -> builtins.list[SpillMeta]:
        """Return the spills of ``session`` (or of every session), oldest first."""
        if session is not None:
            validate_session(session)
        return sorted(self._list(session), key=lambda m: (m.created_at, m.spill_id))

    def read_bytes(self, spill_id: str, start: int, end: int) -> bytes:
        """Return the original bytes ``[start, end)`` of a spill (``end`` clamped).

        Raises:
            RangeNotStored: part of the range lies in the unstored gap; the error holds
                the exact unstored range.
            ConfigError: ``start`` or ``end`` is negative.
        """
        _check_int("start", start, 0)
        _check_int("end", end, 0)
        meta = self.stat(spill_id)
        end = min(end, meta.total_bytes)
        if start >= end:
            return b""
        missing = _not_stored(meta, start, end)
        if missing is not None:
            raise missing
        with self._open(meta) as reader:
            return reader.read(*_physical(meta, start, end))

    def read_lines(
        self, spill_id: str, first_line: int, count: int, *, max_bytes: int | None = None
    ) -> LinePage:
        """Return up to ``count`` lines starting at line ``first_line`` (1-based).

        Uses the sparse line index: one lookup, then a scan of at most one index block,
        whatever the line number. Lines never stored are skipped and reported in the
        page's ``gap``; a page never spans the gap.

        Args:
            spill_id: the spill.
            first_line: the first line wanted (>= 1).
            count: how many lines (>= 1).
            max_bytes: cap on the page's bytes (>= 4): fewer lines are returned, or a
                single longer line is cut on a UTF-8 boundary (``last_line_partial``).

        Raises:
            ConfigError: bad arguments.
        """
        _check_int("first_line", first_line, 1)
        _check_int("count", count, 1)
        if max_bytes is not None:
            _check_int("max_bytes", max_bytes, 4)
        meta = self.stat(spill_id)
        if first_line > meta.total_lines:
            return read_page(
                meta,
                _EMPTY_INDEX,
                _no_read,
                first_line=first_line,
                count=count,
                max_bytes=max_bytes,
            )
        index = self._index_for(meta)
        with self._open(meta) as reader:
            return read_page(
                meta,
                index,
                self._reader_fn(meta, reader),
                first_line=first_line,
                count=count,
                max_bytes=max_bytes,
            )

    def line_of_offset(self, spill_id: str, offset: int) -> int:
        """Return the 1-based line that holds original byte ``offset``.

        ``offset == total_bytes`` gives the last line.

        Raises:
            RangeNotStored: ``offset`` lies in the unstored gap (line numbers there
                are known only at index checkpoints).
            ConfigError: ``offset`` is negative or past the end.
        """
        _check_int("offset", offset, 0)
        meta = self.stat(spill_id)
        if offset > meta.total_bytes:
            raise ConfigError(
                f"offset {offset} is past the end of spill {spill_id} ({meta.total_bytes} bytes)",
                field="offset",
            )
        if meta.total_bytes == 0:
            return 1
        index = self._index_for(meta)
        i = index.interval_of_offset(offset)
        lo = index.offsets[i]
        if offset in (lo, meta.total_bytes):
            newlines = index.newlines[i] if offset == lo else index.total_newlines
        elif index.stored[i]:
            with self._open(meta) as reader:
                newlines = index.newlines[i] + self._reader_fn(meta, reader)(lo, offset).count(
                    b"\n"
                )
        else:
            missing = _not_stored(meta, offset, offset + 1)
            assert missing is not None
            raise missing
        return min(newlines + 1, max(meta.total_lines, 1))

    def line_index(self, spill_id: str) -> LineIndex:
        """Return a spill's line index (for Grep: line numbers of segment starts)."""
        return self._index_for(self.stat(spill_id))

    @contextlib.contextmanager
    def segments(self, spill_id: str) -> Iterator[builtins.list[tuple[int, memoryview]]]:
        """Yield the stored data as ``(original_start, buffer)`` pairs, one per range.

        For the local store the buffers are views of an ``mmap`` of the data file, so a
        scanner (Grep) reads the page cache at C speed without copying. The views are
        released when the block ends: do not keep them.
        """
        meta = self.stat(spill_id)
        with self._open(meta) as reader:
            whole = memoryview(reader.buffer())
            views: builtins.list[tuple[int, memoryview]] = []
            base = 0
            for start, end in meta.stored_ranges:
                views.append((start, whole[base : base + end - start]))
                base += end - start
            try:
                yield views
            finally:
                with contextlib.suppress(BufferError):  # a caller exported a view
                    for _, view in views:
                        view.release()
                    whole.release()

    # ----------------------------------------------------------------- paths

    def resolve(self, spill: str | os.PathLike[str]) -> str:
        """Return the validated id of a spill named by id or (local store) by path.

        Raises:
            InvalidSpillId: neither an id nor a path.
            PathOutsideStore: a path that is not a spill data file inside the store.
            SpillNotFound, SpillExpired: no such spill (any more).
        """
        text = os.fspath(spill)
        if not isinstance(text, str):
            raise InvalidSpillId("a spill is named by a str id or path", spill_id=repr(text))
        if "\x00" in text:
            raise PathOutsideStore("a spill path may not contain NUL bytes", path=repr(text))
        if is_spill_id(text):
            self._stat(text)
            return text
        if os.sep in text or "/" in text:
            spill_id = self._spill_id_of_path(text)
            self._stat(spill_id)
            return spill_id
        return validate_spill_id(text)

    def is_spill_path(self, path: str | os.PathLike[str]) -> bool:
        """Return whether ``path`` (symlinks resolved) is a spill data file of this store."""
        try:
            text = os.fspath(path)
            if not isinstance(text, str) or "\x00" in text:
                return False
            self._spill_id_of_path(text)
        except (SpillstoreError, OSError, TypeError, ValueError):
            return False
        return True

    # ----------------------------------------------------------------- cleanup

    def delete(self, spill_id: str) -> bool:
        """Remove a spill; return whether this call removed it.

        Reading it afterwards raises :class:`SpillExpired`. Already gone is not an error.
        """
        validate_spill_id(spill_id)
        try:
            meta = self._stat(spill_id)
        except SpillstoreError as exc:
            if isinstance(exc, LookupError):
                return False
            raise
        removed = self._remove(meta, reason="delete", now=self._clock())
        if removed:
            logger.info("deleted spill %s", spill_id)
        return removed

    def clean(self, session: str, *, grace: float = DEFAULT_GRACE_SECONDS) -> GcReport:
        """Remove every spill of ``session`` (whatever its age).

        Orphan temp files of the session are removed too once older than ``grace`` (a
        younger one may belong to a writer still running).
        """
        validate_session(session)
        validate_gc_limits(max_age=None, max_total_bytes=None, max_files=None, grace=grace)
        now = self._clock()
        entries: builtins.list[GcEntry] = []
        with self._cleaner_lock():
            for meta in self._list(session):
                self._remove(meta, reason="session", now=now)
                entries.append(_entry(meta, "session"))
            for entry, remove in self._orphans(session, now=now, grace=grace):
                remove()
                entries.append(entry)
        report = GcReport.of(entries, dry_run=False)
        logger.info(
            "cleaned session %s: %s entries, %s bytes", session, len(entries), report.bytes_freed
        )
        return report

    def gc(
        self,
        *,
        max_age: float | None = None,
        max_total_bytes: int | None = None,
        max_files: int | None = None,
        dry_run: bool = False,
        now: float | None = None,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> GcReport:
        """Remove old spills and leftovers of dead writers; report what and why.

        Nothing younger than ``grace`` seconds is removed; oldest go first; only
        spillstore's own files are touched; one cleaner runs at a time. See
        :func:`spillstore._core.gc_plan.plan_gc` for the rules.

        Args:
            max_age: remove spills older than this many seconds.
            max_total_bytes: then remove the oldest until the stored bytes fit.
            max_files: then remove the oldest until this many spills remain.
            dry_run: remove nothing; report what would be removed.
            now: the time to judge ages by (default: the store's clock).
            grace: the minimum age of anything removed.
        """
        validate_gc_limits(
            max_age=max_age, max_total_bytes=max_total_bytes, max_files=max_files, grace=grace
        )
        if now is None:
            now = self._clock()
        entries: builtins.list[GcEntry] = []
        with self._cleaner_lock():
            metas = {m.spill_id: m for m in self._list(None)}
            plan = plan_gc(
                [
                    GcCandidate(
                        spill_id=m.spill_id,
                        session=m.session,
                        created_at=m.created_at,
                        stored_bytes=m.stored_bytes,
                    )
                    for m in metas.values()
                ],
                now=now,
                max_age=max_age,
                max_total_bytes=max_total_bytes,
                max_files=max_files,
                grace=grace,
            )
            for candidate, reason in plan:
                meta = metas[candidate.spill_id]
                if not dry_run:
                    self._remove(meta, reason=reason, now=now)
                entries.append(_entry(meta, reason))
            for entry, remove in self._orphans(None, now=now, grace=grace):
                if not dry_run:
                    remove()
                entries.append(entry)
            if not dry_run:
                self._after_gc(now=now)
        report = GcReport.of(entries, dry_run=dry_run)
        logger.info(
            "gc%s: %s entries, %s bytes",
            " (dry run)" if dry_run else "",
            len(entries),
            report.bytes_freed,
        )
        return report

    # ----------------------------------------------------------------- async twins

    async def _run(self, func: Callable[[], _T]) -> _T:
        return await anyio.to_thread.run_sync(func)

    def awriter(
        self,
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        retention_bytes: Retention = USE_STORE_DEFAULT,
        retained_tail_bytes: int | UseStoreDefault = USE_STORE_DEFAULT,
    ) -> AsyncSpillWriter:
        """Async twin of :meth:`writer` (starting a spill does no blocking I/O)."""
        return AsyncSpillWriter(
            self.writer(
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                retention_bytes=retention_bytes,
                retained_tail_bytes=retained_tail_bytes,
            )
        )

    async def aput(
        self,
        data: bytes
        | bytearray
        | memoryview
        | str
        | Iterable[bytes | str]
        | AsyncIterable[bytes | str],
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        suffix: str | None = None,
        media_notes: Sequence[str] = (),
        retention_bytes: Retention = USE_STORE_DEFAULT,
        retained_tail_bytes: int | UseStoreDefault = USE_STORE_DEFAULT,
    ) -> SpillMeta:
        """Async twin of :meth:`put`; also takes an async iterable of chunks."""
        if isinstance(data, AsyncIterable):
            async with self.awriter(
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                retention_bytes=retention_bytes,
                retained_tail_bytes=retained_tail_bytes,
            ) as w:
                async for chunk in data:
                    await w.write(chunk)
                return await w.commit(suffix=suffix, media_notes=media_notes)
        return await self._run(
            functools.partial(
                self.put,
                data,
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                suffix=suffix,
                media_notes=media_notes,
                retention_bytes=retention_bytes,
                retained_tail_bytes=retained_tail_bytes,
            )
        )

    async def aadopt(self, path: str | os.PathLike[str], **kwargs: Any) -> SpillMeta:
        """Async twin of :meth:`adopt`."""
        return await self._run(functools.partial(self.adopt, path, **kwargs))

    async def astat(self, spill_id: str) -> SpillMeta:
        """Async twin of :meth:`stat`."""
        return await self._run(functools.partial(self.stat, spill_id))

    async def alist(self, session: str | None = None) -> builtins.list[SpillMeta]:
        """Async twin of :meth:`list`."""
        return await self._run(functools.partial(self.list, session))

    async def aread_bytes(self, spill_id: str, start: int, end: int) -> bytes:
        """Async twin of :meth:`read_bytes`."""
        return await self._run(functools.partial(self.read_bytes, spill_id, start, end))

    async def aread_lines(
        self, spill_id: str, first_line: int, count: int, *, max_bytes: int | None = None
    ) -> LinePage:
        """Async twin of :meth:`read_lines`."""
        return await self._run(
            functools.partial(self.read_lines, spill_id, first_line, count, max_bytes=max_bytes)
        )

    async def aline_of_offset(self, spill_id: str, offset: int) -> int:
        """Async twin of :meth:`line_of_offset`."""
        return await self._run(functools.partial(self.line_of_offset, spill_id, offset))

    async def aresolve(self, spill: str | os.PathLike[str]) -> str:
        """Async twin of :meth:`resolve`."""
        return await self._run(functools.partial(self.resolve, spill))

    async def ais_spill_path(self, path: str | os.PathLike[str]) -> bool:
        """Async twin of :meth:`is_spill_path`."""
        return await self._run(functools.partial(self.is_spill_path, path))

    async def adelete(self, spill_id: str) -> bool:
        """Async twin of :meth:`delete`."""
        return await self._run(functools.partial(self.delete, spill_id))

    async def aclean(self, session: str, *, grace: float = DEFAULT_GRACE_SECONDS) -> GcReport:
        """Async twin of :meth:`clean`."""
        return await self._run(functools.partial(self.clean, session, grace=grace))

    async def agc(
        self,
        *,
        max_age: float | None = None,
        max_total_bytes: int | None = None,
        max_files: int | None = None,
        dry_run: bool = False,
        now: float | None = None,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> GcReport:
        """Async twin of :meth:`gc`."""
        return await self._run(
            functools.partial(
                self.gc,
                max_age=max_age,
                max_total_bytes=max_total_bytes,
                max_files=max_files,
                dry_run=dry_run,
                now=now,
                grace=grace,
            )
        )


def _entry(meta: SpillMeta, reason: GcReason) -> GcEntry:
    return GcEntry(
        spill_id=meta.spill_id,
        session=meta.session,
        name=meta.spill_id,
        bytes=meta.stored_bytes,
        reason=reason,
        created_at=meta.created_at,
    )


_EMPTY_INDEX = LineIndex.build([0], [0], ())


def _no_read(start: int, end: int) -> bytes:
    raise AssertionError("nothing to read")


_REMOVAL_REASONS = {
    "delete": "deleted",
    "age": "collected by gc as older than max_age",
    "total_bytes": "collected by gc to keep the store under max_total_bytes",
    "max_files": "collected by gc to keep the store under max_files",
    "session": "removed when its session was cleaned",
}


def expired_error(spill_id: str, reason: str | None, removed_at: float | None) -> SpillExpired:
    """Build the :class:`SpillExpired` for a removed spill, saying why and when."""
    why = _REMOVAL_REASONS.get(reason or "", "removed")
    when = ""
    if removed_at is not None:
        stamp = datetime.datetime.fromtimestamp(removed_at, datetime.UTC)
        when = f" at {stamp.isoformat(timespec='seconds')}"
    return SpillExpired(
        f"spill {spill_id} has expired: it was {why}{when}, and can no longer be read",
        spill_id=spill_id,
    )


@contextlib.contextmanager
def map_os_errors(action: str) -> Iterator[None]:
    """Translate ``OSError`` into one :class:`StoreError`, chained (house-style 11)."""
    try:
        yield
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(exc.errno, f"{action}: {exc.strerror or exc}") from exc
