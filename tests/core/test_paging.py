"""Paging by lines over a cut output, with the reads passed in: no store, no file."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore._core.index import IndexBuilder, RetentionCut
from spillstore._core.paging import (
    ReadFn,
    empty_page,
    line_of_offset,
    not_stored,
    physical,
    read_page,
)
from spillstore._errors import RangeNotStored
from tests.strategies import retention_limits, spill_outputs


@dataclass(frozen=True)
class Spill:
    """The shape paging needs, built from a cut: what a store's metadata would hold."""

    spill_id: str
    total_bytes: int
    total_lines: int
    stored_ranges: tuple[tuple[int, int], ...]


def _cut(data: bytes, cap: int | None, tail: int) -> tuple[Spill, RetentionCut]:
    builder = IndexBuilder(cap, tail, block_bytes=4)
    builder.feed(data)
    cut = builder.finish()
    return Spill("t-" + "0" * 20, len(data), cut.total_lines, cut.stored_ranges), cut


def _reader(data: bytes, spill: Spill) -> tuple[list[tuple[int, int]], ReadFn]:
    stored = b"".join(data[a:b] for a, b in spill.stored_ranges)
    calls: list[tuple[int, int]] = []

    def read(start: int, end: int) -> bytes:
        calls.append((start, end))
        lo, hi = physical(spill.stored_ranges, start, end)
        return stored[lo:hi]

    return calls, read


@given(data=spill_outputs, limits=retention_limits(), first=st.integers(1, 60))
def test_a_page_is_the_original_bytes_of_its_lines(
    data: bytes, limits: tuple[int | None, int], first: int
) -> None:
    """A page holds exactly the original bytes it names, read in at most three calls."""
    spill, cut = _cut(data, *limits)
    calls, read = _reader(data, spill)
    page = read_page(spill, cut.index, read, first_line=first, count=3, max_bytes=None)
    assert page.data == data[page.start_byte : page.end_byte]
    assert len(calls) <= 3
    if first > spill.total_lines:
        assert page == empty_page(spill, first)
    if spill.stored_ranges == ((0, len(data)),):
        *ended, last = data.split(b"\n")
        lines = [line + b"\n" for line in ended] + ([last] if last else [])
        assert page.data == b"".join(lines[first - 1 : first + 2])


@given(data=spill_outputs, limits=retention_limits(), offset=st.integers(0, 400))
def test_line_of_offset_counts_newlines_before_it(
    data: bytes, limits: tuple[int | None, int], offset: int
) -> None:
    """The line of an offset is one more than the newlines before it, or the gap is named."""
    spill, cut = _cut(data, *limits)
    offset = min(offset, len(data))
    _, read = _reader(data, spill)

    def count(start: int, end: int) -> int:
        return read(start, end).count(b"\n")

    try:
        line = line_of_offset(spill, cut.index, offset, count)
    except RangeNotStored:
        assert not any(start <= offset < end for start, end in spill.stored_ranges)
        return
    assert line == min(data.count(b"\n", 0, offset) + 1, max(spill.total_lines, 1))


def test_an_unstored_range_is_worded_with_what_was_kept() -> None:
    """The error for the gap names the gap and the kept ranges; an empty keep is "nothing"."""
    spill = Spill("t-" + "0" * 20, 100, 3, ((0, 10), (90, 100)))
    error = not_stored(spill, 5, 20)
    assert error is not None and (error.start, error.end) == (10, 20)
    assert "kept [0, 10) and [90, 100) of 100 bytes" in str(error)
    nothing = not_stored(Spill("t-" + "0" * 20, 5, 1, ()), 0, 5)
    assert nothing is not None and "kept nothing of 5 bytes" in str(nothing)
    assert not_stored(spill, 0, 10) is None
    with pytest.raises(AssertionError):
        physical(spill.stored_ranges, 5, 95)
