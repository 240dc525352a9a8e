"""A pydantic-ai agent whose tool returns 3 MB: the model gets a pointer, then reads the spill.

Shows `spillstore.pydantic_ai.SpillCapability`: one capability caps every tool result
(an `after_tool_execute` hook) and registers read_spill, grep_spill and list_spills.
The model is pydantic-ai's own `FunctionModel`, so this runs offline with no API key;
pass a real model name (e.g. "openai:gpt-5") to use it for real.

Run:  pip install "spillstore[pydantic-ai]"
      python examples/pydantic_ai_spill.py
"""

from __future__ import annotations

import re
import tempfile

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from spillstore import LocalStore, TruncationService
from spillstore.pydantic_ai import SpillCapability


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A scripted model: fetch the trace, read the spill's last lines, answer."""
    returns = tool_returns(messages)
    if not returns:
        return ModelResponse(parts=[ToolCallPart("fetch_trace", {}, tool_call_id="call_trace")])
    if len(returns) == 1:
        pointer = returns[0].model_response_str()
        print(f"The model received a {len(pointer.encode()):,}-byte pointer:")
        print(pointer.split("\n--- head")[0], end="\n\n")
        spill = re.search(r'spill="([^"]+)"', pointer)
        assert spill is not None
        args = {"spill": spill.group(1), "offset": -3, "limit": 3}
        return ModelResponse(parts=[ToolCallPart("read_spill", args, tool_call_id="call_read")])
    return ModelResponse(
        parts=[TextPart(f"The trace ends with:\n{returns[1].model_response_str()}")]
    )


def main() -> None:
    service = TruncationService(LocalStore(tempfile.mkdtemp(prefix="spillstore-pydantic-ai-")))
    agent = Agent(FunctionModel(model), capabilities=[SpillCapability(service)])

    @agent.tool_plain
    def fetch_trace() -> str:
        """Fetch the request trace."""
        spans = [f"span {i:06d} db.query took {i % 13} ms" for i in range(90_000)]
        return "\n".join([*spans, "span 090000 http.response status=504 (upstream timeout)"]) + "\n"

    print(agent.run_sync("Why did the request fail?").output)


if __name__ == "__main__":
    main()
