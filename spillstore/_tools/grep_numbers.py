"""Line numbers of Grep's hits, a batch at a time, for the listing of every match.

Each number comes from the spill's sparse line index and the newlines counted in C
between hits (:class:`LineNumbers`; used by :func:`~spillstore._tools.grep_plain.render_plain`).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, repeat
from operator import sub

from spillstore._core.index import INDEX_BLOCK_BYTES, LineIndex
from spillstore._tools.regex import Buffer

__all__ = ["LineNumbers"]


class LineNumbers:
    """Line numbers of a haystack's hits, batch by batch, in order.

    Each hit counts the newlines since the previous hit's line end, or since the nearest
    index checkpoint when that is closer (more than an index block away). A dense batch
    counts with one comprehension of ``count`` calls (on an ``mmap``, which has no
    ``count``, over a copy of the batch's bytes in a reused buffer: a fresh copy, or a
    slice a hit, costs more in page faults and allocations); a sparse one hit by hit,
    jumping to checkpoints. Used as a context manager: it releases its view of an mmap.
    """

    __slots__ = (
        "buf",
        "known",
        "last_interval",
        "newline_counts",
        "newlines",
        "offsets",
        "scratch",
        "shift",
        "view",
    )

    def __init__(
        self, buf: Buffer, shift: int, index: LineIndex, *, known: int = -1, newlines: int = 0
    ) -> None:
        self.buf = buf
        self.offsets, self.newline_counts = index.offsets, index.newlines
        self.last_interval = len(index.offsets) - 2
        self.shift = shift  # original offset = physical offset + shift
        self.known = known  # a physical offset whose newline count is known (-1: none) ...
        self.newlines = newlines  # ... and that count (newlines before it, from the start)
        self.view: memoryview | None = None  # of an mmap, while counting in copies of it
        self.scratch = bytearray()  # reused: fresh memory for each copy costs page faults

    def __enter__(self) -> LineNumbers:
        return self

    def __exit__(self, *_: object) -> None:
        if self.view is not None:
            self.view.release()  # so the store can close the mmap

    def resume(self, known: int, newlines: int) -> None:
        """Go on from physical offset ``known``, with ``newlines`` before it."""
        self.known, self.newlines = known, newlines

    def _copy(self, start: int, end: int) -> bytearray:
        """``buf[start:end]`` copied to the start of the scratch buffer (counts over it
        stay within ``[0, end - start]``: past that it holds older bytes)."""
        size = end - start
        if len(self.scratch) < size:
            self.scratch = bytearray(max(size, 2 * len(self.scratch)))
        if self.view is None:
            self.view = memoryview(self.buf)
        memoryview(self.scratch)[:size] = self.view[start:end]
        return self.scratch

    def _checkpoint(self, line_start: int) -> tuple[int, int]:
        """The nearest checkpoint at or before ``line_start``: (physical offset, newlines)."""
        interval = min(bisect_right(self.offsets, line_start + self.shift) - 1, self.last_interval)
        return self.offsets[interval] - self.shift, self.newline_counts[interval]

    def number(self, line_starts: list[int], line_ends: list[int]) -> list[int]:
        """The 1-based line numbers of hits whose lines are ``[line_starts[i], line_ends[i])``."""
        buf, known, newlines = self.buf, self.known, self.newlines
        if known < 0 or line_starts[0] - known > INDEX_BLOCK_BYTES:
            known, newlines = self._checkpoint(line_starts[0])
        last = line_starts[-1]
        if last - known > INDEX_BLOCK_BYTES * len(line_starts):  # sparse: hit by hit
            numbers = []
            for line_start, line_end in zip(line_starts, line_ends, strict=True):
                if line_start - known > INDEX_BLOCK_BYTES:
                    known, newlines = self._checkpoint(line_start)
                newlines += _count(buf, known, line_start)
                numbers.append(newlines + 1)
                known = line_end  # the line holds no newline but the one at its end
        else:
            # From each previous line end (its newline counted) to the next line start.
            previous = [known, *line_ends[:-1]]
            if isinstance(buf, bytes):
                gaps = list(map(buf.count, repeat(b"\n"), previous, line_starts))
            else:  # mmap has no count: the batch's bytes copied into the scratch buffer
                count = self._copy(known, last).count
                gaps = list(
                    map(
                        count,
                        repeat(b"\n"),
                        map(sub, previous, repeat(known)),
                        map(sub, line_starts, repeat(known)),
                    )
                )
            gaps[0] += newlines + 1
            numbers = list(accumulate(gaps))
        self.known, self.newlines = line_ends[-1], numbers[-1] - 1
        return numbers


def _count(buf: Buffer, start: int, end: int) -> int:
    """The newlines in ``buf[start:end]`` (empty when ``end <= start``)."""
    if isinstance(buf, bytes):
        return buf.count(b"\n", start, end)
    return buf[start:end].count(b"\n") if end > start else 0
