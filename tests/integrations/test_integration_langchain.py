"""spillstore.langchain: LangChain agent loops with a fake chat model get pointers and spills."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool

from spillstore import ConfigError, TruncationService
from spillstore.langchain import SpillMiddleware, SpillTool, spill_tools, wrap_tool
from spillstore.text import utf8_size

BIG = "".join(f"{i:06d} | GET /api/items/{i % 500} 200 {i % 89}ms\n" for i in range(90_000))
"""About 3.4 MB of access log."""

SPILL = re.compile(r'spill="([^"]+)"')


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's generic fake chat model, answering from the conversation so far."""

    responder: Callable[[list[BaseMessage]], AIMessage]
    messages: Any = iter(())

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.responder(messages))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


@tool
def access_log() -> str:
    """The web server's access log."""
    return BIG


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def reader(seen: dict[str, str]) -> Callable[[list[BaseMessage]], AIMessage]:
    """Call access_log, read the spill its pointer names at byte 3,000,000, then stop."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
        if "call_log" not in results:
            return call("access_log", "call_log")
        if "call_read" not in results:
            pointer = results["call_log"].content
            assert isinstance(pointer, str)
            seen["pointer"] = pointer
            spill = SPILL.search(pointer)
            assert spill is not None, pointer
            return call(
                "read_spill",
                "call_read",
                spill=spill.group(1),
                byte_offset=3_000_000,
                max_bytes=5000,
            )
        page = results["call_read"].content
        assert isinstance(page, str)
        seen["page"] = page
        return AIMessage(content="all requests succeeded")

    return respond


def check_read_back(seen: dict[str, str], service: TruncationService) -> None:
    assert utf8_size(seen["pointer"]) <= service.settings.max_bytes
    assert "tool access_log (call call_log)" in seen["pointer"]
    body = seen["page"].split("\n", 1)[1].rsplit("\nnext: ", 1)[0]
    assert body == BIG[3_000_000:3_005_000]


def test_middleware_pointer_then_read_spill_returns_the_exact_bytes(
    memory_service: TruncationService,
) -> None:
    """With SpillMiddleware, a 3.4 MB result becomes a pointer and read_spill gets exact bytes."""
    seen: dict[str, str] = {}
    agent = create_agent(
        ScriptedChatModel(responder=reader(seen)),
        tools=[access_log],
        middleware=[SpillMiddleware(memory_service)],
    )
    result = agent.invoke({"messages": [HumanMessage("any errors?")]})
    assert result["messages"][-1].content == "all requests succeeded"
    check_read_back(seen, memory_service)


def test_middleware_async_loop(memory_service: TruncationService) -> None:
    """The async agent loop goes through awrap_tool_call with the same result."""
    seen: dict[str, str] = {}
    agent = create_agent(
        ScriptedChatModel(responder=reader(seen)),
        tools=[access_log],
        middleware=[SpillMiddleware(memory_service)],
    )
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("any errors?")]}))
    check_read_back(seen, memory_service)


def test_wrapped_base_tool_in_a_plain_tool_loop(memory_service: TruncationService) -> None:
    """wrap_tool caps a BaseTool on its own, with the spill tools given as ordinary tools."""
    seen: dict[str, str] = {}
    wrapped = wrap_tool(access_log, service=memory_service)
    assert isinstance(wrapped, SpillTool)
    assert (wrapped.name, wrapped.description) == (access_log.name, access_log.description)
    agent = create_agent(
        ScriptedChatModel(responder=reader(seen)), tools=[wrapped, *spill_tools(memory_service)]
    )
    agent.invoke({"messages": [HumanMessage("any errors?")]})
    check_read_back(seen, memory_service)


def test_wrapped_tool_keeps_injected_arguments_and_status(
    memory_service: TruncationService,
) -> None:
    """Injected arguments still reach the tool; the message keeps its status and artifact."""

    @tool(response_format="content_and_artifact")
    def dump(
        query: str, tool_call_id: Annotated[str, InjectedToolCallId]
    ) -> tuple[str, dict[str, str]]:
        """Dump rows."""
        return BIG, {"call": tool_call_id, "query": query}

    wrapped = wrap_tool(dump, service=memory_service, max_bytes="4KB")
    message = wrapped.invoke(
        {"type": "tool_call", "name": "dump", "args": {"query": "all"}, "id": "call_7"}
    )
    assert isinstance(message, ToolMessage)
    assert message.tool_call_id == "call_7" and message.status == "success"
    assert message.artifact == {"call": "call_7", "query": "all"}
    assert isinstance(message.content, str) and utf8_size(message.content) <= 4000
    assert "(call call_7)" in message.content
    assert "query" in wrapped.tool_call_schema.model_json_schema()["properties"]  # type: ignore[union-attr]


def test_direct_calls_and_small_outputs(memory_service: TruncationService) -> None:
    """A direct call caps the raw value; a small output passes through unchanged."""

    @tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    wrapped = wrap_tool(echo, service=memory_service)
    assert wrapped.invoke({"text": "hi"}) == "hi"
    raw = wrapped.invoke({"text": BIG})
    assert raw.startswith("[spillstore]") and "(call unknown)" in raw
    again = wrap_tool(wrapped, service=memory_service, exempt=True)
    assert again.wrapped is echo
    assert again.invoke({"text": BIG}) == BIG


def test_content_blocks_keep_images(memory_service: TruncationService) -> None:
    """A list of content blocks keeps its image block after the pointer's text block."""
    image = {"type": "image", "url": "https://example.invalid/chart.png"}

    @tool
    def report() -> list[dict[str, str]]:
        """A report with a chart."""
        return [{"type": "text", "text": BIG}, image]

    message = wrap_tool(report, service=memory_service).invoke(
        {"type": "tool_call", "name": "report", "args": {}, "id": "c1"}
    )
    assert isinstance(message.content, list)
    text, picture = message.content
    assert isinstance(text, dict) and text["text"].startswith("[spillstore]")
    assert picture == image


def test_tool_errors_are_untouched(memory_service: TruncationService) -> None:
    """An exception from the tool propagates unchanged through the wrapper."""

    @tool
    def broken() -> str:
        """Always fails."""
        raise LookupError("no such index")

    with pytest.raises(LookupError, match="no such index"):
        wrap_tool(broken, service=memory_service).invoke({})
    with pytest.raises(ConfigError):
        wrap_tool("not a tool", service=memory_service)  # type: ignore[arg-type]


def test_middleware_budgets_and_exempt(memory_service: TruncationService) -> None:
    """Per-tool budgets and exempt names apply inside the agent loop."""
    results: dict[str, str] = {}

    def respond(messages: list[BaseMessage]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        if not done:
            return AIMessage(
                content="",
                tool_calls=[
                    {"name": "access_log", "args": {}, "id": "c1"},
                    {"name": "raw_log", "args": {}, "id": "c2"},
                ],
            )
        results.update({m.tool_call_id: str(m.content) for m in done})
        return AIMessage(content="ok")

    @tool
    def raw_log() -> str:
        """The raw log."""
        return BIG

    agent = create_agent(
        ScriptedChatModel(responder=respond),
        tools=[access_log, raw_log],
        middleware=[
            SpillMiddleware(memory_service, budgets={"access_log": 3000}, exempt={"raw_log"})
        ],
    )
    agent.invoke({"messages": [HumanMessage("go")]})
    assert utf8_size(results["c1"]) <= 3000
    assert results["c2"] == BIG


def test_an_agent_tool_taking_a_spill_tool_name_is_refused(
    memory_service: TruncationService,
) -> None:
    """create_agent keys tools by name: a tool of the agent called ``read_spill`` would
    silently replace the middleware's, so every pointer would send the model to it."""

    @tool
    def read_spill(path: str) -> str:
        """Read a file (the host's own tool)."""
        return "the host's file"

    def respond(messages: list[BaseMessage]) -> AIMessage:
        return call("read_spill", "c1", path="x")

    agent = create_agent(
        ScriptedChatModel(responder=respond),
        tools=[access_log, read_spill],
        middleware=[SpillMiddleware(memory_service)],
    )
    with pytest.raises(ConfigError, match="own tool named 'read_spill'"):
        agent.invoke({"messages": [HumanMessage("go")]})
    with pytest.raises(ConfigError, match="own tool named 'read_spill'"):
        asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))

    # renamed through the service, both tools live side by side
    renamed = TruncationService(memory_service.store, read_tool="read_output")
    seen: list[str] = []

    def respond_renamed(messages: list[BaseMessage]) -> AIMessage:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return call("read_spill", "c1", path="x")
        seen.append(str(results[-1].content))
        return AIMessage(content="ok")

    agent = create_agent(
        ScriptedChatModel(responder=respond_renamed),
        tools=[read_spill],
        middleware=[SpillMiddleware(renamed)],
    )
    agent.invoke({"messages": [HumanMessage("go")]})
    assert seen == ["the host's file"]


def test_missing_framework_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without LangChain, importing the adapter fails with the exact pip install line."""
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "spillstore.langchain")
    with pytest.raises(ImportError, match=re.escape('pip install "spillstore[langchain]"')):
        importlib.import_module("spillstore.langchain")
