"""The model-facing recovery tools: Read, Grep and List over spills (design.md §5).

These tools are how a model gets back what a cap cut, so every result is short, exact
and ready to act on:

- **Read** (``read_spill``) pages a spill by lines (``offset`` 1-based, negative from the
  end; ``limit``) or by bytes (``byte_offset``, ``max_bytes``) for single huge lines. The
  page starts with a header naming the exact line and byte range shown, numbers every
  line, cuts long lines cosmetically with the byte offset to continue from, and ends with
  the exact next call (or ``end of output``).
- **Grep** (``grep_spill``) searches one spill or every spill of the session with RE2 on
  bytes (linear time: model-written patterns cannot backtrack catastrophically), with
  line numbers from the spill's line index, context lines, three output modes and
  ``head_limit``/``offset`` paging.
- **List** (``list_spills``) shows the spills of the session, newest last, so a model can
  find them again after its context was compacted.

Every result is a :class:`~spillstore.ToolResult` marked ``spill_exempt`` (the service
passes it through untouched, so reading a spill never spills again) and **never exceeds
``max_page_bytes``** UTF-8 bytes, header and hints included. Errors the model should act
on (unknown or expired spill, bad offset, bad pattern, a path outside the store, invalid
arguments) are short text results with ``is_error=True``, never exceptions; only a
developer's mistake (bad constructor arguments) raises :class:`~spillstore.ConfigError`.

Confinement is the store's job (ids are validated on every read; a path is mapped to an
id by :meth:`Store.resolve`, which refuses anything that is not a spill data file inside
the store; local files are opened ``O_NOFOLLOW|O_NONBLOCK`` and must be regular files
with one link). This module never opens a path itself. By default the tools also stay in
their own session: a spill of another session is answered as unknown.

Formats (all sizes are UTF-8 bytes, all ranges half-open and in original offsets)::

    spill bash-0123456789abcdef0123: lines 101-300 of 5000, bytes [8123, 16002) of 400000
       101\tfirst line shown
       ...
       300\ta long line cut here [... cut: 52311 more bytes; continue with
           read_spill(spill="bash-...", byte_offset=15810)]
    next: read_spill(spill="bash-0123456789abcdef0123", offset=301, limit=200)

    grep_spill "timeout" in spill bash-0123456789abcdef0123: matching lines 1-100
    1234:2026-11-29T12:03:04Z WARN [db.pool] request failed after timeout
    -- more results: call grep_spill(pattern="timeout", spill="bash-...", offset=100) --

With several spills each line is prefixed by the spill id (``bash-...:1234:text``),
context lines use ``-`` instead of ``:`` and ``--`` separates groups, as grep does.
"""

from __future__ import annotations

import builtins
import functools
import json
import logging
import mmap
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import add
from typing import Any, Literal

import anyio.to_thread
from pydantic import (
    ValidationError,
)

from spillstore._content import TextPart, ToolResult
from spillstore._core.ids import is_spill_id, validate_session
from spillstore._core.index import LineIndex, nth_newline
from spillstore._core.paging import LinePage
from spillstore._errors import (
    ConfigError,
    InvalidSpillId,
    PathOutsideStore,
    RangeNotStored,
    RequestRefused,
    SpillExpired,
    SpillNotFound,
    SpillstoreError,
    StoreError,
)
from spillstore._stores.base import Store
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import (
    DEFAULT_BYTE_PAGE,
    DEFAULT_HEAD_LIMIT,
    DEFAULT_READ_LIMIT,
    GREP_DESCRIPTION,
    LIST_DESCRIPTION,
    MAX_READ_LIMIT,
    MAX_SAFE_INT,
    READ_DESCRIPTION,
    GrepArgs,
    ListArgs,
    ReadArgs,
    ToolArgs,
    parameters,
)
from spillstore._tools.regex import (
    Haystack,
    Matcher,
    compile_pattern,
    count_matching_lines,
    iter_hits,
    render_plain,
)

__all__ = [
    "DEFAULT_HEAD_LIMIT",
    "DEFAULT_MAX_PAGE_BYTES",
    "DEFAULT_READ_LIMIT",
    "MAX_READ_LIMIT",
    "MIN_PAGE_BYTES",
    "GrepArgs",
    "ListArgs",
    "ReadArgs",
    "SpillTools",
    "delegate_read",
]

log = logging.getLogger("spillstore")

DEFAULT_MAX_PAGE_BYTES = 16_000
"""The default page cap: well under the service's 50,000-byte inline budget."""

MIN_PAGE_BYTES = 2048
"""The smallest page cap accepted: room for the header, hints and some content."""

DEFAULT_MAX_LINE_BYTES = 2000
"""Read cuts a line longer than this (cosmetically) and says where it continues."""

DEFAULT_MAX_COLUMN_BYTES = 400
"""Grep shows at most this many bytes of a matching line, around the match."""

PREVIEW_BYTES = 100
"""List shows this many bytes of each spill's first line."""

_MIN_LINE_ROOM = 16
"""A Read page stops when less than this many bytes remain for the next line."""

_NOTE_BYTES = 200
"""An upper bound of a Grep note's size, its spill id excluded."""

_MAX_NOTES = 2
"""Grep names at most this many spills it could not search in full (then a count)."""

_ECHO_CHARS = 100
"""Grep repeats at most this many characters of the pattern in its title and hints."""

META_CACHE_SIZE = 256
"""Spill metadata kept by Read (ids are content-derived: metadata never changes)."""

SCHEMA_SHAPES = ("openai", "anthropic")

# --------------------------------------------------------------------------- text helpers


def _quote(value: str, limit: int = 120) -> str:
    """A short, printable, double-quoted rendering of text the model (or a tool) gave."""
    shown = value if len(value) <= limit else value[:limit] + "..."
    return json.dumps(shown, ensure_ascii=True)


def _char_cut(raw: bytes, limit: int) -> int:
    """The largest cut ``<= limit`` that does not split a UTF-8 sequence of ``raw``."""
    if limit >= len(raw):
        return len(raw)
    cut = max(limit, 0)
    for _ in range(3):
        if cut > 0 and raw[cut] & 0xC0 == 0x80:
            cut -= 1
        else:
            break
    return cut


def _size(text: str) -> int:
    """The UTF-8 size of text that holds no lone surrogates (decoded or rendered text)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _fit(raw: bytes, max_size: int) -> tuple[int, str, bool]:
    """Cut ``raw`` so its shown text (invalid bytes as U+FFFD) is at most ``max_size`` bytes.

    Returns the cut, the text, and whether the shown bytes held invalid UTF-8.
    """
    cut = _char_cut(raw, max_size)
    piece = raw[:cut]
    try:
        return cut, piece.decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    text = piece.decode("utf-8", "replace")
    if _size(text) <= max_size:
        return cut, text, True
    low, high = 0, cut  # invariant: raw[:low] fits, raw[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if _size(raw[:middle].decode("utf-8", "replace")) <= max_size:
            low = middle
        else:
            high = middle
    low = _char_cut(raw, low)
    return low, raw[:low].decode("utf-8", "replace"), True


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _lines_label(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _ranges(ranges: Sequence[tuple[int, int]]) -> str:
    return " and ".join(f"[{start}, {end})" for start, end in ranges) or "nothing"


# --------------------------------------------------------------------------- results


def _result(text: str, *, is_error: bool = False) -> ToolResult:
    return ToolResult(content=(TextPart(text),), is_error=is_error, spill_exempt=True)


def _bounded(text: str, max_bytes: int) -> str:
    """Cut a (short, model-facing) message to ``max_bytes`` as a last line of defence."""
    if _size(text) <= max_bytes:
        return text
    raw = text.encode("utf-8")
    cut = _char_cut(raw, max_bytes - 4)
    return raw[:cut].decode("utf-8", "replace") + " ..."


@dataclass(frozen=True, slots=True)
class _Names:
    read: str
    grep: str
    list: str


# --------------------------------------------------------------------------- the tools


class SpillTools:
    """The Read, Grep and List tools over one store, for one session.

    Args:
        store: the spill store (``LocalStore``, ``MemoryStore``, ...).
        session: the session whose spills Grep and List cover, and (unless
            ``cross_session``) the only session Read may read from.
        max_page_bytes: the most UTF-8 bytes of any result, header and hints included.
        max_line_bytes: Read cuts lines longer than this, saying where they continue
            (default 2,000, or a quarter of the page cap if smaller; at most half of it).
        max_column_bytes: Grep shows at most this many bytes of a matching line
            (default 400, or a quarter of the page cap if smaller; at most half of it).
        read_name, grep_name, list_name: the tool names the model sees (and that the
            continuation hints use); they must match the names the service's pointer
            uses.
        cross_session: allow reading and listing spills of other sessions.

    Raises:
        ConfigError: an argument is invalid (a developer error).
    """

    def __init__(
        self,
        store: Store,
        *,
        session: str = "default",
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        max_line_bytes: int | None = None,
        max_column_bytes: int | None = None,
        read_name: str = "read_spill",
        grep_name: str = "grep_spill",
        list_name: str = "list_spills",
        cross_session: bool = False,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(f"store must be a spillstore Store; got {type(store).__name__}")
        validate_session(session)
        _check_size("max_page_bytes", max_page_bytes, MIN_PAGE_BYTES)
        if max_line_bytes is None:
            max_line_bytes = min(DEFAULT_MAX_LINE_BYTES, max_page_bytes // 4)
        if max_column_bytes is None:
            max_column_bytes = min(DEFAULT_MAX_COLUMN_BYTES, max_page_bytes // 4)
        _check_size("max_line_bytes", max_line_bytes, 16)
        _check_size("max_column_bytes", max_column_bytes, 16)
        if max_line_bytes > max_page_bytes // 2:
            raise ConfigError(
                f"max_line_bytes ({max_line_bytes}) must be at most half of max_page_bytes "
                f"({max_page_bytes})",
                field="max_line_bytes",
            )
        if max_column_bytes > max_page_bytes // 2:
            raise ConfigError(
                f"max_column_bytes ({max_column_bytes}) must be at most half of "
                f"max_page_bytes ({max_page_bytes})",
                field="max_column_bytes",
            )
        names = (read_name, grep_name, list_name)
        for field, name in zip(("read_name", "grep_name", "list_name"), names, strict=True):
            if not isinstance(name, str) or not name.isidentifier() or len(name) > 64:
                raise ConfigError(
                    f"{field} must be an identifier of at most 64 characters; got {name!r}",
                    field=field,
                )
        if len(set(names)) != 3:
            raise ConfigError(f"tool names must differ; got {names}")
        if not isinstance(cross_session, bool):
            raise ConfigError("cross_session must be a bool", field="cross_session")
        self.store = store
        self.session = session
        self.max_page_bytes = max_page_bytes
        self.max_line_bytes = max_line_bytes
        self.max_column_bytes = max_column_bytes
        self.cross_session = cross_session
        self.names = _Names(read=read_name, grep=grep_name, list=list_name)
        self._metas: dict[str, SpillMeta] = {}
        self._metas_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SpillTools({self.store!r}, session={self.session!r})"

    # ----------------------------------------------------------------- schemas

    def schemas(self, shape: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
        """Return the three tools' JSON schemas for function calling.

        Args:
            shape: ``"openai"`` (``{"type": "function", "function": {...}}``) or
                ``"anthropic"`` (``{"name", "description", "input_schema"}``).

        Raises:
            ConfigError: an unknown shape.
        """
        if shape not in SCHEMA_SHAPES:
            raise ConfigError(f"shape must be 'openai' or 'anthropic'; got {shape!r}")
        tools = (
            (self.names.read, READ_DESCRIPTION, ReadArgs),
            (self.names.grep, GREP_DESCRIPTION, GrepArgs),
            (self.names.list, LIST_DESCRIPTION, ListArgs),
        )
        out: list[dict[str, Any]] = []
        for name, description, model in tools:
            schema = json.loads(json.dumps(parameters(model)))
            if shape == "openai":
                out.append(
                    {
                        "type": "function",
                        "function": {
                            "name": name,
                            "description": description,
                            "parameters": schema,
                        },
                    }
                )
            else:
                out.append({"name": name, "description": description, "input_schema": schema})
        return out

    # ----------------------------------------------------------------- dispatch

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run the tool called ``name`` with raw model arguments (a dict or a JSON string).

        Invalid arguments come back as a short error result naming the problem, never as
        an exception.
        """
        parsed = self._parse_call(name, arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        return self._run(parsed)

    async def acall(
        self, name: str, arguments: Mapping[str, Any] | str | None = None
    ) -> ToolResult:
        """Async twin of :meth:`call` (one worker-thread hop)."""
        return await anyio.to_thread.run_sync(self.call, name, arguments)

    def _parse_call(
        self, name: str, arguments: Mapping[str, Any] | str | None
    ) -> ToolArgs | ToolResult:
        models: dict[str, type[ToolArgs]] = {
            self.names.read: ReadArgs,
            self.names.grep: GrepArgs,
            self.names.list: ListArgs,
        }
        model = models.get(name) if isinstance(name, str) else None
        if model is None:
            known = ", ".join(models)
            return self._error(f"unknown tool {_quote(str(name), 60)}; the spill tools are {known}")
        raw: Any = {} if arguments is None else arguments
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw)
            except ValueError:
                return self._error(f"the arguments of {name} are not valid JSON")
        if not isinstance(raw, Mapping):
            return self._error(f"the arguments of {name} must be a JSON object")
        return self._validate(model, name, dict(raw))

    def _validate(
        self, model: type[ToolArgs], name: str, raw: dict[str, Any]
    ) -> ToolArgs | ToolResult:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            return self._error(_describe_validation(name, exc))

    def _run(self, args: ToolArgs) -> ToolResult:
        try:
            if isinstance(args, ReadArgs):
                text = self._read(args)
            elif isinstance(args, GrepArgs):
                text = self._grep(args)
            else:
                assert isinstance(args, ListArgs)
                text = self._list(args)
        except RequestRefused as exc:
            return self._error(str(exc))
        except SpillstoreError as exc:
            return self._error(self._explain(exc))
        except Exception as exc:  # the model must never see a traceback
            log.warning("spillstore: %s failed", type(args).__name__, exc_info=True)
            return self._error(
                f"internal error ({type(exc).__name__}) while running the spill tool; "
                "the spill store may be unavailable"
            )
        return _result(_bounded(text, self.max_page_bytes))

    def _error(self, message: str) -> ToolResult:
        return _result(_bounded(message, self.max_page_bytes), is_error=True)

    def _explain(self, exc: SpillstoreError) -> str:
        names = self.names
        if isinstance(exc, SpillExpired):
            return f"{str(exc)[:300]}; rerun the tool to get its output again"
        if isinstance(exc, SpillNotFound):
            return f"no spill {exc.spill_id[:80]}; call {names.list} to see the spills"
        if isinstance(exc, InvalidSpillId):
            return (
                f"{_quote(exc.spill_id, 100)} is not a spill id or a spill path; call "
                f"{names.list} to see the spills"
            )
        if isinstance(exc, PathOutsideStore):
            return (
                f"refused: {_quote(exc.path, 100)} is not a spill of this store (only "
                f"spill ids, or paths of spill files inside the store, can be read); call "
                f"{names.list} to see the spills"
            )
        if isinstance(exc, RangeNotStored):
            return f"{str(exc)[:300]}"
        if isinstance(exc, StoreError):
            return f"the spill cannot be read: {str(exc)[:300]}"
        return f"invalid request: {str(exc)[:300]}"

    # ----------------------------------------------------------------- public shells

    def read(
        self,
        spill: str,
        offset: int = 1,
        limit: int = DEFAULT_READ_LIMIT,
        byte_offset: int | None = None,
        max_bytes: int | None = None,
    ) -> ToolResult:
        """Read a page of a spill (see the module docstring for the format).

        Args:
            spill: a spill id, or the path of a spill file in the store.
            offset: first line, 1-based; negative counts from the end (-1: last line).
            limit: lines to show (1 to 2000).
            byte_offset: read by bytes from this offset instead (for huge lines).
            max_bytes: bytes to show in byte mode (default 4096); a cap on the bytes of
                lines in line mode.

        Returns:
            A spill-exempt result; ``is_error`` for requests the model should fix.
        """
        parsed = self._validate(
            ReadArgs,
            self.names.read,
            {
                "spill": spill,
                "offset": offset,
                "limit": limit,
                "byte_offset": byte_offset,
                "max_bytes": max_bytes,
            },
        )
        return parsed if isinstance(parsed, ToolResult) else self._run(parsed)

    async def aread(
        self,
        spill: str,
        offset: int = 1,
        limit: int = DEFAULT_READ_LIMIT,
        byte_offset: int | None = None,
        max_bytes: int | None = None,
    ) -> ToolResult:
        """Async twin of :meth:`read` (one worker-thread hop)."""
        return await anyio.to_thread.run_sync(
            functools.partial(
                self.read, spill, offset, limit, byte_offset=byte_offset, max_bytes=max_bytes
            )
        )

    def grep(
        self,
        pattern: str,
        spill: str | None = None,
        *,
        ignore_case: bool = False,
        context: int = 0,
        before: int | None = None,
        after: int | None = None,
        output_mode: Literal["content", "spills", "count"] = "content",
        head_limit: int | None = DEFAULT_HEAD_LIMIT,
        offset: int = 0,
        literal: bool = False,
    ) -> ToolResult:
        """Search one spill, or every spill of the session.

        Args:
            pattern: an RE2 regex (``^``/``$`` match at line ends), or a literal.
            spill: one spill id or path; None searches the whole session.
            ignore_case: match case-insensitively.
            context, before, after: context lines around each matching line.
            output_mode: ``"content"`` (matching lines), ``"spills"`` (spills with a
                match) or ``"count"`` (matching lines per spill).
            head_limit: results per page; 0 or None: unlimited (still page-bounded).
            offset: results to skip (paging).
            literal: the pattern is a literal string.
        """
        parsed = self._validate(
            GrepArgs,
            self.names.grep,
            {
                "pattern": pattern,
                "spill": spill,
                "ignore_case": ignore_case,
                "context": context,
                "before": before,
                "after": after,
                "output_mode": output_mode,
                "head_limit": head_limit,
                "offset": offset,
                "literal": literal,
            },
        )
        return parsed if isinstance(parsed, ToolResult) else self._run(parsed)

    async def agrep(
        self,
        pattern: str,
        spill: str | None = None,
        *,
        ignore_case: bool = False,
        context: int = 0,
        before: int | None = None,
        after: int | None = None,
        output_mode: Literal["content", "spills", "count"] = "content",
        head_limit: int | None = DEFAULT_HEAD_LIMIT,
        offset: int = 0,
        literal: bool = False,
    ) -> ToolResult:
        """Async twin of :meth:`grep` (one worker-thread hop)."""
        return await anyio.to_thread.run_sync(
            functools.partial(
                self.grep,
                pattern,
                spill,
                ignore_case=ignore_case,
                context=context,
                before=before,
                after=after,
                output_mode=output_mode,
                head_limit=head_limit,
                offset=offset,
                literal=literal,
            )
        )

    def list(self, session: str | None = None, *, offset: int = 0, limit: int = 50) -> ToolResult:
        """List the spills of ``session`` (default: this session), newest last.

        Args:
            session: the session; another one than the tools' needs ``cross_session``.
            offset: skip this many of the newest spills (to page back).
            limit: spills to show.
        """
        parsed = self._validate(
            ListArgs, self.names.list, {"session": session, "offset": offset, "limit": limit}
        )
        return parsed if isinstance(parsed, ToolResult) else self._run(parsed)

    async def alist(
        self, session: str | None = None, *, offset: int = 0, limit: int = 50
    ) -> ToolResult:
        """Async twin of :meth:`list` (one worker-thread hop)."""
        return await anyio.to_thread.run_sync(
            functools.partial(self.list, session, offset=offset, limit=limit)
        )

    # ----------------------------------------------------------------- resolving

    def _meta(self, spill: str, *, cached: bool = False) -> SpillMeta:
        """Return the metadata of the spill named by id or path, in an allowed session.

        With ``cached``, metadata seen before is reused (Read: it saves one sidecar
        read per page; every store read checks the spill still exists).
        """
        if "\x00" in spill:
            raise RequestRefused(
                "refused: a spill id or path never contains a NUL byte; call "
                f"{self.names.list} to see the spills"
            )
        spill_id = spill if is_spill_id(spill) else self.store.resolve(spill)
        if cached:
            with self._metas_lock:
                meta = self._metas.get(spill_id)
            if meta is not None:
                return meta
        meta = self.store.stat(spill_id)
        if not self.cross_session and meta.session != self.session:
            raise SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)
        if meta.total_bytes:
            # Ids are content-derived, so a spill's metadata never changes; an expired
            # spill is still noticed, by the read that follows (it stats again).
            with self._metas_lock:
                self._metas[spill_id] = meta
                while len(self._metas) > META_CACHE_SIZE:
                    self._metas.pop(next(iter(self._metas)))
        return meta

    # ----------------------------------------------------------------- Read

    def _read(self, args: ReadArgs) -> str:
        meta = self._meta(args.spill, cached=True)
        if meta.total_bytes == 0:
            return f"spill {meta.spill_id}: empty output (0 bytes, 0 lines)\nend of output"
        if args.byte_offset is not None:
            return self._read_bytes(meta, args, args.byte_offset)
        return self._read_lines(meta, args)

    def _read_lines(self, meta: SpillMeta, args: ReadArgs) -> str:
        spill = meta.spill_id
        total_lines = meta.total_lines
        read = self.names.read
        notes: list[str] = []
        if args.offset < 0:
            first = total_lines + args.offset + 1
            if first < 1:
                notes.append(f"offset {args.offset} is before the first line; showing from line 1")
                first = 1
        else:
            first = args.offset
            if first > total_lines:
                raise RequestRefused(
                    f"offset {first} is past the end: spill {spill} has {total_lines} "
                    f'lines; the last ones: {read}(spill="{spill}", offset=-{args.limit})'
                )
        page = _LinePager(self, meta, args, first)
        return page.render(notes)

    def _read_bytes(self, meta: SpillMeta, args: ReadArgs, byte_offset: int) -> str:
        spill = meta.spill_id
        total = meta.total_bytes
        read = self.names.read
        want = args.max_bytes if args.max_bytes is not None else DEFAULT_BYTE_PAGE
        if byte_offset >= total:
            raise RequestRefused(
                f"byte_offset {byte_offset} is past the end: spill {spill} has {total} bytes "
                f"(the last is byte {total - 1})"
            )
        notes: list[str] = []
        start = byte_offset
        gap = _gap_at(meta, start)
        if gap is not None:
            notes.append(
                f"bytes [{gap[0]}, {gap[1]}) of spill {spill} were not kept (the retention "
                f"cap kept {_ranges(meta.stored_ranges)} of {total} bytes)"
            )
            if gap[1] >= total:
                return "\n".join([*notes, "nothing was kept after them; end of output"])
            notes.append(f"the stored part resumes at byte {gap[1]}; showing from there")
            start = gap[1]
        range_end = next(end for begin, end in meta.stored_ranges if begin <= start < end)
        overhead = self._byte_overhead(meta, want)
        room = self.max_page_bytes - overhead - sum(_size(n) + 1 for n in notes)
        if room < 64:  # pragma: no cover - MIN_PAGE_BYTES leaves far more
            raise RequestRefused("the page cap is too small to show any bytes")
        limit = min(want, room)
        raw = self.store.read_bytes(spill, start, min(start + limit + 4, range_end))
        if gap is None and raw and _is_continuation(raw[0]):
            skip = 0
            while skip < min(3, len(raw)) and _is_continuation(raw[skip]):
                skip += 1
            notes.append(
                f"byte_offset {start} is inside a UTF-8 character; showing from the next "
                f"character boundary, byte {start + skip}"
            )
            raw = raw[skip:]
            start += skip
        # raw runs past limit whenever more bytes follow, so the cut sees the next byte.
        cut, text, lossy = _fit(raw, limit)
        end = start + cut
        if lossy:
            notes.append("invalid UTF-8 bytes are shown as U+FFFD")
        first_line = self.store.line_of_offset(spill, start)
        last_line = self.store.line_of_offset(spill, max(start, end - 1))
        header = (
            f"spill {spill}: bytes [{start}, {end}) of {total}, "
            f"{_lines_label(first_line, last_line)} of {meta.total_lines}"
        )
        if end >= total:
            footer = "end of output"
        elif end >= range_end:
            resume = next((b for b, _ in meta.stored_ranges if b > end), None)
            footer = f"bytes [{end}, {resume}) were not kept (retention cap)" + (
                f'; the stored part resumes at: {read}(spill="{spill}", '
                f"byte_offset={resume}, max_bytes={want})"
                if resume is not None and resume < total
                else "; end of stored output"
            )
        else:
            footer = f'next: {read}(spill="{spill}", byte_offset={end}, max_bytes={want})'
        body = text if text.endswith("\n") or not text else text + "\n"
        return "\n".join([header, *notes]) + "\n" + body + footer

    def _byte_overhead(self, meta: SpillMeta, want: int) -> int:
        """An upper bound of a byte page's header and footer sizes."""
        digits = len(str(meta.total_bytes))
        big = int("9" * digits)
        lines = int("9" * len(str(meta.total_lines)))
        header = (
            f"spill {meta.spill_id}: bytes [{big}, {big}) of {big}, lines {lines}-{lines} "
            f"of {lines}"
        )
        footer = (
            f"bytes [{big}, {big}) were not kept (retention cap); the stored part resumes "
            f'at: {self.names.read}(spill="{meta.spill_id}", byte_offset={big}, '
            f"max_bytes={want})"
        )
        note = "invalid UTF-8 bytes are shown as U+FFFD"
        return _size(header) + _size(footer) + _size(note) + 8

    def _line_end(self, meta: SpillMeta, index: LineIndex, line: int) -> int | None:
        """Return the original offset where ``line`` ends (its newline, or the end).

        None when that newline lies in the part the retention cap did not keep.
        """
        if line > index.total_newlines:
            return meta.total_bytes
        interval = index.interval_of_newline(line)
        if not index.stored[interval]:
            return None
        low, high = index.offsets[interval], index.offsets[interval + 1]
        block = self.store.read_bytes(meta.spill_id, low, high)
        return low + nth_newline(block, line - index.newlines[interval])

    # ----------------------------------------------------------------- Grep

    def _grep(self, args: GrepArgs) -> str:
        matcher = compile_pattern(args.pattern, ignore_case=args.ignore_case, literal=args.literal)
        if args.spill is not None:
            metas = [self._meta(args.spill)]
            single = True
        else:
            metas = self.store.list(self.session)
            single = False
        search = _Search(self, args, matcher, metas, single)
        return search.run()

    @contextmanager
    def _haystacks(
        self, meta: SpillMeta, *, trust_utf8: bool = True
    ) -> Iterator[builtins.list[Haystack]]:
        """Yield the stored ranges of a spill as searchable buffers, in order."""
        with self.store.segments(meta.spill_id) as segments:
            yield _as_haystacks(meta, segments, trust_utf8=trust_utf8)

    # ----------------------------------------------------------------- List

    def _list(self, args: ListArgs) -> str:
        session = self.session if args.session is None else args.session
        if session != self.session and not self.cross_session:
            raise RequestRefused(
                f"only this session's spills can be listed (session {_quote(self.session)}); "
                f"call {self.names.list}() without a session"
            )
        try:
            validate_session(session)
        except ConfigError:
            raise RequestRefused(f"{_quote(session)} is not a session name") from None
        metas = self.store.list(session)
        total = len(metas)
        name = self.names.list
        if total == 0:
            return f"{name}: session {_quote(session)} has no spills"
        end = max(total - args.offset, 0)
        if end == 0:
            raise RequestRefused(
                f"offset {args.offset} skips every spill: session {_quote(session)} has "
                f"{total}; call {name}() for the newest"
            )
        start = max(end - args.limit, 0)
        digits = len(str(total))
        header_max = (
            f"{name}: session {_quote(session)}, spills {total}-{total} of {total} "
            f"(oldest first, newest last)"
        )
        footer_max = f"-- {total} older spills not shown: call {name}(offset={total}) --"
        budget = self.max_page_bytes - _size(header_max) - _size(footer_max) - 4
        entries: list[str] = []
        used = 0
        shown_from = end
        for position in range(end - 1, start - 1, -1):
            entry = self._list_entry(metas[position], position + 1, digits)
            if used + _size(entry) + 1 > budget:
                break
            entries.append(entry)
            used += _size(entry) + 1
            shown_from = position
        entries.reverse()
        header = (
            f"{name}: session {_quote(session)}, spills {shown_from + 1}-{end} of {total} "
            f"(oldest first, newest last)"
        )
        lines = [header, *entries]
        if shown_from > 0:
            lines.append(
                f"-- {shown_from} older spills not shown: call "
                f"{name}(offset={total - shown_from}) --"
            )
        return "\n".join(lines)

    def _list_entry(self, meta: SpillMeta, number: int, digits: int) -> str:
        if meta.complete:
            saved = "saved in full"
        else:
            saved = f"saved in part (kept {_ranges(meta.stored_ranges)})"
        preview = ""
        if meta.stored_ranges and meta.stored_ranges[0][0] == 0:
            head_end = meta.stored_ranges[0][1]
            try:
                first = self.store.read_bytes(meta.spill_id, 0, min(PREVIEW_BYTES + 4, head_end))
            except SpillstoreError:
                first = b""
            newline = first.find(b"\n")
            line = first if newline < 0 else first[:newline]
            cut = _char_cut(line, PREVIEW_BYTES)
            more = cut < len(line) or (newline < 0 and len(first) < meta.total_bytes)
            text = line[:cut].decode("utf-8", "replace") + ("..." if more else "")
            preview = f"; first line: {json.dumps(text, ensure_ascii=False)}"
        return (
            f"{number:>{digits}}. {meta.spill_id} tool {_quote(meta.tool_name, 60)} call "
            f"{_quote(meta.tool_call_id, 60)}: {meta.total_bytes} bytes, {meta.total_lines} "
            f"lines, {saved}{preview}"
        )


def _check_size(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an int >= {minimum}; got {value!r}", field=name)


def _describe_validation(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = str(error["msg"]).removeprefix("Value error, ")
        given = error.get("input")
        shown = ""
        if error["type"] != "missing" and not isinstance(given, dict):
            text = repr(given)
            shown = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
        problems.append(f"{where}: {message}{shown}")
    more = len(exc.errors()) - len(problems)
    tail = f"; and {more} more" if more > 0 else ""
    return f"invalid arguments for {name}: " + "; ".join(problems) + tail


def _gap_at(meta: SpillMeta, offset: int) -> tuple[int, int] | None:
    return next((gap for gap in meta.gaps if gap[0] <= offset < gap[1]), None)


def _as_haystacks(
    meta: SpillMeta, segments: Sequence[tuple[int, memoryview]], *, trust_utf8: bool = True
) -> list[Haystack]:
    """Turn the store's segment views into buffers with ``find`` (``bytes`` or ``mmap``).

    ``memoryview`` has no ``find``/``count``; the views the store yields are slices of
    one buffer (an ``mmap`` of the data file, or ``bytes``) laid out range after range,
    so the underlying object is searched directly at the right physical offsets. Any
    other shape is copied to ``bytes`` (bounded by the retention cap).
    """
    out: list[Haystack] = []
    base = 0
    valid = trust_utf8 and not meta.invalid_utf8
    for origin, view in segments:
        size = len(view)
        owner = view.obj
        if (
            isinstance(owner, bytes | mmap.mmap)
            and view.contiguous
            and view.itemsize == 1
            and len(owner) == meta.stored_bytes
        ):
            out.append(Haystack(owner, base, base + size, origin, valid))
        else:
            out.append(Haystack(bytes(view), 0, size, origin, valid))
        base += size
    return out


# --------------------------------------------------------------------------- Read pages


class _LinePager:
    """Assembles one line-mode Read page within the page cap.

    The page is filled by one or more ``read_lines`` calls (one, unless long lines were
    cut): each line is shown whole, or cut at ``max_line_bytes`` (or at what is left of
    the page) with a marker giving the bytes left and the byte offset to go on from.
    """

    def __init__(self, tools: SpillTools, meta: SpillMeta, args: ReadArgs, first: int) -> None:
        self.tools = tools
        self.meta = meta
        self.args = args
        self.first = first
        self.width = max(6, len(str(meta.total_lines)))
        self.lossy = False
        self.marker_max = 0
        self._index: LineIndex | None = None

    @property
    def index(self) -> LineIndex:
        if self._index is None:
            self._index = self.tools.store.line_index(self.meta.spill_id)
        return self._index

    def _call(self, **kwargs: int) -> str:
        inner = ", ".join(f"{key}={value}" for key, value in kwargs.items())
        return f'{self.tools.names.read}(spill="{self.meta.spill_id}", {inner})'

    def _marker(self, more: int | None, resume: int, gap: tuple[int, int] | None) -> str:
        call = self._call(byte_offset=resume)
        if more is None:
            assert gap is not None
            return (
                f" [... cut: this line goes on into bytes [{gap[0]}, {gap[1]}), which were "
                f"not kept; continue with {call}]"
            )
        return f" [... cut: {more} more bytes; continue with {call}]"

    def _overhead(self, notes: Sequence[str]) -> int:
        """An upper bound of the header, notes and footer sizes of this page."""
        meta = self.meta
        big = int("9" * len(str(meta.total_bytes)))
        lines = int("9" * len(str(meta.total_lines)))
        header = (
            f"spill {meta.spill_id}: lines {lines}-{lines} of {lines}, bytes [{big}, {big}) "
            f"of {big}"
        )
        gap_note = (
            f"lines {lines}-{lines} (bytes [{big}, {big})) were not kept by the retention "
            f"cap; showing from byte {big} (line {lines}, whose start was not kept)"
        )
        footer = (
            f"lines {lines}-{lines} (bytes [{big}, {big})) were not kept by the retention "
            f"cap; the stored part resumes at line {lines}: "
            + self._call(offset=lines, limit=self.args.limit)
        )
        utf8 = "invalid UTF-8 bytes are shown as U+FFFD"
        fixed = sum(_size(note) + 1 for note in notes)
        return _size(header) + _size(gap_note) + _size(footer) + _size(utf8) + fixed + 8

    def _entry(
        self,
        raw: bytes,
        *,
        number: int,
        line_start: int,
        complete: bool,
        page: LinePage,
        room: int,
        data_room: int,
        forced: bool,
    ) -> tuple[str, int, int] | None:
        """Render one line in at most ``room`` bytes.

        Returns the text, the data bytes shown and the original offset where the line
        ends (after its newline); None when it does not fit and need not be forced.
        """
        tools, meta = self.tools, self.meta
        prefix = f"{number:>{self.width}}\t"
        avail = room - len(prefix)
        whole_end = line_start + len(raw)
        after_newline = whole_end + (1 if whole_end < meta.total_bytes else 0)
        if complete and len(raw) <= min(tools.max_line_bytes, avail, data_room):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", "replace")
                if _size(text) <= avail:
                    self.lossy = True
            if _size(text) <= avail:
                return prefix + text, len(raw), after_newline
        limit = min(tools.max_line_bytes, avail - self.marker_max, data_room)
        if limit < tools.max_line_bytes and not forced:
            return None  # no room for this line on this page: the next page starts with it
        limit = max(limit, 4)
        cut, text, lossy = _fit(raw, limit)
        if cut == 0 and raw:
            if not forced:
                return None
            cut = 1
            text = raw[:1].decode("utf-8", "replace")
        self.lossy = self.lossy or lossy
        if complete and cut == len(raw):
            return prefix + text, cut, after_newline
        line_end = whole_end if complete else self.tools._line_end(meta, self.index, number)
        resume = line_start + cut
        if line_end is None:
            marker = self._marker(None, resume, page.gap)
            end = page.end_byte
        else:
            marker = self._marker(line_end - resume, resume, None)
            end = line_end + (1 if line_end < meta.total_bytes else 0)
        return prefix + text + marker, cut, end

    def _room_for_a_cut_line(self) -> int:
        """Bytes a line cut at ``max_line_bytes`` may need: number, text, marker, newline."""
        return self.width + 1 + self.tools.max_line_bytes + self.marker_max + 1

    def _bulk(
        self, page: LinePage, pieces: Sequence[bytes], room: int, remaining: int
    ) -> tuple[builtins.list[str], int, int] | None:
        """Render the leading short, whole, valid UTF-8 lines of a page in one go.

        The common case (a page of ordinary lines) costs one decode and one f-string a
        line. Returns the rendered lines, how many, and their size with newlines; None
        when the first line needs the careful path (long, cut, invalid, no room).
        """
        count = min(len(pieces) - (1 if page.last_line_partial else 0), remaining)
        if count <= 0:
            return None
        cap = self.tools.max_line_bytes
        sizes = list(map(len, pieces[:count]))
        if max(sizes) > cap:
            count = next(i for i, size in enumerate(sizes) if size > cap)
        extra = self.width + 2  # the number, a tab and a newline
        totals = list(accumulate(map(add, sizes[:count], repeat(extra))))
        fitting = bisect_right(totals, room)
        if fitting == 0:
            return None
        end = totals[fitting - 1] - fitting * (extra - 1) - 1
        try:
            lines = page.data[:end].decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return None
        numbered = zip(range(page.first_line, page.first_line + fitting), lines, strict=True)
        texts = list(map(f"%{self.width}d\t%s".__mod__, numbered))
        return texts, fitting, totals[fitting - 1]

    def render(self, notes: list[str]) -> str:
        tools, meta, args = self.tools, self.meta, self.args
        spill = meta.spill_id
        store = tools.store
        budget = tools.max_page_bytes - self._overhead(notes)
        big = int("9" * len(str(meta.total_bytes)))
        self.marker_max = _size(self._marker(big, big, None))
        data_cap = args.max_bytes if args.max_bytes is not None else MAX_SAFE_INT
        prefix_size = self.width + 1
        body: list[str] = []
        used = data_used = 0
        shown_first: int | None = None
        shown_last = start_byte = end_byte = 0
        stop_gap: tuple[int, int] | None = None
        line = self.first
        remaining = args.limit
        full = False
        while remaining > 0 and not full:
            room = budget - used
            if room < _MIN_LINE_ROOM + prefix_size or data_used >= data_cap:
                break
            fetch = max(4, min(room - prefix_size * min(remaining, 64), data_cap - data_used))
            requested = remaining
            page = store.read_lines(spill, line, remaining, max_bytes=fetch)
            gap = page.gap
            if page.last_line < page.first_line:
                if gap is not None and shown_first is None:
                    notes.append(self._gap_lines(gap) + "; nothing was kept after them")
                break
            if gap is not None and page.start_byte >= gap[1] and shown_first is None:
                note = self._gap_lines(gap) + f"; showing from byte {page.start_byte}"
                if page.first_line_partial:
                    note += f" (line {page.first_line}, whose start was not kept)"
                notes.append(note)
            pieces = page.data.split(b"\n")
            if page.data.endswith(b"\n"):
                pieces.pop()
            position = page.start_byte
            done = 0
            if args.max_bytes is None:
                bulk = self._bulk(page, pieces, budget - used, remaining)
                if bulk is not None:
                    texts, done, size = bulk
                    body.extend(texts)
                    used += size
                    if shown_first is None:
                        shown_first, start_byte = page.first_line, position
                    position += sum(map(len, pieces[:done])) + done
                    shown_last = page.first_line + done - 1
                    end_byte = min(position, meta.total_bytes)
                    remaining -= done
                    if remaining == 0:
                        break
            for i, raw in enumerate(pieces[done:], done):
                number = page.first_line + i
                complete = i < len(pieces) - 1 or not page.last_line_partial
                entry = self._entry(
                    raw,
                    number=number,
                    line_start=position,
                    complete=complete,
                    page=page,
                    room=budget - used - 1,
                    data_room=data_cap - data_used,
                    forced=shown_first is None,
                )
                if entry is None:
                    full = True
                    break
                text, shown_bytes, end = entry
                body.append(text)
                used += _size(text) + 1
                data_used += shown_bytes
                if shown_first is None:
                    shown_first, start_byte = number, position
                shown_last, end_byte = number, end
                position += len(raw) + 1
                remaining -= 1
                if remaining == 0 or data_used >= data_cap:
                    break
            else:
                if gap is not None and page.end_byte <= gap[0]:
                    stop_gap = gap
                    break
                if page.next_line is None or page.next_line > meta.total_lines:
                    break
                cut_by_size = page.last_line - page.first_line + 1 < requested
                if cut_by_size and budget - used < self._room_for_a_cut_line():
                    break  # the next line did not fit the fetch, and no cut line fits either
                line = page.next_line
                continue
            break
        if shown_first is None:
            return "\n".join([f"spill {spill}: no stored lines to show", *notes, "end of output"])
        if self.lossy:
            notes.append("invalid UTF-8 bytes are shown as U+FFFD")
        header = (
            f"spill {spill}: {_lines_label(shown_first, shown_last)} of {meta.total_lines}, "
            f"bytes [{start_byte}, {end_byte}) of {meta.total_bytes}"
        )
        if stop_gap is not None:
            footer = self._gap_lines(stop_gap)
            if stop_gap[1] >= meta.total_bytes:
                footer += "; nothing was kept after them: end of stored output"
            else:
                resume_line = store.line_of_offset(spill, stop_gap[1])
                footer += f"; the stored part resumes at line {resume_line}: " + self._call(
                    offset=resume_line, limit=args.limit
                )
        elif shown_last >= meta.total_lines and end_byte >= meta.total_bytes:
            footer = "end of output"
        else:
            footer = "next: " + self._call(offset=shown_last + 1, limit=args.limit)
        return "\n".join([header, *notes, *body, footer])

    def _gap_lines(self, gap: tuple[int, int]) -> str:
        store, spill = self.tools.store, self.meta.spill_id
        first = store.line_of_offset(spill, gap[0])
        last = store.line_of_offset(spill, gap[1] - 1)
        return (
            f"{_lines_label(first, last)} (bytes [{gap[0]}, {gap[1]})) were not kept by the "
            "retention cap"
        )


# --------------------------------------------------------------------------- Grep pages


class _Search:
    """Runs one Grep request over its spills and renders the bounded page."""

    def __init__(
        self,
        tools: SpillTools,
        args: GrepArgs,
        matcher: Matcher,
        metas: Sequence[SpillMeta],
        single: bool,
    ) -> None:
        self.tools = tools
        self.args = args
        self.matcher = matcher
        self.metas = metas
        self.single = single
        self.limit = None if not args.head_limit else args.head_limit
        self.before = args.context if args.before is None else args.before
        self.after = args.context if args.after is None else args.after
        self.unsearched: list[str] = []
        self.trust_utf8 = True

    # --- text pieces

    def _where(self) -> str:
        if self.single:
            return f"in spill {self.metas[0].spill_id}"
        return f"in the {len(self.metas)} spills of session {_quote(self.tools.session)}"

    def _title(self) -> str:
        pattern = json.dumps(
            self.args.pattern[:_ECHO_CHARS]
            + ("..." if len(self.args.pattern) > _ECHO_CHARS else ""),
            ensure_ascii=False,
        )
        flags = []
        if self.args.ignore_case:
            flags.append("ignore_case")
        if self.args.literal:
            flags.append("literal")
        extra = f" ({', '.join(flags)})" if flags else ""
        return f"{self.tools.names.grep} {pattern}{extra} {self._where()}"

    def _again(self, offset: int) -> str:
        args = self.args
        if len(args.pattern) > _ECHO_CHARS:
            return f"{self.tools.names.grep}(<the same arguments>, offset={offset})"
        parts = [f"pattern={json.dumps(args.pattern, ensure_ascii=False)}"]
        if args.spill is not None:
            parts.append(f'spill="{self.metas[0].spill_id}"')
        defaults: dict[str, object] = {
            "ignore_case": False,
            "context": 0,
            "before": None,
            "after": None,
            "output_mode": "content",
            "head_limit": DEFAULT_HEAD_LIMIT,
            "literal": False,
        }
        for key, default in defaults.items():
            value = getattr(args, key)
            if value != default:
                parts.append(f"{key}={json.dumps(value)}")
        parts.append(f"offset={offset}")
        return f"{self.tools.names.grep}({', '.join(parts)})"

    def _gap_notes(self) -> list[str]:
        notes = self.unsearched[:_MAX_NOTES]
        if len(self.unsearched) > _MAX_NOTES:
            more = len(self.unsearched) - _MAX_NOTES
            notes.append(f"and {more} more spills not searched in full")
        return notes

    def _overhead(self) -> int:
        """An upper bound of the title, notes and hint sizes (the rest is for results)."""
        big = MAX_SAFE_INT
        title = self._title() + f": matching lines {big}-{big} (more below)"
        hint = f"-- more results: call {self._again(big)} --"
        id_bytes = max((len(m.spill_id) for m in self.metas), default=0)
        if self.single:
            notes = 0 if self.metas[0].complete else _NOTE_BYTES + id_bytes
        else:
            notes = (_MAX_NOTES + 1) * (_NOTE_BYTES + id_bytes)
        return _size(title) + _size(hint) + notes + 16

    def _each(self) -> Iterator[tuple[SpillMeta, builtins.list[Haystack], LineIndex]]:
        """Yield each readable spill's stored ranges and index; note what was not searched.

        With one spill its errors propagate (the result is that error); across a session a
        spill deleted or damaged meanwhile is skipped with a note, not a failed search.
        """
        for meta in self.metas:
            try:
                with self.tools._haystacks(meta, trust_utf8=self.trust_utf8) as stacks:
                    index = self.tools.store.line_index(meta.spill_id)
                    if not meta.complete:
                        self.unsearched.append(
                            f"spill {meta.spill_id} was saved in part: bytes "
                            f"{_ranges(meta.gaps)} were not kept and were not searched"
                        )
                    yield meta, stacks, index
            except SpillstoreError as exc:
                if self.single:
                    raise
                reason = "it expired" if isinstance(exc, SpillNotFound) else "it cannot be read"
                self.unsearched.append(f"spill {meta.spill_id} was not searched: {reason}")

    # --- modes

    def run(self) -> str:
        mode = self.args.output_mode
        if mode == "count":
            return self._counts()
        if mode == "spills":
            return self._spills()
        return self._content()

    def _finish(self, head: str, body: Sequence[str], tail: str) -> str:
        return "\n".join([head, *self._gap_notes(), *body, tail])

    def _counts(self) -> str:
        tools, args = self.tools, self.args
        rows: list[tuple[SpillMeta, int]] = []
        for meta, stacks, _ in self._each():
            found = sum(count_matching_lines(hay, self.matcher) for hay in stacks)
            if found or self.single:
                rows.append((meta, found))
        total = sum(found for _, found in rows)
        if self.single:
            meta, found = rows[0]
            head = f"{self._title()}: {found} matching lines"
            return self._finish(head, [], "end of results")
        budget = tools.max_page_bytes - self._overhead()
        body: list[str] = []
        used = 0
        selected = rows[args.offset :]
        shown = 0
        for meta, found in selected:
            if self.limit is not None and shown >= self.limit:
                break
            entry = f"{meta.spill_id}: {found} (tool {_quote(meta.tool_name, 60)})"
            if used + _size(entry) + 1 > budget:
                break
            body.append(entry)
            used += _size(entry) + 1
            shown += 1
        head = f"{self._title()}: {total} matching lines in {len(rows)} spills" + (
            f"; counts {args.offset + 1}-{args.offset + shown}" if shown else ""
        )
        if args.offset + shown < len(rows):
            tail = f"-- more results: call {self._again(args.offset + shown)} --"
        else:
            tail = "end of results"
        return self._finish(head, body, tail)

    def _spills(self) -> str:
        tools, args = self.tools, self.args
        budget = tools.max_page_bytes - self._overhead()
        body: list[str] = []
        used = 0
        matched = 0
        shown = 0
        more = False
        for meta, stacks, _ in self._each():
            hit = any(count_matching_lines(hay, self.matcher, stop_after=1) for hay in stacks)
            if not hit:
                continue
            matched += 1
            if matched <= args.offset:
                continue
            entry = (
                f"{meta.spill_id} (tool {_quote(meta.tool_name, 60)}, call "
                f"{_quote(meta.tool_call_id, 60)})"
            )
            if (self.limit is not None and shown >= self.limit) or used + _size(entry) + 1 > budget:
                more = True
                break
            body.append(entry)
            used += _size(entry) + 1
            shown += 1
        if shown:
            head = f"{self._title()}: spills with matches {args.offset + 1}-{args.offset + shown}"
        elif matched:
            head = (
                f"{self._title()}: no spills with matches after offset {args.offset} "
                f"({matched} in all)"
            )
        else:
            head = f"{self._title()}: no spill matches"
        tail = (
            f"-- more results: call {self._again(args.offset + shown)} --"
            if more
            else "end of results"
        )
        return self._finish(head, body, tail)

    def _content(self) -> str:
        """Content mode; a spill whose bytes are not all valid UTF-8 is rendered lossily."""
        text = self._content_pass(lossy=any(meta.invalid_utf8 for meta in self.metas))
        if text is None:  # metadata said valid UTF-8 and was wrong: render it safely
            self.unsearched.clear()
            self.trust_utf8 = False
            text = self._content_pass(lossy=True)
        assert text is not None
        return text

    def _content_pass(self, *, lossy: bool) -> str | None:
        tools, args = self.tools, self.args
        writer = _ContentWriter(
            budget=tools.max_page_bytes - self._overhead(),
            column_bytes=tools.max_column_bytes,
            before=self.before,
            after=self.after,
            lossy=lossy,
        )
        skip = args.offset
        limit = self.limit
        seen = 0
        more = False
        plain = not (self.before or self.after or lossy)
        for meta, stacks, index in self._each():
            prefix = b"" if self.single else meta.spill_id.encode("ascii")
            for hay in stacks:
                add = writer.start(hay, prefix)
                if plain:
                    found, shown, used, more = render_plain(
                        hay,
                        self.matcher,
                        index,
                        head=prefix + b":" if prefix else b"",
                        column_bytes=writer.column_bytes,
                        skip=max(0, skip - seen),
                        limit=None if limit is None else limit - writer.hits,
                        budget=writer.budget - writer.used,
                        pieces=writer.pieces,
                        long_line=writer.long_line,
                    )
                    seen += found
                    writer.hits += shown
                    writer.used += used
                    if more:
                        break
                    continue
                stop_at: int | None = None
                for line, line_start, line_end, match_start, _ in iter_hits(
                    hay, self.matcher, index
                ):
                    seen += 1
                    if seen <= skip:
                        continue
                    if limit is not None and writer.hits >= limit:
                        more = True
                        stop_at = line_start
                        break
                    if not add(line, line_start, line_end, match_start):
                        more = True
                        break
                writer.end(stop_at)
                if more:
                    break
            if more:
                break
        try:
            body = writer.text()
        except UnicodeDecodeError:
            return None
        shown = writer.hits
        if shown:
            head = f"{self._title()}: matching lines {skip + 1}-{skip + shown}" + (
                " (more below)" if more else ""
            )
        elif seen > skip or skip == 0:
            head = f"{self._title()}: no matching lines"
        else:
            head = f"{self._title()}: no matching lines after offset {skip} ({seen} in all)"
        tail = f"-- more results: call {self._again(skip + shown)} --" if more else "end of results"
        lead = "".join(f"{line}\n" for line in [head, *self._gap_notes()])
        return "".join((lead, body, tail))  # one copy of a body that may be megabytes


class _ContentWriter:
    """Renders matching lines (and context) of Grep's content mode within a byte budget.

    Lines are kept as UTF-8 ``bytes`` and decoded once at the end: the plain case (no
    context, line within the column cap) is one ``%``-format of a buffer slice per hit.
    With ``lossy`` every line is decoded with U+FFFD for invalid bytes and re-encoded,
    so the budget counts exactly what the model will see.
    """

    def __init__(
        self, *, budget: int, column_bytes: int, before: int, after: int, lossy: bool
    ) -> None:
        self.budget = budget
        self.column_bytes = column_bytes
        self.before = before
        self.after = after
        self.lossy = lossy
        self.pieces: list[bytes] = []
        self.used = 0
        self.hits = 0
        self.full = False
        self.printed_any = False
        # per stored range
        self.hay: Haystack | None = None
        self.prefix = b""
        self.printed_end = -1
        self.after_pos = -1
        self.after_left = 0
        self.after_line = 0

    def start(self, hay: Haystack, prefix: bytes) -> Callable[[int, int, int, int], bool]:
        """Begin a stored range; return the function that adds one matching line.

        ``prefix`` (a spill id, or empty for a single spill) starts every line.
        """
        self.hay = hay
        self.prefix = prefix
        self.printed_end = -1
        self.after_pos = -1
        self.after_left = 0
        self.after_line = 0
        return self.add

    def long_line(self, line: int, line_start: int, line_end: int, match_start: int) -> bytes:
        """Render a matching line over the column cap (for the plain fast path)."""
        return self._render(line, line_start, line_end, b":", match_start)

    def text(self) -> str:
        """The rendered lines, each ending with a newline.

        Raises:
            UnicodeDecodeError: a line was not valid UTF-8 although not rendered lossily.
        """
        return b"".join(self.pieces).decode("utf-8")

    def _emit(self, piece: bytes) -> bool:
        if self.lossy:
            piece = piece.decode("utf-8", "replace").encode("utf-8")
        if self.used + len(piece) > self.budget:
            self.full = True
            return False
        self.pieces.append(piece)
        self.used += len(piece)
        return True

    def _render(self, number: int, start: int, end: int, sep: bytes, match: int | None) -> bytes:
        """One line (``sep`` is ``b":"`` for a match, ``b"-"`` for context), newline included.

        A line over the column cap shows a window around the match (or its start), with
        the bytes cut on each side and, for a match, its original byte offset.
        """
        hay = self.hay
        assert hay is not None
        buf = hay.buf
        head = (self.prefix + sep if self.prefix else b"") + b"%d" % number + sep
        size = end - start
        if size <= self.column_bytes:
            return head + buf[start:end] + b"\n"
        anchor = start if match is None else match
        window_start = max(start, anchor - self.column_bytes // 4)
        chunk = buf[window_start : min(end, window_start + self.column_bytes + 4)]
        skip = 0
        while skip < min(3, len(chunk)) and _is_continuation(chunk[skip]):
            skip += 1
        chunk = chunk[skip:]
        window_start += skip
        cut = _char_cut(chunk, self.column_bytes)
        left = window_start - start
        right = end - (window_start + cut)
        where = "" if match is None else f"; match at byte {match + hay.origin - hay.lo}"
        opening = f"[... {left} bytes] ".encode() if left else b""
        closing = f" [... {right} more bytes; line of {size} bytes{where}]\n".encode()
        return head + opening + chunk[:cut] + closing

    def _flush_after(self, limit: int) -> bool:
        """Print owed after-context lines that start before physical ``limit``."""
        hay = self.hay
        assert hay is not None
        while self.after_left > 0 and self.after_pos < limit and self.after_pos < hay.hi:
            end = hay.buf.find(b"\n", self.after_pos, hay.hi)
            if end < 0:
                end = hay.hi
            self.after_line += 1
            if not self._emit(self._render(self.after_line, self.after_pos, end, b"-", None)):
                return False
            self.after_left -= 1
            self.after_pos = end + 1
            self.printed_end = self.after_pos
        return True

    def add(self, line: int, line_start: int, line_end: int, match_start: int) -> bool:
        """Print one matching line with its context; False when the page is full."""
        hay = self.hay
        assert hay is not None
        if not self.before and not self.after:
            if not self._emit(self._render(line, line_start, line_end, b":", match_start)):
                return False
            self.hits += 1
            return True
        if not self._flush_after(line_start):
            return False
        floor = max(hay.lo, self.printed_end)
        starts: list[int] = []
        position = line_start
        for _ in range(self.before):
            if position <= floor:
                break
            newline = hay.buf.rfind(b"\n", hay.lo, position - 1)
            position = newline + 1 if newline >= 0 else hay.lo
            if position < floor:
                break
            starts.append(position)
        starts.reverse()
        first_start = starts[0] if starts else line_start
        if self.printed_any and first_start != self.printed_end and not self._emit(b"--\n"):
            return False
        for k, start in enumerate(starts):
            end = hay.buf.find(b"\n", start, line_start)
            number = line - (len(starts) - k)
            if not self._emit(self._render(number, start, end, b"-", None)):
                return False
        if not self._emit(self._render(line, line_start, line_end, b":", match_start)):
            return False
        self.hits += 1
        self.printed_any = True
        self.printed_end = line_end + 1
        self.after_pos = line_end + 1
        self.after_left = self.after
        self.after_line = line
        return True

    def end(self, before: int | None = None) -> None:
        """Finish a stored range: print owed after-context (up to ``before``, if given)."""
        if self.hay is not None and self.after_left and not self.full:
            self._flush_after(self.hay.hi if before is None else before)
        self.after_left = 0


# --------------------------------------------------------------------------- delegation


def delegate_read(
    store: Store,
    path: str,
    *,
    session: str | None = None,
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
    **read_args: Any,
) -> ToolResult | None:
    """Serve a host's own Read tool for spill files; None for any other path.

    A host whose Read tool takes a path calls this first: when ``path`` is a spill data
    file of ``store`` (:meth:`Store.is_spill_path`, symlinks resolved, prefix siblings
    refused) the page comes back as a spill-exempt result (so it never spills again);
    otherwise None is returned and the host goes on with its own logic.

    Args:
        store: the spill store.
        path: the path the model asked to read.
        session: confine to this session (default: any session of the store).
        max_page_bytes: the page cap.
        read_args: ``offset``, ``limit``, ``byte_offset``, ``max_bytes`` as for Read.
    """
    if not isinstance(path, str) or not store.is_spill_path(path):
        return None
    if session is None:
        tools = SpillTools(store, max_page_bytes=max_page_bytes, cross_session=True)
    else:
        tools = SpillTools(store, session=session, max_page_bytes=max_page_bytes)
    parsed = tools._validate(ReadArgs, tools.names.read, {"spill": path, **read_args})
    return parsed if isinstance(parsed, ToolResult) else tools._run(parsed)
