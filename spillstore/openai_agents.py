"""OpenAI Agents SDK integration: capped function tools, and Read/Grep/List/Query as function tools.

Needs the OpenAI Agents SDK: ``pip install "spillstore[openai-agents]"``.

Example::

    from agents import Agent, Runner, function_tool
    from spillstore import LocalStore, TruncationService
    from spillstore.openai_agents import spill_tools, wrap_tools

    service = TruncationService(LocalStore())
    agent = Agent(
        name="ops",
        tools=[*wrap_tools([run_shell, fetch_logs], service=service), *spill_tools(service)],
    )

:func:`wrap_tool` replaces a :class:`~agents.FunctionTool`'s ``on_invoke_tool`` with one
that passes the output through the service, naming the call by the
:class:`~agents.ToolContext`'s ``tool_call_id``. Outputs keep their SDK shape: a ``str``
stays a ``str`` (the pointer when cut); ``ToolOutputText`` items (or ``{"type": "text"}``
dicts) are the text, and image and file items stay in order after the pointer; any other
value is measured as the ``str()`` the SDK would send, and replaced by the pointer only
when it is cut. Tools with a declared output schema (``output_type`` or
``output_json_schema``) are left untouched, since a pointer would break their schema.
Errors the SDK turns into messages arrive as short strings; raised errors pass through.

The wrapped tool is a copy: the original keeps working uncapped. Wrapping a wrapped tool
caps once (the new options win). ``FunctionTool.__wrapped__`` (the decorated Python
callable) is not available on the copy; use the original tool for it.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401 - fail early with the install hint
except ImportError as exc:  # pragma: no cover - the test environment has openai-agents
    raise ImportError(
        "spillstore.openai_agents needs the OpenAI Agents SDK: "
        'pip install "spillstore[openai-agents]"'
    ) from exc

import copy
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pydantic
from agents import FunctionTool, Tool, ToolOutputText
from agents.tool import ToolOutputFileContent, ToolOutputImage, ValidToolOutputPydanticModels
from agents.tool_context import ToolContext

from spillstore._errors import ConfigError
from spillstore._service.adapters import SpillFunction, spill_functions
from spillstore._service.capper import Capper
from spillstore._service.flow import Flow, adrive
from spillstore._service.service import TruncationService
from spillstore._tools.args import SPECS
from spillstore._tools.spill_tools import SpillTools

__all__ = ["spill_tools", "wrap_tool", "wrap_tools"]

_MARKER: Final = "__spillstore_openai_agents__"
_STRUCTURED: pydantic.TypeAdapter[ValidToolOutputPydanticModels] = pydantic.TypeAdapter(
    ValidToolOutputPydanticModels
)

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class _Wrapped:
    """Kept on a capping invoker: the invoker it wraps, and how it caps."""

    inner: Invoker
    capper: Capper


def wrap_tool(
    tool: FunctionTool,
    *,
    service: TruncationService | None = None,
    max_bytes: int | str | None = None,
    exempt: bool = False,
) -> FunctionTool:
    """A copy of ``tool`` whose outputs pass through the service.

    Args:
        tool: the function tool (e.g. from ``@function_tool``).
        service: the service; by default ``TruncationService()``, made on first use.
        max_bytes: this tool's inline budget (an int or a size such as ``"20KB"``).
        exempt: pass this tool's outputs through untouched.

    Raises:
        ConfigError: ``tool`` is not a ``FunctionTool``, or a bad override.
    """
    if not isinstance(tool, FunctionTool):
        raise ConfigError(f"wrap_tool needs an agents FunctionTool; got {type(tool).__name__}")
    _refuse_shadowing(tool, _spill_names(service))
    capper = Capper(service, max_bytes=max_bytes, exempt=exempt)
    wrapped = copy.copy(tool)
    inner: Invoker = wrapped.on_invoke_tool
    already = getattr(inner, _MARKER, None)
    if isinstance(already, _Wrapped):
        inner = already.inner
    typed = tool.output_json_schema is not None or tool._output_type_adapter is not None

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> Any:
        output = await inner(ctx, arguments)
        if typed:
            return output
        name = getattr(ctx, "tool_name", None) or tool.name
        return await adrive(_output_flow(capper, output, name, ctx.tool_call_id))

    setattr(on_invoke_tool, _MARKER, _Wrapped(inner, capper))
    wrapped.on_invoke_tool = on_invoke_tool
    return wrapped


def wrap_tools(
    tools: Iterable[Tool],
    *,
    service: TruncationService | None = None,
    budgets: Mapping[str, int | str] | None = None,
    exempt: Collection[str] = (),
) -> list[Tool]:
    """Wrap every function tool of ``tools`` (others, such as hosted tools, are kept as is).

    Args:
        tools: the agent's tools.
        service: the service; by default one ``TruncationService()`` shared by all.
        budgets: per-tool inline budgets by tool name.
        exempt: names of tools whose outputs pass through untouched.
    """
    shared = service if service is not None else TruncationService()
    budgets = dict(budgets or {})
    out: list[Tool] = []
    names = _spill_names(shared)
    for tool in tools:
        _refuse_shadowing(tool, names)
        if isinstance(tool, FunctionTool) and not getattr(tool, _SPILL_TOOL, False):
            out.append(
                wrap_tool(
                    tool,
                    service=shared,
                    max_bytes=budgets.get(tool.name),
                    exempt=tool.name in exempt,
                )
            )
        else:
            out.append(tool)
    return out


_SPILL_TOOL: Final = "_spillstore_spill_tool"


def _spill_names(service: TruncationService | None) -> frozenset[str]:
    """The names the pointers of ``service`` tell the model to call (``None``: the
    default service's, which are the tools' default names)."""
    if service is None:
        return frozenset(spec.default_name for spec in SPECS)
    return frozenset(service.spill_tools().specs)


def _refuse_shadowing(tool: Tool, names: frozenset[str]) -> None:
    """Refuse a host tool named like a spill tool (one of ``names``).

    The SDK does not check tool names: with two tools of one name, the model's call
    goes to whichever the SDK finds first, so a host's ``read_spill`` would silently
    take every call the pointers ask for. spillstore sees the host's tools here, where
    they are wrapped, so it refuses then, not in the middle of a run.

    Raises:
        ConfigError: naming the tool and what to do.
    """
    name = getattr(tool, "name", None)
    if name in names and not getattr(tool, _SPILL_TOOL, False):
        raise ConfigError(
            f"the agent has its own tool named {name!r}, the name of a spill tool that the"
            " pointers tell the model to call (the SDK would send those calls to either):"
            " rename that tool, or give spillstore's another name"
            " (TruncationService(..., read_tool=...), and spill_tools(service) follows)"
        )


def spill_tools(
    service: TruncationService | None = None, *, tools: SpillTools | None = None
) -> list[FunctionTool]:
    """Read, Grep and List as function tools (their outputs are never capped).

    Args:
        service: the service whose store and session the tools read (default
            ``TruncationService()``); ignored when ``tools`` is given.
        tools: the spill tools to expose (their names are the tool names).
    """
    out: list[FunctionTool] = []
    for function in spill_functions(service, tools=tools):
        tool = FunctionTool(
            name=function.name,
            description=function.description,
            params_json_schema=function.parameters,
            on_invoke_tool=_spill_invoker(function),
            strict_json_schema=False,
        )
        setattr(tool, _SPILL_TOOL, True)
        out.append(tool)
    return out


def _spill_invoker(function: SpillFunction) -> Invoker:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        return await function.acall(arguments or None)

    return invoke


# --------------------------------------------------------------------------- outputs


def _structured(item: Any) -> Any:
    """``item`` as an SDK structured output model, or None (as the SDK decides)."""
    if isinstance(item, ToolOutputText | ToolOutputImage | ToolOutputFileContent):
        return item
    if isinstance(item, dict) and "type" in item:
        try:
            return _STRUCTURED.validate_python(item)
        except pydantic.ValidationError:
            return None
    return None


def _text_of(item: Any) -> str | None:
    model = _structured(item)
    return model.text if isinstance(model, ToolOutputText) else None


def _make_text(text: str) -> ToolOutputText:
    return ToolOutputText(text=text)


def _output_flow(capper: Capper, output: Any, tool_name: str, tool_call_id: str) -> Flow[Any]:
    """Cap one tool output, keeping the shape the SDK understands (see the module)."""
    if isinstance(output, str):
        return (
            yield from capper.value_flow(output, tool_name=tool_name, tool_call_id=tool_call_id)
        )
    items: list[Any] | None = None
    if isinstance(output, list | tuple) and output and all(_structured(i) for i in output):
        items = list(output)
    elif _structured(output) is not None:
        items = [output]
    if items is not None:
        capped = yield from capper.items_flow(
            items,
            text_of=_text_of,
            make_text=_make_text,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
        )
        return output if capped is None else capped
    text = str(output)
    return (
        yield from capper.text_flow(output, text, tool_name=tool_name, tool_call_id=tool_call_id)
    )
