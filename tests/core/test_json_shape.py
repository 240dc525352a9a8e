"""The JSON shape summary and JSON detection: pure, deterministic, bounded."""

from __future__ import annotations

import gc
import json
from unittest.mock import patch

import jq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spillstore._core import json_lazy
from spillstore._core import json_shape as json_shape_module
from spillstore._core.json_doc import looks_like_json, parse_doc
from spillstore._core.json_lazy import lazy_doc
from spillstore._core.json_shape import JsonShape, json_shape
from spillstore._core.utf8 import utf8_size
from tests.strategies import hostile_text, json_documents


def _users(count: int) -> str:
    items = [
        {"id": i, "name": f"user{i}", "email": f"u{i}@x", "tags": ["a", "b"], "score": i / 2}
        for i in range(count)
    ]
    return json.dumps({"total": count, "items": items})


def test_an_array_of_objects_shows_the_union_of_keys_with_types_and_examples() -> None:
    """Top-level keys, array lengths, and each item key's type with one short example."""
    shape = json_shape([_users(300)], 2048)
    assert shape is not None
    assert shape.lines == (
        "JSON object, 2 keys:",
        "  total: int (300)",
        '  items: array[300] of {id: int (0), name: str ("user0"), email: str ("u0@x"),'
        ' tags: array[2] of str ("a"), score: float (0.0)}',
    )
    assert shape.example == ".items[0]"


def test_keys_missing_from_some_objects_and_mixed_types_are_marked() -> None:
    """A key absent from some items is optional (?); several types are all listed."""
    shape = json_shape(['[{"a": 1}, {"a": null, "b": "x"}, 3]'], 2048)
    assert shape is not None
    assert shape.lines == ('JSON array[3] of (int (3) | {a: null | int (1), b?: str ("x")})',)


def test_json_lines_are_summarized_over_the_lines_with_their_count() -> None:
    """JSON Lines: the shape of all lines together, and how many there are."""
    shape = json_shape(['{"a": 1}\n{"a": 2, "b": [true]}\n'], 2048)
    assert shape is not None
    assert shape.lines == ("JSON Lines, 2 values, each: {a: int (1), b?: array[1] of bool (true)}",)


def test_deep_and_wide_structures_are_elided_with_counts() -> None:
    """Nesting past the depth limit shows sizes only; keys past the limit are counted."""
    deep = json.dumps({"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}})
    shape = json_shape([deep], 2048)
    assert shape is not None and "{1 keys}" in shape.lines[1]
    wide = json.dumps([{f"k{i}": i for i in range(40)}])
    shape = json_shape([wide], 2048)
    assert shape is not None and "... 16 more keys" in shape.lines[0]


@settings(max_examples=200, deadline=None)
@given(document=json_documents, budget=st.integers(min_value=80, max_value=2048))
def test_any_shape_fits_its_budget_and_is_deterministic(document: str, budget: int) -> None:
    """Whatever the document, the shape fits the budget and renders the same twice."""
    shape = json_shape([document], budget)
    assert shape is not None
    assert sum(utf8_size(line) + 1 for line in shape.lines) <= budget
    assert shape == json_shape([document], budget)
    "\n".join(shape.lines).encode("utf-8")  # strict UTF-8


@given(text=hostile_text)
def test_text_that_is_not_json_gets_no_shape(text: str) -> None:
    """Hostile text never crashes detection; text that neither parses nor is read by jq
    (the jq binding: values one after another are a stream to it) gets no shape."""
    try:
        json.loads(text)
        parses = True
    except ValueError:
        parses = False
    try:
        jq_reads = bool(jq.compile(".").input_text(text).all())
    except ValueError:
        jq_reads = False
    except UnicodeEncodeError:  # a lone surrogate: jq never sees such text as it is
        jq_reads = True
    if not parses and not jq_reads and len([ln for ln in text.split("\n") if ln.strip()]) < 2:
        assert json_shape([text], 2048) is None


@pytest.mark.parametrize("text", ["00", "1-1", "truefalse", "1true", "nullnull", "-0-0"])
def test_values_glued_into_one_jq_token_are_no_stream(text: str) -> None:
    """Two scalars with nothing between them are one token to jq (an error, or ``00``
    read as 0), never two values: no stream shape."""
    assert json_shape([text], 2048) is None


@pytest.mark.parametrize(
    ("text", "count"), [("1 2", 2), ("[1]2", 2), ('"a""b"', 2), ("{}1[2]", 3), ("[]null", 2)]
)
def test_values_one_after_another_are_a_stream_as_jq_reads_them(text: str, count: int) -> None:
    """What jq reads as several values gets the stream shape with their count."""
    shape = json_shape([text], 2048)
    assert shape is not None
    assert shape.lines[0].startswith(f"JSON values one after another, {count} values")


def test_detection_looks_only_at_the_first_significant_byte() -> None:
    """Text that cannot start JSON is refused from its first byte, not parsed."""
    assert looks_like_json('  \n {"a": 1}') and looks_like_json(b"[1]")
    assert not looks_like_json("hello {") and not looks_like_json(b"") and not looks_like_json("")
    assert json_shape(["x" * 10_000_000], 2048) is None


def test_a_value_repeated_key_locates_the_last_one_as_jq_does() -> None:
    """With a repeated key, the range is the last member's, the one jq and Python keep."""
    data = b'{"a": 1, "a": [2]}'
    doc = parse_doc(data)
    assert not isinstance(doc, type(None))
    assert doc.locate(0, ["a"]) == (14, 17)  # type: ignore[union-attr]


def test_non_ascii_documents_give_byte_ranges_not_character_ranges() -> None:
    """Ranges count UTF-8 bytes: after a 4-byte character the offsets move by four."""
    data = '{"\U0001f600": "\u00e9", "b": 7}'.encode()
    doc = parse_doc(data)
    start, end = doc.locate(0, ["b"])  # type: ignore[union-attr]
    assert data[start:end] == b"7"


_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-2, 2) | st.text(max_size=4)
_members = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d e", *(f"k{n}" for n in range(30))]),
    _scalars | st.lists(_scalars | st.lists(st.integers(0, 3), max_size=2), max_size=3),
    max_size=28,
)
_listing_items = st.lists(json_documents, max_size=12) | st.lists(
    st.builds(json.dumps, _members), max_size=30
)


def _listing(items: list[str], spaced: bool, wrapped: bool) -> str:
    array = "[" + (",\n  " if spaced else ",").join(items) + "]"
    return f'{{"total": {len(items)}, "note": [1, "]"], "items": {array}}}' if wrapped else array


def _both_ways(text: str) -> tuple[JsonShape | None, JsonShape | None]:
    """The shape summarized a chunk of 40 bytes at a time, and parsed whole."""
    with (
        patch.object(json_lazy, "CHUNK_BYTES", 40),
        patch.object(json_shape_module, "CHUNKED_CHARS", 0),
    ):
        chunked = json_shape([text], 4096)
    with patch.object(json_shape_module, "CHUNKED_CHARS", 10**12):
        whole = json_shape([text], 4096)
    return chunked, whole


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_listing_items, spaced=st.booleans(), wrapped=st.booleans())
def test_a_listing_summarized_a_chunk_at_a_time_reads_as_parsed_whole(
    items: list[str], spaced: bool, wrapped: bool
) -> None:
    """Kinds, examples, length ranges, optional keys, key order and counts, depth: the
    same lines and example expression whether the items are summarized in chunks."""
    chunked, whole = _both_ways(_listing(items, spaced, wrapped))
    assert chunked == whole


def test_what_later_chunks_bring_is_in_the_shape() -> None:
    """Keys first seen late (past the 24 shown), kinds and lengths that change between
    chunks, a key missing from one chunk's objects: all shown as in the whole parse,
    and the listing really was cut into many chunks."""
    items = [{"id": n, "tags": ["a"] * (n % 3)} for n in range(20)]
    items += [{"id": str(n), "late": None, **{f"k{k}": k for k in range(30)}} for n in range(5)]
    items += [{"id": 1.5, "tags": [[1, [2, [3, [4]]]]]}, 7, [], {"": {}}]
    text = _listing([json.dumps(item) for item in items], spaced=False, wrapped=True)
    doc = lazy_doc(text.encode())
    assert doc is not None and len(doc.chunks) == 1  # 1 MiB chunks: one
    with patch.object(json_lazy, "CHUNK_BYTES", 40):
        doc = lazy_doc(text.encode())
        assert doc is not None and len(doc.chunks) > 10
    chunked, whole = _both_ways(text)
    assert chunked is not None and chunked == whole
    assert "... 10 more keys" in "\n".join(chunked.lines)


def test_the_collector_is_resumed_after_a_chunked_shape_and_left_paused_if_it_was() -> None:
    """The cycle collector is paused only during the chunked parse, and only if it ran."""
    text = _listing([json.dumps({"a": n}) for n in range(50)], spaced=False, wrapped=True)
    assert gc.isenabled()
    with patch.object(json_shape_module, "CHUNKED_CHARS", 0):
        assert json_shape([text], 2048) is not None
        assert gc.isenabled()
        gc.disable()
        try:
            assert json_shape([text], 2048) is not None
            assert not gc.isenabled()
        finally:
            gc.enable()
