"""The streaming retention cut and the line index, for random outputs, chunkings and caps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._core.index import (
    IndexBuilder,
    LineIndex,
    RetentionCut,
    count_lines,
    validate_retention,
)
from spillstore._core.newlines import nth_newline, nth_newline_of
from spillstore._errors import ConfigError
from tests.strategies import chunks, retention_limits, spill_outputs


@settings(max_examples=300)
@given(
    data=spill_outputs, limits=retention_limits(), cuts=st.lists(st.integers(0, 500), max_size=8)
)
def test_index_builder_is_exact(
    data: bytes, limits: tuple[int | None, int], cuts: list[int]
) -> None:
    """The streaming builder stores what it says, cuts on boundaries, and indexes exactly."""
    cap, tail = limits
    builder = IndexBuilder(cap, tail, block_bytes=7)
    written = bytearray()
    for chunk in chunks(data, cuts):
        written += builder.feed(chunk)
    cut = builder.finish()
    for part in cut.final_parts:
        written += part
    assert bytes(written) == b"".join(data[a:b] for a, b in cut.stored_ranges)
    assert cut.total_lines == count_lines(data)
    index = cut.index
    assert list(index.offsets) == sorted(set(index.offsets))
    for offset, newlines in zip(index.offsets, index.newlines, strict=True):
        assert data.count(b"\n", 0, offset) == newlines
    if cap is not None and len(data) > cap:
        ranges = cut.stored_ranges
        head = ranges[0][1] if ranges and ranges[0][0] == 0 else 0
        assert max(0, cap - tail - 3) <= head <= cap - tail
        if ranges and ranges[-1][1] == len(data) and ranges[-1][0] > 0:
            assert len(data) - tail <= ranges[-1][0] <= len(data) - tail + 3
    try:
        data.decode()
    except UnicodeDecodeError:
        return
    for start, end in cut.stored_ranges:
        data[start:end].decode()  # a cut never splits a character of valid input


@given(
    data=st.binary(max_size=3000).map(lambda b: b.replace(b"\x00", b"\n")),
    n=st.integers(1, 200),
    lo=st.integers(0, 3000),
    span=st.integers(0, 3000),
)
def test_nth_newline_matches_naive(data: bytes, n: int, lo: int, span: int) -> None:
    """nth_newline finds the same position as counting one by one."""
    lo = min(lo, len(data))
    hi = min(lo + span, len(data))
    positions = [i for i in range(lo, hi) if data[i] == 0x0A]
    expected = positions[n - 1] if len(positions) >= n else -1
    assert nth_newline(data, n, lo, hi) == expected


@given(
    lines=st.lists(st.integers(0, 5000), min_size=1, max_size=600),
    width=st.sampled_from([3, 50, 150, 400, 5000]),
    tail=st.integers(0, 300),
    pick=st.floats(0, 1),
)
def test_nth_newline_of_a_block_matches_naive(
    lines: list[int], width: int, tail: int, pick: float
) -> None:
    """Given how many newlines a block holds, the guess-and-step search finds the same
    newline as counting one by one, for short, long and very unequal lines."""
    data = b"".join(b"x" * (size % (width + 1)) + b"\n" for size in lines) + b"y" * tail
    positions = [i for i, byte in enumerate(data) if byte == 0x0A]
    n = 1 + int(pick * (len(positions) - 1))
    assert nth_newline_of(data, n, len(positions)) == positions[n - 1]
    assert nth_newline_of(data, len(positions) + 1, len(positions)) == -1


@given(data=spill_outputs, limits=retention_limits())
def test_line_index_survives_its_serialization(data: bytes, limits: tuple[int | None, int]) -> None:
    """An index read back from its bytes has the same checkpoints and stored intervals."""
    builder = IndexBuilder(*limits, block_bytes=5)
    builder.feed(data)
    cut = builder.finish()
    again = LineIndex.from_bytes(cut.index.to_bytes(), cut.stored_ranges)
    assert list(again.offsets) == list(cut.index.offsets)
    assert list(again.newlines) == list(cut.index.newlines)
    assert again.stored == cut.index.stored
    assert again.describes(len(data), cut.total_lines)
    assert not again.describes(len(data) + 1, cut.total_lines)


@pytest.mark.parametrize(
    ("cap", "tail", "field"),
    [(-1, 0, "retention_bytes"), (True, 0, "retention_bytes"), (10, -1, "retained_tail_bytes"),
     (10, 11, "retained_tail_bytes"), (None, None, "retained_tail_bytes"),
     (1.5, 0, "retention_bytes")],
)  # fmt: skip
def test_bad_retention_names_its_field(cap: object, tail: object, field: str) -> None:
    """A cap or tail that is not a fitting non-negative int raises ConfigError naming it."""
    with pytest.raises(ConfigError) as caught:
        validate_retention(cap, tail)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.parametrize("total", [250_000, 299_999, 300_000, 300_001, 2_000_000])
def test_index_builder_takes_any_piece_sizes(total: int) -> None:
    """Pieces of any size (tiny ones copied together, large ones kept as they are)
    give the stored bytes, ranges and index of one single piece."""
    line = "caf\u00e9 \U0001f600 line\n".encode()
    data = (line * (total // len(line) + 1))[:total]
    sizes = [1, 7, 16_383, 16_384, 50_000, 3, 120_000, 200_000, 99_999]

    def run(pieces: list[bytes]) -> tuple[bytes, RetentionCut]:
        builder = IndexBuilder(300_000, 100_000, block_bytes=4096)
        written = bytearray()
        for piece in pieces:
            written += builder.feed(piece)
        cut = builder.finish()
        for part in cut.final_parts:
            written += part
        return bytes(written), cut

    pieces, start, turn = [], 0, 0
    while start < total:
        size = sizes[turn % len(sizes)]
        pieces.append(data[start : start + size])
        start, turn = start + size, turn + 1
    stored, cut = run(pieces)
    whole_stored, whole = run([data])
    assert stored == whole_stored == b"".join(data[a:b] for a, b in cut.stored_ranges)
    assert cut.stored_ranges == whole.stored_ranges
    assert cut.total_lines == whole.total_lines == count_lines(data)
    assert list(cut.index.offsets) == list(whole.index.offsets)
    assert list(cut.index.newlines) == list(whole.index.newlines)
