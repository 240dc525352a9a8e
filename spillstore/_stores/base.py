"""The store: every public operation the backends share, over their few primitives.

A backend implements six primitives (:class:`~spillstore._stores.backend.Backend`) and
may override a few hooks. Everything else lives here or below it, once: streaming and
the retention cut (:mod:`~spillstore._stores.writer`), reads in *original* offsets
(:mod:`~spillstore._core.paging`), path resolution, and ``delete``, ``clean`` and ``gc``
(:mod:`~spillstore._stores.cleanup`). ``LocalStore``, ``MemoryStore`` and ``S3Store``
therefore make the same decisions, and one contract suite tests them all.

Each async twin sits right after its sync method and runs it in a worker thread with
:func:`~spillstore._twins.in_thread`: one hop per operation, no second implementation
(house-style 3). anyio's threads were chosen over aiofiles because ``aiofiles.os`` breaks
under pyfakefs while ``anyio.to_thread`` does not, and anyio already comes with ``mcp``.
A twin is ``method_twin`` of the sync method (``astat = method_twin(stat)``): it runs
``self.stat`` in a worker thread, so a subclass's override counts, and it has the sync
method's signature by construction: callers pass both to one ParamSpec-typed
request (``_service.flow.call``). Backends implement the primitives and hooks, not these
methods. ``aput`` is the exception: it also takes an async iterable of chunks.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
from collections.abc import AsyncIterable, Iterable, Iterator, Sequence

from spillstore._core import paging
from spillstore._core.checks import check_int
from spillstore._core.ids import is_spill_id, validate_session, validate_spill_id
from spillstore._core.index import LineIndex
from spillstore._core.paging import LinePage
from spillstore._errors import ConfigError, InvalidSpillId, PathOutsideStore, SpillstoreError
from spillstore._stores.backend import USE_STORE_DEFAULT, Retention, UseStoreDefault
from spillstore._stores.cleanup import CleanupOps
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import AsyncSpillWriter, SpillWriter, copy_fd, copy_file
from spillstore._twins import in_thread, method_twin

__all__ = ["Store"]

logger = logging.getLogger("spillstore")


class Store(CleanupOps):
    """A spill store: the backend protocol plus the shared API built on it.

    Subclasses implement the primitives ``_create``, ``_stat``, ``_list``, ``_open``,
    ``_read_index`` and ``_remove`` (and may override the hooks ``_cleaner_lock``,
    ``_orphans``, ``_after_gc``, ``_spill_id_of_path``, ``_adopt_in_place`` and
    ``_scan_data``). Every
    public method, and its ``a``-prefixed async twin, is shared.

    Args:
        clock: returns epoch seconds; used for ``created_at`` and as ``gc``'s ``now``.
        retention_bytes: default retention cap (None: store everything).
        retained_tail_bytes: default tail kept when an output exceeds the cap.
    """

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
        return self._spill_writer(
            self._create(session), (session, tool_name, tool_call_id), cap, tail
        )

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
        if not isinstance(data, AsyncIterable):
            return await in_thread(self.put)(
                data,
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                suffix=suffix,
                media_notes=media_notes,
                retention_bytes=retention_bytes,
                retained_tail_bytes=retained_tail_bytes,
            )
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
        in_place = self._adopt_in_place(source, session=session, retention_bytes=cap)
        if in_place is not None:
            sink, fd = in_place
            with self._spill_writer(sink, (session, tool_name, tool_call_id), None, 0) as w:
                copy_fd(w, fd, source)
                meta = w.commit(suffix=suffix, media_notes=media_notes)
            logger.debug("adopted %s as spill %s without a copy", source, meta.spill_id)
        else:
            with self.writer(
                session=session,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
                retention_bytes=cap,
                retained_tail_bytes=tail,
            ) as w:
                copy_file(w, source)
                meta = w.commit(suffix=suffix, media_notes=media_notes)
        if move:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(source)
        return meta

    aadopt = method_twin(adopt)

    # ----------------------------------------------------------------- reading

    def stat(self, spill_id: str) -> SpillMeta:
        """Return a spill's metadata.

        Raises:
            InvalidSpillId: not an id spillstore makes.
            SpillExpired: it was deleted or collected.
            SpillNotFound: it never existed.
        """
        return self._stat(validate_spill_id(spill_id))

    astat = method_twin(stat)

    def list(self, session: str | None = None) -> builtins.list[SpillMeta]:
        """Return the spills of ``session`` (or of every session), oldest first."""
        if session is not None:
            validate_session(session)
        metas = self._list(session)
        if self._LISTED_IN_ORDER:
            return metas
        return sorted(metas, key=lambda m: (m.created_at, m.spill_id))

    alist = method_twin(list)

    def read_bytes(self, spill_id: str, start: int, end: int) -> bytes:
        """Return the original bytes ``[start, end)`` of a spill (``end`` clamped).

        Raises:
            RangeNotStored: part of the range lies in the unstored gap; the error holds
                the exact unstored range.
            ConfigError: ``start`` or ``end`` is negative.
        """
        check_int("start", start)
        check_int("end", end)
        meta = self.stat(spill_id)
        end = min(end, meta.total_bytes)
        if start >= end:
            return b""
        missing = paging.not_stored(meta, start, end)
        if missing is not None:
            raise missing
        with self._open(meta) as reader:
            return reader.read(*paging.physical(meta.stored_ranges, start, end))

    aread_bytes = method_twin(read_bytes)

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
        check_int("first_line", first_line, minimum=1)
        check_int("count", count, minimum=1)
        if max_bytes is not None:
            check_int("max_bytes", max_bytes, minimum=4)
        meta = self.stat(spill_id)
        if first_line > meta.total_lines:
            return paging.empty_page(meta, first_line)
        index = self._index_for(meta)
        with self._open(meta) as reader:
            return paging.read_page(
                meta,
                index,
                self._reader_fn(meta, reader),
                first_line=first_line,
                count=count,
                max_bytes=max_bytes,
            )

    aread_lines = method_twin(read_lines)

    def line_of_offset(self, spill_id: str, offset: int) -> int:
        """Return the 1-based line that holds original byte ``offset``.

        ``offset == total_bytes`` gives the last line.

        Raises:
            RangeNotStored: ``offset`` lies in the unstored gap (line numbers there
                are known only at index checkpoints).
            ConfigError: ``offset`` is negative or past the end.
        """
        check_int("offset", offset)
        meta = self.stat(spill_id)
        if offset > meta.total_bytes:
            raise ConfigError(
                f"offset {offset} is past the end of spill {spill_id} ({meta.total_bytes} bytes)",
                field="offset",
            )
        if meta.total_bytes == 0:
            return 1

        def count_newlines(start: int, end: int) -> int:
            with self._open(meta) as reader:
                return self._reader_fn(meta, reader)(start, end).count(b"\n")

        return paging.line_of_offset(meta, self._index_for(meta), offset, count_newlines)

    aline_of_offset = method_twin(line_of_offset)

    def line_index(self, spill_id: str) -> LineIndex:
        """Return a spill's line index (for Grep: line numbers of segment starts)."""
        return self.line_index_of(self.stat(spill_id))

    def line_index_of(self, meta: SpillMeta) -> LineIndex:
        """Return the line index of the spill ``meta`` describes, without reading its
        metadata again (a search over spills just listed).

        Raises:
            SpillExpired: it was removed since ``meta`` was read.
            StoreError: the index is damaged or does not describe the spill.
        """
        return self._index_for(meta)

    aline_index = method_twin(line_index)

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

    def scan_data(
        self, metas: Iterable[SpillMeta]
    ) -> Iterator[tuple[SpillMeta, bytes | memoryview | SpillstoreError]]:
        """Yield each spill's stored data, its stored ranges one after another, in one
        buffer (``bytes``, or a view of an ``mmap`` of the data file).

        For a search over many spills (session-wide Grep): the spills are opened from the
        metadata in hand, with no second metadata read, and a backend may open them more
        cheaply than one by one (the local store holds each session directory open and
        reads a small data file whole instead of mapping it). A spill that cannot be
        opened (expired, damaged) yields its error instead of ending the scan. Each
        buffer is released when the next spill is asked for: do not keep it.
        """
        return self._scan_data(metas)

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

    aresolve = method_twin(resolve)

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

    ais_spill_path = method_twin(is_spill_path)
