"""The pure preview planner and line shaper: exact ranges against brute force."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._core.cap import PART_SEPARATOR
from spillstore._core.pointer import count_newlines, plan_preview, quote_name
from spillstore._core.shape import shape_lines
from spillstore._core.utf8 import encode
from tests.strategies import hostile_text

MANY = settings(max_examples=2000)
text_parts = st.lists(
    st.builds(lambda t, n: t * n, hostile_text, st.integers(1, 30)), min_size=1, max_size=4
)


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


@MANY
@given(text_parts, st.integers(1, 300), st.integers(1, 200))
def test_preview_ranges_are_exact(texts: list[str], head_bytes: int, tail_bytes: int) -> None:
    """Head and tail are the stated byte ranges of the original, and line ranges match."""
    data = encode(PART_SEPARATOR.join(texts))
    preview = plan_preview(
        texts,
        total_bytes=len(data),
        newlines=count_newlines(texts),
        head_bytes=head_bytes,
        tail_bytes=tail_bytes,
    )
    assert encode(preview.head_text) == data[: preview.head_end]
    assert encode(preview.tail_text) == data[preview.tail_start :]
    assert preview.head_end <= preview.tail_start <= len(data)
    assert preview.head_end <= head_bytes
    assert len(data) - preview.tail_start <= tail_bytes
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert preview.total_lines == lines
    if preview.head_end:
        assert preview.head_lines == (1, _line_of(data, preview.head_end - 1))
    if preview.tail_start < len(data):
        assert preview.tail_lines == (_line_of(data, preview.tail_start), lines)
    if preview.tail_start > preview.head_end:
        assert preview.elided_lines == (
            _line_of(data, preview.head_end),
            _line_of(data, preview.tail_start - 1),
        )
    else:
        assert preview.elided_lines is None


@MANY
@given(text_parts, st.integers(80, 200), st.integers(100, 5000))
def test_shaping_cuts_only_long_lines_and_respects_budget(
    texts: list[str], max_line: int, budget: int
) -> None:
    """Shaped text stays within budget; short lines are kept, long ones cut with a marker."""
    shaped = shape_lines(texts, max_line_bytes=max_line, budget=budget)
    original = PART_SEPARATOR.join(texts)
    if shaped is None:
        return
    assert len(encode(shaped.text)) <= budget
    assert shaped.cut_count >= 1
    out_lines = shaped.text.split("\n")
    in_lines = original.split("\n")
    assert len(out_lines) == len(in_lines)
    for before, after in zip(in_lines, out_lines, strict=True):
        if len(encode(before)) <= max_line:
            assert after == before.encode("utf-8", "replace").decode() or after == before
        else:
            assert "[... line cut:" in after
            kept = after[: after.index(" [... line cut:")]
            assert encode(before).startswith(encode(kept))


def test_shaping_marker_points_at_the_cut_byte() -> None:
    """The first cut line's resume offset is the byte right after what was kept."""
    texts = ["ok\n" + "x" * 500 + "\nend"]
    shaped = shape_lines(texts, max_line_bytes=100, budget=10_000)
    assert shaped is not None
    assert shaped.first_cut == (2, 3 + 100)
    assert "400 more bytes from byte 103" in shaped.text


@given(
    parts=st.lists(
        st.text(alphabet="ab\n", max_size=30).map(lambda t: t.replace("a", "a" * 40)),
        min_size=1,
        max_size=5,
    )
)
@settings(max_examples=200)
def test_the_first_cut_names_the_line_its_byte_is_on_across_text_parts(parts: list[str]) -> None:
    """first_cut's line is the line holding its byte, whether or not a part ends in a newline."""
    shaped = shape_lines(parts, max_line_bytes=100, budget=100_000)
    if shaped is None:
        return
    line, offset = shaped.first_cut
    joined = encode(PART_SEPARATOR.join(parts))
    assert line == joined[:offset].count(b"\n") + 1


def test_quote_name_bounds_and_masks() -> None:
    """Names are cut to 64 bytes, control characters masked, and never empty."""
    assert quote_name("") == "?"
    assert quote_name("a\nb") == "a?b"
    assert len(encode(quote_name("n" * 1000))) == 64


def test_shaping_gives_up_early_on_many_short_lines() -> None:
    """Many short lines that overflow the budget give None without a line-by-line walk."""
    from spillstore._core.shape import _short_lines_overflow

    texts = ["ok line\n" * 100_000 + "x" * 5_000]
    assert _short_lines_overflow(texts[0], 200, 1_000)
    assert shape_lines(texts, max_line_bytes=200, budget=1_000) is None


def test_shaping_early_exit_does_not_hide_a_fitting_shape() -> None:
    """A long line inside the window keeps the walk going, and shaping still succeeds."""
    from spillstore._core.shape import _short_lines_overflow

    texts = ["head\n" + "x" * 50_000 + "\ntail\n"]
    assert not _short_lines_overflow(texts[0], 200, 1_000)
    shaped = shape_lines(texts, max_line_bytes=200, budget=1_000)
    assert shaped is not None and shaped.cut_count == 1


@MANY
@given(text_parts, st.integers(80, 200), st.integers(100, 2000))
def test_shaping_early_exit_agrees_with_the_walk(
    texts: list[str], max_line: int, budget: int
) -> None:
    """Whenever the early exit says shaping cannot fit, walking every line agrees."""
    from unittest import mock

    from spillstore._core import shape as _shape

    if not _shape._short_lines_overflow(texts[0], max_line, budget):
        return
    with mock.patch.object(_shape, "_short_lines_overflow", return_value=False):
        assert shape_lines(texts, max_line_bytes=max_line, budget=budget) is None
