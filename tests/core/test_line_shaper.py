"""LineShaper: per-line shaping of a byte stream, fed in any pieces, as shape_lines does it."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from spillstore._core.shape import LineShaper, shape_lines
from spillstore._core.utf8 import encode
from tests.strategies import HOSTILE_PIECES

lines_text = st.lists(
    st.sampled_from((*HOSTILE_PIECES, "x" * 30, "\n\n", "word ")) | st.text(max_size=5),
    max_size=300,
).map("".join)


@given(
    text=lines_text,
    max_line_bytes=st.integers(16, 120),
    budget=st.integers(0, 4000),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
def test_a_stream_in_any_pieces_is_shaped_as_shape_lines_shapes_the_whole(
    text: str, max_line_bytes: int, budget: int, cuts: list[int]
) -> None:
    """Same text (as the model reads it), same cut count, same first cut; or both None."""
    whole = shape_lines([text], max_line_bytes=max_line_bytes, budget=budget)
    data = encode(text)
    shaper = LineShaper(max_line_bytes=max_line_bytes, budget=budget)
    bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        shaper.feed(data[start:end])
    streamed = shaper.finish(budget)
    if whole is None:
        assert streamed is None
        return
    assert streamed is not None
    assert streamed.text == encode(whole.text).decode("utf-8")
    assert (streamed.cut_count, streamed.first_cut) == (whole.cut_count, whole.first_cut)


def test_a_shaper_past_its_budget_keeps_nothing_and_gives_up() -> None:
    """Short lines past the budget: the shaper drops what it kept and ignores the rest."""
    shaper = LineShaper(max_line_bytes=20, budget=100)
    shaper.feed(b"short line\n" * 20)
    assert shaper.over
    shaper.feed(b"x" * 1000 + b"\n")
    assert shaper.finish(100) is None


def test_invalid_utf8_is_never_shaped() -> None:
    """Bytes that are not UTF-8 (kept in a line's start) give no shaped text."""
    shaper = LineShaper(max_line_bytes=20, budget=1000)
    shaper.feed(b"\xff\xfe" + b"x" * 100 + b"\n")
    assert shaper.finish(1000) is None
