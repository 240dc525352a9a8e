"""What the framework adapters share: the capper per tool, and the spill tools as functions.

The adapters (``spillstore.langchain``, ``spillstore.openai_agents``,
``spillstore.pydantic_ai``) translate between a framework's tool shapes and spillstore's;
everything else lives here once: :class:`ToolCappers` chooses the capper for a tool by
its name, and :func:`spill_functions` describes Read, Grep and List for the framework
to register (name, description, JSON schema and the calls that answer them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spillstore._service.capper import Capper, model_text
from spillstore._service.service import TruncationService

if TYPE_CHECKING:
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["SpillFunction", "ToolCappers", "spill_functions"]

Arguments = Mapping[str, Any] | str | None
"""A spill tool call's raw arguments: a mapping, a JSON object as text, or none."""


class ToolCappers:
    """The cappers a framework adapter applies, chosen by tool name.

    The service's budget by default, a per-tool budget where one is given, and none at
    all for exempt tools and for the spill tools themselves (reading a spill must never
    spill again). Shared by the LangChain middleware and the pydantic-ai capability.

    Args:
        service: the service results go through (default ``TruncationService()``).
        spill_tools: the Read/Grep/List/Query tools (default ``service.spill_tools()``).
        budgets: per-tool inline budgets by tool name (ints or human sizes).
        exempt: tool names whose results pass through untouched.
    """

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        spill_tools: SpillTools | None = None,
        budgets: Mapping[str, int | str] | None = None,
        exempt: Collection[str] = (),
    ) -> None:
        self.service = service if service is not None else TruncationService()
        self.spill_tools = spill_tools if spill_tools is not None else self.service.spill_tools()
        self.exempt = frozenset(exempt) | frozenset(self.spill_tools.names)
        self._default = Capper(self.service)
        self._by_name = {
            name: Capper(self.service, max_bytes=size) for name, size in (budgets or {}).items()
        }

    def for_tool(self, name: str) -> Capper | None:
        """The capper for a tool's results, or None when they pass through untouched."""
        if name in self.exempt:
            return None
        return self._by_name.get(name, self._default)


@dataclass(frozen=True, slots=True)
class SpillFunction:
    """One spill tool (Read, Grep, List or Query) as a framework registers it.

    Attributes:
        name, description: as the model sees them.
        parameters: the JSON schema of the arguments (from spillstore's models).
    """

    tools: SpillTools
    name: str
    description: str
    parameters: dict[str, Any]

    def call(self, arguments: Arguments) -> str:
        """Answer one call: the tool's model-facing text (errors included, never raised)."""
        return model_text(self.tools.call(self.name, arguments))

    async def acall(self, arguments: Arguments) -> str:
        """Async twin of :meth:`call`."""
        return model_text(await self.tools.acall(self.name, arguments))

    def keywords(self) -> Callable[..., str]:
        """:meth:`call` as a function of keyword arguments, named after the tool."""

        def spill_tool(**arguments: Any) -> str:
            return self.call(arguments)

        spill_tool.__name__ = self.name
        return spill_tool

    def akeywords(self) -> Callable[..., Awaitable[str]]:
        """:meth:`acall` as an async function of keyword arguments, named after the tool."""

        async def spill_tool(**arguments: Any) -> str:
            return await self.acall(arguments)

        spill_tool.__name__ = self.name
        return spill_tool


def spill_functions(
    service: TruncationService | None = None, *, tools: SpillTools | None = None
) -> list[SpillFunction]:
    """Read, Grep and List as functions to register with a framework: ``tools``, or
    else the spill tools of ``service`` (default ``TruncationService()``)."""
    if tools is None:
        tools = (service if service is not None else TruncationService()).spill_tools()
    functions = (schema["function"] for schema in tools.schemas("openai"))
    return [
        SpillFunction(tools, function["name"], function["description"], function["parameters"])
        for function in functions
    ]
