"""A LangChain agent whose tool returns 3 MB: the model gets a pointer, then reads the spill.

Shows `spillstore.langchain.SpillMiddleware`: agent middleware (`wrap_tool_call`) that
caps every tool result and registers read_spill, grep_spill and list_spills with the
agent. The chat model is LangChain's `GenericFakeChatModel`, scripted, so this runs
offline with no API key; pass a real chat model to `create_agent` to use it for real.
(`spillstore.langchain.wrap_tool` wraps a single `BaseTool` instead.)

Run:  pip install "spillstore[langchain]"
      python examples/langchain_spill.py
"""

from __future__ import annotations

import re
import tempfile
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from spillstore import LocalStore, TruncationService
from spillstore.langchain import SpillMiddleware


class ScriptedChatModel(GenericFakeChatModel):
    """The fake chat model, answering from the conversation so far."""

    messages: Any = iter(())

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=respond(messages))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self


def respond(messages: list[BaseMessage]) -> AIMessage:
    results = [m for m in messages if isinstance(m, ToolMessage)]
    if not results:
        return AIMessage("", tool_calls=[{"name": "disk_usage", "args": {}, "id": "call_du"}])
    if len(results) == 1:
        pointer = str(results[0].content)
        print(f"The model received a {len(pointer.encode()):,}-byte pointer:")
        print(pointer.split("\n--- head", maxsplit=1)[0], end="\n\n")
        spill = re.search(r'spill="([^"]+)"', pointer)
        assert spill is not None
        args = {"pattern": r"^[0-9]{3,}G", "spill": spill.group(1)}
        return AIMessage("", tool_calls=[{"name": "grep_spill", "args": args, "id": "call_grep"}])
    return AIMessage(f"The biggest directories:\n{results[1].content}")


@tool
def disk_usage() -> str:
    """Disk usage of every directory, like `du -h`."""
    sizes = [f"{(n * 7) % 900}M\t/data/projects/p{n:06d}" for n in range(100_000)]
    sizes[66_000] = "412G\t/data/projects/p066000/checkpoints"
    return "\n".join(sizes) + "\n"


def main() -> None:
    service = TruncationService(LocalStore(tempfile.mkdtemp(prefix="spillstore-langchain-")))
    agent = create_agent(
        ScriptedChatModel(), tools=[disk_usage], middleware=[SpillMiddleware(service)]
    )
    result = agent.invoke({"messages": [HumanMessage("What is filling the disk?")]})
    print(result["messages"][-1].content)


if __name__ == "__main__":
    main()
