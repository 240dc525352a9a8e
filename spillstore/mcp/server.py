"""The spill tools as MCP tools, and the stdio server that serves only them.

Read/Grep/List (:class:`~spillstore._tools.spill_tools.SpillTools`) become MCP tools with read-only
annotations. Their results are plain text: no ``structured_content`` (a copy of the text
as structured output would double every page), and errors the model should act on are
``is_error`` results, never protocol errors.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from spillstore._content import TextPart, ToolResult
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.stdio import Intercept, stdio_streams

__all__ = ["READ_ONLY", "mcp_result", "serve_stdio", "spill_server", "spill_tool_definitions"]

READ_ONLY = types.ToolAnnotations(
    read_only_hint=True,
    destructive_hint=False,
    idempotent_hint=True,
    open_world_hint=False,
)
"""The spill tools only read saved outputs: read-only, idempotent, closed world."""


def spill_tool_definitions(tools: SpillTools) -> list[types.Tool]:
    """The spill tools as MCP tool definitions (names as ``tools`` was built)."""
    return [
        types.Tool(
            name=schema["name"],
            title=tools.specs[schema["name"]].title,
            description=schema["description"],
            input_schema=schema["input_schema"],
            annotations=READ_ONLY,
        )
        for schema in tools.schemas("anthropic")
    ]


def mcp_result(result: ToolResult) -> types.CallToolResult:
    """A spill tool's result as an MCP result: its text, and nothing structured."""
    content: list[types.ContentBlock] = [
        types.TextContent(text=part.text) for part in result.content if isinstance(part, TextPart)
    ]
    return types.CallToolResult(content=content, is_error=result.is_error)


def spill_server(tools: SpillTools, *, name: str = "spillstore", version: str = "") -> Server[Any]:
    """A low-level MCP server exposing the spill tools of ``tools``.

    Run it with ``server.run(read_stream, write_stream, server.create_initialization_options())``
    or connect to it in-process with ``mcp.Client(server)``.
    """
    definitions = spill_tool_definitions(tools)
    names = {tool.name for tool in definitions}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=definitions)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            known = ", ".join(sorted(names))
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name!r}; known: {known}")],
                is_error=True,
            )
        return mcp_result(await tools.acall(params.name, params.arguments))

    return Server(
        name,
        version=version,
        instructions=(
            "Tools to page, search and list tool outputs that were too large to show "
            "in full and were saved (spilled) instead."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(server: Server[Any], intercept: Intercept | None = None) -> None:
    """Serve ``server`` over this process's stdin/stdout until stdin closes.

    Uses :func:`~spillstore.mcp.stdio.stdio_streams` (no worker thread per message)
    rather than the SDK's ``stdio_server``; ``intercept`` sees each line first.
    """
    async with stdio_streams(intercept) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
