"""pydantic-ai integration: a capability that caps tool results and adds Read/Grep/List/Query.

Needs pydantic-ai (the slim package is enough): ``pip install "spillstore[pydantic-ai]"``.

Example::

    from pydantic_ai import Agent
    from spillstore import LocalStore, TruncationService
    from spillstore.pydantic_ai import SpillCapability

    service = TruncationService(LocalStore())
    agent = Agent("openai:gpt-5", tools=[run_shell], capabilities=[SpillCapability(service)])

:class:`SpillCapability` hooks ``after_tool_execute``: every tool's return value passes
through the service, named by the ``ToolCallPart``'s ``tool_call_id``, before pydantic-ai
turns it into a ``ToolReturnPart``. The value keeps its shape where the model would see
text: a ``str`` stays a ``str`` (the pointer when cut); a ``ToolReturn`` keeps its
``content``, ``metadata`` and ``tools`` with its ``return_value`` capped; multimodal
files (``BinaryContent``, ``ImageUrl``, ...) stay attached, after the pointer; any other
value (a dict, a model, a list) is measured as the JSON text pydantic-ai would send, and
replaced by the pointer (a ``str``) only when it is cut. Exceptions, ``ModelRetry`` and
deferrals never reach the hook, so they pass through untouched.

The capability also registers ``read_spill``, ``grep_spill``, ``list_spills`` and
``query_spill`` (their
results are never capped; errors the model should act on are plain text results).
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401 - fail early with the install hint
except ImportError as exc:  # pragma: no cover - the test environment has pydantic-ai
    raise ImportError(
        'spillstore.pydantic_ai needs pydantic-ai: pip install "spillstore[pydantic-ai]"'
    ) from exc

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic_ai import FunctionToolset, RunContext, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ToolCallPart, ToolReturn, is_multi_modal_content, tool_return_ta
from pydantic_ai.tools import ToolDefinition

from spillstore._service.adapters import ToolCappers, spill_functions
from spillstore._service.capper import Capper
from spillstore._service.flow import Flow, adrive
from spillstore._service.service import TruncationService
from spillstore._tools.spill_tools import SpillTools

__all__ = ["SpillCapability", "spill_toolset"]


def spill_toolset(tools: SpillTools) -> FunctionToolset[Any]:
    """Read, Grep and List as a pydantic-ai toolset (schemas from spillstore's models)."""
    return FunctionToolset(
        [
            Tool.from_schema(
                function.akeywords(),
                name=function.name,
                description=function.description,
                json_schema=function.parameters,
            )
            for function in spill_functions(tools=tools)
        ]
    )


@dataclass(init=False)
class SpillCapability(AbstractCapability[Any]):
    """Caps every tool result of an agent, and gives the model Read, Grep and List.

    Args:
        service: the service; by default ``TruncationService()`` (made now, so the
            environment is read when the capability is built).
        spill_tools: the spill tools to register (default: over the service's store
            and session); their names are exempt from capping.
        include_spill_tools: register Read/Grep/List/Query (turn off when the agent already
            has them, e.g. from spillstore's MCP server).
        budgets: per-tool inline budgets by tool name (ints or sizes such as ``"20KB"``).
        exempt: names of tools whose results pass through untouched.

    Raises:
        ConfigError: a bad budget or service.
    """

    service: TruncationService
    spill_tools: SpillTools
    include_spill_tools: bool
    exempt: frozenset[str]

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        spill_tools: SpillTools | None = None,
        include_spill_tools: bool = True,
        budgets: Mapping[str, int | str] | None = None,
        exempt: Collection[str] = (),
    ) -> None:
        self._cappers = ToolCappers(
            service, spill_tools=spill_tools, budgets=budgets, exempt=exempt
        )
        self.service = self._cappers.service
        self.spill_tools = self._cappers.spill_tools
        self.exempt = self._cappers.exempt
        self.include_spill_tools = include_spill_tools

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not built from agent specs: it holds a service and a store."""
        return None

    def get_toolset(self) -> FunctionToolset[Any] | None:
        """The Read/Grep/List/Query toolset, unless ``include_spill_tools`` is off."""
        return spill_toolset(self.spill_tools) if self.include_spill_tools else None

    async def after_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        result: Any,
    ) -> Any:
        """Pass the tool's return value through the service (see the module docstring)."""
        capper = self._cappers.for_tool(call.tool_name)
        if capper is None:
            return result
        return await adrive(_value_flow(capper, result, call.tool_name, call.tool_call_id))


def _json_text(value: Any) -> str:
    """The text pydantic-ai sends for a non-``str`` value (its JSON; a JSON string unquoted)."""
    dumped = tool_return_ta.dump_json(value, by_alias=True)
    if dumped.startswith(b'"'):
        text: str = pydantic_core.from_json(dumped)
        return text
    return dumped.decode()


def _value_flow(capper: Capper, value: Any, tool_name: str, tool_call_id: str) -> Flow[Any]:
    """Cap a tool's return value where the model would see text (see the module)."""
    if isinstance(value, ToolReturn):
        inner = yield from _value_flow(capper, value.return_value, tool_name, tool_call_id)
        return (
            value if inner is value.return_value else dataclasses.replace(value, return_value=inner)
        )
    if isinstance(value, str):
        return (yield from capper.value_flow(value, tool_name=tool_name, tool_call_id=tool_call_id))
    if value is None or is_multi_modal_content(value):
        return value
    if isinstance(value, list | tuple):
        files = [item for item in value if is_multi_modal_content(item)]
        data = [item for item in value if not is_multi_modal_content(item)]
        if not data:
            return value
        if files:  # pydantic-ai sends the data without the files (one item unwrapped)
            shown = data[0] if len(data) == 1 else data
            text = shown if isinstance(shown, str) else _json_text(shown)
            capped = yield from capper.items_flow(
                [text, *files],
                text_of=lambda item: item if isinstance(item, str) else None,
                make_text=str,
                tool_name=tool_name,
                tool_call_id=tool_call_id,
            )
            return value if capped is None else capped
    text = _json_text(value)
    return (
        yield from capper.text_flow(value, text, tool_name=tool_name, tool_call_id=tool_call_id)
    )
