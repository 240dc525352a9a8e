"""Spill metadata, the sparse line index, and the pure decisions behind storage.

Nothing here does I/O, reads the clock or reads the environment: ids, retention cuts,
line-index lookups and their results are plain functions of their arguments, so they are
property-tested in microseconds and shared by every backend.

Vocabulary (design.md §1): sizes are UTF-8 bytes; ranges are half-open ``[start, end)``
in bytes of the *original* output; lines are 1-based. ``total_lines`` counts the
``b"\\n"`` bytes, plus one when the output is non-empty and does not end with one
(``b"a\\nb"`` has 2 lines, ``b"a\\n"`` has 1, ``b""`` has 0). Line *k* starts right after
the *(k-1)*-th newline.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spillstore._errors import ConfigError, InvalidSpillId

__all__ = [
    "DEFAULT_RETAINED_TAIL_BYTES",
    "DEFAULT_RETENTION_BYTES",
    "INDEX_BLOCK_BYTES",
    "META_FORMAT_VERSION",
    "IndexBuilder",
    "LineIndex",
    "LinePage",
    "RetentionCut",
    "SpillMeta",
    "count_lines",
    "cut_head",
    "cut_tail",
    "gaps_of",
    "is_spill_id",
    "make_spill_id",
    "nth_newline",
    "sanitize_stem",
    "validate_retention",
    "validate_session",
    "validate_spill_id",
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

META_FORMAT_VERSION = 1

STEM_MAX_CHARS = 32
"""Longest readable stem of a spill id (the sanitized tool name)."""

ID_DIGEST_HEX = 20
"""Hex digits of the content-derived part of a spill id (80 bits)."""

_SPILL_ID_RE = re.compile(rf"[a-z0-9_]{{1,{STEM_MAX_CHARS}}}-[0-9a-f]{{{ID_DIGEST_HEX}}}")
_SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_STEM_DROP = re.compile(r"[^a-z0-9_]+")
_STEM_RUNS = re.compile(r"_{2,}")


# --------------------------------------------------------------------------- ids


def is_spill_id(value: object) -> bool:
    """Return whether ``value`` is a string spillstore could have issued as a spill id."""
    return isinstance(value, str) and _SPILL_ID_RE.fullmatch(value) is not None


def validate_spill_id(value: object) -> str:
    """Return ``value`` if it is a well-formed spill id.

    Raises:
        InvalidSpillId: it is not a string of the form ``<stem>-<20 hex digits>``
            (so it can never carry ``/``, ``..``, NUL or anything else into a path).
    """
    if is_spill_id(value):
        assert isinstance(value, str)
        return value
    shown = repr(value)[:80]
    raise InvalidSpillId(
        f"{shown} is not a spill id (expected <stem>-<{ID_DIGEST_HEX} hex digits>, "
        f"e.g. bash-0123456789abcdef0123)",
        spill_id=str(value)[:200],
    )


def validate_session(value: object) -> str:
    """Return ``value`` if it is an acceptable session name.

    A session is 1-64 characters of ``[A-Za-z0-9._-]`` starting with a letter or digit,
    and never contains ``..``.

    Raises:
        ConfigError: it is not.
    """
    if isinstance(value, str) and _SESSION_RE.fullmatch(value) and ".." not in value:
        return value
    raise ConfigError(
        f"invalid session name {repr(value)[:80]}: use 1-64 characters of "
        "[A-Za-z0-9._-], starting with a letter or digit, without '..'",
        field="session",
    )


def sanitize_stem(tool_name: str) -> str:
    """Turn a tool name into the readable stem of a spill id: ``[a-z0-9_]{1,32}``.

    Anything outside ``[a-z0-9_]`` becomes ``_`` (runs collapsed, ends stripped); an empty
    result becomes ``"tool"``. The stem is for humans only: uniqueness comes from the
    digest part of the id.
    """
    stem = _STEM_RUNS.sub("_", _STEM_DROP.sub("_", tool_name.lower())).strip("_")
    stem = stem[:STEM_MAX_CHARS].rstrip("_")
    return stem or "tool"


def make_spill_id(
    *,
    session: str,
    tool_name: str,
    tool_call_id: str,
    sha256: str,
    total_bytes: int,
    stored_ranges: Sequence[tuple[int, int]],
    suffix: str | None,
    media_notes: Sequence[str],
) -> str:
    """Derive a spill id from everything a spill records, except the time.

    Content-derived ids keep the model-facing pointer deterministic (the same result in
    the same session gives the same id and path, so prompt caches keep hitting), and make
    a second identical put idempotent: one id names one content, never two.
    """
    material = json.dumps(
        [
            session,
            tool_name,
            tool_call_id,
            sha256,
            total_bytes,
            [list(r) for r in stored_ranges],
            suffix,
            list(media_notes),
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(material.encode("ascii")).hexdigest()[:ID_DIGEST_HEX]
    return f"{sanitize_stem(tool_name)}-{digest}"


# --------------------------------------------------------------------------- models


ByteRange = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]


class SpillMeta(BaseModel):
    """The metadata sidecar of one spill (JSON on disk).

    Attributes:
        spill_id: the id (``<stem>-<digest>``), validated on every read.
        session: the session the spill belongs to.
        tool_name: the tool that produced the output, as given.
        tool_call_id: the call id, as given.
        total_bytes: size of the original output in UTF-8 bytes.
        total_lines: its line count (see the module docstring for the convention).
        stored_ranges: the original byte ranges that were stored, ``((0, T),)`` when the
            whole output was kept, ``((0, h), (t, T))`` when the retention cap cut it,
            ``()`` for an empty output.
        sha256: hex digest of *all* original bytes, stored or not.
        created_at: epoch seconds from the store's clock.
        suffix: text that had to reach the model whatever happened.
        media_notes: one line per media part that was not stored with the text.
        invalid_utf8: the original bytes were not valid UTF-8.
        path: absolute path of the data file (local store), else None.
        adopted_inode: ``(st_dev, st_ino, st_size, st_mtime_ns)`` of a data file that was
            adopted without a copy (hard link or move); reads refuse the file if it no
            longer matches. None when the store wrote the file itself.
        format_version: sidecar format.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spill_id: str
    session: str
    tool_name: str
    tool_call_id: str
    total_bytes: int = Field(ge=0)
    total_lines: int = Field(ge=0)
    stored_ranges: tuple[ByteRange, ...]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    created_at: float
    suffix: str | None = None
    media_notes: tuple[str, ...] = ()
    invalid_utf8: bool = False
    path: str | None = None
    adopted_inode: tuple[int, int, int, int] | None = None
    format_version: int = META_FORMAT_VERSION

    @field_validator("spill_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return validate_spill_id(value)

    @field_validator("session")
    @classmethod
    def _check_session(cls, value: str) -> str:
        return validate_session(value)

    @model_validator(mode="after")
    def _check_ranges(self) -> SpillMeta:
        previous_end = 0
        for start, end in self.stored_ranges:
            if not previous_end <= start < end <= self.total_bytes:
                raise ValueError(
                    f"stored_ranges must be sorted, non-empty, disjoint and within "
                    f"[0, {self.total_bytes}]; got {self.stored_ranges}"
                )
            previous_end = end
        return self

    @property
    def stored_bytes(self) -> int:
        """Bytes actually stored (the size of the data file)."""
        return sum(end - start for start, end in self.stored_ranges)

    @property
    def complete(self) -> bool:
        """Whether every byte of the output was stored."""
        return self.stored_bytes == self.total_bytes

    @property
    def gaps(self) -> tuple[tuple[int, int], ...]:
        """The original byte ranges that were *not* stored."""
        return gaps_of(self.stored_ranges, self.total_bytes)


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


# --------------------------------------------------------------------------- counting


def count_lines(data: bytes) -> int:
    """Return the line count of ``data`` under spillstore's convention."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def nth_newline(buf: bytes, n: int, start: int = 0, end: int | None = None) -> int:
    """Return the position of the ``n``-th (1-based) ``b"\\n"`` in ``buf[start:end]``, or -1.

    Skips in C-speed ``bytes.count`` strides (4 KiB, then 256 B) before finding the
    newline one by one, so locating a line deep in a block of short lines stays cheap.
    """
    if end is None:
        end = len(buf)
    pos = start
    for stride in (4096, 256):
        while pos + stride < end:
            found = buf.count(b"\n", pos, pos + stride)
            if found >= n:
                break
            n -= found
            pos += stride
    while n > 0:
        pos = buf.find(b"\n", pos, end)
        if pos < 0:
            return -1
        n -= 1
        pos += 1
    return pos - 1


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def cut_head(window: bytes, window_start: int, limit: int) -> int:
    """Return where to end a head kept up to ``limit``, on a UTF-8 boundary.

    ``window`` holds the original bytes ``[window_start, limit + 1)`` (at least the byte
    at ``limit`` and up to 3 before it). The cut backs off from ``limit`` while the byte
    there is a UTF-8 continuation byte, at most 3 times (invalid input stays bounded).
    """
    cut = limit
    floor = max(window_start, limit - 3)
    while cut > floor and _is_continuation(window[cut - window_start]):
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
    while cut < ceiling and _is_continuation(window[cut - window_start]):
        cut += 1
    return cut


def validate_retention(retention_bytes: int | None, retained_tail_bytes: int) -> None:
    """Check a retention cap and its tail size.

    Raises:
        ConfigError: the cap is negative, the tail is negative or larger than the cap,
            or either is not an ``int`` (``bool`` included).
    """
    for name, value in (
        ("retention_bytes", retention_bytes),
        ("retained_tail_bytes", retained_tail_bytes),
    ):
        if value is None and name == "retention_bytes":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{name} must be a non-negative int; got {value!r}", field=name)
    if retention_bytes is not None and retained_tail_bytes > retention_bytes:
        raise ConfigError(
            f"retained_tail_bytes ({retained_tail_bytes}) must not exceed retention_bytes "
            f"({retention_bytes})",
            field="retained_tail_bytes",
        )


def gaps_of(
    stored_ranges: Sequence[tuple[int, int]], total_bytes: int
) -> tuple[tuple[int, int], ...]:
    """Return the complement of ``stored_ranges`` within ``[0, total_bytes)``."""
    gaps: list[tuple[int, int]] = []
    position = 0
    for start, end in stored_ranges:
        if start > position:
            gaps.append((position, start))
        position = end
    if total_bytes > position:
        gaps.append((position, total_bytes))
    return tuple(gaps)


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
        final_parts: bytes still to append to the data file, in order.
        stored_ranges: the original ranges the data file holds.
        total_bytes, total_lines: of the whole original output.
        index: the line index.
    """

    final_parts: tuple[bytes, ...]
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
        self._ring = bytearray()
        self._last_byte = -1

    @property
    def total_bytes(self) -> int:
        """Bytes fed so far."""
        return self._total

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
        direct = size if self._direct is None else max(0, min(size, self._direct - start))
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
        if len(view) >= self._ring_cap:
            self._ring = bytearray(view[-self._ring_cap :])
        else:
            self._ring += view
            if len(self._ring) > 2 * self._ring_cap + (1 << 16):
                del self._ring[: len(self._ring) - self._ring_cap]

    def finish(self) -> RetentionCut:
        """Decide the cuts; return the parts still to write, the ranges and the index."""
        total = self._total
        ends_newline = self._last_byte == 0x0A
        offsets, counts = self._offsets, self._counts
        if self._direct is None or self._cap is None or total <= self._cap:
            # Everything is stored; the ring holds [direct, total) if anything.
            ring = bytes(self._ring)
            if self._direct is not None and total > self._direct:
                self._index_ring(ring, self._direct, total, self._newlines_at_direct)
            ranges: tuple[tuple[int, int], ...] = ((0, total),) if total else ()
            parts: tuple[bytes, ...] = (ring,) if ring else ()
        else:
            assert self._head is not None
            head_end = cut_head(bytes(self._boundary), self._direct, self._head)
            head_extra = bytes(self._boundary[: head_end - self._direct])
            if head_end > offsets[-1]:
                offsets.append(head_end)
                counts.append(self._newlines_at_direct + head_extra.count(b"\n"))
            ring = bytes(self._ring)
            ring_start = total - len(ring)
            ring_newlines = self._newlines - ring.count(b"\n")
            tail_start = cut_tail(ring, ring_start, total - self._tail) if self._tail else total
            parts = (head_extra, ring[tail_start - ring_start :])
            ranges = tuple(r for r in ((0, head_end), (tail_start, total)) if r[1] > r[0])
            if tail_start < total:
                before = tail_start - 1
                nl_before = ring_newlines + ring.count(b"\n", 0, before - ring_start)
                if before > offsets[-1]:
                    offsets.append(before)
                    counts.append(nl_before)
                tail = ring[tail_start - ring_start :]
                self._index_ring(
                    tail,
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

    def _index_ring(self, data: bytes, origin: int, total: int, newlines_before: int) -> None:
        # data holds the original bytes [origin, total); newlines_before counts [0, origin).
        if origin > self._offsets[-1]:
            self._offsets.append(origin)
            self._counts.append(newlines_before)
        running = newlines_before
        position = 0
        next_mark = origin // self._block * self._block + self._block
        while next_mark < total:
            cut = next_mark - origin
            running += data.count(b"\n", position, cut)
            self._offsets.append(next_mark)
            self._counts.append(running)
            position = cut
            next_mark += self._block
