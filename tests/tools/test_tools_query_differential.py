"""query_spill on hostile JSON against the jq binding, every byte range read back.

A listing (``{"total": N, "items": [...]}``, or the same items as JSON Lines) holds,
at its start, middle or end, items written to trip a fast path: needles written with
escapes (``\\u0041BC``, ``A\\/BC``, an escaped key), numbers in every form (``1e2``,
``100.0``, ``1.00e+2``, ``-0``, 20 digits), duplicate keys (the last wins, either way),
surrogate-pair escapes, odd whitespace, values of the wrong type, a nested decoy.
Each expression's results are compared with the jq binding's on the same text, and every
stated ``[start, end)`` range is checked twice: the saved bytes there parse to the
value, and ``read_spill`` byte mode shows exactly those bytes.

Paths: the end-to-end test's default document (about 1.2 MB) takes the worker's chunked
parse; the in-process test runs the chunk-at-a-time path (``lazy_doc``, which the worker
uses from 16 MiB) on a 2.3 MB document, so both run in seconds.
``SPILLSTORE_DIFF_JSON_ITEMS=170000`` makes the end-to-end document about 18 MB, so it
takes the lazy path in the worker too (RESULTS.md has that run's figure).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from spillstore import LocalStore, Settings, SpillTools, TruncationService
from spillstore._content import ToolResult
from spillstore._core.json_lazy import LazyDoc, lazy_doc
from spillstore._tools.query_run import Ask, run_query

jq = pytest.importorskip("jq")

_ASKED = os.environ.get("SPILLSTORE_DIFF_JSON_ITEMS")
"""Read at import: the suite's autouse fixture clears SPILLSTORE_* before each test."""
ITEMS = int(_ASKED) if _ASKED else 12_500

SPECIALS = [
    '{"id":-1,"name":"\\u0041BC","score":1}',
    '{"id":-2,"name":"ABC","score":1e2}',
    '{"id":-3,"name":"A\\/BC","score":100.0}',
    '{"id":-4,"name":"x","name":"ABD","score":-0}',
    '{"id":-5, "name" : "ABC" ,"score":100}',
    '{"id":-6,"name":"ABC\\n","score":1.00e+2}',
    '{"id":-7,"name":"😀ABC","score":100}',
    '{"id":-8,"name":"\\ud83d\\ude00ABC","score":100}',
    '{"id":-9,"nested":{"name":"ABC"},"name":null,"score":12345678901234567890}',
    '{"id":-10,"n\\u0061me":"ABC","score":1E2}',
    '{"id":-11,"name":"AB\\u0043","score":0.1e3}',
    '{"id":-12,\r\n"name"\t:\n"ABC"}',
    '{"id":-13,"name":"ABC","name":"x"}',
    '{"id":-14,"name":["ABC"],"score":[100]}',
    '{"id":-15,"name":"\\"ABC\\""}',
    '{"id":-16,"name":"ABC","extra":{"name":"ABC","score":100}}',
    '{"id":-17,"名前":"ABC","name":"\\u00c9"}',
    '{"id":-18,"name":"ABC\\u0000","score":100}',
]

BIG_INTEGER = SPECIALS[8]
"""An integer past 64 bits: orjson does not read it, so a document holding it is parsed
whole (the standard decoder), never kept a chunk at a time."""

CHUNKABLE = [special for special in SPECIALS if special != BIG_INTEGER]

EXPRESSIONS = [
    '.items[] | select(.name == "ABC")',
    '.items[] | select(.name == "ABC") | .id',
    '.items[] | select(.name == "ABD") | .id',
    ".items[] | select(.score == 100) | .id",
    ".items[] | select(.score == 1) | .id",
    '.items[] | select(.name == "😀ABC") | .id',
    ".items[] | select(.id == -4)",
    '.items[] | select(.name == "A/BC") | .id',
    '.items[] | select(.name == "É") | .name',
    '.items[] | select(.name == "ABC\\u0000") | .id',
    ".items[] | select(.score == 12345678901234567890) | .id",
    '.items[] | select(.name == "user7777")',
    ".items | length",
    '[.items[] | .name | strings | select(startswith("AB"))] | length',
    ".items[-1]",
    ".items[5].tags[1]",
    "first(.items[] | select(.score > 1000)) | .id",
    ".items[] | select(.id == -16) | .extra.name",
]

LINE_EXPRESSIONS = [
    'select(.name == "ABC") | .id',
    "select(.score == 100) | .id",
    'select(.name == "😀ABC")',
    "select(.id == -4) | .name",
    'select(.name == "É") | .id',
]

_RESULT = re.compile(r"^\d+\. (?:line (\d+), )?(?:bytes \[(\d+), (\d+)\): )?(.*)$")


def _item(i: int) -> str:
    return f'{{"id":{i},"name":"user{i}","email":"u{i}@x.y","tags":["a","b"],"score":{i / 7!r}}}'


def _items(count: int, where: str, specials: list[str]) -> list[str]:
    body = [_item(i) for i in range(count)]
    for k, special in enumerate(specials):
        at = {"start": k, "middle": count // 2 + k * 97, "end": count - 1 - k}[where]
        body.insert(at, special)
    return body


def _document(count: int, where: str, specials: list[str]) -> str:
    body = _items(count, where, specials)
    return f'{{"total":{len(body)},"items":[{",".join(body)}]}}'


def _norm(value: Any) -> Any:
    """A value as jq and Python both see it (numbers as doubles: jq's view)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return {k: _norm(v) for k, v in value.items()}


def _same(got: list[Any], want: list[Any]) -> bool:
    return json.dumps(_norm(got), sort_keys=True) == json.dumps(_norm(want), sort_keys=True)


def _jq_all(expressions: list[str], text: str) -> list[list[Any]]:
    """Each expression's results by the jq binding, from one parse of ``text`` (each
    JSON value of it, in turn, for JSON Lines)."""
    program = jq.compile("[" + ",".join(f"[{e}]" for e in expressions) + "]")
    out: list[list[Any]] = [[] for _ in expressions]
    for per_value in program.input_text(text).all():
        for results, more in zip(out, per_value, strict=True):
            results.extend(more)
    return out


def _text(result: ToolResult) -> str:
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def _results(page: str) -> list[tuple[int | None, tuple[int, int] | None, Any]]:
    out = []
    for line in page.split("\n")[1:]:
        found = _RESULT.match(line)
        if found is None or line.startswith("Exact"):
            continue
        try:
            value = json.loads(found.group(4))
        except ValueError:
            continue
        line_number = int(found.group(1)) if found.group(1) else None
        span = (int(found.group(2)), int(found.group(3))) if found.group(2) else None
        out.append((line_number, span, value))
    return out


def _read_back(tools: SpillTools, spill_id: str, raw: bytes, span: tuple[int, int]) -> None:
    """``read_spill`` byte mode shows exactly ``raw[start:end]`` (when it fits a page)."""
    start, end = span
    if end - start > 2000:
        return
    page = _text(tools.read(spill_id, byte_offset=start, max_bytes=max(end - start, 4)))
    header, body = page.split("\n", 1)
    assert header.startswith(f"spill {spill_id}: bytes [{start}, "), header
    assert body.encode().startswith(raw[start:end]), (span, body[:120])


def _spill(tmp_path: Path, text: str) -> tuple[SpillTools, str]:
    store = LocalStore(tmp_path / "spills")
    result = TruncationService(store).truncate_for_model(text, tool_name="t", tool_call_id="c")
    assert result.spill is not None and result.spill.spill_id is not None
    return SpillTools(store), result.spill.spill_id


@pytest.mark.parametrize(
    ("where", "specials"),
    [
        ("start", CHUNKABLE),
        ("middle", CHUNKABLE),
        ("end", CHUNKABLE),
        ("middle", SPECIALS),
    ],
    ids=["start", "middle", "end", "middle-big-integer"],
)
def test_queries_on_a_hostile_listing_agree_with_jq_and_their_ranges_read_back(
    where: str, specials: list[str], tmp_path: Path
) -> None:
    """Every expression's values equal jq's; every range holds its value, byte for byte."""
    text = _document(ITEMS, where, specials)
    raw = text.encode()
    tools, spill_id = _spill(tmp_path, text)
    try:
        for expression, want in zip(EXPRESSIONS, _jq_all(EXPRESSIONS, text), strict=True):
            page = _text(tools.query(spill_id, expression, limit=100))
            found = _results(page)
            assert _same([value for _, _, value in found], want), (expression, page[:400])
            for _, span, value in found:
                if span is not None:
                    assert _same([json.loads(raw[span[0] : span[1]])], [value]), expression
                    _read_back(tools, spill_id, raw, span)
    finally:
        tools.close()


@pytest.mark.parametrize("where", ["start", "end"])
def test_queries_on_hostile_json_lines_agree_with_jq_and_name_their_lines(
    where: str, tmp_path: Path
) -> None:
    """JSON Lines: values equal jq's; each range lies on the line it names and holds it."""
    # A record holding a raw newline is no JSON Line: those specials are left out.
    lines = _items(ITEMS // 4, where, [s for s in SPECIALS if "\n" not in s])
    text = "\n".join(lines) + "\n"
    raw = text.encode()
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()) + 1)
    tools, spill_id = _spill(tmp_path, text)
    try:
        wanted = _jq_all(LINE_EXPRESSIONS, text)
        for expression, want in zip(LINE_EXPRESSIONS, wanted, strict=True):
            page = _text(tools.query(spill_id, expression, limit=100))
            found = _results(page)
            assert _same([value for _, _, value in found], want), (expression, page[:400])
            for line_number, span, value in found:
                assert line_number is not None, (expression, page[:300])
                if span is not None:
                    assert starts[line_number - 1] <= span[0] < span[1] < starts[line_number]
                    assert _same([json.loads(raw[span[0] : span[1]])], [value]), expression
                    _read_back(tools, spill_id, raw, span)
    finally:
        tools.close()


def test_the_chunk_at_a_time_path_agrees_with_jq_on_hostile_items() -> None:
    """The lazy document (kept as bytes, a chunk parsed at a time) answers as jq does."""
    text = _document(25_000, "middle", CHUNKABLE)
    raw = text.encode()
    doc = lazy_doc(raw)
    assert isinstance(doc, LazyDoc) and len(doc.chunks) > 1
    for expression, want in zip(EXPRESSIONS, _jq_all(EXPRESSIONS, text), strict=True):
        reply = run_query(doc, Ask(expression, 0, 1000, 100_000, 10_000_000))
        assert reply[0] == "results", (expression, reply)
        found: list[tuple[str, int, tuple[int, int] | None, int | None]] = reply[1]
        assert _same([json.loads(item[0]) for item in found], want), expression
        for shown, _, span, _ in found:
            if span is not None:
                assert _same([json.loads(raw[span[0] : span[1]])], [json.loads(shown)])


def _stream_of(items: list[str], *, pretty: bool) -> str:
    if pretty:
        return "".join(json.dumps(json.loads(item), indent=2) + "\n" for item in items)
    return "".join(items)


EDGE_DOCUMENTS = {
    "bom-canonical": "\ufeff" + _document(300, "middle", CHUNKABLE).replace(" ", ""),
    "bom-spaced": "\ufeff " + _document(300, "middle", CHUNKABLE) + "\n",
    "nan-infinity": _document(300, "end", CHUNKABLE).replace(
        '"score":1}', '"score":NaN,"big":Infinity,"small":-Infinity}'
    ),
    "stream-compact": _stream_of(_items(300, "middle", CHUNKABLE), pretty=False),
    "stream-pretty": _stream_of(_items(100, "start", CHUNKABLE), pretty=True),
    "bom-json-lines": "\ufeff" + "\n".join(_items(300, "end", CHUNKABLE[:6])) + "\n",
}
"""Documents jq reads that are not plain JSON: a byte order mark (jq skips it), ``NaN``
and ``Infinity`` (null and the largest doubles to jq), values one after another (a
stream to jq), compact on one line or pretty-printed over many."""


@pytest.mark.parametrize("name", list(EDGE_DOCUMENTS))
def test_documents_jq_reads_beyond_plain_json_are_queried_as_jq_reads_them(
    name: str, tmp_path: Path
) -> None:
    """The pointer shows a shape, and query_spill gives jq's values, each range holding
    its value's own bytes (NaN and Infinity are written as such there)."""
    text = EDGE_DOCUMENTS[name]
    raw = text.encode()
    store = LocalStore(tmp_path / "spills")
    service = TruncationService(store, Settings(max_bytes=4096))
    result = service.truncate_for_model(text, tool_name="t", tool_call_id="c")
    assert result.spill is not None and result.spill.spill_id is not None
    pointer = _text(result) if len(result.content) == 1 else result.content[0].text  # type: ignore[union-attr]
    assert "query_spill(" in pointer, pointer[:600]
    tools, spill_id = SpillTools(store), result.spill.spill_id
    listing = "items" in text[:40]
    expressions = EXPRESSIONS[:8] if listing else LINE_EXPRESSIONS
    if name == "nan-infinity":
        expressions = [*expressions, ".items[] | select(.id == -1) | [.score, .big, .small]"]
    try:
        for expression, want in zip(expressions, _jq_all(expressions, text), strict=True):
            page = _text(tools.query(spill_id, expression, limit=100))
            assert "is not JSON" not in page, page[:300]
            found = _results(page)
            assert _same([value for _, _, value in found], want), (expression, page[:400])
            for _, span, value in found:
                if span is not None and b"NaN" not in raw[span[0] : span[1]]:
                    shown = json.loads(raw[span[0] : span[1]], parse_constant=_jq_constant)
                    assert _same([shown], [value]), (expression, span)
                    _read_back(tools, spill_id, raw, span)
    finally:
        tools.close()


def _jq_constant(name: str) -> Any:
    return {"NaN": None, "Infinity": 1.7976931348623157e308}.get(name, -1.7976931348623157e308)
