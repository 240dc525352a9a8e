"""The proxy's upstream side: one connection to the upstream MCP server, restarted on demand.

:class:`Upstream` starts the connection (a subprocess over
:class:`~spillstore.mcp.transport.StdioTransport`, or a remote server, streamable HTTP or
SSE, with its headers, through :func:`http_transport`), notices when it ends (the process
exited, the stream closed, or the proxy stopped a hung server), and restarts it when the
next request needs it, up to ``max_restarts`` times.
:class:`~spillstore.mcp.proxy.SpillProxy` serves the downstream side.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession, MessageHandlerFnT

from spillstore._errors import UpstreamUnavailable
from spillstore.mcp.transport import StdioTransport

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "REMOTE",
    "STDIO",
    "Connection",
    "TransportFactory",
    "Upstream",
    "Words",
    "http_transport",
    "until_first",
]

log = logging.getLogger("spillstore")


@dataclass(frozen=True)
class Words:
    """How messages say that the upstream is brought back: a process is restarted, a
    remote server reconnected."""

    again: str
    """``restarted`` / ``reconnected``"""
    doing: str
    """``restarting it`` / ``reconnecting``"""
    times: str
    """``restart(s)`` / ``reconnection(s)``"""
    failed: str
    """``could not be started`` / ``could not be connected to``"""
    stopped: str
    """``it was stopped`` / ``the connection was closed``"""


STDIO = Words("restarted", "restarting it", "restart(s)", "could not be started", "it was stopped")
REMOTE = Words(
    "reconnected",
    "reconnecting",
    "reconnection(s)",
    "could not be connected to",
    "the connection was closed",
)


@dataclass(eq=False)
class Connection:
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


class Upstream:
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
        words: Words = STDIO,
    ) -> None:
        self._connect = connect
        self._on_message = on_message
        self.max_restarts = max_restarts
        self.start_timeout = start_timeout
        self.words = words
        self.restarts = 0
        self._conn: Connection | None = None
        self._last_end = "has not started"
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False
        self._generation = 0
        self.on_restart: Callable[[], Any] | None = None

    async def __aenter__(self) -> Upstream:
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
    def current(self) -> Connection | None:
        return self._conn

    async def acquire(self) -> Connection:
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
            if conn is not None:
                self._last_end = await conn.describe_end()
            again = self.words.again
            if self.restarts >= self.max_restarts:
                raise UpstreamUnavailable(
                    f"the upstream MCP server {self._last_end} and was {again} "
                    f"{self.restarts} time(s) already (max_restarts={self.max_restarts}); "
                    f"it is not {again} again"
                )
            self.restarts += 1
            log.warning(
                "spillstore proxy: the upstream MCP server %s; %s (%d of %d)",
                self._last_end,
                self.words.doing,
                self.restarts,
                self.max_restarts,
            )
            conn = await self._start()
        if self.on_restart is not None:
            await self.on_restart()
        return conn

    async def _start(self) -> Connection:
        assert self._tg is not None
        if self._conn is not None:
            old, self._conn = self._conn, None  # ended: a failed start leaves none
            old.stop.set()
            await old.ended.wait()
        outcome = await self._tg.start(self._run)
        if isinstance(outcome, BaseException):
            cause = _leaf(outcome)
            self._last_end = f"{self.words.failed} ({type(cause).__name__}: {cause})"
            raise UpstreamUnavailable(f"the upstream MCP server {self._last_end}") from outcome
        assert isinstance(outcome, Connection)
        return outcome

    async def _run(self, *, task_status: anyio.abc.TaskStatus[Any]) -> None:
        started = False
        conn: Connection | None = None
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
                conn = Connection(
                    session=session,
                    init=init,
                    transport=transport if isinstance(transport, StdioTransport) else None,
                    generation=self._generation,
                )
                self._conn = conn
                started = True
                task_status.started(conn)
                await until_first(
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


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside task-group wrappers (the group itself if it holds several)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def until_first(*waits: Callable[[], Any]) -> None:
    """Return when the first of ``waits`` returns."""
    async with anyio.create_task_group() as tg:

        async def run(wait: Callable[[], Any]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(run, wait)


HTTP_TIMEOUT = 30.0
"""Seconds to connect to (and send to) a remote upstream, as the SDK's own clients use."""

HTTP_READ_TIMEOUT = 300.0
"""Seconds a streamable-HTTP response may stay silent (the SDK's default)."""

SSE_IDLE_TIMEOUT = 24 * 3600.0
"""Seconds an SSE upstream's event stream may stay silent. The stream is the session: the
SDK's default (300 s) would end an idle one; a tool call has its own ``call_timeout``."""


async def _refused(response: Any) -> None:
    """Say so when a remote upstream refuses the proxy's credentials (the SDK's error for
    a streamable-HTTP request does not carry the status)."""
    if response.status_code in (401, 403):
        log.warning(
            "spillstore proxy: the upstream answered %s to %s %s: it wants credentials; pass "
            "them with --header NAME=VALUE or --header-env NAME=VAR (a server that signs in "
            "with OAuth in the client cannot be reached through the proxy)",
            response.status_code,
            response.request.method,
            response.request.url,
        )


def _http_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An HTTP client for a remote upstream (the SDK's client factory signature)."""
    import httpx2  # noqa: PLC0415 - only for a remote upstream

    return httpx2.AsyncClient(
        headers=headers, timeout=timeout, auth=auth, event_hooks={"response": [_refused]}
    )


@asynccontextmanager
async def http_transport(
    url: str, *, headers: Mapping[str, str] | None = None, sse: bool = False
) -> AsyncIterator[Any]:
    """A remote upstream: streamable HTTP (no cap on the size of one server-sent event), or
    with ``sse`` the older HTTP+SSE transport; ``headers`` go with every request."""
    if sse:
        from mcp.client.sse import sse_client  # noqa: PLC0415 - only for an SSE upstream

        async with sse_client(
            url,
            headers=dict(headers) if headers else None,
            timeout=HTTP_TIMEOUT,
            sse_read_timeout=SSE_IDLE_TIMEOUT,
            httpx_client_factory=_http_client,
        ) as streams:
            yield streams
        return
    import httpx2  # noqa: PLC0415 - only for a remote upstream
    from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

    timeout = httpx2.Timeout(HTTP_TIMEOUT, read=HTTP_READ_TIMEOUT)
    async with (
        _http_client(dict(headers) if headers else None, timeout) as client,
        streamable_http_client(url, http_client=client, max_sse_event_size=None) as streams,
    ):
        yield streams
