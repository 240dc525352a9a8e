"""LangChain integration: agent middleware, a ``BaseTool`` wrapper, and Read/Grep/List/Query tools.

Needs LangChain 1.x (``langchain-core``, and ``langchain`` for agent middleware):
``pip install "spillstore[langchain]"``.

Example::

    from langchain.agents import create_agent
    from spillstore import LocalStore, TruncationService
    from spillstore.langchain import SpillMiddleware

    service = TruncationService(LocalStore())
    agent = create_agent(model, tools=[run_shell], middleware=[SpillMiddleware(service)])

:class:`SpillMiddleware` implements ``wrap_tool_call`` (and ``awrap_tool_call``): every
``ToolMessage`` a tool produces passes through the service, named by its
``tool_call_id``, and the middleware registers ``read_spill``, ``grep_spill``,
``list_spills`` and ``query_spill`` with the agent. :func:`wrap_tool` wraps one
``BaseTool`` instead, for graphs built by hand (``ToolNode``) or tools called directly.

Content keeps its shape: a ``str`` stays a ``str`` (the pointer when cut); a list of
content blocks keeps its non-text blocks (images, files) in order after the pointer,
text blocks being the output. ``status``, ``artifact``, the name and the call id are
kept. ``Command`` results (a tool updating graph state) pass through untouched, as do
exceptions. A direct call without a tool call id (``tool.invoke({"x": 1})``) caps the
raw value as :func:`spillstore.wrap` does, with the call id ``"unknown"``.
"""

from __future__ import annotations

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
except ImportError as exc:  # pragma: no cover - the test environment has langchain
    raise ImportError(
        'spillstore.langchain needs LangChain: pip install "spillstore[langchain]"'
    ) from exc

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, Final

from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command
from pydantic import ConfigDict, PrivateAttr

from spillstore._errors import ConfigError
from spillstore._service.adapters import ToolCappers, spill_functions
from spillstore._service.capper import Capper
from spillstore._service.flow import Flow, adrive, drive
from spillstore._service.service import TruncationService
from spillstore._service.wrap import UNKNOWN_CALL_ID
from spillstore._tools.spill_tools import SpillTools

__all__ = ["SpillMiddleware", "SpillTool", "spill_tools", "wrap_tool"]

_TEXT: Final = "text"


def spill_tools(
    service: TruncationService | None = None, *, tools: SpillTools | None = None
) -> list[BaseTool]:
    """Read, Grep and List as LangChain tools (schemas from spillstore's models).

    Args:
        service: the service whose store and session the tools read (default
            ``TruncationService()``); ignored when ``tools`` is given.
        tools: the spill tools to expose (their names are the tool names).
    """
    return [
        StructuredTool.from_function(
            func=function.keywords(),
            coroutine=function.akeywords(),
            name=function.name,
            description=function.description,
            args_schema=function.parameters,
        )
        for function in spill_functions(service, tools=tools)
    ]


_spill_tool_list = spill_tools
"""The function under another name, for parameters called ``spill_tools``."""


# --------------------------------------------------------------------------- content


def _text_of(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping) and block.get("type") == _TEXT:
        text = block.get(_TEXT)
        return text if isinstance(text, str) else None
    return None


def _text_block(text: str) -> dict[str, str]:
    return {"type": _TEXT, _TEXT: text}


def _message_flow(capper: Capper, message: ToolMessage, tool_name: str) -> Flow[ToolMessage]:
    """A tool message with its content capped: text as text, blocks as blocks."""
    content = message.content
    call_id = message.tool_call_id or UNKNOWN_CALL_ID
    name = message.name or tool_name
    if isinstance(content, str):
        capped: Any = yield from capper.value_flow(content, tool_name=name, tool_call_id=call_id)
        changed = capped is not content
    else:
        capped = yield from capper.items_flow(
            content, text_of=_text_of, make_text=_text_block, tool_name=name, tool_call_id=call_id
        )
        changed = capped is not None
    return message.model_copy(update={"content": capped}) if changed else message


def _output_flow(capper: Capper, output: Any, tool_name: str) -> Flow[Any]:
    """A tool's output capped: a message by its call id, a raw value as ``wrap`` caps it."""
    if isinstance(output, ToolMessage):
        return (yield from _message_flow(capper, output, tool_name))
    if isinstance(output, Command):
        return output
    return (yield from capper.value_flow(output, tool_name=tool_name, tool_call_id=UNKNOWN_CALL_ID))


# --------------------------------------------------------------------------- middleware


class SpillMiddleware(AgentMiddleware):
    """Agent middleware: caps every tool result and adds Read/Grep/List/Query to the agent.

    Args:
        service: the service; by default ``TruncationService()`` (made now).
        spill_tools: the spill tools to register (default: over the service's store
            and session); their names are exempt from capping.
        include_spill_tools: register Read/Grep/List/Query with the agent.
        budgets: per-tool inline budgets by tool name (ints or sizes such as ``"20KB"``).
        exempt: names of tools whose results pass through untouched.

    Raises:
        ConfigError: a bad budget.
    """

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        spill_tools: SpillTools | None = None,
        include_spill_tools: bool = True,
        budgets: Mapping[str, int | str] | None = None,
        exempt: Collection[str] = (),
    ) -> None:
        super().__init__()
        self._cappers = ToolCappers(
            service, spill_tools=spill_tools, budgets=budgets, exempt=exempt
        )
        self.service = self._cappers.service
        self.spill = self._cappers.spill_tools
        self.exempt = self._cappers.exempt
        self.tools = _spill_tool_list(tools=self.spill) if include_spill_tools else []

    def _check_tools(self, tools: Iterable[object]) -> None:
        """Refuse an agent where another tool took the name of one this middleware added.

        ``create_agent`` keys its tools by name, so a tool of the agent called
        ``read_spill`` silently replaces ours, and every pointer would send the model to
        it. Raises :class:`~spillstore.ConfigError` naming the tool, on the first model
        call.
        """
        ours = {tool.name: tool for tool in self.tools}
        for tool in tools:
            name = getattr(tool, "name", None)
            if isinstance(name, str) and name in ours and tool is not ours[name]:
                raise ConfigError(
                    f"the agent has its own tool named {name!r}, which replaces the one "
                    f"SpillMiddleware adds (the pointers tell the model to call it): rename "
                    f"that tool, or give spillstore's another name "
                    f"(TruncationService(..., read_tool=...), and its tools follow)"
                )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Check that the agent's tools are the ones registered, then call the model."""
        self._check_tools(request.tools)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of :meth:`wrap_model_call`."""
        self._check_tools(request.tools)
        return await handler(request)

    def _capping(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> Flow[ToolMessage | Command[Any]]:
        name = request.tool_call["name"]
        capper = self._cappers.for_tool(name)
        if capper is None or not isinstance(result, ToolMessage):
            return result
        return (yield from _message_flow(capper, result, name))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool, then pass its ``ToolMessage`` through the service."""
        return drive(self._capping(request, handler(request)))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async twin of :meth:`wrap_tool_call`."""
        return await adrive(self._capping(request, await handler(request)))


# --------------------------------------------------------------------------- BaseTool wrapper


class SpillTool(BaseTool):
    """A ``BaseTool`` that runs another one and passes its output through the service.

    It has the wrapped tool's name, description, argument schema and ``return_direct``;
    the wrapped tool does the parsing, callbacks and error handling. Build it with
    :func:`wrap_tool`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    wrapped: BaseTool
    """The tool that does the work."""
    func: Callable[..., Any] | None = None
    """The wrapped tool's function, if it has one (LangGraph reads injected arguments here)."""
    coroutine: Callable[..., Awaitable[Any]] | None = None
    """The wrapped tool's coroutine, if it has one."""

    _capper: Capper = PrivateAttr()

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("SpillTool.run delegates to the wrapped tool")  # pragma: no cover

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the wrapped tool (with the same arguments), then cap its output."""
        return drive(_output_flow(self._capper, self.wrapped.run(*args, **kwargs), self.name))

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        """Async twin of :meth:`run`."""
        output = await self.wrapped.arun(*args, **kwargs)
        return await adrive(_output_flow(self._capper, output, self.name))


def wrap_tool(
    tool: BaseTool,
    *,
    service: TruncationService | None = None,
    max_bytes: int | str | None = None,
    exempt: bool = False,
) -> SpillTool:
    """Wrap a LangChain tool so its output passes through the service.

    Wrapping a :class:`SpillTool` again wraps the original tool (it caps once; the new
    options win).

    Args:
        tool: any ``BaseTool`` (``@tool`` functions, ``StructuredTool``, subclasses).
        service: the service; by default ``TruncationService()``, made on first use.
        max_bytes: this tool's inline budget (an int or a size such as ``"20KB"``).
        exempt: pass this tool's outputs through untouched.

    Raises:
        ConfigError: ``tool`` is not a ``BaseTool``, or a bad override.
    """
    if not isinstance(tool, BaseTool):
        raise ConfigError(f"wrap_tool needs a LangChain BaseTool; got {type(tool).__name__}")
    capper = Capper(service, max_bytes=max_bytes, exempt=exempt)
    inner = tool.wrapped if isinstance(tool, SpillTool) else tool
    wrapped = SpillTool(
        name=inner.name,
        description=inner.description,
        args_schema=inner.args_schema,
        return_direct=inner.return_direct,
        wrapped=inner,
        func=getattr(inner, "func", None),
        coroutine=getattr(inner, "coroutine", None),
    )
    wrapped._capper = capper
    return wrapped
