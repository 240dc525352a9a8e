"""Grep's listing of matching lines without context (grep -n's job), in batches.

Listing every one of 35,000 matches pays the per-hit work 35,000 times, so it runs in
batches: a tight loop finds a batch of hits (:func:`~spillstore._tools.scan.collector`;
64 at first, then twice as many each time, but not far past what the rest of the page
holds), then each step over the batch is one comprehension of C calls: the line starts
(``rfind``), the line numbers (:class:`~spillstore._tools.grep_numbers.LineNumbers`,
one ``count`` a hit), and one ``%``-format of the whole batch, added as one page piece.

A spill stored in a file is an ``mmap``, which has no ``count``. Where hits are dense
(closer than an index block on average, so every newline is counted anyway), the rest
of the range is listed in *windows*: about :data:`WINDOW_BYTES` of whole lines copied
once as ``bytes``, then searched, counted and sliced there, in the window's own offsets
(counting in a copy with shifted offsets cost more: measured in RESULTS.md, issue 17).
A window starts where the line count is known (the last hit's line end, or the last
window's end), and a pattern that may match across lines is never windowed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate, chain, repeat
from operator import sub

from spillstore._core.index import INDEX_BLOCK_BYTES, LineIndex
from spillstore._tools import scan
from spillstore._tools.grep_numbers import LineNumbers
from spillstore._tools.regex import Buffer, Matcher
from spillstore._tools.scan import FIRST_BATCH, MOST_BATCH, Haystack

__all__ = ["WINDOW_BYTES", "render_plain"]

WINDOW_BYTES = 1 << 20
"""A window of an mmap holds about this many bytes (whole lines; a longer line is listed
in the mmap)."""

_WINDOW_HITS = 1024
"""Windows are copied only for a page that can still take this many hits (a short page
is listed in the mmap: copying a window for it would cost more than it saves)."""

LongLine = Callable[[int, int, int, int], bytes]


def render_plain(
    hay: Haystack,
    matcher: Matcher,
    index: LineIndex,
    *,
    head: bytes,
    column_bytes: int,
    skip: int,
    limit: int | None,
    budget: int,
    pieces: list[bytes],
    long_line: LongLine,
) -> tuple[int, int, int, bool]:
    """Render matching lines as ``<head><line>:<text>\\n`` into ``pieces``.

    When a line is over ``column_bytes`` (rendered by ``long_line(line, start, end,
    match_start)``, in the haystack's offsets) or a batch does not fit in ``budget``, the
    batch is rendered line by line, and the first line that does not fit ends the page.
    Skipped hits (``skip``) are not numbered.

    Returns:
        ``(seen, shown, used, more)``: hits seen (skipped ones included), lines added,
        their bytes, and whether it stopped early (``limit`` or ``budget`` reached) with
        a hit left unshown.
    """
    lo, hi = hay.lo, hay.hi
    if hi <= lo:
        return 0, 0, 0, False
    pos, seen = lo, 0
    if skip:
        pos, seen = scan.pass_over(hay, matcher, skip)
    page = _Page(
        head,
        column_bytes=column_bytes,
        cap=hi if limit is None else limit,
        budget=budget,
        pieces=pieces,
        seen=seen,
    )
    numbering = LineNumbers(hay.buf, hay.origin - lo, index)
    windows = not isinstance(hay.buf, bytes) and matcher.to_line_end is not None
    with numbering:  # it may hold a view of an mmap, released here
        collect = scan.collector(hay, matcher)
        while pos < hi:
            if (
                windows
                and page.dense
                and page.left() >= _WINDOW_HITS
                and numbering.known >= 0
                and pos - numbering.known < WINDOW_BYTES
            ):
                cut = _window_end(hay, pos)
                if cut > pos:
                    done = _window(
                        hay,
                        matcher,
                        index=index,
                        numbering=numbering,
                        page=page,
                        pos=pos,
                        cut=cut,
                        long_line=long_line,
                    )
                    if done is not None:
                        return done
                    pos = cut
                    collect = scan.collector(hay, matcher)  # from here, anew
                    continue
            first = pos
            starts, ends, pos = collect(pos, page.batch())
            found = len(starts)
            done = page.add(
                hay.buf, starts, ends, lo=lo, hi=hi, numbering=numbering, long_line=long_line
            )
            if done is not None:
                return done
            page.dense = _dense(pos - first, found)
        return page.result(more=False)


def _window_end(hay: Haystack, pos: int) -> int:
    """The end of a window from ``pos``: after its last newline (or the range's end);
    ``pos`` itself when no line ends within :data:`WINDOW_BYTES`."""
    end = min(pos + WINDOW_BYTES, hay.hi)
    if end == hay.hi:
        return end
    return hay.buf.rfind(b"\n", pos, end) + 1 or pos


def _window(
    hay: Haystack,
    matcher: Matcher,
    *,
    index: LineIndex,
    numbering: LineNumbers,
    page: _Page,
    pos: int,
    cut: int,
    long_line: LongLine,
) -> tuple[int, int, int, bool] | None:
    """List the hits in ``[pos, cut)`` of an mmap from a ``bytes`` copy of whole lines.

    The copy starts at ``numbering.known`` (its newline count is known), so each count
    runs within it; at the end ``numbering`` moves on to ``cut``, whose count is then
    known (the newlines after the last hit are counted once, as the next hit would).
    Returns the page's result when the page ended, else None.
    """
    base = numbering.known
    window = hay.buf[base:cut]
    size = cut - base
    part = Haystack(window, pos - base, size, hay.origin + pos - hay.lo, hay.valid_utf8)
    shift = hay.origin - hay.lo + base  # a window offset to an original one
    counts = LineNumbers(window, shift, index, known=0, newlines=numbering.newlines)
    collect = scan.collector(part, matcher)

    def shifted(line: int, start: int, end: int, match: int) -> bytes:
        return long_line(line, start + base, end + base, match + base)

    at, found = part.lo, 0
    while at < size:
        starts, ends, at = collect(at, page.batch())
        found += len(starts)
        done = page.add(window, starts, ends, lo=0, hi=size, numbering=counts, long_line=shifted)
        if done is not None:
            return done
    newlines = counts.newlines + window.count(b"\n", counts.known, size)
    numbering.resume(cut, newlines)
    page.dense = _dense(cut - pos, found)
    return None


def _dense(span: int, hits: int) -> bool:
    """Whether ``hits`` in ``span`` bytes were closer than an index block on average (so
    numbering them counts every newline between them anyway)."""
    return span < INDEX_BLOCK_BYTES * hits


class _Page:
    """What the listing has added to the page, and how it batches (see the module)."""

    __slots__ = (
        "budget",
        "cap",
        "column_bytes",
        "dense",
        "form",
        "most",
        "pieces",
        "seen",
        "shown",
        "used",
    )

    def __init__(
        self,
        head: bytes,
        *,
        column_bytes: int,
        cap: int,
        budget: int,
        pieces: list[bytes],
        seen: int,
    ) -> None:
        self.form = head + b"%d:%b\n"  # head is a spill id and a colon: no % in it
        self.column_bytes = column_bytes
        self.cap = cap  # (without a limit: the range's end; never reached, a hit a byte at most)
        self.budget = budget
        self.pieces = pieces
        self.seen = seen
        self.shown = self.used = 0
        self.most = FIRST_BATCH
        self.dense = False

    def batch(self) -> int:
        """The most hits the next batch should find (one past the limit, to see it)."""
        return min(self.cap - self.shown + 1, self.most)

    def left(self) -> int:
        """About how many more hits the page can take (the limit, or the budget at the
        line size seen so far)."""
        return min(
            self.cap - self.shown, (self.budget - self.used) * self.shown // max(self.used, 1)
        )

    def result(self, *, more: bool, extra: int = 0) -> tuple[int, int, int, bool]:
        return self.seen + self.shown + extra, self.shown, self.used, more

    def add(
        self,
        buf: Buffer,
        starts: list[int],
        ends: list[int],
        *,
        lo: int,
        hi: int,
        numbering: LineNumbers,
        long_line: LongLine,
    ) -> tuple[int, int, int, bool] | None:
        """Add a batch of hits (match starts, line ends in ``buf``, a range ``[lo, hi)``);
        return the page's result when the page ended, else None."""
        line_starts = [at + 1 or lo for at in map(buf.rfind, repeat(b"\n"), repeat(lo), starts)]
        if line_starts and line_starts[-1] >= hi:  # an empty match after the final newline
            del starts[-1], ends[-1], line_starts[-1]
        if not starts:
            return None  # none in this batch (it ended at a miss): go on
        over = len(starts) > self.cap - self.shown  # the last hit is past the limit: not shown
        if over:
            del starts[-1], ends[-1], line_starts[-1]
            if not starts:
                return self.result(more=True, extra=1)
        numbers = numbering.number(line_starts, ends)
        form, column_bytes, budget, used = self.form, self.column_bytes, self.budget, self.used
        block = b""
        if max(map(sub, ends, line_starts)) <= column_bytes:  # one format for the batch
            lines = [buf[a:b] for a, b in zip(line_starts, ends, strict=True)]
            block = (form * len(lines)) % tuple(
                chain.from_iterable(zip(numbers, lines, strict=True))
            )
        if block and used + len(block) <= budget:
            self.pieces.append(block)
        else:  # a long line, or the page fills up: line by line
            new = [
                form % (n, buf[a:b]) if b - a <= column_bytes else long_line(n, a, b, start)
                for n, a, b, start in zip(numbers, line_starts, ends, starts, strict=True)
            ]
            block = b"".join(new)
            if used + len(block) > budget:  # the first line that does not fit ends the page
                fit = bisect_right(list(accumulate(map(len, new), initial=used)), budget) - 1
                self.pieces += new[:fit]
                self.used += sum(map(len, new[:fit]))
                self.shown += fit
                return self.result(more=True, extra=1)
            self.pieces += new
        self.shown += len(numbers)
        self.used += len(block)
        if over:
            return self.result(more=True, extra=1)
        # Twice the batch, but not far past what the page holds at this line size.
        self.most = min(2 * self.most, MOST_BATCH, self.left() + 2)
        return None
