"""An upstream MCP server for the proxy tests: big, mixed, failing and slow results.

Built on the SDK's low-level ``Server`` and served over stdio. Run it as
``python tests/mcp/mcp_servers/big.py``; every tool is deterministic.

Tools:

- ``big(size, line_bytes=100, char="x")``: exactly ``size`` UTF-8 bytes of text in lines of
  ``line_bytes`` bytes (the last line may be shorter and has no newline);
- ``echo(text)``: the text back;
- ``mixed(size)``: text, an image, audio, an embedded text resource of ``size`` bytes,
  an embedded blob resource, a resource link, in that order;
- ``structured(size, wrapped=false)``: a tool with an output schema; ``size`` bytes of
  text, and structured content ``{"lines": N, "text": ...}`` (or, with ``wrapped``,
  ``{"result": <the same text>}`` as ``MCPServer`` makes for ``-> str`` tools);
- ``users(count, structured=false)``: the JSON document ``{"total": count, "items":
  [{id, name, email, tags, score}, ...]}`` (:func:`make_users`) as text, or (with
  ``structured``) a one-line text and the document as structured content;
- ``fails(size)``: an ``is_error`` result of ``size`` bytes;
- ``crash(code=3)``: the process exits at once;
- ``sleep(seconds)``: answers after ``seconds``;
- ``freeze()``: blocks the whole process (the event loop too) for 60 s;
- ``progress(steps)``: reports ``steps`` progress notifications, then answers;
- ``add_tool()``: adds a tool ``extra`` and sends ``tools/list_changed``;
- ``touch(uri)``: sends ``notifications/resources/updated`` for ``uri`` only if a client
  subscribed to it (as the spec asks), and says which it did;
- ``log(level, data)``: sends a log message at ``level`` unless it is below the level
  the client set with ``logging/setLevel`` (default: ``debug``, everything).

Resources: ``test://small`` (text) and ``test://big/{size}`` (a template). Prompts:
``greet(name)``.

Options: ``--clash`` adds a tool named ``read_spill`` (to test the proxy's prefix);
``--late-clash NAME`` makes ``add_tool()`` add a tool named NAME instead of ``extra``;
``--http PORT`` serves streamable HTTP on 127.0.0.1:PORT (path ``/mcp``) instead of stdio,
or with ``--sse`` the older HTTP+SSE transport (``/sse``); ``--require-header NAME=VALUE``
then answers 401 to any HTTP request without that header.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 32).decode()
WAV = base64.b64encode(b"RIFF" + b"\0" * 32).decode()
BLOB = base64.b64encode(bytes(range(256))).decode()


def make_text(size: int, line_bytes: int = 100, char: str = "x") -> str:
    """Exactly ``size`` UTF-8 bytes: lines of ``line_bytes`` bytes, numbered at the start."""
    width = len(char.encode())
    per_line = max((line_bytes - 1 - 9) // width, 0)
    line_count = size // line_bytes
    body = "".join(f"{n:08d} {char * per_line}\n" for n in range(line_count))
    rest = size - len(body.encode())
    filler = char * (rest // width) + "." * (rest % width)
    return body + filler


def make_users(count: int) -> dict[str, Any]:
    """A document shaped like a big API listing: ``count`` users, ``user<i>`` by name."""
    items = [
        {
            "id": i,
            "name": f"user{i}",
            "email": f"user{i}@example.com",
            "tags": ["a", "b"],
            "score": i * 0.5,
        }
        for i in range(count)
    ]
    return {"total": count, "items": items}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or []}


SIZE = {"type": "integer", "minimum": 0}
TOOLS = [
    types.Tool(
        name="big",
        description="Text of exactly size bytes.",
        input_schema=_schema(
            {"size": SIZE, "line_bytes": SIZE, "char": {"type": "string"}}, ["size"]
        ),
    ),
    types.Tool(
        name="echo",
        description="Echo the text.",
        input_schema=_schema({"text": {"type": "string"}}, ["text"]),
    ),
    types.Tool(name="mixed", description="Mixed blocks.", input_schema=_schema({"size": SIZE})),
    types.Tool(
        name="users",
        description="A JSON listing of users.",
        input_schema=_schema({"count": SIZE, "structured": {"type": "boolean"}}, ["count"]),
    ),
    types.Tool(
        name="structured",
        description="Structured output.",
        input_schema=_schema({"size": SIZE, "wrapped": {"type": "boolean"}}, ["size"]),
        output_schema={
            "type": "object",
            "properties": {
                "lines": {"type": "integer"},
                "text": {"type": "string"},
                "result": {"type": "string"},
            },
            "additionalProperties": False,
        },
    ),
    types.Tool(name="fails", description="An error.", input_schema=_schema({"size": SIZE})),
    types.Tool(name="crash", description="Exit at once.", input_schema=_schema({"code": SIZE})),
    types.Tool(
        name="sleep",
        description="Answer late.",
        input_schema=_schema({"seconds": {"type": "number"}}),
    ),
    types.Tool(name="freeze", description="Block the process.", input_schema=_schema({})),
    types.Tool(
        name="progress", description="Report progress.", input_schema=_schema({"steps": SIZE})
    ),
    types.Tool(name="add_tool", description="Add a tool.", input_schema=_schema({})),
    types.Tool(
        name="touch",
        description="Notify subscribers of a resource.",
        input_schema=_schema({"uri": {"type": "string"}}, ["uri"]),
    ),
    types.Tool(
        name="log",
        description="Send a log message.",
        input_schema=_schema({"level": {"type": "string"}, "data": {"type": "string"}}),
    ),
]
if "--clash" in sys.argv:
    TOOLS.append(types.Tool(name="read_spill", description="Clashes.", input_schema=_schema({})))
EXTRA = types.Tool(
    name=sys.argv[sys.argv.index("--late-clash") + 1] if "--late-clash" in sys.argv else "extra",
    description="Added later.",
    input_schema=_schema({}),
)
state: dict[str, bool] = {"extra": False}
subscribed: set[str] = set()
LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
log_level = {"level": "debug"}


def text(value: str) -> types.TextContent:
    return types.TextContent(text=value)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[*TOOLS, *([EXTRA] if state["extra"] else [])])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    name = params.name
    if name == "big":
        body = make_text(args["size"], args.get("line_bytes", 100), args.get("char", "x"))
        return types.CallToolResult(content=[text(body)])
    if name == "echo":
        return types.CallToolResult(content=[text(args["text"])])
    if name == "mixed":
        size = args.get("size", 100)
        return types.CallToolResult(
            content=[
                text("mixed result"),
                types.ImageContent(data=PNG, mime_type="image/png"),
                types.AudioContent(data=WAV, mime_type="audio/wav"),
                types.EmbeddedResource(
                    resource=types.TextResourceContents(
                        uri="test://doc", text=make_text(size), mime_type="text/plain"
                    )
                ),
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri="test://blob", blob=BLOB, mime_type="application/octet-stream"
                    )
                ),
                types.ResourceLink(uri="test://small", name="small", mime_type="text/plain"),
            ]
        )
    if name == "structured":
        body = make_text(args["size"])
        structured = (
            {"result": body}
            if args.get("wrapped")
            else {"lines": body.count("\n"), "text": body[:20]}
        )
        return types.CallToolResult(content=[text(body)], structured_content=structured)
    if name == "users":
        document = make_users(args["count"])
        if args.get("structured"):
            return types.CallToolResult(
                content=[text(f"{args['count']} users")], structured_content=document
            )
        return types.CallToolResult(content=[text(json.dumps(document))])
    if name == "fails":
        return types.CallToolResult(content=[text(make_text(args.get("size", 10)))], is_error=True)
    if name == "crash":
        sys.stderr.write("big.py: crashing on request\n")
        sys.stderr.flush()
        os._exit(args.get("code", 3))
    if name == "sleep":
        await anyio.sleep(args.get("seconds", 1))
        return types.CallToolResult(content=[text("slept")])
    if name == "freeze":
        time.sleep(60)  # blocks the event loop: the server answers nothing
        return types.CallToolResult(content=[text("thawed")])
    if name == "progress":
        steps = args.get("steps", 3)
        for step in range(steps):
            await ctx.session.report_progress(step + 1, steps, f"step {step + 1}")
        return types.CallToolResult(content=[text(f"{steps} steps")])
    if name == "add_tool":
        state["extra"] = True
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[text("added")])
    if name == "touch":
        uri = args["uri"]
        if uri not in subscribed:
            return types.CallToolResult(content=[text(f"{uri} is not subscribed")])
        await ctx.session.send_resource_updated(uri)
        return types.CallToolResult(content=[text(f"notified {uri}")])
    if name == "log":
        level = args.get("level", "info")
        if LEVELS.index(level) < LEVELS.index(log_level["level"]):
            return types.CallToolResult(content=[text(f"not logged below {log_level['level']}")])
        await ctx.session.send_log_message(level, args.get("data", ""), logger="big")
        return types.CallToolResult(content=[text("logged")])
    if name in ("extra", "read_spill"):
        return types.CallToolResult(content=[text(f"{name} called")])
    return types.CallToolResult(content=[text(f"unknown tool {name}")], is_error=True)


async def list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri="test://small", name="small", mime_type="text/plain")]
    )


async def list_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(uri_template="test://big/{size}", name="big")]
    )


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    body = "small resource" if uri == "test://small" else make_text(int(uri.rsplit("/", 1)[1]))
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=body)])


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(name="greet", arguments=[types.PromptArgument(name="name", required=True)])
        ]
    )


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    who = (params.arguments or {}).get("name", "you")
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=text(f"Hello, {who}!"))]
    )


async def subscribe(
    ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(
    ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


async def set_level(
    ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
) -> types.EmptyResult:
    log_level["level"] = params.level
    return types.EmptyResult()


with warnings.catch_warnings():  # logging/setLevel is deprecated in 2026-07-28
    warnings.simplefilter("ignore")
    server = Server(
        "big-test-server",
        version="1.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_set_logging_level=set_level,
    )


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read_stream, write_stream, options)


def sse_app() -> Any:
    """The older HTTP+SSE transport: the event stream at ``/sse``, messages at ``/messages/``."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(
            request.scope,
            request.receive,
            request._send,  # the SDK's own sse_app does the same
        ) as (read_stream, write_stream):
            options = server.create_initialization_options(NotificationOptions(tools_changed=True))
            await server.run(read_stream, write_stream, options)
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


def requiring(app: Any, name: str, value: str) -> Any:
    """``app``, answering 401 to every HTTP request that lacks the header ``name: value``."""
    wanted = (name.lower().encode(), value.encode())

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and wanted not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing the header"})
            return
        await app(scope, receive, send)

    return guarded


def main_http(port: int) -> None:
    import uvicorn

    app = sse_app() if "--sse" in sys.argv else server.streamable_http_app(host="127.0.0.1")
    if "--require-header" in sys.argv:
        name, _, value = sys.argv[sys.argv.index("--require-header") + 1].partition("=")
        app = requiring(app, name, value)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if "--http" in sys.argv:
        main_http(int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        anyio.run(main)
