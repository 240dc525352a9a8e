"""Byte and line ranges: their complement and their one wording. Pure: no I/O.

Byte ranges are half-open ``[start, end)`` in the original output; line spans are
inclusive 1-based ``(first, last)``. Every model-facing text that names a range (the
pointer, Read's headers, the store's "not stored" errors, the CLI) words it here, so
one range reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

__all__ = ["EMPTY", "Range", "format_lines", "format_ranges", "gaps"]

Range: TypeAlias = tuple[int, int]
"""A half-open byte range ``[start, end)``."""

EMPTY = "nothing"
"""How an empty list of byte ranges is worded."""


def gaps(ranges: Sequence[Range], total: int) -> tuple[Range, ...]:
    """Return the complement of sorted, disjoint ``ranges`` within ``[0, total)``."""
    out: list[Range] = []
    position = 0
    for start, end in ranges:
        if start > position:
            out.append((position, start))
        position = end
    if total > position:
        out.append((position, total))
    return tuple(out)


def format_ranges(ranges: Sequence[Range]) -> str:
    """``"[0, 10) and [20, 30)"``; :data:`EMPTY` when there are none."""
    return " and ".join(f"[{start}, {end})" for start, end in ranges) or EMPTY


def format_lines(span: tuple[int, int] | None) -> str:
    """``"line 3"``, ``"lines 3-7"``, or ``"no lines"`` for ``None``."""
    if span is None:
        return "no lines"
    first, last = span
    return f"line {first}" if first == last else f"lines {first}-{last}"
