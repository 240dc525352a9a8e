"""The MCP proxy: any MCP server behind the cap, plus the spill tools.

:class:`SpillProxy` connects to one upstream server (a subprocess over stdio, read with
the linear :class:`~spillstore.mcp.transport.StdioTransport`, or a remote URL: streamable
HTTP or SSE, with headers)
and serves, downstream, a low-level SDK ``Server`` that:

- lists the upstream's tools, without their ``output_schema`` (any result may be
  rewritten; see :mod:`spillstore.mcp.convert` for structured content), plus
  ``read_spill``/``grep_spill``/``list_spills``/``query_spill`` (all prefixed when an upstream
  tool already has one of their names);
- passes every upstream ``tools/call`` result through
  :meth:`TruncationService.atruncate_for_model`: text and embedded text resources are
  capped and spilled, images and audio kept, blob resources and unknown blocks replaced
  by a visible notice, ``is_error`` and ``_meta`` kept;
- forwards resources (list, templates, read, subscribe), prompts (list, get),
  completions and ``logging/setLevel`` when the upstream has them, progress
  notifications of a call, the upstream's log messages, and its list-changed and
  resource-updated notifications (to 2025-era clients directly, to 2026-era clients on
  their ``subscriptions/listen`` streams, whose resource URIs are subscribed upstream
  while the stream is open; see :mod:`spillstore.mcp.forward`).

Not forwarded: requests the upstream makes of the client (sampling, elicitation, roots:
the proxy declares none of these capabilities, so a well-behaved upstream does not ask)
and the upstream's ``tasks`` capability (a task-augmented ``tools/call`` delivers its
result later, through ``tasks/result``, which would go around the cap; without the
capability a client calls tools directly and every result passes the cap).
``resources/read`` and ``prompts/get`` results are forwarded as they are, not capped.

Failures: a call that runs into an upstream crash gets an ``is_error`` result saying how
the server ended, and the next request restarts it (up to ``max_restarts`` times, after
which every call says it is gone). A call that gets no answer within ``call_timeout``
seconds is cancelled upstream and gets an ``is_error`` result; if the server then does
not answer a ``tools/list`` within ``probe_timeout`` seconds it is treated as hung,
stopped, and restarted on the next request. A restarted upstream is subscribed again to
every resource URI a client holds.

This module holds the tools side; the spill tools' names and upstream tools that clash
with them are in :mod:`spillstore.mcp.tool_names`, the upstream connection and its
restarts in :mod:`spillstore.mcp.upstream`, what is forwarded as it is in
:mod:`spillstore.mcp.forward`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.shared.exceptions import MCPError

from spillstore._core.checks import check_int
from spillstore._errors import ConfigError, UpstreamUnavailable, UsageError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._stores.unavailable import unavailable_on_failure
from spillstore._stores.url import store_for
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.convert import from_tool_result, to_tool_result
from spillstore.mcp.defaults import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_RESTARTS,
    DEFAULT_PREFIX,
    DEFAULT_PROBE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    MAX_TOOL_PAGES,
    SPILL_TOOL_NAMES,
)
from spillstore.mcp.fastpath import FastCalls
from spillstore.mcp.forward import Notifications, Passthrough, ProxyServer, progress_forwarder
from spillstore.mcp.launch import Launched
from spillstore.mcp.server import mcp_result, serve_stdio, spill_tool_definitions
from spillstore.mcp.tool_names import LateClashes, spill_names
from spillstore.mcp.transport import StdioTransport
from spillstore.mcp.upstream import (
    REMOTE,
    STDIO,
    Connection,
    Upstream,
    Words,
    http_transport,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_PREFIX",
    "SPILL_TOOL_NAMES",
    "SpillProxy",
]

log = logging.getLogger("spillstore")

_PREFIX = "[spillstore proxy]"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


class SpillProxy:
    """An MCP server that forwards one upstream MCP server and caps its tool results.

    Use it as an async context manager: entering starts the upstream (and fails with
    :class:`UpstreamUnavailable` if it cannot be started); :attr:`server` is then the
    downstream low-level SDK server (``mcp.Client(proxy.server)`` connects in-process,
    :meth:`run_stdio` serves this process's stdin/stdout).

    Args:
        command: the upstream server's command line (``["npx", "-y", "server", ...]``).
        url: instead of ``command``, a streamable-HTTP upstream (no size limit on
            server-sent events is applied).
        headers: HTTP headers sent with every request to ``url`` (e.g. ``Authorization``).
        sse: ``url`` is an SSE endpoint (the HTTP+SSE transport of protocol 2024-11-05).
        settings: budgets and caps (default: ``Settings()``: environment, then defaults).
        store: where spills go (default: the store ``settings`` name: its ``store`` URL,
            else a ``LocalStore`` at ``settings.dir``).
        session: the store session (default: ``settings.session``).
        env: the upstream's environment (default: this process's).
        cwd: the upstream's working directory.
        stderr: where the upstream's stderr goes (default: inherited; never stdout).
        call_timeout: seconds an upstream tool call may take.
        request_timeout: seconds for other forwarded requests.
        start_timeout: seconds the upstream has to answer ``initialize``.
        probe_timeout: after a timed-out call, seconds the upstream has to answer a
            ``tools/list`` before it is considered hung and restarted.
        max_restarts: how many times a crashed or hung upstream is restarted.
        prefix: put before the spill tools' names when an upstream tool has one of them.
        max_page_bytes: the spill tools' page cap (default: theirs).
        name: the proxy's server name (default: ``spillstore-proxy/<upstream name>``).
        launched: the upstream ``command``, already started
            (:func:`~spillstore.mcp.launch.launch`) so that it boots while the caller
            imports: the first connection adopts it. If it is never adopted (an error
            first), the caller discards it.

    Raises:
        ConfigError: neither or both of ``command`` and ``url``, headers or ``sse``
            without ``url``, or bad numbers.
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        sse: bool = False,
        settings: Settings | None = None,
        store: Store | None = None,
        session: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | IO[Any] | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        probe_timeout: float = DEFAULT_PROBE_TIMEOUT,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        prefix: str = DEFAULT_PREFIX,
        max_page_bytes: int | None = None,
        name: str | None = None,
        launched: Launched | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ConfigError("give the upstream as exactly one of command= and url=")
        if command is not None and (isinstance(command, str) or not command):
            raise ConfigError("command must be a non-empty sequence: [executable, *args]")
        if url is None and (headers or sse):
            raise ConfigError("headers= and sse= are for a remote upstream (url=)")
        for label, value in (
            ("call_timeout", call_timeout),
            ("request_timeout", request_timeout),
            ("start_timeout", start_timeout),
            ("probe_timeout", probe_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{label} must be a positive number of seconds; got {value!r}")
        check_int("max_restarts", max_restarts, minimum=0)
        self.command = list(command) if command is not None else None
        self.url = url
        self.headers = dict(headers or {})
        self.sse = sse
        self.settings = settings if settings is not None else Settings()
        self._store = store
        self.session_name = session if session is not None else self.settings.session
        self.env = env
        self.cwd = cwd
        self.stderr = stderr
        self.call_timeout = float(call_timeout)
        self.request_timeout = float(request_timeout)
        self.start_timeout = float(start_timeout)
        self.probe_timeout = float(probe_timeout)
        self.max_restarts = max_restarts
        self.prefix = prefix
        self.max_page_bytes = max_page_bytes
        self.name = name
        self._launched = launched
        self._passthrough = Passthrough(self._acquire, self.request_timeout)
        self._notifications = Notifications(
            on_tools_changed=self._forget_tools, subscriptions=self._passthrough.subscriptions
        )
        self._tools_cache: tuple[int, list[types.Tool]] | None = None
        self._late_clashes = LateClashes()
        self._upstream: Upstream | None = None
        self._server: ProxyServer | None = None
        self._spill: SpillTools | None = None
        self._service: TruncationService | None = None
        self._exit: AsyncExitStack | None = None

    # ------------------------------------------------------------------ lifecycle

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        if self.command is not None:
            launched, self._launched = self._launched, None
            return StdioTransport(
                self.command[0],
                self.command[1:],
                env=self.env,
                cwd=self.cwd,
                stderr=self.stderr,
                launched=launched,
            )
        assert self.url is not None
        return http_transport(self.url, headers=self.headers, sse=self.sse)

    async def __aenter__(self) -> SpillProxy:
        store = self._store
        if store is None and self._launched is not None:
            # The upstream is booting already (started before the SDK was imported):
            # open the store (its module loads here) while it does, not after.
            store = unavailable_on_failure(lambda: store_for(self.settings), log)
        async with AsyncExitStack() as stack:
            upstream = Upstream(
                self._transport,
                on_message=self._notifications.on_upstream_message,
                max_restarts=self.max_restarts,
                start_timeout=self.start_timeout,
                words=STDIO if self.url is None else REMOTE,
            )
            self._upstream = await stack.enter_async_context(upstream)
            upstream.on_restart = self._notifications.restarted
            conn = upstream.current
            assert conn is not None
            try:
                upstream_tools = await self._list_upstream_tools(conn)
            except MCPError as exc:
                raise UpstreamUnavailable(
                    f"the upstream MCP server did not list its tools: {exc}"
                ) from exc
            names = spill_names({tool.name for tool in upstream_tools}, self.prefix)
            if store is None:
                store = unavailable_on_failure(lambda: store_for(self.settings), log)
            tools_kwargs: dict[str, Any] = {}
            if self.max_page_bytes is not None:
                tools_kwargs["max_page_bytes"] = self.max_page_bytes
            self._spill = SpillTools(
                store,
                session=self.session_name,
                read_name=names[0],
                grep_name=names[1],
                list_name=names[2],
                query_name=names[3],
                **tools_kwargs,
            )
            self._service = TruncationService(
                store,
                self.settings,
                session=self.session_name,
                read_tool=names[0],
                grep_tool=names[1],
                query_tool=names[3],
            )
            self._server = self._build_server(conn.init)
            self._exit = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._notifications.close()
        if self._exit is not None:
            exit_stack, self._exit = self._exit, None
            await exit_stack.aclose()

    @property
    def server(self) -> Server[Any]:
        """The downstream server (available inside ``async with``)."""
        if self._server is None:
            raise UsageError("enter the proxy (async with SpillProxy(...)) before using it")
        return self._server

    @property
    def spill_tools(self) -> SpillTools:
        """The spill tools the proxy serves (names as decided at start)."""
        if self._spill is None:
            raise UsageError("enter the proxy (async with SpillProxy(...)) before using it")
        return self._spill

    @property
    def _words(self) -> Words:
        return STDIO if self._upstream is None else self._upstream.words

    @property
    def restarts(self) -> int:
        """How many times the upstream was restarted."""
        return self._upstream.restarts if self._upstream is not None else 0

    async def run_stdio(self) -> None:
        """Serve the proxy over this process's stdin/stdout until stdin closes.

        Small upstream tool calls skip the SDK sessions (:mod:`spillstore.mcp.fastpath`).
        """
        async with anyio.create_task_group() as tg:
            fast = FastCalls(self, tg)
            await serve_stdio(self.server, fast.intercept)
            tg.cancel_scope.cancel()

    def live_stdio_connection(self) -> Connection | None:
        """The upstream connection if it is alive and over stdio, else None."""
        conn = self._upstream.current if self._upstream is not None else None
        if conn is None or conn.transport is None or not conn.alive:
            return None
        return conn

    def _build_server(self, init: types.InitializeResult) -> ProxyServer:
        caps = init.capabilities
        upstream_name = init.server_info.name if init.server_info else "upstream"
        server = ProxyServer(
            self.name or f"spillstore-proxy/{upstream_name}"[:200],
            version=init.server_info.version if init.server_info else "",
            instructions=init.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._notifications.listen,
            **self._passthrough.handlers(caps),
        )
        server.notification_options = NotificationOptions(
            prompts_changed=bool(caps.prompts and caps.prompts.list_changed),
            resources_changed=bool(caps.resources and caps.resources.list_changed),
            tools_changed=True,  # a restarted upstream may bring other tools
        )
        server.middleware.append(self._notifications.remember_downstream)
        return server

    # ------------------------------------------------------------------ tools

    def _forget_tools(self) -> None:
        self._tools_cache = None

    async def _list_upstream_tools(self, conn: Connection) -> list[types.Tool]:
        cached = self._tools_cache
        if cached is not None and cached[0] == conn.generation:
            return cached[1]
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await conn.session.send_request(
                types.ListToolsRequest(params=params),
                types.ListToolsResult,
                request_read_timeout_seconds=self.request_timeout,
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self._tools_cache = (conn.generation, tools)
        return tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        conn = await self._acquire()
        upstream = await self._list_upstream_tools(conn)
        tools = self._late_clashes.merge(upstream, spill_tool_definitions(self.spill_tools))
        await self._passthrough.warn_client(ctx, self._late_clashes.take_news())
        return types.ListToolsResult(tools=tools)

    async def _acquire(self) -> Connection:
        assert self._upstream is not None
        try:
            return await self._upstream.acquire()
        except UpstreamUnavailable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{_PREFIX} {exc}") from exc

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spill = self.spill_tools
        if params.name in spill.names:
            return mcp_result(await spill.acall(params.name, params.arguments))
        assert self._upstream is not None and self._service is not None
        try:
            conn = await self._upstream.acquire()
        except UpstreamUnavailable as exc:
            return _error(f"{_PREFIX} {params.name!r} was not called: {exc}.")
        result = await self._forward_call(ctx, params, conn)
        call_id = str(ctx.request_id) if ctx.request_id is not None else "-"
        return await self.cap_result(result, params.name, call_id)

    async def cap_result(
        self, result: types.CallToolResult, name: str, call_id: str
    ) -> types.CallToolResult:
        """An upstream tool's result, through the cap (the proxy's own errors pass)."""
        assert self._service is not None
        if result.is_error and not result.content:
            return result
        converted = to_tool_result(result, structured_budget=self.settings.max_bytes)
        capped = await self._service.atruncate_for_model(
            converted.result, tool_name=name, tool_call_id=call_id
        )
        return from_tool_result(converted, capped)

    async def _forward_call(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        conn: Connection,
    ) -> types.CallToolResult:
        progress = progress_forwarder(ctx)
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=params.name, arguments=params.arguments)
        )
        try:
            with self._notifications.logs_to(ctx):
                return await conn.session.send_request(
                    request,
                    types.CallToolResult,
                    request_read_timeout_seconds=self.call_timeout,
                    progress_callback=progress,
                )
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or not conn.alive:
                return await self.ended_error(params.name, conn)
            if exc.code == types.REQUEST_TIMEOUT:
                return await self.timeout_error(params.name, conn)
            raise  # a protocol error of the upstream: the client gets it as it came
        except Exception as exc:  # a transport failure (e.g. HTTP): an error result
            log.warning("spillstore proxy: %r failed upstream: %s", params.name, exc)
            return _error(
                f"{_PREFIX} the call to {params.name!r} failed on the way to the upstream "
                f"MCP server ({type(exc).__name__}: {str(exc)[:300]})."
            )

    async def ended_error(self, name: str, conn: Connection) -> types.CallToolResult:
        """The result of a call the upstream's end interrupted."""
        how = await conn.describe_end()
        left = self.max_restarts - self.restarts
        words = self._words
        then = (
            f"it will be {words.again} on the next call ({left} {words.times} left)"
            if left > 0
            else f"it will not be {words.again} (no {words.times} left)"
        )
        return _error(
            f"{_PREFIX} the upstream MCP server {how} while running {name!r}; "
            f"the call did not complete and was not retried; {then}."
        )

    async def timeout_error(self, name: str, conn: Connection) -> types.CallToolResult:
        """The result of a call that timed out (after probing whether the server hangs)."""
        hung = await self._probe(conn)
        then = (
            f"it does not answer at all now, so {self._words.stopped} and will be "
            f"{self._words.again} on the next call"
            if hung
            else "the call was cancelled; the server still answers other requests"
        )
        return _error(
            f"{_PREFIX} the upstream MCP server did not answer {name!r} within "
            f"{self.call_timeout:g} s; {then}."
        )

    async def _probe(self, conn: Connection) -> bool:
        """Is the upstream hung? Ask for its tools; stop it if it does not answer."""
        try:
            await conn.session.send_request(
                types.ListToolsRequest(),
                types.ListToolsResult,
                request_read_timeout_seconds=self.probe_timeout,
            )
        except MCPError as exc:
            log.warning("spillstore proxy: the upstream does not answer (%s); stopping it", exc)
            conn.stop.set()
            return True
        return False
