"""Read's line mode: one page of numbered lines, filled within the page cap.

The pager asks the store for lines (:meth:`Store.read_lines`, served from the spill's
line index, so line 5,000,000 costs what line 1 costs), renders the common case of
short valid lines in bulk, and takes the careful path for the rest: a line longer than
``max_line_bytes`` (or than what is left of the page) is cut with a marker giving the
bytes left and the byte offset to go on from, and a line the retention cap cut says
which bytes were not kept. The header, notes and footer are bounded before any line is
placed, so the page never exceeds ``max_page_bytes``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add

from spillstore._core.index import LineIndex
from spillstore._core.newlines import nth_newline
from spillstore._core.paging import LinePage
from spillstore._core.ranges import Range, format_lines, gaps
from spillstore._core.utf8 import utf8_size
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import MAX_SAFE_INT, ReadArgs
from spillstore._tools.text import ToolsView, fit

__all__ = ["LinePager"]

_MIN_LINE_ROOM = 16
"""A Read page stops when less than this many bytes remain for the next line."""


class LinePager:
    """Assembles one line-mode Read page within the page cap.

    The page is filled by one or more ``read_lines`` calls (one, unless long lines were
    cut): each line is shown whole, or cut at ``max_line_bytes`` (or at what is left of
    the page) with a marker giving the bytes left and the byte offset to go on from.
    """

    def __init__(self, tools: ToolsView, meta: SpillMeta, args: ReadArgs, first: int) -> None:
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
        """The spill's line index, read on first use (only a cut line needs it)."""
        if self._index is None:
            self._index = self.tools.store.line_index(self.meta.spill_id)
        return self._index

    def _call(self, **kwargs: int) -> str:
        inner = ", ".join(f"{key}={value}" for key, value in kwargs.items())
        return f'{self.tools.names.read}(spill="{self.meta.spill_id}", {inner})'

    def _marker(self, more: int | None, resume: int, gap: Range | None) -> str:
        call = self._call(byte_offset=resume)
        if more is None:
            assert gap is not None
            kept = f"{gap[0] - resume} more kept bytes, then " if gap[0] > resume else ""
            return (
                f" [... cut: this line goes on with {kept}bytes [{gap[0]}, {gap[1]}), which "
                f"were not kept; the kept bytes stop at {gap[0]}; continue with {call}]"
            )
        return f" [... cut: {more} more bytes; continue with {call}]"

    def _gap_after(self, offset: int) -> Range:
        """The first unkept byte range at or after ``offset`` (from the spill's metadata).

        The page's own gap is only known when the page reached it; a page the page cap
        cut first still needs to say where the kept bytes stop.
        """
        meta = self.meta
        for gap in gaps(meta.stored_ranges, meta.total_bytes):
            if gap[1] > offset:
                return gap
        return (meta.total_bytes, meta.total_bytes)  # unreachable: the line's end is unkept

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
        fixed = sum(utf8_size(note) + 1 for note in notes)
        return (
            utf8_size(header)
            + utf8_size(gap_note)
            + utf8_size(footer)
            + utf8_size(utf8)
            + fixed
            + 8
        )

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
                if utf8_size(text) <= avail:
                    self.lossy = True
            if utf8_size(text) <= avail:
                return prefix + text, len(raw), after_newline
        limit = min(tools.max_line_bytes, avail - self.marker_max, data_room)
        if limit < tools.max_line_bytes and not forced:
            return None  # no room for this line on this page: the next page starts with it
        limit = max(limit, 4)
        cut, text, lossy = fit(raw, limit)
        self.lossy = self.lossy or lossy
        if complete and cut == len(raw):
            return prefix + text, cut, after_newline
        line_end = whole_end if complete else self._line_end(number)
        resume = line_start + cut
        if line_end is None:
            gap = self._gap_after(resume)
            marker = self._marker(None, resume, gap)
            end = gap[0]
        else:
            marker = self._marker(line_end - resume, resume, None)
            end = line_end + (1 if line_end < meta.total_bytes else 0)
        return prefix + text + marker, cut, end

    def _room_for_a_cut_line(self) -> int:
        """Bytes a line cut at ``max_line_bytes`` may need: number, text, marker, newline."""
        return self.width + 1 + self.tools.max_line_bytes + self.marker_max + 1

    def _bulk(
        self, page: LinePage, pieces: Sequence[bytes], room: int, remaining: int
    ) -> tuple[list[str], int, int] | None:
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
        """Render the page from line ``first``; ``notes`` go under the header."""
        tools, meta, args = self.tools, self.meta, self.args
        spill = meta.spill_id
        store = tools.store
        budget = tools.max_page_bytes - self._overhead(notes)
        big = int("9" * len(str(meta.total_bytes)))
        self.marker_max = max(
            utf8_size(self._marker(big, big, None)), utf8_size(self._marker(None, 0, (big, big)))
        )
        data_cap = args.max_bytes if args.max_bytes is not None else MAX_SAFE_INT
        prefix_size = self.width + 1
        body: list[str] = []
        used = data_used = 0
        shown_first: int | None = None
        shown_last = start_byte = end_byte = 0
        stop_gap: Range | None = None
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
            if gap is not None and page.start_byte >= gap[1]:
                # First on the page or after lines shown before the gap: either way the
                # page says where the kept part resumes, and whose line start it lost.
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
                used += utf8_size(text) + 1
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
            f"spill {spill}: {format_lines((shown_first, shown_last))} of {meta.total_lines}, "
            f"bytes [{start_byte}, {end_byte}) of {meta.total_bytes}"
        )
        if stop_gap is not None:
            footer = self._gap_lines(stop_gap)
            if stop_gap[1] >= meta.total_bytes:
                footer += "; nothing was kept after them: end of stored output"
            else:
                resume_line = store.line_of_offset(spill, stop_gap[1])
                # Inside a line already shown, a line hint would repeat this very call.
                again = (
                    self._call(byte_offset=stop_gap[1])
                    if resume_line <= shown_last
                    else self._call(offset=resume_line, limit=args.limit)
                )
                footer += f"; the stored part resumes at line {resume_line}: {again}"
        elif shown_last >= meta.total_lines and end_byte >= meta.total_bytes:
            footer = "end of output"
        else:
            footer = "next: " + self._call(offset=shown_last + 1, limit=args.limit)
        return "\n".join([header, *notes, *body, footer])

    def _gap_lines(self, gap: Range) -> str:
        store, spill = self.tools.store, self.meta.spill_id
        first = store.line_of_offset(spill, gap[0])
        # A gap to the end has no stored byte after it to count from: its last byte is
        # on the last line.
        total = self.meta.total_bytes
        last = self.meta.total_lines if gap[1] >= total else store.line_of_offset(spill, gap[1] - 1)
        return (
            f"{format_lines((first, last))} (bytes [{gap[0]}, {gap[1]})) were not kept by the "
            "retention cap"
        )

    def _line_end(self, line: int) -> int | None:
        """Return the original offset where ``line`` ends (its newline, or the end).

        None when that newline lies in the part the retention cap did not keep.
        """
        meta, index = self.meta, self.index
        if line > index.total_newlines:
            return meta.total_bytes
        interval = index.interval_of_newline(line)
        if not index.stored[interval]:
            return None
        low, high = index.offsets[interval], index.offsets[interval + 1]
        block = self.tools.store.read_bytes(meta.spill_id, low, high)
        return low + nth_newline(block, line - index.newlines[interval])
