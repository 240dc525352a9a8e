"""Hostile arguments from a model: each gets a short error result, the same from every door.

Offsets and limits of every type and size, ids that traverse, name other sessions or
hold odd characters, regexes that are catastrophic, invalid or unsupported, jq programs
that never end or reach outside: through ``SpillTools.call``, its async twin and the MCP
server in process, each call returns (no exception, no hang), stays within the page cap,
is strict UTF-8, and the three doors answer alike. Error cases are errors; the few
lawful extremes (an offset past every result) are answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from spillstore import MemoryStore, SpillTools, TextPart, ToolResult, TruncationService
from spillstore.mcp import spill_server

PAGE = 4000
_STORE = MemoryStore()
_TEXT = "".join(f"line {i} é😀 abc\n" for i in range(5000))
_JSON = json.dumps({"items": [{"id": i, "name": f"n{i}"} for i in range(3000)]})
_SID = TruncationService(_STORE).truncate_for_model(_TEXT, tool_name="bash", tool_call_id="a")
_JID = TruncationService(_STORE).truncate_for_model(_JSON, tool_name="fetch", tool_call_id="b")
assert _SID.spill is not None and _SID.spill.spill_id is not None
assert _JID.spill is not None and _JID.spill.spill_id is not None
SID, JID = _SID.spill.spill_id, _JID.spill.spill_id
_OTHER = TruncationService(_STORE, session="other").truncate_for_model(
    _TEXT + "x", tool_name="bash", tool_call_id="c"
)
assert _OTHER.spill is not None
OTHER = _OTHER.spill.spill_id

BAD_PATTERNS = ["(", "[", "a**", "a{100000}", "(?<=a)b", r"(a)\1", "a++", r"\Z", "", "x" * 2001]
BAD_EXPRESSIONS = ["", ".[", "def f: f; f", "last(range(1e12))", 'include "a"; .', "error", "\x00"]
BAD_NUMBERS = [-1, -(2**63), 2**63, 2**53, 1.0, 1.5, "1", "", True, None, [], {}]

ERRORS: list[tuple[str, dict[str, Any]]] = [
    *(("read_spill", {"spill": SID, "offset": v}) for v in BAD_NUMBERS if v != -1),
    *(("read_spill", {"spill": SID, "limit": v}) for v in BAD_NUMBERS),
    *(("read_spill", {"spill": SID, "byte_offset": v}) for v in [-1, 2**53, 1.5, "0", False]),
    *(("read_spill", {"spill": SID, "max_bytes": v}) for v in [0, 3, 10**7, 2.0, "9"]),
    *(
        ("grep_spill", {"spill": SID, "pattern": "a", f: v})
        for f in ("head_limit", "offset", "context")
        for v in [-1, 1.5, "2", True]
    ),
    *(("list_spills", {f: v}) for f in ("offset", "limit") for v in [-1, 0.5, "3", False]),
    *(
        ("query_spill", {"spill": JID, "expression": ".", f: v})
        for f in ("offset", "limit")
        for v in [-1, 1.0, "3", None]
    ),
    ("read_spill", {"spill": SID, "offset": 0}),
    ("read_spill", {"spill": SID, "offset": 5001}),
    ("read_spill", {"spill": SID, "byte_offset": 2**53 - 1}),
    ("read_spill", {"spill": SID, "unknown": 1}),
    ("read_spill", {}),
    ("read_spill", {"spill": OTHER}),
    ("grep_spill", {"spill": OTHER, "pattern": "a"}),
    ("query_spill", {"spill": OTHER, "expression": "."}),
    ("list_spills", {"session": "other"}),
    ("list_spills", {"session": "../default"}),
    ("list_spills", {"offset": 2**53 - 1}),
    *(
        (tool, {"spill": spill, **extra})
        for spill in [
            "../../etc/passwd",
            "/etc/passwd",
            "/dev/zero",
            "/proc/self/fd/0",
            f"{SID}/../x",
            f"{SID}\x00",
            f" {SID}",
            f"{SID}\n",
            SID.upper(),
            "é" * 5000,
            "x" * 4097,
            "file:///etc/passwd",
            "bash-00000000000000000000",
        ]
        for tool, extra in [
            ("read_spill", {}),
            ("grep_spill", {"pattern": "a"}),
            ("query_spill", {"expression": "."}),
        ]
    ),
    *(("grep_spill", {"spill": SID, "pattern": pattern}) for pattern in BAD_PATTERNS),
    *(("query_spill", {"spill": JID, "expression": e}) for e in BAD_EXPRESSIONS),
    ("query_spill", {"spill": JID, "expression": "." * 4001}),
    ("query_spill", {"spill": SID, "expression": "."}),
]

ANSWERS: list[tuple[str, dict[str, Any]]] = [
    ("grep_spill", {"spill": SID, "pattern": "(a+)+$"}),
    ("grep_spill", {"spill": SID, "pattern": "(.*)*x" * 20}),
    ("grep_spill", {"spill": SID, "pattern": "abc", "offset": 2**53 - 1}),
    ("grep_spill", {"spill": SID, "pattern": "abc", "head_limit": 2**53 - 1}),
    ("grep_spill", {"spill": SID, "pattern": "line", "head_limit": 0, "context": 50}),
    ("grep_spill", {"pattern": "(", "literal": True, "output_mode": "count"}),
    ("query_spill", {"spill": JID, "expression": ".items[0]", "offset": 2**53 - 1}),
    ("query_spill", {"spill": JID, "expression": "env"}),
    ("query_spill", {"spill": JID, "expression": "repeat(.)", "limit": 1000}),
    ("read_spill", {"spill": SID, "offset": -5000, "limit": 2000}),
    ("read_spill", {"spill": SID, "offset": -5001}),
    ("read_spill", {"spill": SID, "offset": -(2**53 - 1)}),
]


_RUNAWAY = ("def f: f; f", "last(range(1e12))")
"""Programs stopped by the query's CPU limit."""


def _text(result: ToolResult) -> str:
    assert result.spill_exempt
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


def _id(case: tuple[str, dict[str, Any]]) -> str:
    return f"{case[0]}-{json.dumps(case[1], ensure_ascii=True)[:60]}"


@pytest.fixture(scope="module")
def tools() -> Iterator[SpillTools]:
    """The tools of session "default" over the shared store (one query worker)."""
    made = SpillTools(_STORE, max_page_bytes=PAGE)
    yield made
    made.close()


@pytest.mark.anyio
@pytest.mark.parametrize("case", ERRORS + ANSWERS, ids=_id)
async def test_hostile_arguments_get_a_bounded_answer_from_both_twins(
    tools: SpillTools, case: tuple[str, dict[str, Any]]
) -> None:
    """No exception or hang; bounded, strict UTF-8; ``call`` and ``acall`` agree."""
    name, arguments = case
    started = time.monotonic()
    result = tools.call(name, arguments)
    assert time.monotonic() - started < 30
    text = _text(result)
    assert len(text.encode("utf-8")) <= PAGE
    assert result.is_error == (case in ERRORS), text[:300]
    again = await tools.acall(name, arguments)
    assert again.is_error == result.is_error
    if name != "query_spill":  # a stopped query words the CPU time it took
        assert _text(again) == text


@pytest.mark.anyio
async def test_hostile_arguments_get_the_same_answers_through_the_mcp_server(
    tools: SpillTools,
) -> None:
    """The MCP server in process answers every hostile call as ``SpillTools.call`` does."""
    async with Client(spill_server(tools)) as client:
        for name, arguments in ERRORS + ANSWERS:
            if arguments.get("expression") in _RUNAWAY:
                continue  # 2 s of CPU each: the twins' test runs them
            result = tools.call(name, arguments)
            reply = await client.call_tool(name, arguments)
            assert bool(reply.is_error) == result.is_error, (name, arguments)
            shown = "\n".join(c.text for c in reply.content if isinstance(c, types.TextContent))
            if name != "query_spill":
                assert shown == _text(result), (name, arguments)
