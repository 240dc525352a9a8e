"""Paging a spill by lines and bytes, in original offsets. Pure: the I/O is passed in.

A backend stores only the retained ranges of an output, back to back. The functions here
map original offsets onto that data, say exactly which bytes were not kept, and turn a
request for lines into one exact :class:`LinePage`, given the spill's line index and a
function that reads original bytes. They never open anything themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spillstore._core.index import LineIndex, cut_head
from spillstore._core.newlines import nth_newline_of
from spillstore._core.ranges import Range, format_ranges, gaps
from spillstore._errors import RangeNotStored

__all__ = [
    "LinePage",
    "ReadFn",
    "SpillShape",
    "empty_page",
    "line_of_offset",
    "not_stored",
    "physical",
    "read_page",
]

ReadFn = Callable[[int, int], bytes]
"""Returns the original bytes ``[start, end)``, a range inside one stored range."""


class SpillShape(Protocol):
    """What paging needs to know of a spill (:class:`~spillstore.SpillMeta` has it)."""

    @property
    def spill_id(self) -> str: ...

    @property
    def total_bytes(self) -> int: ...

    @property
    def total_lines(self) -> int: ...

    @property
    def stored_ranges(self) -> Sequence[Range]: ...


@dataclass(frozen=True, slots=True)
class LinePage:
    """A page of lines read from a spill, with exact original ranges.

    ``data`` is exactly the original bytes ``[start_byte, end_byte)``; it always lies in
    one stored range. It holds lines ``first_line..last_line`` (inclusive), except that the
    first line may have begun before ``start_byte`` (``first_line_partial``: its start was
    not stored) and the last line may go on after ``end_byte`` (``last_line_partial``: cut
    by the unstored gap or by ``max_bytes``). An empty page has
    ``last_line == first_line - 1``.

    Attributes:
        spill_id: the spill read.
        first_line, last_line: the 1-based line range held in ``data``.
        start_byte, end_byte: the original byte range of ``data``.
        data: the bytes.
        total_lines, total_bytes: of the whole output.
        first_line_partial, last_line_partial: see above.
        gap: the unstored original range ``[start, end)`` this page ran into (it stopped
            before it, or skipped over it to reach ``first_line``), else None.
        next_line: the line to ask for next, None at the end. After a cut line it is the
            following line; continue the cut line itself with ``next_byte``.
        next_byte: the original offset where the following stored bytes start, None at
            the end.
    """

    spill_id: str
    first_line: int
    last_line: int
    start_byte: int
    end_byte: int
    data: bytes
    total_lines: int
    total_bytes: int
    first_line_partial: bool = False
    last_line_partial: bool = False
    gap: tuple[int, int] | None = None
    next_line: int | None = None
    next_byte: int | None = None


def empty_page(meta: SpillShape, first_line: int, gap: Range | None = None) -> LinePage:
    """The page for a request that holds no line: past the end, or only unstored lines."""
    return LinePage(
        spill_id=meta.spill_id,
        first_line=first_line,
        last_line=first_line - 1,
        start_byte=meta.total_bytes,
        end_byte=meta.total_bytes,
        data=b"",
        total_lines=meta.total_lines,
        total_bytes=meta.total_bytes,
        gap=gap,
    )


def physical(stored_ranges: Sequence[Range], start: int, end: int) -> Range:
    """Map an original range lying in one stored range to offsets in the stored data."""
    base = 0
    for range_start, range_end in stored_ranges:
        if range_start <= start and end <= range_end:
            return base + start - range_start, base + end - range_start
        base += range_end - range_start
    raise AssertionError(f"[{start}, {end}) is not inside one stored range")


def not_stored(meta: SpillShape, start: int, end: int) -> RangeNotStored | None:
    """The error for reading ``[start, end)`` if part of it was not stored, else None."""
    for gap_start, gap_end in gaps(meta.stored_ranges, meta.total_bytes):
        if gap_start < end and start < gap_end:
            lo, hi = max(start, gap_start), min(end, gap_end)
            return RangeNotStored(
                f"bytes [{lo}, {hi}) of spill {meta.spill_id} were not stored: the "
                f"retention cap kept {format_ranges(meta.stored_ranges)} of "
                f"{meta.total_bytes} bytes",
                spill_id=meta.spill_id,
                start=lo,
                end=hi,
            )
    return None


def _offset_after_newline(index: LineIndex, read: ReadFn, k: int) -> tuple[int | None, int]:
    """Return (offset right after newline ``k``, or None if unstored; its interval start)."""
    if k == 0:
        return 0, 0
    i = index.interval_of_newline(k)
    lo, hi = index.offsets[i], index.offsets[i + 1]
    if index.stored[i]:
        held = index.newlines[i + 1] - index.newlines[i]
        position = nth_newline_of(read(lo, hi), k - index.newlines[i], held)
        return lo + position + 1, lo
    if hi - lo == 1:
        return hi, lo
    return None, lo


def read_page(
    meta: SpillShape,
    index: LineIndex,
    read: ReadFn,
    *,
    first_line: int,
    count: int,
    max_bytes: int | None,
) -> LinePage:
    """Read up to ``count`` lines from ``first_line``; ``read`` returns original bytes.

    The logic of :meth:`~spillstore.Store.read_lines`, with the I/O passed in: ``read``
    is called only for ranges inside one stored range, and at most three times (the
    index blocks holding the first and the last line, then the page itself).
    """
    total_bytes, total_lines = meta.total_bytes, meta.total_lines
    if first_line > total_lines:
        return empty_page(meta, first_line)
    ranges = meta.stored_ranges
    start, probe = _offset_after_newline(index, read, first_line - 1)
    line_no, first_partial = first_line, False
    skipped: Range | None = None
    if start is None or not any(a <= start < b for a, b in ranges):
        position = probe if start is None else start
        skipped = next(g for g in gaps(ranges, total_bytes) if g[0] <= position < g[1])
        if skipped[1] >= total_bytes:
            return empty_page(meta, first_line, skipped)
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
            held = index.newlines[i + 1] - index.newlines[i]
            end = lo + nth_newline_of(read(lo, hi), last_wanted - index.newlines[i], held) + 1
            known_last = last_wanted
    stop_gap: Range | None = None
    if end == range_end and range_end < total_bytes:
        stop_gap = next(g for g in gaps(ranges, total_bytes) if g[0] == range_end)
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


def line_of_offset(
    meta: SpillShape, index: LineIndex, offset: int, count_newlines: Callable[[int, int], int]
) -> int:
    """Return the 1-based line holding original byte ``offset`` (``total_bytes``: the last).

    ``count_newlines(start, end)`` counts the newlines of original bytes in one stored
    range; it is called at most once, for the part of one index block before ``offset``.

    Raises:
        RangeNotStored: ``offset`` lies in the unstored gap (line numbers there are
            known only at index checkpoints).
    """
    i = index.interval_of_offset(offset)
    lo = index.offsets[i]
    if offset in (lo, meta.total_bytes):
        newlines = index.newlines[i] if offset == lo else index.total_newlines
    elif index.stored[i]:
        newlines = index.newlines[i] + count_newlines(lo, offset)
    else:
        missing = not_stored(meta, offset, offset + 1)
        assert missing is not None
        raise missing
    return min(newlines + 1, max(meta.total_lines, 1))
