"""A large document kept as bytes (``json_lazy``): chunks proved by their parse, the same
items, ranges and query pages as the document parsed whole.

The chunk size is made tiny here, so small documents are cut into many chunks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spillstore._core import json_lazy
from spillstore._core.json_doc import JsonDoc, parse_doc
from spillstore._core.json_lazy import LazyDoc, lazy_doc, parse_chunked
from spillstore._tools import query_run
from tests.strategies import json_documents


@pytest.fixture(autouse=True)
def tiny_chunks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(json_lazy, "CHUNK_BYTES", 40)
    yield


def _listing(items: list[str], spaced: bool, wrapped: bool) -> bytes:
    separator = ",\n    " if spaced else ","
    array = "[" + separator.join(items) + "]"
    if not wrapped:
        return array.encode()
    head = f'{{"total": {len(items)}, "note": [1, "]"],\n "items": '
    return (head + array + "}\n").encode()


_ids = st.integers(-9, 99) | st.sampled_from([7.0, -3.0, 70, 17, 7.5, 7e0, 0.7e1])
_items = st.lists(json_documents, max_size=12) | st.lists(
    st.builds(
        lambda i, s, compact: json.dumps(
            {"id": i, "name": s, "tags": [{"id": i}, "a,b"]},
            separators=(",", ":") if compact else None,
        ),
        _ids,
        st.text(max_size=6),
        st.booleans(),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=_items, spaced=st.booleans(), wrapped=st.booleans())
def test_lazy_items_and_ranges_are_those_of_the_whole_parse(
    items: list[str], spaced: bool, wrapped: bool
) -> None:
    """Every item comes back in order, and every value's range reads back to it."""
    data = _listing(items, spaced, wrapped)
    doc = lazy_doc(data)
    if doc is None:  # no cut proved within ATTEMPTS tries: parsed whole instead
        assert isinstance(parse_doc(data), JsonDoc)
        assert not all(item.startswith("{") for item in items)
        return
    whole = json.loads(data)
    array = whole["items"] if wrapped else whole
    assert doc.key == ("items" if wrapped else None) and doc.count == len(array)
    assert [value for _, value in doc.each()] == array
    base: list[Any] = ["items"] if wrapped else []
    for index, value in enumerate(array):
        for path in ([*base, index], [*base, index - len(array)]):
            start, end = doc.locate(0, path)  # type: ignore[misc]
            assert json.loads(data[start:end]) == value
    if wrapped:
        start, end = doc.locate(0, ["note", 1])  # type: ignore[misc]
        assert data[start:end] == b'"]"'
    assert doc.locate(0, [*base, len(array)]) is None
    chunked = parse_chunked(data)
    assert chunked is not None and chunked.values == [whole]
    assert json.dumps(chunked.values[0]) == json.dumps(whole)  # the same key order
    for path in ([*base, 0], [*base, -1], base):
        assert chunked.locate(0, path) == doc.locate(0, path)
    chunked._canonical_known, chunked._canonical = True, None  # found within a chunk
    for index, value in enumerate(array):
        start, end = chunked.locate(0, [*base, index])  # type: ignore[misc]
        assert json.loads(data[start:end]) == value


EXPRESSIONS = [
    ".items[]",
    ".items[] | .id",
    '.items[] | select(.name == "a")',
    '.items[] | select("x" == .name) | .tags[0]',
    ".items[] | select(.id == 7)",
    ".items[] | select(.id == 7.0) | .name",
    ".items[] | select(.id == -3)",
    ".items[] | .. | numbers",
    ".items | length",
    ".total",
    ".note[] | . + 1",
    ".note | .[1]",
    '.missing // "none"',
    "def ids: .items[].id; ids",
    ".items[-1] | tojson",
    ".items[] | .name | @base64",
]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=_items,
    spaced=st.booleans(),
    expression=st.sampled_from(EXPRESSIONS),
    skip=st.integers(0, 3),
)
def test_lazy_query_pages_equal_the_whole_documents_pages(
    items: list[str], spaced: bool, expression: str, skip: int
) -> None:
    """A query on the lazy document gives the page (values, ranges, errors) the same
    query gives on the document parsed whole."""
    data = _listing(items, spaced, wrapped=True)
    lazy = lazy_doc(data)
    whole = parse_doc(data)
    assert isinstance(whole, JsonDoc)
    if lazy is None:  # no cut proved within ATTEMPTS tries (items that are not objects)
        assert not all(item.startswith("{") for item in items)
        return
    ask = query_run.Ask(expression, skip, 5, 80, 1000)
    assert query_run.run_query(lazy, ask) == query_run.run_query(whole, ask)
    top = query_run.Ask(expression.replace(".items", ""), skip, 5, 80, 1000)
    if top.expression.startswith("[]"):
        return
    array = _listing(items, spaced, wrapped=False)
    lazy_array, whole_array = lazy_doc(array), parse_doc(array)
    assert isinstance(whole_array, JsonDoc)
    if lazy_array is None:
        return
    top = query_run.Ask("." + expression.removeprefix(".items"), skip, 5, 80, 1000)
    assert query_run.run_query(lazy_array, top) == query_run.run_query(whole_array, top)


def test_a_chunk_without_the_needle_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``select(.name == "text")`` parses only the chunks whose bytes hold ``"text"``;
    ``select(.id == 150)`` those whose bytes hold ``150`` (written as orjson writes)."""
    items = [json.dumps({"id": i, "name": f"user{i}"}, separators=(",", ":")) for i in range(200)]
    doc = lazy_doc(_listing(items, spaced=False, wrapped=True))
    assert doc is not None and len(doc.chunks) > 20
    parsed: list[int] = []
    real = LazyDoc.items
    monkeypatch.setattr(LazyDoc, "items", lambda self, chunk: parsed.append(1) or real(self, chunk))
    for expression in ('.items[] | select(.name == "user150")', ".items[] | select(.id == 150)"):
        parsed.clear()
        ask = query_run.Ask(expression, 0, 5, 200, 1000)
        _, found, *_ = query_run.run_query(doc, ask)
        assert [json.loads(text) for text, *_ in found] == [{"id": 150, "name": "user150"}]
        assert len(parsed) == 1


def test_shapes_not_kept_lazily_are_parsed_whole() -> None:
    """Not an array at the end of the root object, not JSON, a scalar: None."""
    for data in (b'{"items": [1, 2], "total": 2}', b'{"items": [1, 2] x}', b"12", b"[1, 2"):
        assert lazy_doc(data) is None, data
    assert lazy_doc(b'{"items": [1], "b": [2, 3]}') is not None  # the last member
