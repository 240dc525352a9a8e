"""Line counting, the sparse line index, and the streaming retention cut. Pure.

Nothing here does I/O, reads the clock or reads the environment: the retention cut and
the line index are plain functions of the bytes fed, so they are property-tested in
microseconds and shared by every backend.

Vocabulary (design.md §1): sizes are UTF-8 bytes; ranges are half-open ``[start, end)``
in bytes of the *original* output; lines are 1-based. ``total_lines`` counts the
``b"\\n"`` bytes, plus one when the output is non-empty and does not end with one
(``b"a\\nb"`` has 2 lines, ``b"a\\n"`` has 1, ``b""`` has 0). Line *k* starts right after
the *(k-1)*-th newline.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from spillstore._core.checks import check_int
from spillstore._core.utf8 import is_continuation
from spillstore._errors import ConfigError

__all__ = [
    "DEFAULT_RETAINED_TAIL_BYTES",
    "DEFAULT_RETENTION_BYTES",
    "INDEX_BLOCK_BYTES",
    "IndexBuilder",
    "LineIndex",
    "RetentionCut",
    "count_lines",
    "cut_head",
    "cut_tail",
    "validate_retention",
]

DEFAULT_RETENTION_BYTES = 10 * 1024 * 1024
"""The most bytes of one output that are stored (design.md §4)."""

DEFAULT_RETAINED_TAIL_BYTES = 1024 * 1024
"""Of those, the bytes kept from the end of an output larger than the cap."""

INDEX_BLOCK_BYTES = 32 * 1024
"""The line index has a checkpoint at every multiple of this many original bytes.

A byte-spaced index costs one ``bytes.count`` per block to build (no search for the
k-th newline while streaming), bounds every lookup to scanning one block, and stays
small: 1 GiB of output needs 32,768 checkpoints (512 KiB)."""


_SMALL_PIECE_BYTES = 16 * 1024
"""Pieces held for the tail cut below this size are copied together, larger ones kept."""

# --------------------------------------------------------------------------- counting


def count_lines(data: bytes) -> int:
    """Return the line count of ``data`` under spillstore's convention."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def cut_head(window: bytes, window_start: int, limit: int) -> int:
    """Return where to end a head kept up to ``limit``, on a UTF-8 boundary.

    ``window`` holds the original bytes ``[window_start, limit + 1)`` (at least the byte
    at ``limit`` and up to 3 before it). The cut backs off from ``limit`` while the byte
    there is a UTF-8 continuation byte, at most 3 times (invalid input stays bounded).
    """
    cut = limit
    floor = max(window_start, limit - 3)
    while cut > floor and is_continuation(window[cut - window_start]):
        cut -= 1
    return cut


def cut_tail(window: bytes, window_start: int, start: int) -> int:
    """Return where to start a tail kept from ``start``, on a UTF-8 boundary.

    ``window`` holds the original bytes ``[window_start, window_start + len(window))``,
    which must include ``[start, end)``. The cut advances from ``start`` while the byte
    there is a continuation byte, at most 3 times.
    """
    end = window_start + len(window)
    cut = start
    ceiling = min(end, start + 3)
    while cut < ceiling and is_continuation(window[cut - window_start]):
        cut += 1
    return cut


def validate_retention(retention_bytes: int | None, retained_tail_bytes: int) -> None:
    """Check a retention cap and its tail size.

    Raises:
        ConfigError: the cap is negative, the tail is negative or larger than the cap,
            or either is not an ``int`` (``bool`` included).
    """
    check_int("retention_bytes", retention_bytes, allow_none=True)
    check_int("retained_tail_bytes", retained_tail_bytes)
    if retention_bytes is not None and retained_tail_bytes > retention_bytes:
        raise ConfigError(
            f"retained_tail_bytes ({retained_tail_bytes}) must not exceed retention_bytes "
            f"({retention_bytes})",
            field="retained_tail_bytes",
        )


# --------------------------------------------------------------------------- line index

_INDEX_MAGIC = b"SPIX\x01\x00\x00\x00"


@dataclass(frozen=True, slots=True, eq=False)
class LineIndex:
    """The sparse line index of one spill: newline counts at checkpoint offsets.

    ``offsets`` rises strictly from 0 to ``total_bytes``; ``newlines[i]`` is the number
    of ``b"\\n"`` in the original bytes ``[0, offsets[i])``. Checkpoints sit at every
    multiple of :data:`INDEX_BLOCK_BYTES` inside stored ranges, at both ends of every
    stored range, and one byte before the start of every range after a gap (so whether a
    line starts exactly where stored bytes resume is known). Every interval between two
    checkpoints is therefore either wholly stored or wholly unstored.
    """

    offsets: array[int]
    newlines: array[int]
    stored: bytes = field(repr=False)
    """One flag per interval ``[offsets[i], offsets[i+1])``: 1 if stored."""

    @classmethod
    def build(
        cls,
        offsets: Sequence[int],
        newlines: Sequence[int],
        stored_ranges: Sequence[tuple[int, int]],
    ) -> LineIndex:
        """Build an index, working out which intervals are stored."""
        offs = array("q", offsets)
        nls = array("q", newlines)
        if len(offs) != len(nls) or not offs or offs[0] != 0:
            raise ValueError("malformed line index")
        flags = bytearray(len(offs) - 1)
        for start, end in stored_ranges:
            first = bisect_left(offs, start)
            last = bisect_left(offs, end)
            flags[first:last] = b"\x01" * (last - first)
        return cls(offs, nls, bytes(flags))

    @property
    def total_bytes(self) -> int:
        """The original size the index covers."""
        return self.offsets[-1]

    @property
    def total_newlines(self) -> int:
        """The number of newlines in the whole original output."""
        return self.newlines[-1]

    def describes(self, total_bytes: int, total_lines: int) -> bool:
        """Whether this index can belong to an output of that many bytes and lines."""
        newlines = self.total_newlines
        return self.total_bytes == total_bytes and newlines <= total_lines <= newlines + 1

    def interval_of_offset(self, offset: int) -> int:
        """Return ``i`` with ``offsets[i] <= offset < offsets[i+1]`` (clamped to the last)."""
        return min(bisect_right(self.offsets, offset) - 1, len(self.offsets) - 2)

    def interval_of_newline(self, k: int) -> int:
        """Return ``i`` with ``newlines[i] < k <= newlines[i+1]``: where newline ``k`` is."""
        return bisect_left(self.newlines, k) - 1

    def newlines_at(self, offset: int) -> int:
        """Return the newlines before ``offset``, which must be a checkpoint.

        Every stored range starts at a checkpoint, so Grep can number the lines of
        each segment it scans.

        Raises:
            KeyError: ``offset`` is not a checkpoint.
        """
        i = bisect_left(self.offsets, offset)
        if i < len(self.offsets) and self.offsets[i] == offset:
            return self.newlines[i]
        raise KeyError(offset)

    def to_bytes(self) -> bytes:
        """Serialize as ``SPIX`` magic, a count, then little-endian int64 arrays."""
        offs, nls = array("q", self.offsets), array("q", self.newlines)
        if sys.byteorder == "big":  # pragma: no cover - every supported host is little
            offs.byteswap()
            nls.byteswap()
        count = len(offs).to_bytes(8, "little")
        return _INDEX_MAGIC + count + offs.tobytes() + nls.tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes, stored_ranges: Sequence[tuple[int, int]]) -> LineIndex:
        """Parse :meth:`to_bytes` output.

        Raises:
            ValueError: the bytes are not a well-formed index.
        """
        if raw[:8] != _INDEX_MAGIC or len(raw) < 16:
            raise ValueError("not a spillstore line index")
        count = int.from_bytes(raw[8:16], "little")
        if len(raw) != 16 + 16 * count or count < 1:
            raise ValueError("truncated line index")
        offs, nls = array("q"), array("q")
        offs.frombytes(raw[16 : 16 + 8 * count])
        nls.frombytes(raw[16 + 8 * count :])
        if sys.byteorder == "big":  # pragma: no cover
            offs.byteswap()
            nls.byteswap()
        return cls.build(offs, nls, stored_ranges)


@dataclass(frozen=True, slots=True)
class RetentionCut:
    """What a finished :class:`IndexBuilder` decided.

    Attributes:
        final_parts: bytes still to append to the data file, in order (a part may be a
            view of a larger buffer: no copy of the retained tail is made).
        stored_ranges: the original ranges the data file holds.
        total_bytes, total_lines: of the whole original output.
        index: the line index.
    """

    final_parts: tuple[bytes | memoryview, ...]
    stored_ranges: tuple[tuple[int, int], ...]
    total_bytes: int
    total_lines: int
    index: LineIndex


class IndexBuilder:
    """Streaming retention and indexing: decides, byte by byte, what a spill stores.

    Pure (no I/O, no clock): :meth:`feed` takes the output in pieces and returns the part
    to append to the data file *now*; :meth:`finish` returns the rest, the stored ranges
    and the line index. Memory stays bounded by the retention cap's tail, not by the
    output: with a cap ``R`` and tail ``K``, bytes before ``R - K - 3`` go straight out,
    the next few are kept to place the UTF-8-safe head cut, and the last ``K + 4`` are
    kept in a ring to place the tail cut at the end. Every byte, stored or not, is
    counted, so line numbers after the gap are exact.

    Args:
        retention_bytes: the cap ``R``, or None to store everything.
        retained_tail_bytes: ``K``, kept from the end when the output exceeds ``R``.
        block_bytes: spacing of the index checkpoints (default :data:`INDEX_BLOCK_BYTES`).
    """

    def __init__(
        self,
        retention_bytes: int | None = DEFAULT_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
        *,
        block_bytes: int | None = None,
    ) -> None:
        validate_retention(retention_bytes, retained_tail_bytes)
        self._cap = retention_bytes
        self._tail = retained_tail_bytes
        self._head = None if retention_bytes is None else retention_bytes - retained_tail_bytes
        # Bytes before this offset go straight to the data file.
        self._direct = None if self._head is None else max(0, self._head - 3)
        self._ring_cap = retained_tail_bytes + 4
        self._block = block_bytes or INDEX_BLOCK_BYTES
        self._total = 0
        self._newlines = 0
        self._newlines_at_direct = 0
        self._offsets = array("q", [0])
        self._counts = array("q", [0])
        self._boundary = bytearray()
        # The last bytes held past the head, as the pieces fed (no copies): at least the
        # last ``_ring_cap`` of them, at most that plus one piece.
        self._ring: deque[bytes | bytearray] = deque()
        self._ring_bytes = 0
        self._last_byte = -1

    @property
    def total_bytes(self) -> int:
        """Bytes fed so far."""
        return self._total

    @property
    def newlines(self) -> int:
        """Newlines in the bytes fed so far (each byte is counted once, as it is fed)."""
        return self._newlines

    def stored_now(self, size: int) -> int:
        """How many of the next ``size`` bytes :meth:`feed` returns to store now.

        They are the first ones: the bytes before the head cut's neighbourhood. It
        depends only on positions, so a caller may hand them on before feeding them.
        """
        if self._direct is None:
            return size
        return max(0, min(size, self._direct - self._total))

    def feed(self, data: bytes, lo: int = 0, hi: int | None = None) -> bytes | memoryview:
        """Account for the next piece, ``data[lo:hi]``; return the part to store now.

        Taking a window of a larger ``bytes`` avoids copying a huge input piece by piece.
        """
        if hi is None:
            hi = len(data)
        size = hi - lo
        if size <= 0:
            return b""
        start = self._total
        origin = start - lo  # the original offset of data[0]
        self._last_byte = data[hi - 1]
        direct = self.stored_now(size)
        if direct:
            self._count_direct(data, lo, lo + direct, origin)
        if direct < size:
            self._hold(data, lo + direct, hi)
        self._total = start + size
        if direct == size and lo == 0 and hi == len(data):
            return data
        return memoryview(data)[lo : lo + direct] if direct else b""

    def _count_direct(self, piece: bytes, lo: int, hi: int, origin: int) -> None:
        # origin: the original offset of piece[0]. Adds block checkpoints in [lo, hi).
        block = self._block
        position = lo
        next_mark = (origin + lo) // block * block + block
        while next_mark < origin + hi:
            cut = next_mark - origin
            self._newlines += piece.count(b"\n", position, cut)
            self._offsets.append(next_mark)
            self._counts.append(self._newlines)
            position = cut
            next_mark += block
        self._newlines += piece.count(b"\n", position, hi)
        if self._direct is not None and origin + hi == self._direct:
            self._newlines_at_direct = self._newlines

    def _hold(self, piece: bytes, lo: int, hi: int) -> None:
        assert self._direct is not None and self._head is not None
        view = memoryview(piece)[lo:hi]
        self._newlines += piece.count(b"\n", lo, hi)
        wanted = self._head + 1 - self._direct - len(self._boundary)
        if wanted > 0:
            self._boundary += view[:wanted]
        ring = self._ring
        if len(view) >= self._ring_cap:
            ring.clear()
            ring.append(bytes(view[-self._ring_cap :]))
            self._ring_bytes = self._ring_cap
            return
        if len(view) < _SMALL_PIECE_BYTES:  # coalesced: a deque of tiny objects costs more
            if ring and isinstance(ring[-1], bytearray) and len(ring[-1]) < _SMALL_PIECE_BYTES:
                ring[-1] += view
            else:
                ring.append(bytearray(view))
        elif lo == 0 and hi == len(piece) and type(piece) is bytes:
            ring.append(piece)
        else:
            ring.append(bytes(view))
        self._ring_bytes += len(view)
        while self._ring_bytes - len(ring[0]) >= self._ring_cap:
            self._ring_bytes -= len(ring.popleft())

    def finish(self) -> RetentionCut:
        """Decide the cuts; return the parts still to write, the ranges and the index."""
        total = self._total
        ends_newline = self._last_byte == 0x0A
        offsets, counts = self._offsets, self._counts
        if self._direct is None or self._cap is None or total <= self._cap:
            # Everything is stored; the ring holds [direct, total) if anything.
            ring = self._take_ring()
            if self._direct is not None and total > self._direct:
                self._index_ring(ring, 0, self._direct, total, self._newlines_at_direct)
            ranges: tuple[tuple[int, int], ...] = ((0, total),) if total else ()
            parts: tuple[bytes | memoryview, ...] = (ring,) if ring else ()
        else:
            assert self._head is not None
            head_end = cut_head(bytes(self._boundary), self._direct, self._head)
            head_extra = bytes(self._boundary[: head_end - self._direct])
            if head_end > offsets[-1]:
                offsets.append(head_end)
                counts.append(self._newlines_at_direct + head_extra.count(b"\n"))
            ring = self._take_ring()
            ring_start = total - len(ring)
            ring_newlines = self._newlines - ring.count(b"\n")
            tail_start = cut_tail(ring, ring_start, total - self._tail) if self._tail else total
            parts = (head_extra, memoryview(ring)[tail_start - ring_start :])
            ranges = tuple(r for r in ((0, head_end), (tail_start, total)) if r[1] > r[0])
            if tail_start < total:
                before = tail_start - 1
                nl_before = ring_newlines + ring.count(b"\n", 0, before - ring_start)
                if before > offsets[-1]:
                    offsets.append(before)
                    counts.append(nl_before)
                self._index_ring(
                    ring,
                    tail_start - ring_start,
                    tail_start,
                    total,
                    nl_before + (1 if ring[before - ring_start] == 0x0A else 0),
                )
            parts = tuple(p for p in parts if p)
        if offsets[-1] != total:
            offsets.append(total)
            counts.append(self._newlines)
        index = LineIndex.build(offsets, counts, ranges)
        return RetentionCut(
            final_parts=parts,
            stored_ranges=ranges,
            total_bytes=total,
            total_lines=self._newlines + (1 if total and not ends_newline else 0),
            index=index,
        )

    def _take_ring(self) -> bytes:
        ring = b"".join(self._ring)
        self._ring.clear()  # one copy of the tail in memory, not two
        return ring

    def _index_ring(
        self, data: bytes, lo: int, origin: int, total: int, newlines_before: int
    ) -> None:
        # data[lo:] holds the original bytes [origin, total); newlines_before counts
        # [0, origin).
        if origin > self._offsets[-1]:
            self._offsets.append(origin)
            self._counts.append(newlines_before)
        running = newlines_before
        position = lo
        next_mark = origin // self._block * self._block + self._block
        while next_mark < total:
            cut = lo + next_mark - origin
            running += data.count(b"\n", position, cut)
            self._offsets.append(next_mark)
            self._counts.append(running)
            position = cut
            next_mark += self._block
