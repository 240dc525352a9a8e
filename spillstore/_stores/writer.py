"""Writing a spill: one stream in, the retained bytes out, hashed and indexed on the way.

A backend receives the stored bytes through a :class:`Sink`; :class:`SpillWriter` does
everything else once, for every backend: it encodes ``str`` chunks, checks UTF-8,
hashes all bytes, counts lines and builds the index (:class:`~spillstore._core.index.
IndexBuilder` decides what the retention cap keeps), and hands the kept bytes to the
sink, through :class:`~spillstore._stores.pipeline.Pipeline` (hashing and writing in
two threads while the caller counts). Memory stays bounded whatever the output's size.
:class:`AsyncSpillWriter` is its async twin: the same writer, run in a worker thread
with batched chunks.
"""

from __future__ import annotations

import abc
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Final, TypeVar

from spillstore._core.ids import make_spill_id
from spillstore._core.index import IndexBuilder, LineIndex
from spillstore._core.utf8 import ENCODE_ERRORS, strict
from spillstore._errors import ConfigError, StoreError, UsageError
from spillstore._stores.errors import map_os_errors
from spillstore._stores.meta import SpillMeta
from spillstore._stores.pipeline import Pipeline
from spillstore._stores.tally import Tally, Utf8Check
from spillstore._twins import in_thread

__all__ = [
    "ASYNC_BATCH_BYTES",
    "PIECE_BYTES",
    "PIECE_CHARS",
    "VIEW_BYTES",
    "AsyncSpillWriter",
    "Sink",
    "SpillWriter",
    "Tally",
    "Utf8Check",
    "copy_fd",
    "copy_file",
]

PIECE_BYTES: Final = 1 << 20
"""Large inputs are processed in pieces of this many bytes (bounded memory)."""

PIECE_CHARS: Final = 1 << 18
"""A ``str`` is encoded this many characters at a time (at most 1 MiB of UTF-8)."""

VIEW_BYTES: Final = 16 << 20
"""One large ``bytes`` (past :data:`PIECE_BYTES`) goes to the pipeline's hash and write
threads whole (one hashlib call, one write: every return from either takes the GIL
back, which may wait for this thread up to the switch interval), and is then counted
and checked here in windows of this many bytes: views, not copies, so their size costs
no memory. The write then never waits for the count, as it did when each window went
to the threads after it was counted (RESULTS.md, "Store v2 (issue 14), session 7")."""

ASYNC_BATCH_BYTES: Final = 256 * 1024
"""The async writer hands chunks to its thread in batches of about this size."""


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


def _check_open(state: str) -> None:
    if state != "open":
        raise UsageError(f"this spill writer is already {state}")


_V = TypeVar("_V")


def _stored(value: _V) -> _V:
    """A text as it is recorded: strict UTF-8, each lone surrogate U+FFFD (SQLite and
    JSON sidecars refuse them); anything else as given, for the metadata's checks."""
    return strict(value) if isinstance(value, str) else value  # type: ignore[return-value]


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
        # Recorded as strict UTF-8 (a lone surrogate as U+FFFD), as every text is stored.
        self._tool_name = _stored(tool_name)
        self._tool_call_id = _stored(tool_call_id)
        self._builder = IndexBuilder(retention_bytes, retained_tail_bytes)
        self._pipeline = Pipeline(sink.write)
        self._utf8 = Utf8Check()
        self._created_at = created_at
        self._on_commit = on_commit
        self._state = "open"

    @property
    def total_bytes(self) -> int:
        """Bytes written so far (UTF-8)."""
        return self._builder.total_bytes

    @property
    def taken(self) -> Tally:
        """Once aborted (by a failure or the caller): the measure of every byte taken.

        Its sha256, size, newline count and UTF-8 check cover exactly the
        :attr:`total_bytes` bytes the writer took before it stopped; a caller that must
        still describe the whole output continues it with the rest (``Tally.feed``).

        Raises:
            UsageError: the writer is still open, or committed.
        """
        if self._state != "aborted":
            raise UsageError(
                f"a spill writer's measure is handed over once aborted, not {self._state}"
            )
        builder = self._builder
        return Tally(
            self._pipeline.hasher,
            self._utf8,
            total_bytes=builder.total_bytes,
            newlines=builder.newlines,
        )

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
            ConfigError: the chunk is neither bytes nor str.
            UsageError: the writer was already committed or aborted.
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
                    self._feed_whole(chunk)
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
        check = utf8.valid and (utf8.pending or not (from_str or (whole and data.isascii())))
        part = self._builder.feed(data, lo, hi)
        try:  # the pipeline's threads hash and write this piece while it is checked
            self._pipeline.submit(piece, part)
        finally:  # also after a failed write: the measure handed over covers the piece
            if check:
                utf8.feed(piece)

    def _feed_whole(self, data: bytes) -> None:
        # One large bytes, already in memory: the pipeline's threads get all of it at
        # once (one hash call, one write; each return from hashlib or the sink waits for
        # the GIL while this thread counts), then it is counted and checked here, in
        # windows (views, not copies).
        size = len(data)
        builder = self._builder
        stored = builder.stored_now(size)
        try:
            self._pipeline.submit(data, data if stored == size else memoryview(data)[:stored])
        finally:  # also after a failed write: the measure handed over covers all of it
            utf8 = self._utf8
            check = utf8.valid and (utf8.pending or not data.isascii())
            view = memoryview(data)
            for start in range(0, size, VIEW_BYTES):
                end = min(start + VIEW_BYTES, size)
                builder.feed(data, start, end)  # its part to store was handed over above
                if check:
                    utf8.feed(view[start:end])

    def commit(self, *, suffix: str | None = None, media_notes: Sequence[str] = ()) -> SpillMeta:
        """Finish the spill and make it visible; return its metadata.

        Raises:
            StoreError: the backend failed; nothing of this spill is left visible.
            UsageError: the writer was already committed or aborted.
        """
        _check_open(self._state)
        try:
            self._pipeline.drain()  # before the tail is joined: one copy in memory, not two
            cut = self._builder.finish()
            for part in cut.final_parts:
                self._pipeline.submit(b"", part)
            sha256 = self._pipeline.finish()
            notes = tuple(map(_stored, media_notes))
            suffix = _stored(suffix)
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
        """Drop the spill: nothing written stays visible or on disk. Idempotent.

        The bytes taken are still hashed (a few batches at most): see :attr:`taken`.
        """
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
        self._failed_batch: tuple[bytes | bytearray | memoryview | str, ...] = ()

    @property
    def total_bytes(self) -> int:
        """Bytes handed to the sync writer so far (batched chunks not included)."""
        return self._writer.total_bytes

    @property
    def taken(self) -> Tally:
        """Once aborted: the measure of the bytes the sync writer took (see
        :attr:`SpillWriter.taken`)."""
        return self._writer.taken

    @property
    def failed_batch(self) -> tuple[bytes | bytearray | memoryview | str, ...]:
        """The batch of chunks whose hand-over failed, in order (empty if none failed).

        Its chunks end where the output written so far ends; the sync writer took a
        prefix of them (up to :attr:`total_bytes`).
        """
        return self._failed_batch

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
            try:
                await in_thread(_write_each)(self._writer, batch)
            except BaseException:
                self._failed_batch = tuple(batch)
                raise

    async def commit(
        self, *, suffix: str | None = None, media_notes: Sequence[str] = ()
    ) -> SpillMeta:
        """Finish and publish the spill (see :meth:`SpillWriter.commit`)."""
        await self._flush()
        return await in_thread(self._writer.commit)(suffix=suffix, media_notes=media_notes)

    async def abort(self) -> None:
        """Drop the spill (see :meth:`SpillWriter.abort`)."""
        self._pending, self._pending_size = [], 0
        await in_thread(self._writer.abort)()


def _write_each(
    writer: SpillWriter, chunks: Iterable[bytes | bytearray | memoryview | str]
) -> None:
    for chunk in chunks:
        writer.write(chunk)


def copy_fd(writer: SpillWriter, fd: int, path: str) -> None:
    """Write everything left to read from the open file ``fd`` (named ``path``).

    Raises:
        StoreError: the file cannot be read, or the backend failed.
    """
    while True:
        with map_os_errors(f"cannot read {path}"):
            piece = os.read(fd, PIECE_BYTES)
        if not piece:
            return
        writer.write(piece)


def copy_file(writer: SpillWriter, path: str) -> None:
    """Write the regular file at ``path`` (a symlink there is refused, not followed).

    Raises:
        StoreError: the file cannot be opened or read, is not a regular file, or the
            backend failed.
    """
    with map_os_errors(f"cannot adopt {path}"):
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        with map_os_errors(f"cannot adopt {path}"):
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise StoreError(f"cannot adopt {path}: not a regular file")
        copy_fd(writer, fd, path)
    finally:
        os.close(fd)
