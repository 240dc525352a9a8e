"""The JSON shape summary and JSON detection: pure, deterministic, bounded."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._core.json_doc import looks_like_json, parse_doc
from spillstore._core.json_shape import json_shape
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
    """Hostile text never crashes detection; text that does not parse gets no shape."""
    try:
        json.loads(text)
        parses = True
    except ValueError:
        parses = False
    if not parses and len([line for line in text.split("\n") if line.strip()]) < 2:
        assert json_shape([text], 2048) is None


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
