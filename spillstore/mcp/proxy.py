"""The MCP proxy: any MCP server behind the cap, plus the spill tools.

:class:`SpillProxy` connects to one upstream server (a subprocess over stdio, read with
the linear :class:`~spillstore.mcp.transport.StdioTransport`, or a streamable-HTTP URL)
and serves, downstream, a low-level SDK ``Server`` that:

- lists the upstream's tools, without their ``output_schema`` (any result may be
  rewritten; see :mod:`spillstore.mcp.convert` for structured content), plus
  ``read_spill``/``grep_spill``/``list_spills`` (all three prefixed when an upstream
  tool already has one of their names);
- passes every upstream ``tools/call`` result through
  :meth:`TruncationService.atruncate_for_model`: text and embedded text resources are
  capped and spilled, images and audio kept, blob resources and unknown blocks replaced
  by a visible notice, ``is_error`` and ``_meta`` kept;
- forwards resources (list, templates, read, subscribe), prompts (list, get) and
  completions when the upstream has them, progress notifications of a call, and the
  upstream's list-changed and resource-updated notifications (to 2025-era clients
  directly, to 2026-era clients on their ``subscriptions/listen`` streams).

Not forwarded: requests the upstream makes of the client (sampling, elicitation, roots:
the proxy declares none of these capabilities, so a well-behaved upstream does not ask),
the upstream's log messages (they go to the ``spillstore`` logger, i.e. stderr), and
resource subscriptions across an upstream restart. ``resources/read`` and
``prompts/get`` results are forwarded as they are, not capped.

Failures: a call that runs into an upstream crash gets an ``is_error`` result saying how
the server ended, and the next request restarts it (up to ``max_restarts`` times, after
which every call says it is gone). A call that gets no answer within ``call_timeout``
seconds is cancelled upstream and gets an ``is_error`` result; if the server then does
not answer a ``tools/list`` within ``probe_timeout`` seconds it is treated as hung,
stopped, and restarted on the next request.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any, Final

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage, MessageHandlerFnT
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from spillstore._errors import ConfigError, UpstreamUnavailable, UsageError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.convert import from_tool_result, to_tool_result
from spillstore.mcp.server import mcp_result, spill_tool_definitions
from spillstore.mcp.transport import StdioTransport

__all__ = ["SpillProxy"]

log = logging.getLogger("spillstore")

DEFAULT_CALL_TIMEOUT: Final = 600.0
"""Seconds an upstream ``tools/call`` may take before the proxy gives up on it."""

DEFAULT_START_TIMEOUT: Final = 60.0
"""Seconds the upstream has to answer ``initialize``."""

DEFAULT_PROBE_TIMEOUT: Final = 10.0
"""After a timed-out call, seconds the upstream has to answer ``tools/list``."""

DEFAULT_REQUEST_TIMEOUT: Final = 120.0
"""Seconds for forwarded requests other than ``tools/call`` (lists, reads, prompts)."""

MAX_TOOL_PAGES: Final = 100
"""Pages of ``tools/list`` read from the upstream at most (a paginator that never ends)."""

SPILL_TOOL_NAMES: Final = ("read_spill", "grep_spill", "list_spills")

_PREFIX = "[spillstore proxy]"


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


@dataclass(eq=False)
class _Connection:
    """One running upstream: its session and how to tell that it ended."""

    session: ClientSession
    init: types.InitializeResult
    transport: StdioTransport | None
    generation: int
    stop: anyio.Event = field(default_factory=anyio.Event)
    ended: anyio.Event = field(default_factory=anyio.Event)

    @property
    def alive(self) -> bool:
        if self.ended.is_set() or self.stop.is_set():
            return False
        return self.transport is None or not self.transport.exited.is_set()

    async def describe_end(self) -> str:
        """How the upstream ended, waiting a moment for the exit status."""
        if self.transport is None:
            return "closed the connection"
        with anyio.move_on_after(2.0):
            await self.transport.exited.wait()
        return self.transport.describe_exit()


TransportFactory = Callable[[], AbstractAsyncContextManager[Any]]


class _Upstream:
    """Owns the upstream connection: starts it, notices its end, restarts it on demand.

    Every connection runs in a task of this object's task group, so it is entered and
    left in one task whoever asked for the restart.
    """

    def __init__(
        self,
        connect: TransportFactory,
        *,
        on_message: MessageHandlerFnT,
        max_restarts: int,
        start_timeout: float,
    ) -> None:
        self._connect = connect
        self._on_message = on_message
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        self.restarts = 0
        self._conn: _Connection | None = None
        self._last_end = "has not started"
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False
        self._generation = 0
        self.on_restart: Callable[[], Any] | None = None

    async def __aenter__(self) -> _Upstream:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._start()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the upstream (stdin closed, then SIGTERM/SIGKILL of its group)."""
        self._closing = True
        if self._conn is not None:
            self._conn.stop.set()
        if self._tg is not None:
            tg, self._tg = self._tg, None
            await tg.__aexit__(None, None, None)

    @property
    def current(self) -> _Connection | None:
        return self._conn

    async def acquire(self) -> _Connection:
        """The live connection, restarting a crashed or hung upstream when allowed.

        Raises:
            UpstreamUnavailable: the proxy is closing, the restart budget is spent, or
                the restart failed.
        """
        conn = self._conn
        if conn is not None and conn.alive:
            return conn
        async with self._lock:
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            if self._closing or self._tg is None:
                raise UpstreamUnavailable("the proxy is shutting down")
            if conn is not None and conn.transport is not None:
                self._last_end = await conn.describe_end()
            if self.restarts >= self.max_restarts:
                raise UpstreamUnavailable(
                    f"the upstream MCP server {self._last_end} and was restarted "
                    f"{self.restarts} time(s) already (max_restarts={self.max_restarts}); "
                    "it is not restarted again"
                )
            self.restarts += 1
            log.warning(
                "spillstore proxy: the upstream MCP server %s; restarting it (%d of %d)",
                self._last_end,
                self.restarts,
                self.max_restarts,
            )
            conn = await self._start()
        if self.on_restart is not None:
            await self.on_restart()
        return conn

    async def _start(self) -> _Connection:
        assert self._tg is not None
        if self._conn is not None:
            old = self._conn
            old.stop.set()
            await old.ended.wait()
        outcome = await self._tg.start(self._run)
        if isinstance(outcome, BaseException):
            self._last_end = f"could not be started ({type(outcome).__name__}: {outcome})"
            raise UpstreamUnavailable(f"the upstream MCP server {self._last_end}") from outcome
        assert isinstance(outcome, _Connection)
        return outcome

    async def _run(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        started = False
        conn: _Connection | None = None
        try:
            async with AsyncExitStack() as stack:
                transport = self._connect()
                read_stream, write_stream = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(
                    ClientSession(
                        read_stream,
                        write_stream,
                        message_handler=self._on_message,
                        client_info=types.Implementation(name="spillstore-proxy", version="0.1"),
                    )
                )
                with anyio.fail_after(self.start_timeout):
                    init = await session.initialize()
                self._generation += 1
                conn = _Connection(
                    session=session,
                    init=init,
                    transport=transport if isinstance(transport, StdioTransport) else None,
                    generation=self._generation,
                )
                self._conn = conn
                started = True
                task_status.started(conn)
                await _until_first(
                    conn.stop.wait,
                    *([conn.transport.exited.wait] if conn.transport is not None else []),
                )
        except Exception as exc:
            if not started:
                task_status.started(exc)
                return
            log.warning("spillstore proxy: the upstream connection failed: %s", exc)
        finally:
            if conn is not None:
                conn.ended.set()


async def _until_first(*waits: Callable[[], Any]) -> None:
    """Return when the first of ``waits`` returns."""
    async with anyio.create_task_group() as tg:

        async def run(wait: Callable[[], Any]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(run, wait)


class _ProxyServer(Server[Any]):
    """A low-level ``Server`` that advertises the list-changed notifications it forwards."""

    notification_options = NotificationOptions()

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self.notification_options,
            experimental_capabilities,
            extensions,
        )


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
        settings: budgets and caps (default: ``Settings()``: environment, then defaults).
        store: where spills go (default: a ``LocalStore`` at ``settings.dir``).
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

    Raises:
        ConfigError: neither or both of ``command`` and ``url``, or bad numbers.
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        url: str | None = None,
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
        max_restarts: int = 3,
        prefix: str = "spillstore_",
        max_page_bytes: int | None = None,
        name: str | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ConfigError("give the upstream as exactly one of command= and url=")
        if command is not None and (isinstance(command, str) or not command):
            raise ConfigError("command must be a non-empty sequence: [executable, *args]")
        for label, value in (
            ("call_timeout", call_timeout),
            ("request_timeout", request_timeout),
            ("start_timeout", start_timeout),
            ("probe_timeout", probe_timeout),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ConfigError(f"{label} must be a positive number of seconds; got {value!r}")
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ConfigError(f"max_restarts must be a whole number >= 0; got {max_restarts!r}")
        self.command = list(command) if command is not None else None
        self.url = url
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
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._downstream: ServerSession | None = None
        self._tools_cache: tuple[int, list[types.Tool]] | None = None
        self._upstream: _Upstream | None = None
        self._server: _ProxyServer | None = None
        self._spill: SpillTools | None = None
        self._service: TruncationService | None = None
        self._exit: AsyncExitStack | None = None

    # ------------------------------------------------------------------ lifecycle

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        if self.command is not None:
            return StdioTransport(
                self.command[0], self.command[1:], env=self.env, cwd=self.cwd, stderr=self.stderr
            )
        assert self.url is not None
        return _http_transport(self.url)

    async def __aenter__(self) -> SpillProxy:
        async with AsyncExitStack() as stack:
            upstream = _Upstream(
                self._transport,
                on_message=self._on_upstream_message,
                max_restarts=self.max_restarts,
                start_timeout=self.start_timeout,
            )
            self._upstream = await stack.enter_async_context(upstream)
            upstream.on_restart = self._on_restart
            conn = upstream.current
            assert conn is not None
            try:
                upstream_tools = await self._list_upstream_tools(conn)
            except MCPError as exc:
                raise UpstreamUnavailable(
                    f"the upstream MCP server did not list its tools: {exc}"
                ) from exc
            names = self._spill_names({tool.name for tool in upstream_tools})
            store = self._store
            if store is None:
                from spillstore._stores.local import LocalStore  # noqa: PLC0415 - only when needed

                store = LocalStore(self.settings.dir)
            tools_kwargs: dict[str, Any] = {}
            if self.max_page_bytes is not None:
                tools_kwargs["max_page_bytes"] = self.max_page_bytes
            self._spill = SpillTools(
                store,
                session=self.session_name,
                read_name=names[0],
                grep_name=names[1],
                list_name=names[2],
                **tools_kwargs,
            )
            self._service = TruncationService(
                store,
                self.settings,
                session=self.session_name,
                read_tool=names[0],
                grep_tool=names[1],
            )
            self._server = self._build_server(conn.init)
            self._exit = stack.pop_all()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._listen.close()
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
    def restarts(self) -> int:
        """How many times the upstream was restarted."""
        return self._upstream.restarts if self._upstream is not None else 0

    async def run_stdio(self) -> None:
        """Serve the proxy over this process's stdin/stdout until stdin closes."""
        from spillstore.mcp.server import serve_stdio  # noqa: PLC0415 - a small cycle

        await serve_stdio(self.server)

    def _spill_names(self, upstream_names: set[str]) -> tuple[str, str, str]:
        names = SPILL_TOOL_NAMES
        if upstream_names.isdisjoint(names):
            return names
        prefixed = (
            f"{self.prefix}{names[0]}",
            f"{self.prefix}{names[1]}",
            f"{self.prefix}{names[2]}",
        )
        if not upstream_names.isdisjoint(prefixed):
            raise ConfigError(
                f"the upstream has tools named like the spill tools even with the prefix "
                f"{self.prefix!r}; choose another prefix"
            )
        log.warning(
            "spillstore proxy: the upstream has a tool named like a spill tool; the spill "
            "tools are served as %s",
            ", ".join(prefixed),
        )
        return prefixed

    def _build_server(self, init: types.InitializeResult) -> _ProxyServer:
        caps = init.capabilities
        handlers: dict[str, Any] = {}
        if caps.resources is not None:
            handlers["on_list_resources"] = self._list_resources
            handlers["on_list_resource_templates"] = self._list_resource_templates
            handlers["on_read_resource"] = self._read_resource
            if caps.resources.subscribe:
                handlers["on_subscribe_resource"] = self._subscribe
                handlers["on_unsubscribe_resource"] = self._unsubscribe
        if caps.prompts is not None:
            handlers["on_list_prompts"] = self._list_prompts
            handlers["on_get_prompt"] = self._get_prompt
        if caps.completions is not None:
            handlers["on_completion"] = self._complete
        upstream_name = init.server_info.name if init.server_info else "upstream"
        server = _ProxyServer(
            self.name or f"spillstore-proxy/{upstream_name}"[:200],
            version=init.server_info.version if init.server_info else "",
            instructions=init.instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self._listen,
            **handlers,
        )
        server.notification_options = NotificationOptions(
            prompts_changed=bool(caps.prompts and caps.prompts.list_changed),
            resources_changed=bool(caps.resources and caps.resources.list_changed),
            tools_changed=True,  # a restarted upstream may bring other tools
        )
        server.middleware.append(self._remember_downstream)
        return server

    # ------------------------------------------------------------------ notifications

    async def _remember_downstream(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Keep the 2025-era downstream session, to forward notifications on it."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._downstream = ctx.session
        return await call_next(ctx)

    async def _publish(self, event: ServerEvent) -> None:
        await self._bus.publish(event)
        session = self._downstream
        if session is None:
            return
        try:
            if isinstance(event, ToolsListChanged):
                await session.send_tool_list_changed()
            elif isinstance(event, PromptsListChanged):
                await session.send_prompt_list_changed()
            elif isinstance(event, ResourcesListChanged):
                await session.send_resource_list_changed()
            else:
                await session.send_resource_updated(event.uri)
        except Exception as exc:  # the client went away: nothing to tell
            log.debug("spillstore proxy: could not forward %s: %s", event, exc)
            self._downstream = None

    async def _on_upstream_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            log.warning("spillstore proxy: upstream transport error: %s", message)
            return
        if isinstance(message, types.ToolListChangedNotification):
            self._tools_cache = None
            await self._publish(ToolsListChanged())
        elif isinstance(message, types.PromptListChangedNotification):
            await self._publish(PromptsListChanged())
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._publish(ResourcesListChanged())
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self._publish(ResourceUpdated(uri=str(message.params.uri)))
        elif isinstance(message, types.LoggingMessageNotification):
            params = message.params
            log.info("upstream log [%s] %s: %s", params.level, params.logger or "-", params.data)

    async def _on_restart(self) -> None:
        self._tools_cache = None
        await self._publish(ToolsListChanged())

    # ------------------------------------------------------------------ tools

    async def _list_upstream_tools(self, conn: _Connection) -> list[types.Tool]:
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
        spill = spill_tool_definitions(self.spill_tools)
        own = {tool.name for tool in spill}
        forwarded: list[types.Tool] = []
        for tool in await self._list_upstream_tools(conn):
            if tool.name in own:
                log.warning(
                    "spillstore proxy: upstream tool %r is hidden by the spill tool of that name",
                    tool.name,
                )
                continue
            forwarded.append(tool.model_copy(update={"output_schema": None}))
        return types.ListToolsResult(tools=[*forwarded, *spill])

    async def _acquire(self) -> _Connection:
        assert self._upstream is not None
        try:
            return await self._upstream.acquire()
        except UpstreamUnavailable as exc:
            raise MCPError(code=types.INTERNAL_ERROR, message=f"{_PREFIX} {exc}") from exc

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spill = self.spill_tools
        if params.name in (spill.names.read, spill.names.grep, spill.names.list):
            return mcp_result(await spill.acall(params.name, params.arguments))
        assert self._upstream is not None and self._service is not None
        try:
            conn = await self._upstream.acquire()
        except UpstreamUnavailable as exc:
            return _error(f"{_PREFIX} {params.name!r} was not called: {exc}.")
        result = await self._forward_call(ctx, params, conn)
        if result.is_error and not result.content:
            return result
        converted = to_tool_result(result, structured_budget=self.settings.max_bytes)
        capped = await self._service.atruncate_for_model(
            converted.result,
            tool_name=params.name,
            tool_call_id=str(ctx.request_id) if ctx.request_id is not None else "-",
        )
        return from_tool_result(converted, capped)

    async def _forward_call(
        self,
        ctx: ServerRequestContext[Any],
        params: types.CallToolRequestParams,
        conn: _Connection,
    ) -> types.CallToolResult:
        progress = _progress_forwarder(ctx)
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=params.name, arguments=params.arguments)
        )
        try:
            return await conn.session.send_request(
                request,
                types.CallToolResult,
                request_read_timeout_seconds=self.call_timeout,
                progress_callback=progress,
            )
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED or not conn.alive:
                how = await conn.describe_end()
                left = self.max_restarts - self.restarts
                then = (
                    f"it will be restarted on the next call ({left} restart(s) left)"
                    if left > 0
                    else "it will not be restarted (no restarts left)"
                )
                return _error(
                    f"{_PREFIX} the upstream MCP server {how} while running {params.name!r}; "
                    f"the call did not complete and was not retried; {then}."
                )
            if exc.code == types.REQUEST_TIMEOUT:
                hung = await self._probe(conn)
                then = (
                    "it does not answer at all now, so it was stopped and will be "
                    "restarted on the next call"
                    if hung
                    else "the call was cancelled; the server still answers other requests"
                )
                return _error(
                    f"{_PREFIX} the upstream MCP server did not answer {params.name!r} within "
                    f"{self.call_timeout:g} s; {then}."
                )
            raise  # a protocol error of the upstream: the client gets it as it came
        except Exception as exc:  # a transport failure (e.g. HTTP): an error result
            log.warning("spillstore proxy: %r failed upstream: %s", params.name, exc)
            return _error(
                f"{_PREFIX} the call to {params.name!r} failed on the way to the upstream "
                f"MCP server ({type(exc).__name__}: {str(exc)[:300]})."
            )

    async def _probe(self, conn: _Connection) -> bool:
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

    # ------------------------------------------------------------------ resources, prompts

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.ListResourcesRequest(params=params),
            types.ListResourcesResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.ListResourceTemplatesRequest(params=params),
            types.ListResourceTemplatesResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=params.uri)),
            types.ReadResourceResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=params.uri)),
            types.EmptyResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=params.uri)),
            types.EmptyResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.ListPromptsRequest(params=params),
            types.ListPromptsResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        conn = await self._acquire()
        return await conn.session.send_request(
            types.GetPromptRequest(
                params=types.GetPromptRequestParams(name=params.name, arguments=params.arguments)
            ),
            types.GetPromptResult,
            request_read_timeout_seconds=self.request_timeout,
        )

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        conn = await self._acquire()
        forwarded = types.CompleteRequestParams(
            ref=params.ref, argument=params.argument, context=params.context
        )
        return await conn.session.send_request(
            types.CompleteRequest(params=forwarded),
            types.CompleteResult,
            request_read_timeout_seconds=self.request_timeout,
        )


def _progress_forwarder(ctx: ServerRequestContext[Any]) -> Any:
    """A progress callback that forwards upstream progress to the downstream request."""
    meta: Mapping[str, Any] = ctx.meta or {}
    if meta.get("progress_token", meta.get("progressToken")) is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        try:
            await ctx.session.report_progress(progress, total, message)
        except Exception as exc:
            log.debug("spillstore proxy: could not forward progress: %s", exc)

    return forward


@asynccontextmanager
async def _http_transport(url: str) -> AsyncIterator[Any]:
    """A streamable-HTTP upstream with no cap on the size of one server-sent event."""
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    async with streamable_http_client(url, max_sse_event_size=None) as streams:
        yield streams
