"""cap_result (the cap with a receipt) and cap_content (head/tail of a content list)."""

from __future__ import annotations

import hashlib
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._content import MediaPart, Part, TextPart, ToolResult
from spillstore._core.cap import (
    MIN_CAP_BYTES,
    PART_SEPARATOR,
    cap_content,
    cap_result,
    elide_middle,
    elision_marker,
)
from spillstore._core.utf8 import encode, utf8_size
from spillstore._errors import ConfigError
from tests.strategies import hostile_text, media_parts, parts

MANY = settings(max_examples=2000)


def _joined(content: list[Part]) -> str:
    return PART_SEPARATOR.join(p.text for p in content if isinstance(p, TextPart))


# --- cap_result ---------------------------------------------------------------------


@MANY
@given(hostile_text, st.integers(min_value=1, max_value=200))
def test_cap_result_receipt_is_exact(text: str, cap: int) -> None:
    """Over the cap, text is the longest prefix, and omitted_bytes and sha256 are exact."""
    out = cap_result(text, cap)
    size = utf8_size(text)
    if size <= cap:
        if encode(text).decode("utf-8") == text:
            assert out is text
        else:
            assert out == encode(text).decode("utf-8")  # design 0b: strict UTF-8
        return
    assert isinstance(out, dict)
    assert set(out) == {"text", "truncated", "omitted_bytes", "sha256"}
    kept = encode(out["text"])
    assert len(kept) <= cap
    assert encode(text).startswith(kept)
    assert out["truncated"] is True
    assert len(kept) + out["omitted_bytes"] == size
    assert out["sha256"] == hashlib.sha256(encode(text)).hexdigest()


@MANY
@given(hostile_text, st.integers(min_value=1, max_value=200))
def test_cap_result_is_idempotent_and_deterministic(text: str, cap: int) -> None:
    """Capping twice changes nothing more, and the same input gives equal output."""
    once = cap_result(text, cap)
    assert cap_result(once, cap) is once
    assert cap_result(text, cap) == once


@MANY
@given(hostile_text)
def test_cap_result_edges(text: str) -> None:
    """At cap = size and size + 1 the very object comes back (its strict UTF-8 form
    when it holds a lone surrogate); at size - 1 it is cut."""
    size = utf8_size(text)
    if size == 0:
        return
    kept = encode(text).decode("utf-8")
    for cap in (size, size + 1):
        out = cap_result(text, cap)
        assert out is text if kept == text else out == kept
    cut = cap_result(text, size - 1) if size > 1 else None
    if cut is not None:
        assert isinstance(cut, dict) and cut["omitted_bytes"] >= 1


def test_cap_result_mapping_keeps_other_keys_and_receipt_wins() -> None:
    """A mapping keeps its other keys, but its own receipt keys are overwritten."""
    value = {"text": "x" * 100, "tool": "ls", "truncated": False, "sha256": "fake"}
    out = cap_result(value, 10)
    assert isinstance(out, dict)
    assert out["tool"] == "ls"
    assert out["text"] == "x" * 10
    assert out["truncated"] is True
    assert out["omitted_bytes"] == 90
    assert out["sha256"] == hashlib.sha256(b"x" * 100).hexdigest()
    assert value["truncated"] is False  # the input is not mutated


def test_cap_result_mapping_that_fits_is_same_object() -> None:
    """A mapping whose text fits comes back as the very same object."""
    value = {"text": "short", "n": 1}
    assert cap_result(value, 100) is value


@pytest.mark.parametrize(
    "value",
    [b"x" * 1000, ["x" * 1000], 12345, 1.5, None, {"text": b"x" * 1000}, {"data": "x" * 999}],
)
def test_cap_result_passes_non_text_through(value: object) -> None:
    """Bytes, lists, numbers, None and mappings without str text are returned untouched."""
    assert cap_result(value, 10) is value


@pytest.mark.parametrize("cap", [0, -1, True, False, 1.5, math.nan, "10", None])
def test_cap_result_rejects_bad_caps(cap: object) -> None:
    """A cap that is not a positive int raises ConfigError naming max_bytes."""
    with pytest.raises(ConfigError, match="max_bytes"):
        cap_result("text", cap)  # type: ignore[arg-type]


def test_cap_result_hashes_surrogates_as_fffd() -> None:
    """A lone surrogate is hashed as U+FFFD, never raising."""
    out = cap_result("\ud800" * 10, 4)
    assert isinstance(out, dict)
    assert out["text"] == "\ufffd"
    assert out["omitted_bytes"] == 27
    assert out["sha256"] == hashlib.sha256("\ufffd".encode() * 10).hexdigest()


# --- cap_content --------------------------------------------------------------------

cap_sizes = st.integers(min_value=MIN_CAP_BYTES, max_value=MIN_CAP_BYTES + 400)
long_parts = st.lists(
    st.one_of(
        st.builds(lambda t, n: TextPart(t * n), hostile_text, st.integers(0, 60)),
        media_parts,
    ),
    max_size=6,
)


@MANY
@given(st.one_of(parts, long_parts), cap_sizes, st.text(max_size=100))
def test_cap_content_never_exceeds_cap(content: list[Part], cap: int, tool: str) -> None:
    """The text of a capped list is within the cap, marker included, for every valid cap."""
    out = cap_content(content, cap, tool_name=tool)
    texts = [p.text for p in out if isinstance(p, TextPart)]
    total = sum(map(utf8_size, texts)) + len(PART_SEPARATOR) * max(len(texts) - 1, 0)
    assert total <= cap
    for text in texts:
        encode(text).decode("utf-8")


@MANY
@given(long_parts, cap_sizes)
def test_cap_content_keeps_exact_head_and_tail(content: list[Part], cap: int) -> None:
    """A capped text is a prefix, the marker, then a suffix of the joined original."""
    out = cap_content(content, cap, tool_name="tool")
    original = _joined(content)
    size = utf8_size(original)
    if size <= cap:
        # itself, or its texts as strict UTF-8 (design 0b: lone surrogates as U+FFFD)
        assert out is content or _joined(out) == encode(original).decode("utf-8")
        assert (out is content) == (encode(original).decode("utf-8") == original)
        return
    [capped] = [p for p in out if isinstance(p, TextPart)]
    match = re.search(r"\n\n\[\.\.\. (\d+) bytes elided.*?\.\.\.\]\n\n", capped.text, re.S)
    assert match is not None
    head_text, tail_text = capped.text[: match.start()], capped.text[match.end() :]
    whole = encode(original)
    assert whole.startswith(encode(head_text))
    assert whole.endswith(encode(tail_text))
    assert utf8_size(head_text) + int(match.group(1)) + utf8_size(tail_text) == size
    assert f"returned {size} bytes, over the {cap}-byte cap" in capped.text


@MANY
@given(long_parts, cap_sizes)
def test_cap_content_keeps_media_in_order(content: list[Part], cap: int) -> None:
    """Media parts pass through untouched and in their relative order."""
    out = cap_content(content, cap, tool_name="t")
    assert [p for p in out if not isinstance(p, TextPart)] == [
        p for p in content if not isinstance(p, TextPart)
    ]


@MANY
@given(long_parts, cap_sizes)
def test_cap_content_is_deterministic(content: list[Part], cap: int) -> None:
    """The same list and cap give equal output."""
    assert cap_content(content, cap, tool_name="t") == cap_content(content, cap, tool_name="t")


def test_cap_content_edges_at_cap() -> None:
    """A text of exactly the cap is untouched; one byte more is cut to within the cap."""
    exact = [TextPart("a" * 600)]
    assert cap_content(exact, 600, tool_name="t") is exact
    over = [TextPart("a" * 601)]
    out = cap_content(over, 600, tool_name="t")
    assert out is not over
    assert utf8_size(out[0].text) <= 600  # type: ignore[union-attr]
    under = [TextPart("a" * 599)]
    assert cap_content(under, 600, tool_name="t") is under


def test_cap_content_result_keeps_error_and_metadata() -> None:
    """A capped ToolResult keeps is_error, metadata and structured content."""
    image = MediaPart("image", "image/png", b"\x89PNG")
    result = ToolResult(
        content=[TextPart("x" * 5000), image, TextPart("y" * 5000)],
        is_error=True,
        metadata={"trace": 1},
        structured={"k": "v"},
    )
    out = cap_content(result, 1000, tool_name="build")
    assert out is not result
    assert out.is_error is True
    assert out.metadata == {"trace": 1}
    assert out.structured == {"k": "v"}
    assert out.content[1] is image
    assert len(out.content) == 2
    first = out.content[0]
    assert isinstance(first, TextPart)
    assert first.text.startswith("x") and first.text.endswith("y")
    assert "build returned 10001 bytes, over the 1000-byte cap" in first.text


def test_cap_content_result_that_fits_is_same_object() -> None:
    """A ToolResult whose text fits comes back as the very same object."""
    result = ToolResult(content=[TextPart("ok")])
    assert cap_content(result, 1000, tool_name="t") is result


@pytest.mark.parametrize("cap", [MIN_CAP_BYTES - 1, 0, -1, True, 600.0])
def test_cap_content_rejects_caps_too_small_for_marker(cap: object) -> None:
    """Caps below MIN_CAP_BYTES, and non-int caps, raise rather than be exceeded."""
    with pytest.raises(ConfigError, match="max_bytes"):
        cap_content([TextPart("x")], cap, tool_name="t")  # type: ignore[arg-type]


@pytest.mark.parametrize("ratio", [0.0, 1.0, -0.5, 1.5, True, math.nan, None, "0.5", [0.5]])
def test_cap_content_rejects_bad_head_ratio(ratio: float) -> None:
    """head_ratio must be a number strictly between 0 and 1 (else ConfigError, not TypeError)."""
    with pytest.raises(ConfigError, match="head_ratio"):
        cap_content([TextPart("x")], 1000, tool_name="t", head_ratio=ratio)


def test_widest_marker_leaves_room_in_min_cap() -> None:
    """The widest possible marker (64-byte name, 20-digit numbers) fits MIN_CAP_BYTES."""
    widest = elision_marker(
        tool_name="\U0001f600" * 100,
        total_bytes=10**20 - 1,
        max_bytes=10**20 - 1,
        elided_bytes=10**20 - 1,
    )
    assert utf8_size(widest) + 64 <= MIN_CAP_BYTES


def test_marker_quotes_bounded_printable_tool_name() -> None:
    """A hostile tool name is cut to 64 bytes and its control characters masked."""
    marker = elision_marker(
        tool_name="evil\n\x00" + "n" * 500, total_bytes=2, max_bytes=1, elided_bytes=1
    )
    assert "evil??" in marker
    assert "n" * 58 in marker and "n" * 59 not in marker


@MANY
@given(st.one_of(hostile_text, hostile_text.map(encode)), st.integers(0, 40), cap_sizes)
def test_elide_middle_within_cap_with_exact_affixes(text: str | bytes, reps: int, cap: int) -> None:
    """elide_middle of one str or bytes stays within the cap and keeps an exact head and tail."""
    value = text * reps
    out = elide_middle(value, cap, tool_name="t")
    size = utf8_size(value)
    if size <= cap:
        if isinstance(value, str) and encode(value).decode("utf-8") != value:
            assert out == encode(value).decode("utf-8")  # design 0b: strict UTF-8
        else:
            assert out is value
        return
    raw = out if isinstance(out, bytes) else encode(out)
    assert len(raw) <= cap
    whole = value if isinstance(value, bytes) else encode(value)
    marker_at = raw.index(b"\n\n[... ")
    assert whole.startswith(raw[:marker_at])
    assert whole.endswith(raw[raw.index(b"...]\n\n") + 6 :])
    assert type(out) is type(value)
