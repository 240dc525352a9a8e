"""The independent model of the truth: the original bytes, the settings, plain slicing.

Nothing here imports spillstore's cutting, paging or indexing code: every expected value
is computed from the original bytes with ``bytes`` methods, so a bug in the library
cannot hide in its own reference.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import cached_property

_SURROGATE = re.compile("[\ud800-\udfff]")

Range = tuple[int, int]


def model_encode(text: str) -> bytes:
    """What a ``str`` output is as bytes: UTF-8, each lone surrogate as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text).encode("utf-8")


def clean(text: str) -> str:
    """A ``str`` as the model may see it: lone surrogates replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def shown(raw: bytes) -> str:
    """How Read and the previews show raw bytes: invalid UTF-8 as U+FFFD."""
    return raw.decode("utf-8", "replace")


def is_valid_utf8(raw: bytes) -> bool:
    """Whether ``raw`` decodes strictly."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True)
class Truth:
    """One output as it really is.

    Attributes:
        data: the output's bytes (text parts joined by ``\\n``; a str encoded with
            lone surrogates as U+FFFD; raw bytes as they came).
        retention_bytes, retained_tail_bytes: the retention settings (None: keep all).
    """

    data: bytes
    retention_bytes: int | None = None
    retained_tail_bytes: int = 0

    @property
    def total(self) -> int:
        """Total bytes."""
        return len(self.data)

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of the whole output."""
        return hashlib.sha256(self.data).hexdigest()

    @cached_property
    def newline_offsets(self) -> list[int]:
        """Offsets of every ``\\n``."""
        return [m.start() for m in re.finditer(b"\n", self.data)]

    @cached_property
    def total_lines(self) -> int:
        """Newlines, plus one for a last line without a newline."""
        if not self.data:
            return 0
        return len(self.newline_offsets) + (0 if self.data.endswith(b"\n") else 1)

    def line_of(self, offset: int) -> int:
        """The 1-based line holding byte ``offset``."""
        return bisect_right(self.newline_offsets, offset - 1) + 1

    def line_start(self, line: int) -> int:
        """Offset of the first byte of ``line``."""
        return 0 if line == 1 else self.newline_offsets[line - 2] + 1

    def line_end(self, line: int) -> int:
        """Offset of ``line``'s newline (or the end of the output)."""
        return self.newline_offsets[line - 1] if line <= len(self.newline_offsets) else self.total

    def line_after(self, line: int) -> int:
        """Offset just after ``line`` (after its newline)."""
        return min(self.line_end(line) + 1, self.total)

    def lines_of(self, start: int, end: int) -> tuple[int, int] | None:
        """The line span of the byte range ``[start, end)``; None when empty."""
        if end <= start:
            return None
        return (self.line_of(start), self.line_of(end - 1))

    @cached_property
    def valid(self) -> bool:
        """Whether the output is valid UTF-8."""
        return is_valid_utf8(self.data)

    @cached_property
    def char_starts(self) -> frozenset[int]:
        """Offsets where a character (or a lone invalid byte) starts."""
        text = self.data.decode("utf-8", "surrogateescape")
        starts, position = [], 0
        for char in text:
            starts.append(position)
            position += 1 if "\udc80" <= char <= "\udcff" else len(char.encode("utf-8"))
        return frozenset(starts)

    @property
    def cut_by_retention(self) -> bool:
        """Whether the retention cap cuts the stored copy."""
        return self.retention_bytes is not None and self.total > self.retention_bytes

    def kept(self, offset: int, ranges: tuple[Range, ...]) -> bool:
        """Whether ``offset`` lies in one of ``ranges``."""
        return any(start <= offset < end for start, end in ranges)

    def needle_lines(self, needle: bytes, ranges: tuple[Range, ...]) -> list[int]:
        """Lines holding an occurrence of ``needle`` wholly inside one of ``ranges``."""
        lines: list[int] = []
        for match in re.finditer(re.escape(needle), self.data):
            inside = any(s <= match.start() and match.end() <= e for s, e in ranges)
            line = self.line_of(match.start())
            if inside and (not lines or lines[-1] != line):
                lines.append(line)
        return lines


def gaps(ranges: tuple[Range, ...], total: int) -> tuple[Range, ...]:
    """The complement of sorted ``ranges`` in ``[0, total)``."""
    out: list[Range] = []
    position = 0
    for start, end in ranges:
        if start > position:
            out.append((position, start))
        position = end
    if total > position:
        out.append((position, total))
    return tuple(out)
