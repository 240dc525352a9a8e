r"""The Grep scanners: the hot loops that find matching lines in a spill's stored bytes.

A *hit* is a matching line: the line holding the start of a match. A match that runs
over several lines is reported at its first line; the next search starts after that
line (or after the match, if it ends later). Each loop step is a handful of C calls:
the next match, its line's start (``rfind``) and end (``find``), and a newline count.

A plain literal (no regex metacharacters, or ``literal=True``) is also searched with
``bytes.find``/``mmap.find``, adaptively. Measured on the benchmark log (2 cores, Python
3.11, google-re2 1.1): RE2's literal-prefix accelerator scans about 2.5x faster than
``find`` (about 5.8 vs 2.2 GB/s), but each RE2 call costs about 0.6 us against 0.13 us
for ``find``. So the scanner asks RE2 for the next hit after a long gap, and ``find``
while hits are less than :data:`DENSE_GAP_BYTES` apart (the crossover). Both engines
give the same leftmost match of a literal, so the choice never changes a result.

Line numbers come from the spill's sparse line index: the first hit of a run counts
newlines from its nearest checkpoint, later hits count from the previous hit, so the
counting work is bounded by the distance between hits (or one index block), never by
the distance from the start of the file, and every count is one ``bytes.count`` in C.

A case-sensitive literal whose first character is common is searched from its rarest
one (:attr:`~spillstore._tools.regex.Matcher.lead`): RE2 finds a literal prefix by
``memchr`` of its first byte, and stops at every copy of that byte. On the benchmark log,
``timeout`` searched as ``meout`` (``t`` is 5x as common as ``m``) took 38 instead of 53
ms for 100 MiB. The bytes before the rare character are checked at each hit.

Nothing here formats model-facing text. Listing every match (Grep's content mode without
context, :mod:`~spillstore._tools.grep_plain`) pays its per-hit work 35,000 times in the
benchmark (held to 1.5x GNU grep), so it works in batches: a tight loop collects a batch
of hits (:func:`collector`, also the loop of count mode and of skipping), then each later
step is one comprehension of C calls over the batch. :func:`iter_hits`, the hit-by-hit
generator, serves the context mode and is what the batches are tested against.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from spillstore._core.index import INDEX_BLOCK_BYTES, LineIndex
from spillstore._tools.regex import Buffer, Matcher, RawMatch

__all__ = [
    "BATCH_BYTES",
    "DENSE_GAP_BYTES",
    "FIRST_BATCH",
    "MOST_BATCH",
    "Haystack",
    "Hit",
    "collector",
    "count_matching_lines",
    "iter_hits",
    "pass_over",
    "searcher",
]

DENSE_GAP_BYTES = 1600
"""Below this gap between hits, ``find`` beats an RE2 call for a literal (measured)."""


@dataclass(frozen=True, slots=True)
class Haystack:
    """One stored range of a spill, as a searchable buffer.

    Attributes:
        buf: the buffer holding the range (it may hold other ranges too).
        lo, hi: the range's physical bounds in ``buf``.
        origin: the original offset of ``buf[lo]``.
        valid_utf8: every byte of the range is valid UTF-8 (so RE2's ``[^\\n]*`` always
            runs on to the newline, and need not be checked).
        cut_lo, cut_hi: bytes before ``lo`` / from ``hi`` on were not kept (the retention
            cap), so a line touching that end may be longer than what is stored.
    """

    buf: Buffer
    lo: int
    hi: int
    origin: int
    valid_utf8: bool = False
    cut_lo: bool = False
    cut_hi: bool = False


Hit = tuple[int, int, int, int, int]
"""A matching line: ``(line, line_start, line_end, match_start, match_end)``.

``line`` is the 1-based line number in the original output (0 when not numbered); the
offsets are physical offsets in the haystack's buffer, the line without its newline. A
plain tuple: it is made once per hit on a hot path."""


def searcher(matcher: Matcher, buf: Buffer) -> Callable[[int, int], tuple[int, int]]:
    """Return ``search(pos, end) -> (start, end)`` of the next match, ``(-1, -1)`` if none.

    For a literal it switches between RE2 and ``find`` by the last gap between hits;
    with a prefilter it looks for the required literal first (see :func:`_filtered`).
    """
    raw, anchor, needle = matcher.raw, matcher.anchor, matcher.needle
    if matcher.prefilter is not None:
        return _filtered(buf, raw, matcher.prefilter, anchor)
    if needle is None and matcher.spans_lines:
        return _within_lines(buf, raw, anchor)
    if needle is None:
        return lambda pos, end: raw(anchor, buf, pos, end)[0]
    find = buf.find
    size = len(needle)
    dense = False

    def search(pos: int, end: int) -> tuple[int, int]:
        nonlocal dense
        if dense:
            start = find(needle, pos, end)
            if start < 0:
                return -1, -1
            found = start, start + size
        else:
            found = raw(anchor, buf, pos, end)[0]
            start = found[0]
            if start < 0:
                return found
        dense = start - pos < DENSE_GAP_BYTES
        return found

    return search


def _filtered(
    buf: Buffer, raw: RawMatch, prefilter: RawMatch, anchor: Any
) -> Callable[[int, int], tuple[int, int]]:
    """A search that finds the pattern's required literal first, then checks its line.

    RE2 scans at its fastest only from a literal *prefix*; ``[0-9]+ ms NEEDLE`` has
    none, and RE2's DFA then reads every byte (about 0.7 GB/s here). Every match of
    such a pattern contains ``" ms NEEDLE"`` and lies within one line (the prefilter is
    only built for patterns that cannot match a newline), so: find the literal (fast),
    run the pattern on that line only, and go on after the line if it does not match.
    Results are exactly the plain search's. When candidate lines mostly fail (the
    literal is common), the search falls back to the plain scan for good.
    """
    find, rfind = buf.find, buf.rfind
    misses = found = 0
    filtering = True

    def search(pos: int, end: int) -> tuple[int, int]:
        nonlocal misses, found, filtering
        while filtering:
            candidate = prefilter(anchor, buf, pos, end)[0][0]
            if candidate < 0:
                return -1, -1
            line_start = max(rfind(b"\n", 0, candidate) + 1, pos)
            line_end = find(b"\n", candidate, end)
            if line_end < 0:
                line_end = end
            match = raw(anchor, buf, line_start, line_end)[0]
            if match[0] >= 0:
                found += 1
                return match
            misses += 1
            if misses > 64 and misses > 8 * found:
                filtering = False
            pos = line_end + 1
            if pos > end:
                return -1, -1
        return raw(anchor, buf, pos, end)[0]

    return search


def _within_lines(buf: Buffer, raw: RawMatch, anchor: Any) -> Callable[[int, int], tuple[int, int]]:
    """A search for a regex that may match a newline, skipping matches that start with one.

    Such a match (``[^a]$`` or ``\\s+$`` from the newline ending ``"xa"`` through an
    empty line) holds nothing of the line that newline ends, so it is no hit on that
    line. Where one starts, an empty match of the pattern there (``\\s*$`` at the end
    of the line) still counts; otherwise the search goes on from the next byte.
    """

    def search(pos: int, end: int) -> tuple[int, int]:
        found = raw(anchor, buf, pos, end)[0]
        start, stop = found
        while start >= 0 and stop > start and buf[start] == _NEWLINE:
            if raw(anchor, buf, start, start)[0][0] == start:
                return start, start
            found = raw(anchor, buf, start + 1, end)[0]
            start, stop = found
        return found

    return search


_NEWLINE = ord("\n")


def iter_hits(hay: Haystack, matcher: Matcher, index: LineIndex | None) -> Iterator[Hit]:
    """Yield the matching lines of one stored range, in order, with their numbers.

    Without an index the lines are not numbered (``line`` is 0). Each step is a C call:
    the next match, its line's start (``rfind``) and end (``find``), and the newlines
    since the previous hit (``count``), or since the nearest index checkpoint when the
    previous hit is more than one index block away.
    """
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return
    search = searcher(matcher, buf)
    find, rfind = buf.find, buf.rfind
    is_bytes = isinstance(buf, bytes)
    number = index is not None
    offsets, newline_counts = (index.offsets, index.newlines) if index is not None else ((), ())
    last_interval = len(offsets) - 2
    shift = hay.origin - lo  # original offset = physical offset + shift
    known = -1  # a physical offset whose newline count is known ...
    newlines = 0  # ... and that count (newlines before it, from the original start)
    pos = lo
    while pos < hi:
        match_start, match_end = search(pos, hi)
        if match_start < 0:
            return
        newline = rfind(b"\n", lo, match_start)
        line_start = newline + 1 if newline >= 0 else lo
        if line_start >= hi:  # an empty match after the final newline: not a line
            return
        line_end = find(b"\n", match_start, hi)
        if line_end < 0:
            line_end = hi
        line = 0
        if number:
            if known < 0 or line_start - known > INDEX_BLOCK_BYTES:
                interval = min(bisect_right(offsets, line_start + shift) - 1, last_interval)
                known = offsets[interval] - shift
                newlines = newline_counts[interval]
            if is_bytes:
                newlines += buf.count(b"\n", known, line_start)  # type: ignore[union-attr]
            elif line_start > known:
                newlines += buf[known:line_start].count(b"\n")
            known = line_start
            line = newlines + 1
        yield line, line_start, line_end, match_start, match_end
        pos = line_end + 1 if line_end + 1 > match_end else match_end


def count_matching_lines(hay: Haystack, matcher: Matcher, *, stop_after: int | None = None) -> int:
    """Return how many lines of one stored range match (at most ``stop_after``).

    Count mode's loop (grep -c's job): the hits are found in batches, as for a listing
    (:func:`collector`), and only counted.
    """
    return pass_over(hay, matcher, stop_after)[1]


FIRST_BATCH = 64
"""Hits found in a batch at first (a page may hold few); it doubles up to the most."""

MOST_BATCH = 4096
"""The most hits found in one batch."""

BATCH_BYTES = 1 << 20
"""A batch ends at the first hit this far past its start (bounds the work past a full page)."""


def collector(
    hay: Haystack, matcher: Matcher
) -> Callable[[int, int], tuple[list[int], list[int], int]]:
    """Return ``collect(pos, most) -> (match starts, line ends, where to go on)``.

    At most ``most`` hits, ending at the first past :data:`BATCH_BYTES` from ``pos``; an
    empty match at the end of the range is among them (the caller drops it). For a
    pattern that cannot span a line, on valid UTF-8, one RE2 call a hit gives the match
    and its line end (for a literal, from its rarest character: :attr:`Matcher.lead`,
    given up after :data:`_LEAD_MISSES` misses when the lead mostly fails). While a
    literal's hits are dense (less than :data:`DENSE_GAP_BYTES` apart on average), and
    for any other pattern, :func:`searcher` finds each match and ``find`` its line end.
    """
    buf, hi = hay.buf, hay.hi
    search = searcher(matcher, buf)
    find = buf.find
    anchor, lead, size = matcher.anchor, matcher.lead, len(matcher.lead)
    program = matcher.rare_line_end if size else matcher.to_line_end
    fast = program is not None and matcher.prefilter is None and hay.valid_utf8
    literal = matcher.needle is not None
    dense = False
    misses = found = 0

    def collect(pos: int, most: int) -> tuple[list[int], list[int], int]:
        nonlocal dense, misses, found, program, size
        starts: list[int] = []
        ends: list[int] = []
        add_start, add_end = starts.append, ends.append
        first, stop = pos, min(pos + BATCH_BYTES, hi - 1)
        if fast and not dense and size:
            for _ in range(most):
                start, line_end = program(anchor, buf, pos + size, hi)[0]  # type: ignore[misc]
                if start < 0:
                    return starts, ends, hi
                start -= size
                if buf[start : start + size] != lead:  # the rest of the literal, alone
                    misses += 1
                    pos = start + 1
                    if misses > _LEAD_MISSES and misses > found:
                        program, size = matcher.to_line_end, 0
                        return starts, ends, pos
                    continue
                add_start(start)
                add_end(line_end)
                pos = line_end + 1
                if pos > stop:
                    break
            found += len(starts)
        elif fast and not dense:
            for _ in range(most):
                start, line_end = program(anchor, buf, pos, hi)[0]  # type: ignore[misc]
                if start < 0:
                    return starts, ends, hi
                add_start(start)
                add_end(line_end)
                pos = line_end + 1
                if pos > stop:
                    break
        else:
            for _ in range(most):
                start, match_end = search(pos, hi)
                if start < 0:
                    return starts, ends, hi
                line_end = find(b"\n", start, hi)
                if line_end < 0:
                    line_end = hi
                add_start(start)
                add_end(line_end)
                pos = line_end + 1 if line_end + 1 > match_end else match_end
                if pos > stop:
                    break
        dense = literal and pos - first < DENSE_GAP_BYTES * len(starts)
        return starts, ends, pos

    return collect


_LEAD_MISSES = 64
"""Misses (the rest of a literal without its lead) a search takes before it gives up
searching from the rarest character, once they outnumber the hits."""


def pass_over(hay: Haystack, matcher: Matcher, most: int | None) -> tuple[int, int]:
    """Pass over matching lines (at most ``most``); return where to go on and how many."""
    lo, hi = hay.lo, hay.hi
    collect = collector(hay, matcher)
    rfind = hay.buf.rfind
    pos, passed = lo, 0
    batch = FIRST_BATCH
    while pos < hi and (most is None or passed < most):
        starts, _, pos = collect(pos, batch if most is None else min(batch, most - passed))
        passed += len(starts)
        if starts and rfind(b"\n", lo, starts[-1]) + 1 >= hi:
            return hi, passed - 1  # an empty match after the final newline: not a line
        batch = min(2 * batch, MOST_BATCH)
    return pos, passed
