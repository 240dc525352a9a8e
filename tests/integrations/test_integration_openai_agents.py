"""spillstore.openai_agents: a real Agents SDK run with a scripted model gets pointers, spills."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import agents.testing as agents_testing
import pytest
from agents import Agent, FunctionTool, RunConfig, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel
from agents.tool import ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext

from spillstore import ConfigError, MemoryStore, SpillTools, TruncationService
from spillstore.openai_agents import spill_tools, wrap_tool, wrap_tools
from spillstore.text import utf8_size

BIG = "".join(
    f"2026-11-29T12:{i % 60:02d}:00Z INFO request {i} served in {i % 97} ms\n"
    for i in range(60_000)
)
"""About 3.5 MB of log."""

SPILL = re.compile(r'spill="([^"]+)"')


@function_tool
def fetch_logs() -> str:
    """Fetch the service logs."""
    return BIG


def outputs(call: ModelCall) -> dict[str, Any]:
    """The function_call_output items the model receives, by call id."""
    items = call.input if isinstance(call.input, list) else []
    return {
        item["call_id"]: item["output"]
        for item in items
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    }


def run(agent: Agent[Any], prompt: str = "look at the logs") -> Any:
    return asyncio.run(Runner.run(agent, prompt, run_config=RunConfig(tracing_disabled=True)))


def test_pointer_then_read_spill_returns_the_exact_bytes(
    memory_service: TruncationService, memory_store: MemoryStore
) -> None:
    """A 3.5 MB output reaches the model as a pointer; its read_spill call gets the exact bytes."""
    seen: dict[str, Any] = {}

    def after_fetch(call: ModelCall) -> ModelStep:
        pointer = outputs(call)["call_fetch"]
        seen["pointer"] = pointer
        spill = SPILL.search(pointer)
        assert spill is not None, pointer
        args = {"spill": spill.group(1), "byte_offset": 1_000_000, "max_bytes": 5000}
        return ModelStep(
            output=[agents_testing.function_call("read_spill", args, call_id="call_read")]
        )

    def after_read(call: ModelCall) -> ModelStep:
        seen["page"] = outputs(call)["call_read"]
        return ModelStep(output=[agents_testing.assistant_message("the logs look fine")])

    model = ScriptedModel(
        [
            ModelStep(
                output=[agents_testing.function_call("fetch_logs", {}, call_id="call_fetch")]
            ),
            ModelStep.respond(after_fetch),
            ModelStep.respond(after_read),
        ]
    )
    agent = Agent(
        name="ops",
        model=model,
        tools=[*wrap_tools([fetch_logs], service=memory_service), *spill_tools(memory_service)],
    )
    result = run(agent)
    model.assert_complete()
    assert result.final_output == "the logs look fine"
    pointer = seen["pointer"]
    assert utf8_size(pointer) <= memory_service.settings.max_bytes
    assert "tool fetch_logs (call call_fetch)" in pointer
    body = seen["page"].split("\n", 1)[1].rsplit("\nnext: ", 1)[0]
    assert body == BIG[1_000_000:1_005_000]


def test_small_output_passes_through_and_original_tool_is_untouched(
    memory_service: TruncationService,
) -> None:
    """A small output reaches the model unchanged; the original tool stays uncapped."""

    @function_tool
    def status() -> str:
        """Service status."""
        return "all green"

    wrapped = wrap_tool(status, service=memory_service)
    assert wrapped is not status
    assert wrapped.name == status.name and wrapped.params_json_schema == status.params_json_schema
    seen: dict[str, Any] = {}

    def answer(call: ModelCall) -> ModelStep:
        seen.update(outputs(call))
        return ModelStep(output=[agents_testing.assistant_message("ok")])

    model = ScriptedModel(
        [
            ModelStep(output=[agents_testing.function_call("status", {}, call_id="c1")]),
            ModelStep.respond(answer),
        ]
    )
    run(Agent(name="ops", model=model, tools=[wrapped]))
    assert seen["c1"] == "all green"


def test_structured_outputs_keep_images_after_the_pointer(
    memory_service: TruncationService,
) -> None:
    """ToolOutputText items are the text; image items stay attached, in order, after the pointer."""
    image = ToolOutputImage(image_url="https://example.invalid/chart.png")

    @function_tool
    def report() -> list[Any]:
        """A report with a chart."""
        return [ToolOutputText(text=BIG), image]

    seen: dict[str, Any] = {}

    def answer(call: ModelCall) -> ModelStep:
        seen.update(outputs(call))
        return ModelStep(output=[agents_testing.assistant_message("ok")])

    model = ScriptedModel(
        [
            ModelStep(output=[agents_testing.function_call("report", {}, call_id="c1")]),
            ModelStep.respond(answer),
        ]
    )
    run(Agent(name="ops", model=model, tools=[wrap_tool(report, service=memory_service)]))
    text, picture = seen["c1"]
    assert text["type"] == "input_text" and text["text"].startswith("[spillstore]")
    assert picture["type"] == "input_image"
    assert picture["image_url"] == image.image_url


def test_tool_errors_reach_the_model_as_the_sdk_formats_them(
    memory_service: TruncationService,
) -> None:
    """A tool that raises still produces the SDK's own error message, not a pointer."""

    @function_tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    seen: dict[str, Any] = {}

    def answer(call: ModelCall) -> ModelStep:
        seen.update(outputs(call))
        return ModelStep(output=[agents_testing.assistant_message("ok")])

    model = ScriptedModel(
        [
            ModelStep(output=[agents_testing.function_call("broken", {}, call_id="c1")]),
            ModelStep.respond(answer),
        ]
    )
    run(Agent(name="ops", model=model, tools=[wrap_tool(broken, service=memory_service)]))
    assert seen["c1"].startswith("An error occurred while running the tool")
    assert "[spillstore]" not in seen["c1"]


def test_wrapping_twice_caps_once_and_budgets_apply(memory_service: TruncationService) -> None:
    """wrap_tool on a wrapped tool replaces its options; a per-tool budget caps smaller."""
    twice = wrap_tool(
        wrap_tool(fetch_logs, service=memory_service), service=memory_service, max_bytes="4KB"
    )
    seen: dict[str, Any] = {}

    def answer(call: ModelCall) -> ModelStep:
        seen.update(outputs(call))
        return ModelStep(output=[agents_testing.assistant_message("ok")])

    model = ScriptedModel(
        [
            ModelStep(output=[agents_testing.function_call("fetch_logs", {}, call_id="c1")]),
            ModelStep.respond(answer),
        ]
    )
    run(Agent(name="ops", model=model, tools=[twice]))
    assert utf8_size(seen["c1"]) <= 4000
    assert seen["c1"].count("[spillstore]") == 1


def test_spill_tools_have_schemas_and_answer_errors_as_text(memory_store: MemoryStore) -> None:
    """Read, Grep and List are FunctionTools with the spill schemas; bad arguments give text."""
    tools = spill_tools(tools=SpillTools(memory_store))
    assert [t.name for t in tools] == ["read_spill", "grep_spill", "list_spills", "query_spill"]
    assert all(isinstance(t, FunctionTool) for t in tools)
    assert "spill" in tools[0].params_json_schema["properties"]
    assert wrap_tools(tools) == tools  # never capped
    invoke = tools[0].on_invoke_tool
    ctx = ToolContext(context=None, tool_name="read_spill", tool_call_id="c1", tool_arguments="{}")
    answer = asyncio.run(invoke(ctx, json.dumps({"spill": "nope-00000000000000000000"})))
    assert "list_spills" in answer


@function_tool(name_override="read_spill")
def host_read_spill(path: str) -> str:
    """The host's own file reader, unluckily named like a spill tool."""
    return path


def test_a_host_tool_named_like_a_spill_tool_is_refused_where_it_is_wrapped(
    memory_service: TruncationService,
) -> None:
    """The SDK would send the pointers' read_spill calls to either tool: wrap_tools and
    wrap_tool refuse the host's, naming it; spillstore's own spill tools still pass, and
    renaming spillstore's tool makes room for the host's."""
    with pytest.raises(ConfigError, match="own tool named 'read_spill'"):
        wrap_tools([fetch_logs, host_read_spill], service=memory_service)
    with pytest.raises(ConfigError, match="own tool named 'read_spill'"):
        wrap_tool(host_read_spill, service=memory_service)
    with pytest.raises(ConfigError, match="own tool named 'read_spill'"):
        wrap_tool(host_read_spill)  # the default service's names
    ours = spill_tools(memory_service)
    assert wrap_tools([fetch_logs, *ours], service=memory_service)[1:] == ours
    renamed = TruncationService(memory_service.store, read_tool="spill_read")
    wrapped = wrap_tools([host_read_spill, *spill_tools(renamed)], service=renamed)
    assert [t.name for t in wrapped][:2] == ["read_spill", "spill_read"]


def test_missing_sdk_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the SDK, importing the adapter fails with the exact pip install line."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "spillstore.openai_agents")
    with pytest.raises(ImportError, match=re.escape('pip install "spillstore[openai-agents]"')):
        importlib.import_module("spillstore.openai_agents")
