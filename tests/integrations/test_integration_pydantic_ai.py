"""spillstore.pydantic_ai: agent runs with pydantic-ai's test models get pointers and spills.

Runs use ``asyncio.run(agent.run(...))``: ``run_sync`` leaves its event loop open on purpose.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from pydantic_ai import Agent, BinaryContent, ToolReturn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    tool_return_ta,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from spillstore import MemoryStore, TruncationService
from spillstore.pydantic_ai import SpillCapability
from spillstore.text import utf8_size

BIG = "".join(
    f"event {i}: user={i % 1000} action=click target=#btn-{i % 37}\n" for i in range(70_000)
)
"""About 3.8 MB of events."""

SPILL = re.compile(r'spill="([^"]+)"')


def returns(messages: list[ModelMessage]) -> dict[str, ToolReturnPart]:
    """Every tool return the model has received, by call id."""
    return {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def test_pointer_then_read_spill_returns_the_exact_bytes(memory_service: TruncationService) -> None:
    """A 3.8 MB tool result reaches the model as a pointer; read_spill returns the exact bytes."""
    seen: dict[str, str] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        got = returns(messages)
        if "call_events" not in got:
            assert {"read_spill", "grep_spill", "list_spills"} <= {
                t.name for t in info.function_tools
            }
            return ModelResponse(parts=[ToolCallPart("events", {}, tool_call_id="call_events")])
        if "call_read" not in got:
            pointer = got["call_events"].model_response_str()
            seen["pointer"] = pointer
            spill = SPILL.search(pointer)
            assert spill is not None, pointer
            args = {"spill": spill.group(1), "byte_offset": 2_500_000, "max_bytes": 6000}
            return ModelResponse(parts=[ToolCallPart("read_spill", args, tool_call_id="call_read")])
        seen["page"] = got["call_read"].model_response_str()
        return ModelResponse(parts=[TextPart("nothing unusual")])

    agent = Agent(FunctionModel(model), capabilities=[SpillCapability(memory_service)])

    @agent.tool_plain
    def events() -> str:
        """Recent click events."""
        return BIG

    result = asyncio.run(agent.run("what happened?"))
    assert result.output == "nothing unusual"
    assert utf8_size(seen["pointer"]) <= memory_service.settings.max_bytes
    assert "tool events (call call_events)" in seen["pointer"]
    body = seen["page"].split("\n", 1)[1].rsplit("\nnext: ", 1)[0]
    assert body == BIG[2_500_000:2_506_000]


def test_test_model_sees_the_pointer(memory_service: TruncationService) -> None:
    """With TestModel calling the tool, the recorded tool return is the pointer, within budget."""
    agent = Agent(TestModel(call_tools=["events"]), capabilities=[SpillCapability(memory_service)])

    @agent.tool_plain
    async def events() -> str:
        """Recent click events."""
        return BIG

    result = asyncio.run(agent.run("go"))
    (part,) = [p for p in returns(result.all_messages()).values() if p.tool_name == "events"]
    assert isinstance(part.content, str)
    assert part.content.startswith("[spillstore] The output of tool events")
    assert utf8_size(part.content) <= memory_service.settings.max_bytes


def run_tool(service: TruncationService, value: Any, **options: Any) -> ToolReturnPart:
    """Run one tool returning ``value`` through the capability; return what the model got."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not returns(messages):
            return ModelResponse(parts=[ToolCallPart("tool", {}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("ok")])

    agent = Agent(FunctionModel(model), capabilities=[SpillCapability(service, **options)])

    @agent.tool_plain
    def tool() -> Any:
        """A tool."""
        return value

    return returns(asyncio.run(agent.run("go")).all_messages())["c1"]


def test_small_and_non_text_values_pass_through(memory_service: TruncationService) -> None:
    """Results within budget reach the model unchanged, whatever their type."""
    assert run_tool(memory_service, "fine").content == "fine"
    assert run_tool(memory_service, {"rows": 3}).content == {"rows": 3}


def test_big_json_value_becomes_a_pointer_to_its_json(
    memory_service: TruncationService, memory_store: MemoryStore
) -> None:
    """A big dict is measured as the JSON pydantic-ai would send, and that JSON is saved."""
    value = {"rows": [{"id": i, "name": f"item {i}"} for i in range(40_000)]}
    part = run_tool(memory_service, value)
    assert isinstance(part.content, str) and "[spillstore]" in part.content
    assert utf8_size(part.content) <= memory_service.settings.max_bytes
    spill = SPILL.search(part.content)
    assert spill is not None
    assert memory_store.stat(spill.group(1)).total_bytes == len(_json(value).encode())


def _json(value: Any) -> str:
    return tool_return_ta.dump_json(value, by_alias=True).decode()


def test_tool_return_keeps_metadata_and_files_stay_attached(
    memory_service: TruncationService,
) -> None:
    """ToolReturn keeps its metadata with a capped return_value; files stay after the pointer."""
    image = BinaryContent(data=b"\x89PNG\r\n", media_type="image/png")
    part = run_tool(memory_service, ToolReturn(return_value=BIG, metadata={"rows": 70_000}))
    assert isinstance(part.content, str) and part.content.startswith("[spillstore]")
    assert part.metadata == {"rows": 70_000}
    with_file = run_tool(memory_service, [BIG, image])
    assert isinstance(with_file.content, list)
    assert with_file.content[0].startswith("[spillstore]")
    assert with_file.content[1] == image


def test_budgets_and_exempt_tools(memory_service: TruncationService) -> None:
    """Per-tool budgets cap smaller; exempt tools pass through untouched."""
    small = run_tool(memory_service, BIG, budgets={"tool": "4KB"})
    assert isinstance(small.content, str) and utf8_size(small.content) <= 4000
    exempt = run_tool(memory_service, BIG, exempt={"tool"})
    assert exempt.content == BIG


def test_tool_exceptions_are_not_results(memory_service: TruncationService) -> None:
    """A tool that raises fails the run with its own exception, untouched by the capability."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart("broken", {}, tool_call_id="c1")])

    agent = Agent(FunctionModel(model), capabilities=[SpillCapability(memory_service)])

    @agent.tool_plain
    def broken() -> str:
        """Always fails."""
        raise LookupError("no such table")

    with pytest.raises(LookupError, match="no such table"):
        asyncio.run(agent.run("go"))


def test_missing_framework_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without pydantic-ai, importing the adapter fails with the exact pip install line."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "pydantic_ai", None)
    monkeypatch.delitem(sys.modules, "spillstore.pydantic_ai")
    with pytest.raises(ImportError, match=re.escape('pip install "spillstore[pydantic-ai]"')):
        importlib.import_module("spillstore.pydantic_ai")
