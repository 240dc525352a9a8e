"""Read (``read_spill``): one page of a spill, by lines or by bytes.

The page starts with a header naming the exact line and byte range shown, numbers every
line, cuts long lines cosmetically with the byte offset to continue from, and ends with
the exact next call (or ``end of output``)::

    spill bash-0123456789abcdef0123: lines 101-300 of 5000, bytes [8123, 16002) of 400000
       101\tfirst line shown
       ...
       300\ta long line cut here [... cut: 52311 more bytes; continue with
           read_spill(spill="bash-...", byte_offset=15810)]
    next: read_spill(spill="bash-0123456789abcdef0123", offset=301, limit=200)

Line mode is the :class:`~spillstore._tools.read_lines.LinePager`'s job; byte mode (for
single huge lines) is here. A byte page shows whole UTF-8 characters, invalid bytes as
U+FFFD, and says which bytes the retention cap did not keep when it runs into them.
"""

from __future__ import annotations

from spillstore._core.ranges import Range, format_lines, format_ranges
from spillstore._core.utf8 import continues_character, is_continuation, utf8_size
from spillstore._errors import RequestRefused
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import DEFAULT_BYTE_PAGE, ReadArgs
from spillstore._tools.read_lines import LinePager
from spillstore._tools.text import ToolsView, fit

__all__ = ["read_page"]


def read_page(tools: ToolsView, meta: SpillMeta, args: ReadArgs) -> str:
    """Render the page of ``meta`` that ``args`` asks for, within the page cap.

    Raises:
        RequestRefused: the offset lies past the end (the message says what to call).
        SpillstoreError: the store could not read the spill.
    """
    if meta.total_bytes == 0:
        return f"spill {meta.spill_id}: empty output (0 bytes, 0 lines)\nend of output"
    if args.byte_offset is not None:
        return _read_bytes(tools, meta, args, args.byte_offset)
    return _read_lines(tools, meta, args)


def _read_lines(tools: ToolsView, meta: SpillMeta, args: ReadArgs) -> str:
    spill = meta.spill_id
    total_lines = meta.total_lines
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
                f"offset {first} is past the end: spill {spill} has {total_lines} lines; "
                f'the last ones: {tools.names.read}(spill="{spill}", offset=-{args.limit})'
            )
    return LinePager(tools, meta, args, first).render(notes)


def _read_bytes(tools: ToolsView, meta: SpillMeta, args: ReadArgs, byte_offset: int) -> str:
    spill = meta.spill_id
    total = meta.total_bytes
    read = tools.names.read
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
            f"cap kept {format_ranges(meta.stored_ranges)} of {total} bytes)"
        )
        if gap[1] >= total:
            return "\n".join([*notes, "nothing was kept after them; end of output"])
        notes.append(f"the stored part resumes at byte {gap[1]}; showing from there")
        start = gap[1]
    range_end = next(end for begin, end in meta.stored_ranges if begin <= start < end)
    overhead = _byte_overhead(tools, meta, want)
    room = tools.max_page_bytes - overhead - sum(utf8_size(n) + 1 for n in notes)
    if room < 64:  # pragma: no cover - MIN_PAGE_BYTES leaves far more
        raise RequestRefused("the page cap is too small to show any bytes")
    limit = min(want, room)
    raw = tools.store.read_bytes(spill, start, min(start + limit + 4, range_end))
    skip = 0
    if gap is None and raw and is_continuation(raw[0]):
        range_start = next(begin for begin, end in meta.stored_ranges if begin <= start < end)
        before = tools.store.read_bytes(spill, max(range_start, start - 3), start)
        skip = continues_character(before, raw)  # 0: stray bytes, shown as invalid
    if skip:
        notes.append(
            f"byte_offset {start} is inside a UTF-8 character; showing from the next "
            f"character boundary, byte {start + skip}"
        )
        raw = raw[skip:]
        start += skip
    # raw runs past limit whenever more bytes follow, so the cut sees the next byte.
    cut, text, lossy = fit(raw, limit)
    end = start + cut
    if lossy:
        notes.append("invalid UTF-8 bytes are shown as U+FFFD")
    first_line = tools.store.line_of_offset(spill, start)
    last_line = tools.store.line_of_offset(spill, max(start, end - 1))
    header = (
        f"spill {spill}: bytes [{start}, {end}) of {total}, "
        f"{format_lines((first_line, last_line))} of {meta.total_lines}"
    )
    if end >= total:
        footer = "end of output"
    elif end >= range_end:
        resume = next((b for b, _ in meta.stored_ranges if b > end), None)
        footer = f"bytes [{end}, {resume or total}) were not kept (retention cap)" + (
            f'; the stored part resumes at: {read}(spill="{spill}", '
            f"byte_offset={resume}, max_bytes={want})"
            if resume is not None and resume < total
            else "; end of stored output"
        )
    else:
        footer = f'next: {read}(spill="{spill}", byte_offset={end}, max_bytes={want})'
    body = text if text.endswith("\n") or not text else text + "\n"
    return "\n".join([header, *notes]) + "\n" + body + footer


def _byte_overhead(tools: ToolsView, meta: SpillMeta, want: int) -> int:
    """An upper bound of a byte page's header and footer sizes."""
    digits = len(str(meta.total_bytes))
    big = int("9" * digits)
    lines = int("9" * len(str(meta.total_lines)))
    header = (
        f"spill {meta.spill_id}: bytes [{big}, {big}) of {big}, lines {lines}-{lines} of {lines}"
    )
    footer = (
        f"bytes [{big}, {big}) were not kept (retention cap); the stored part resumes "
        f'at: {tools.names.read}(spill="{meta.spill_id}", byte_offset={big}, '
        f"max_bytes={want})"
    )
    note = "invalid UTF-8 bytes are shown as U+FFFD"
    return utf8_size(header) + utf8_size(footer) + utf8_size(note) + 8


def _gap_at(meta: SpillMeta, offset: int) -> Range | None:
    """The unstored byte range holding ``offset``, if the retention cap cut one there."""
    return next((gap for gap in meta.gaps if gap[0] <= offset < gap[1]), None)
