"""Query (``query_spill``): jq over JSON and JSON Lines spills, with exact byte ranges.

The jq programs run in a real worker process; hostile programs are stopped by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spillstore import MemoryStore, SpillTools, ToolResult
from spillstore._core.json_doc import NotJson, parse_doc
from spillstore._tools import query_run
from tests.strategies import json_documents

RESULT = re.compile(r"^(\d+)\. (?:line (\d+), )?bytes \[(\d+), (\d+)\): (.*)$")


def text_of(result: ToolResult) -> str:
    """The single text part of a tool result, checked to be spill-exempt."""
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def tools() -> Iterator[SpillTools]:
    """One tools object (one warm worker) over a memory store, for the whole module."""
    spill_tools = SpillTools(MemoryStore())
    yield spill_tools
    spill_tools.close()


def _put(tools: SpillTools, data: bytes | str, **options: object) -> str:
    meta = tools.store.put(
        data,
        session="default",
        tool_name="fetch",
        tool_call_id="c1",
        **options,  # type: ignore[arg-type]
    )
    return meta.spill_id


def _ranged(text: str) -> list[tuple[int | None, int, int, str]]:
    found = []
    for line in text.split("\n")[1:]:
        match = RESULT.match(line)
        if match:
            number_line = int(match[2]) if match[2] else None
            found.append((number_line, int(match[3]), int(match[4]), match[5]))
    return found


def test_needle_comes_back_with_its_exact_bytes_in_one_call(tools: SpillTools) -> None:
    """A select over a large array returns the one item, its byte range reads back exactly."""
    items = [{"id": i, "name": f"user{i}", "tags": ["a", "b"]} for i in range(3000)]
    data = json.dumps({"total": 3000, "items": items}).encode()
    spill = _put(tools, data)
    result = tools.query(spill, '.items[] | select(.name == "user2999")')
    text = text_of(result)
    assert not result.is_error, text
    assert len(text.encode()) <= 2048
    ((_, start, end, shown),) = _ranged(text)
    assert data[start:end] == json.dumps(items[2999]).encode()
    assert json.loads(shown) == items[2999]
    assert f"byte_offset={start}, max_bytes={end - start}" in text
    read = text_of(tools.read(spill, byte_offset=start, max_bytes=end - start))
    assert json.dumps(items[2999]) in read


def test_second_query_on_a_spill_uses_the_kept_document(tools: SpillTools) -> None:
    """The worker keeps a document it parsed: a second query sends only the expression."""
    spill = _put(tools, json.dumps({"a": [1, 2, 3]}))
    assert "1. bytes [7, 8): 1" in text_of(tools.query(spill, ".a[0]"))
    calls = []
    original = tools.store.read_bytes

    def counting(*args: object) -> bytes:
        calls.append(args)
        return original(*args)  # type: ignore[arg-type]

    tools.store.read_bytes = counting  # type: ignore[method-assign]
    try:
        assert "1. bytes [13, 14): 3" in text_of(tools.query(spill, ".a[-1]"))
    finally:
        del tools.store.read_bytes
    assert calls == []


def test_a_deleted_spill_is_not_answered_from_the_workers_copy(tools: SpillTools) -> None:
    """After a spill is deleted, a query says so, even though the worker kept the document."""
    spill = _put(tools, json.dumps({"gone": [1]}))
    assert not tools.query(spill, ".gone").is_error
    tools.store.delete(spill)
    result = tools.query(spill, ".gone")
    assert result.is_error
    assert spill in text_of(result)


def test_json_lines_run_per_line_with_line_numbers(tools: SpillTools) -> None:
    """Each line of a JSON Lines spill is queried on its own; results name their line."""
    data = b'{"a": 1}\n\n{"a": 2, "b": [true]}\n{"a": 3}\n'
    spill = _put(tools, data)
    text = text_of(tools.query(spill, ".a"))
    assert "JSON Lines" in text
    found = _ranged(text)
    assert [(line, data[s:e]) for line, s, e, _ in found] == [(1, b"1"), (3, b"2"), (4, b"3")]


def test_computed_values_have_no_byte_ranges(tools: SpillTools) -> None:
    """A result that is not a value of the document comes back without a range, and says so."""
    spill = _put(tools, json.dumps({"items": [1, 2, 3]}))
    text = text_of(tools.query(spill, ".items | length"))
    assert "computed values" in text
    assert text.splitlines()[-1] == "1. 3"


def test_paging_names_the_next_call(tools: SpillTools) -> None:
    """Results past the limit are announced with the exact next call."""
    spill = _put(tools, json.dumps(list(range(50))))
    text = text_of(tools.query(spill, ".[]", limit=5))
    assert f'query_spill(spill="{spill}", expression=".[]", offset=5, limit=5)' in text
    assert "5. bytes" in text and "6. bytes" not in text
    later = text_of(tools.query(spill, ".[]", offset=45, limit=5))
    assert "(the last)" in later and "50. bytes" in later


def test_a_spill_that_is_not_json_names_the_tools_that_work(tools: SpillTools) -> None:
    """Query on plain text is an error naming Read and Grep for that spill."""
    spill = _put(tools, "hello world\n" * 10)
    result = tools.query(spill, ".")
    text = text_of(result)
    assert result.is_error
    assert "not JSON" in text
    assert f'read_spill(spill="{spill}")' in text and "grep_spill(" in text


def test_a_spill_saved_in_part_points_to_grep_and_read(tools: SpillTools) -> None:
    """A spill the retention cap cut cannot be parsed whole: the error says what to use."""
    data = json.dumps({"items": list(range(20000))})
    spill = _put(tools, data, retention_bytes=4096, retained_tail_bytes=1024)
    result = tools.query(spill, ".items[0]")
    assert result.is_error
    text = text_of(result)
    assert "saved in part" in text and "grep_spill(" in text and "read_spill(" in text


def test_text_with_a_json_line_is_queried_over_that_line(tools: SpillTools) -> None:
    """Structured content appended as the last line of a text result can be queried."""
    data = 'Found 2 users\n{"users":[{"name":"a"},{"name":"b"}]}'
    spill = _put(tools, data)
    text = text_of(tools.query(spill, '.users[] | select(.name == "b")'))
    assert "1 lines holding no JSON object or array skipped" in text
    ((line, start, end, _),) = _ranged(text)
    assert line == 2 and data.encode()[start:end] == b'{"name":"b"}'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("def f: f; f", "stopped"),
        ("last(range(1e12))", "stopped"),
        ("[range(1e12)]", "stopped|memory"),
        ('"x" * 4000000000', "memory|stopped|failed"),
        (".[", "does not compile"),
        ('include "x"; .', "does not compile"),
        (".a.b.c", "failed"),
    ],
)
def test_hostile_expressions_end_in_a_clear_error(
    tools: SpillTools, expression: str, expected: str
) -> None:
    """Runaway, huge and malformed programs end as error results; the next query works."""
    spill = _put(tools, json.dumps({"a": [1, 2]}))
    result = tools.query(spill, expression)
    assert result.is_error, text_of(result)
    assert re.search(expected, text_of(result)), text_of(result)
    assert "1. bytes [7, 8): 1" in text_of(tools.query(spill, ".a[0]"))


def test_arguments_are_validated_strictly(tools: SpillTools) -> None:
    """A NUL in the expression, an empty one or a bad limit is an argument error."""
    for arguments in (
        {"spill": "x-00000000000000000000", "expression": ".a\x00b"},
        {"spill": "x-00000000000000000000", "expression": ""},
        {"spill": "x-00000000000000000000", "expression": ".", "limit": 0},
        {"spill": "x-00000000000000000000", "expression": ".", "offset": True},
    ):
        result = tools.call("query_spill", arguments)
        assert result.is_error
        assert text_of(result).startswith("invalid arguments for query_spill: ")


def test_a_long_expression_never_pushes_the_next_call_off_the_page(tools: SpillTools) -> None:
    """With a long, wide-character expression the page still ends with its next call."""
    spill = _put(tools, json.dumps(list(range(3000))))
    expression = ".[] | select(. >= 0)" + ' | select(. != "\U0001f600")' * 120
    result = tools.query(spill, expression, limit=1000)
    text = text_of(result)
    assert not result.is_error, text
    assert len(text.encode()) <= tools.max_page_bytes
    assert text.split("\n")[-1].startswith("More: ")


def test_infinite_streams_are_paged_not_run_to_the_end(tools: SpillTools) -> None:
    """A program with endless results gives one page and a next call."""
    spill = _put(tools, "[1]")
    text = text_of(tools.query(spill, "repeat(.)", limit=3))
    assert "results 1-3." in text and "offset=3" in text


def test_the_worker_sees_no_host_environment(
    tools: SpillTools, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jq's env shows nothing of the host's environment (no credentials leak)."""
    monkeypatch.setenv("SPILLSTORE_TEST_SECRET", "hunter2")
    fresh = SpillTools(MemoryStore())
    try:
        spill = fresh.store.put("[1]", session="default", tool_name="t", tool_call_id="c").spill_id
        text = text_of(fresh.query(spill, "env | keys"))
    finally:
        fresh.close()
    assert "SPILLSTORE_TEST_SECRET" not in text and "hunter2" not in text


def test_jq_refusing_what_python_accepts_is_reported_as_not_json(tools: SpillTools) -> None:
    """A lone surrogate escape (valid for Python's parser, not for jq's) is a clear error."""
    spill = _put(tools, '{"a": "\\ud800"}')
    result = tools.query(spill, ".a")
    assert result.is_error
    assert "jq cannot parse it" in text_of(result)


def _as_jq_reads(text: str | bytes) -> Any:
    """JSON read as jq reads it: an integer past 2**53 is a double (a value is shown with
    the shortest digits of its double, as jq shows it: 21035272956795910)."""
    return json.loads(text, parse_int=lambda s: int(s) if len(s) < 16 else float(s))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(document=json_documents)
def test_every_path_result_reads_back_to_the_same_value(tools: SpillTools, document: str) -> None:
    """For any JSON document, every value ``..`` yields has a range that parses back to it."""
    data = document.encode("utf-8")
    spill = _put(tools, data)
    text = text_of(tools.query(spill, "..", limit=1000))
    assert not text.startswith("query_spill") or "computed" not in text, text
    found = _ranged(text)
    assert found, text
    for _, start, end, shown in found:
        assert _as_jq_reads(data[start:end]) == _as_jq_reads(shown)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents=st.lists(json_documents, min_size=2, max_size=5))
def test_every_json_lines_result_reads_back_on_its_line(documents: list[str]) -> None:
    """JSON Lines: each result's range lies on its stated line and parses back to it."""
    compact = [json.dumps(json.loads(d)) for d in documents]  # one line each
    data = "\n".join(compact).encode("utf-8")
    doc = parse_doc(data)
    assert not isinstance(doc, NotJson) and doc.kind == "ndjson"
    for root, (line, _, _) in enumerate(doc.roots):
        start, end = doc.locate(root, [])  # type: ignore[misc]
        assert data.count(b"\n", 0, start) == line - 1
        assert json.loads(data[start:end]) == json.loads(compact[root])


QUERIES = [".", "..", ".[]?", ".a", '.. | select(type == "string")', "[.. | numbers] | length"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=json_documents, ndjson=st.booleans(), expression=st.sampled_from(QUERIES))
def test_native_pages_match_jq_pages(document: str, ndjson: bool, expression: str) -> None:
    """The native evaluator's page (values, byte ranges, line numbers, paging) is the page
    jq gives for the same query, each value printed alike (but -0: jq's binding reads it 0)."""
    text = document
    if ndjson:
        text = "\n".join([json.dumps(json.loads(document))] * 2)
    doc = parse_doc(text.encode("utf-8"))
    assert not isinstance(doc, NotJson)
    ask = query_run.Ask(expression, skip=1, limit=7, max_result_bytes=60, max_total_bytes=900)
    native = query_run.run_query(doc, ask)
    if native[0] == "error" or "\\u" in text:
        return  # a failure is worded by jq; a surrogate escape sends the document to jq
    by_jq = query_run._run_jq(doc, ask)
    assert native[2:] == by_jq[2:]  # more, kind, paths, skipped lines
    assert [item[2:] for item in native[1]] == [item[2:] for item in by_jq[1]]  # ranges, lines
    for (shown, size, _, _), (jq_shown, jq_size, _, _) in zip(native[1], by_jq[1], strict=True):
        if size == len(shown.encode()) and jq_size == len(jq_shown.encode()):
            # Uncut: the same text (jq's binding hands -0 over as 0).
            assert re.sub(r"-0(?![.\de])", "0", shown) == jq_shown


def test_the_needle_query_runs_without_jq(monkeypatch: pytest.MonkeyPatch) -> None:
    """The common query is answered natively: jq is not asked (nor the text parsed again)."""
    items = [{"id": i, "name": f"user{i}"} for i in range(500)]
    data = json.dumps({"total": 500, "items": items}).encode()
    doc = parse_doc(data)
    assert not isinstance(doc, NotJson)

    def no_jq(*args: object) -> None:
        raise AssertionError("jq was asked")

    monkeypatch.setattr(query_run, "_run_jq", no_jq)
    ask = query_run.Ask('.items[] | select(.name == "user499")', 0, 20, 2000, 6000)
    _, found, more, kind, paths, _ = query_run.run_query(doc, ask)
    ((text, _, (start, end), line),) = found
    assert (more, kind, paths, line) == (False, "json", True, None)
    assert data[start:end] == json.dumps(items[499]).encode() and json.loads(text) == items[499]


@pytest.mark.parametrize(("depth", "said"), [(1010, "could not run"), (5000, "is not JSON")])
def test_a_document_nested_too_deeply_is_a_clear_error(
    tools: SpillTools, depth: int, said: str
) -> None:
    """Nesting past what the parsers and the evaluator follow says so, and what to do."""
    spill = _put(tools, "[" * depth + "1" + "]" * depth)
    result = tools.query(spill, ".")
    assert result.is_error
    text = text_of(result)
    assert said in text and "nested too deeply" in text, text
    assert "a ? after a step" not in text  # not the expression's fault


@pytest.mark.parametrize(
    ("expression", "answer"),
    [
        ('"\\ud800"', None),
        ('"\\ud83d" + "\\ude00"', None),
        ('{"\\ud800": 1}', None),
        ('"\\udfff"', '1. "\ufffd"'),
        ('.a == "x\\udfff"', "1. false"),
    ],
)
def test_a_lone_surrogate_escape_in_a_string_literal_is_read_as_jq_reads_it(
    tools: SpillTools, expression: str, answer: str | None
) -> None:
    """jq refuses a high ``\\uD800`` escape without its pair when it compiles the program,
    and reads a lone low one as U+FFFD; the native evaluator took both as lone
    surrogates, which reached the model's text (never strict UTF-8) or joined two
    halves into one character."""
    spill = _put(tools, json.dumps({"a": "x", "pad": "p" * 3000}))
    result = tools.call("query_spill", {"spill": spill, "expression": expression})
    text = text_of(result)
    text.encode("utf-8")  # strict UTF-8: no lone surrogate reaches the model
    if answer is None:
        assert result.is_error
        assert "does not compile" in text and "surrogate" in text
    else:
        assert not result.is_error
        assert text.split("\n")[-1] == answer
