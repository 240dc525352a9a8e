"""The parse the query keeps (``parse_doc``) and the byte range of every value in it.

A document written the way orjson writes it is located from its members' compact
lengths; any other is scanned. Both must give the same ranges, and every range must
parse back to the value at its path.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spillstore._core.json_doc import JsonDoc, NotJson, parse_doc
from tests.strategies import json_documents


def _paths(value: Any, path: list[object]) -> Iterator[tuple[list[object], Any]]:
    yield path, value
    if isinstance(value, dict):
        for key, member in value.items():
            yield from _paths(member, [*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, [*path, index])
            yield from _paths(item, [*path, index - len(value)])


def _scanned(data: bytes) -> JsonDoc:
    """The document located by the text scanner alone (as if not written by orjson)."""
    doc = parse_doc(data)
    assert isinstance(doc, JsonDoc)
    doc._canonical_known = True
    doc._canonical = None
    return doc


def _check(data: bytes) -> None:
    doc = parse_doc(data)
    assert isinstance(doc, JsonDoc) and doc.kind == "json"
    scanned = _scanned(data)
    for path, value in _paths(doc.values[0], []):
        found = doc.locate(0, path)
        assert found is not None, path
        start, end = found
        assert json.loads(data[start:end]) == value, (path, data[start:end])
        assert scanned.locate(0, path) == found, path
    assert doc.locate(0, ["no such key"]) is None or isinstance(doc.values[0], dict)
    assert scanned.locate(0, [10**6]) is None and doc.locate(0, [10**6]) is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    document=json_documents, compact=st.booleans(), trailing=st.sampled_from(["", "\n", " \r\n"])
)
def test_every_value_range_reads_back_in_compact_and_spaced_documents(
    document: str, compact: bool, trailing: str
) -> None:
    """Every value's range parses back to it, whether the document is written as orjson
    writes it (ranges from lengths) or any other way (ranges from a scan): the same."""
    data = document.encode("utf-8")
    if compact:
        # A lone surrogate cannot be written compactly: the document stays as it is.
        with contextlib.suppress(orjson.JSONEncodeError, TypeError):
            data = orjson.dumps(json.loads(document)) + trailing.encode()
    _check(data)


def test_a_compact_document_is_located_without_decoding_its_text() -> None:
    """orjson's own writing: ranges come from the compact lengths; the text is not decoded."""
    items = [
        {"id": i, "name": f"user{i}", "tags": ["a", "\u00e9"], "score": i / 2} for i in range(50)
    ]
    data = orjson.dumps({"total": 50, "items": items}) + b"\n"
    doc = parse_doc(data)
    assert isinstance(doc, JsonDoc) and doc.strict and doc.canonical() is not None
    start, end = doc.locate(0, ["items", 49])  # type: ignore[misc]
    assert data[start:end] == orjson.dumps(items[49])
    assert doc._text is None  # non-ASCII, yet never decoded for a range
    _check(data)


def test_long_integers_are_parsed_exactly_not_as_floats() -> None:
    """An integer past 64 bits (orjson reads a float) is parsed by the standard decoder."""
    data = b'{"big": 123456789012345678901234567890, "n": 18446744073709551616}'
    doc = parse_doc(data)
    assert isinstance(doc, JsonDoc)
    assert doc.values[0] == {"big": 123456789012345678901234567890, "n": 2**64}
    _check(data)


def test_what_orjson_refuses_is_still_parsed_as_python_does() -> None:
    """A lone surrogate escape and a number past the largest double: the standard decoder."""
    doc = parse_doc(b'{"a": "\\ud800", "b": 1e400}')
    assert isinstance(doc, JsonDoc) and not doc.strict
    assert doc.values[0]["a"] == "\ud800" and doc.values[0]["b"] == float("inf")
    assert isinstance(parse_doc(b'{"a": 1,}'), NotJson)


def test_ranges_in_a_long_compact_array_match_the_scan_in_every_block() -> None:
    """Items past the first blocks of a compact array (measured a block at a time) get
    the same ranges as a scan gives, at every index and from either end."""
    items = [{"i": i, "s": "\u00e9" * (i % 7), "n": [i] * (i % 3)} for i in range(300)]
    data = orjson.dumps({"items": items, "x": [1.5, None]})
    doc, scanned = parse_doc(data), _scanned(data)
    assert isinstance(doc, JsonDoc) and doc.canonical() is not None
    for index in [*range(300), -1, -64, -65, -300]:
        for path in (["items", index], ["items", index, "n"], ["items", index, "s"]):
            assert doc.locate(0, path) == scanned.locate(0, path), path
    assert doc.locate(0, ["items", 300]) is None and doc.locate(0, ["items", -301]) is None
