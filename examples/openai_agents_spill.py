"""An OpenAI Agents SDK agent whose tool returns 3 MB: the model gets a pointer, reads the spill.

Shows `spillstore.openai_agents`: `wrap_tools` caps the agent's function tools (the call
id comes from the SDK's ToolContext) and `spill_tools` adds read_spill, grep_spill and
list_spills. The model is the SDK's own `agents.testing.ScriptedModel`, so this runs
offline with no API key; swap in a real model to use it for real.

Run:  pip install "spillstore[openai-agents]"
      python examples/openai_agents_spill.py
"""

from __future__ import annotations

import asyncio
import re
import tempfile

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from spillstore import LocalStore, TruncationService
from spillstore.openai_agents import spill_tools, wrap_tools


@function_tool
def query_orders() -> str:
    """Export every order of the day as CSV."""
    rows = [f"{n},customer-{n % 977},{(n * 37) % 10_000 / 100:.2f},paid" for n in range(80_000)]
    rows[51_234] = "51234,customer-430,99.99,REFUSED"
    return "id,customer,amount,status\n" + "\n".join(rows) + "\n"


def last_output(call: ModelCall) -> str:
    items = [
        i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]
    return str(items[-1]["output"])


def grep_the_spill(call: ModelCall) -> ModelStep:
    pointer = last_output(call)
    print(f"The model received a {len(pointer.encode()):,}-byte pointer:")
    print(pointer.split("\n--- head")[0], end="\n\n")
    spill = re.search(r'spill="([^"]+)"', pointer)
    assert spill is not None
    args = {"pattern": "REFUSED", "spill": spill.group(1)}
    return ModelStep(output=[function_call("grep_spill", args, call_id="call_grep")])


def answer(call: ModelCall) -> ModelStep:
    return ModelStep(output=[assistant_message(f"One order was refused:\n{last_output(call)}")])


async def main() -> None:
    service = TruncationService(LocalStore(tempfile.mkdtemp(prefix="spillstore-agents-")))
    model = ScriptedModel(
        [
            ModelStep(output=[function_call("query_orders", {}, call_id="call_orders")]),
            ModelStep.respond(grep_the_spill),
            ModelStep.respond(answer),
        ]
    )
    agent = Agent(
        name="orders",
        model=model,
        tools=[*wrap_tools([query_orders], service=service), *spill_tools(service)],
    )
    result = await Runner.run(
        agent, "Any refused orders?", run_config=RunConfig(tracing_disabled=True)
    )
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
