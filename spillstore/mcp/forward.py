"""What the proxy forwards as it is: requests, notifications, subscriptions and progress.

- :class:`Passthrough`: resources (list, templates, read), prompts (list, get),
  completions and ``logging/setLevel``, sent upstream unchanged when the upstream has
  them; their results come back uncapped. The proxy always takes ``logging/setLevel``
  (its own warnings reach the client as log messages, :meth:`Passthrough.warn_client`),
  and keeps the level.
- :class:`Subscriptions`: the resource subscriptions the proxy holds upstream for its
  clients, counted per URI: a 2025-era ``resources/subscribe`` and every URI of a
  2026-era ``subscriptions/listen`` stream send ``resources/subscribe`` upstream (once
  per URI), and the last holder gone sends ``resources/unsubscribe``. After an upstream
  restart every held URI is subscribed again.
- :class:`Notifications`: the upstream's list-changed and resource-updated
  notifications, to 2025-era clients on their session and to 2026-era clients on their
  ``subscriptions/listen`` streams; the upstream's log messages to 2025-era clients (at
  the level they set with ``logging/setLevel``, which is forwarded upstream) and to the
  2026-era ``tools/call`` requests in flight that opted in to logs (their ``_meta``
  log level); and to the ``spillstore`` logger at debug level.
- :func:`progress_forwarder`: progress of an upstream call, to the downstream request.
- :class:`ProxyServer`: the downstream server, advertising the notifications it forwards.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from spillstore.mcp.upstream import Connection

__all__ = [
    "LOG_LEVELS",
    "Notifications",
    "Passthrough",
    "ProxyServer",
    "Subscriptions",
    "progress_forwarder",
]

log = logging.getLogger("spillstore")

_Result = TypeVar("_Result", bound=types.Result)

LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""MCP's log levels, least severe first."""


class ProxyServer(Server[Any]):
    """A low-level ``Server`` that advertises the list-changed notifications it forwards."""

    notification_options = NotificationOptions()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # logging/setLevel is forwarded for 2025-era clients: the SDK's deprecation
        # warning (the 2026-07-28 protocol dropped it) is about new servers, not proxies.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            super().__init__(*args, **kwargs)

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


class Passthrough:
    """The requests the proxy sends upstream unchanged, as downstream server handlers.

    Args:
        acquire: returns the live upstream connection (restarting it when allowed).
        request_timeout: seconds each request may take.
    """

    def __init__(self, acquire: Callable[[], Awaitable[Connection]], request_timeout: float):
        self._acquire = acquire
        self.request_timeout = request_timeout
        self.subscriptions = Subscriptions(acquire, request_timeout)
        """The resource subscriptions held upstream (see :class:`Subscriptions`)."""
        self.client_log_level: types.LoggingLevel | None = None
        """The level a 2025-era client set with ``logging/setLevel`` (None: not set)."""
        self._upstream_logs = False

    def handlers(self, caps: types.ServerCapabilities) -> dict[str, Any]:
        """The ``on_*`` server handlers for what the upstream's capabilities offer."""
        handlers: dict[str, Any] = {}
        if caps.resources is not None:
            handlers["on_list_resources"] = self.list_resources
            handlers["on_list_resource_templates"] = self.list_resource_templates
            handlers["on_read_resource"] = self.read_resource
            if caps.resources.subscribe:
                self.subscriptions.upstream_subscribes = True
                handlers["on_subscribe_resource"] = self.subscriptions.subscribe
                handlers["on_unsubscribe_resource"] = self.subscriptions.unsubscribe
        if caps.prompts is not None:
            handlers["on_list_prompts"] = self.list_prompts
            handlers["on_get_prompt"] = self.get_prompt
        if caps.completions is not None:
            handlers["on_completion"] = self.complete
        self._upstream_logs = caps.logging is not None
        handlers["on_set_logging_level"] = self.set_logging_level
        return handlers

    async def _forward(self, request: types.ClientRequest, result_type: type[_Result]) -> _Result:
        conn = await self._acquire()
        return await conn.session.send_request(
            request, result_type, request_read_timeout_seconds=self.request_timeout
        )

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        request = types.ListResourcesRequest(params=params)
        return await self._forward(request, types.ListResourcesResult)

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        request = types.ListResourceTemplatesRequest(params=params)
        return await self._forward(request, types.ListResourceTemplatesResult)

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=params.uri))
        return await self._forward(request, types.ReadResourceResult)

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await self._forward(types.ListPromptsRequest(params=params), types.ListPromptsResult)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(name=params.name, arguments=params.arguments)
        )
        return await self._forward(request, types.GetPromptResult)

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        request = types.CompleteRequest(
            params=types.CompleteRequestParams(
                ref=params.ref, argument=params.argument, context=params.context
            )
        )
        return await self._forward(request, types.CompleteResult)

    async def set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """A 2025-era client's log level: the proxy's own warnings are filtered by it, and
        the upstream's log messages by the upstream (when it has logging)."""
        self.client_log_level = params.level
        if not self._upstream_logs:
            return types.EmptyResult()
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=params.level))
        return await self._forward(request, types.EmptyResult)

    async def warn_client(self, ctx: ServerRequestContext[Any], messages: Sequence[str]) -> None:
        """Send the proxy's own warnings to the client of ``ctx`` as log messages
        (``notifications/message``, logger ``spillstore``), where its session allows: a
        2025-era client unless it set a level above ``warning``; a 2026-era request only
        when it opted in at ``warning`` or below (the SDK's session drops the rest)."""
        level: types.LoggingLevel = "warning"
        if (
            ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
            and self.client_log_level is not None
            and LOG_LEVELS.index(level) < LOG_LEVELS.index(self.client_log_level)
        ):
            return
        for message in messages:
            try:
                with warnings.catch_warnings():  # deprecated in 2026-07-28; still allowed
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await ctx.session.send_log_message(
                        level, message, "spillstore", related_request_id=ctx.request_id
                    )
            except Exception as exc:  # the client went away
                log.debug("spillstore proxy: could not send a warning to the client: %s", exc)


class Subscriptions:
    """The resource subscriptions the proxy holds upstream, counted per URI.

    Upstreams that follow the spec send ``notifications/resources/updated`` only for
    subscribed URIs, so every downstream holder of a URI (the 2025-era client's
    ``resources/subscribe``, each 2026-era listen stream naming it) counts, and the
    upstream is subscribed while the count is above zero.

    Args:
        acquire: returns the live upstream connection (restarting it when allowed).
        request_timeout: seconds each subscribe/unsubscribe request may take.
    """

    def __init__(self, acquire: Callable[[], Awaitable[Connection]], request_timeout: float):
        self._acquire = acquire
        self.request_timeout = request_timeout
        self.upstream_subscribes = False
        """Whether the upstream declared ``resources.subscribe`` (else nothing is sent)."""
        self._counts: dict[str, int] = {}
        self._legacy: set[str] = set()

    def legacy_wants(self, uri: str) -> bool:
        """Whether the 2025-era client subscribed to ``uri``."""
        return uri in self._legacy

    async def hold(self, uri: str) -> None:
        """Count one more holder of ``uri``; the first one subscribes upstream.

        Raises:
            MCPError: the upstream refused or did not answer (the count is not kept).
        """
        count = self._counts.get(uri, 0)
        self._counts[uri] = count + 1
        if count == 0 and self.upstream_subscribes:
            try:
                await self._send(
                    types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                )
            except BaseException:
                self._drop(uri)
                raise

    async def release(self, uri: str) -> None:
        """Count one holder of ``uri`` less; the last one unsubscribes upstream."""
        if self._drop(uri) and self.upstream_subscribes:
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
            try:
                await self._send(request)
            except Exception as exc:  # gone upstream: nothing is subscribed there any more
                log.debug("spillstore proxy: unsubscribing %s upstream failed: %s", uri, exc)

    async def renew(self) -> None:
        """Subscribe every held URI again (after an upstream restart)."""
        if not self.upstream_subscribes:
            return
        for uri in list(self._counts):
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
            try:
                await self._send(request)
            except Exception as exc:
                log.warning("spillstore proxy: could not subscribe to %s again: %s", uri, exc)

    async def hold_all(self, uris: Sequence[str]) -> list[str]:
        """Hold every URI of a listen stream; those the upstream refused are logged.

        Returns:
            The URIs held (release them when the stream ends).
        """
        held: list[str] = []
        for uri in dict.fromkeys(uris):
            try:
                await self.hold(uri)
            except Exception as exc:
                log.warning("spillstore proxy: the upstream refused to subscribe %s: %s", uri, exc)
                continue
            held.append(uri)
        return held

    def _drop(self, uri: str) -> bool:
        """Count one holder less; whether it was the last."""
        count = self._counts.get(uri, 0) - 1
        if count > 0:
            self._counts[uri] = count
            return False
        self._counts.pop(uri, None)
        return count == 0

    async def _send(self, request: types.ClientRequest) -> None:
        conn = await self._acquire()
        await conn.session.send_request(
            request, types.EmptyResult, request_read_timeout_seconds=self.request_timeout
        )

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """A 2025-era ``resources/subscribe`` (repeating one changes nothing)."""
        uri = str(params.uri)
        if uri not in self._legacy:
            await self.hold(uri)
            self._legacy.add(uri)
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """A 2025-era ``resources/unsubscribe``."""
        uri = str(params.uri)
        if uri in self._legacy:
            self._legacy.discard(uri)
            await self.release(uri)
        return types.EmptyResult()


class Notifications:
    """The upstream's notifications, passed to every downstream client that listens.

    Args:
        on_tools_changed: called when the upstream's tool list changed (before clients
            are told), e.g. to forget a cached list.
        subscriptions: the resource subscriptions held upstream; a listen stream's URIs
            are held while it is open.
    """

    def __init__(self, on_tools_changed: Callable[[], None], subscriptions: Subscriptions) -> None:
        self._bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self._bus)
        self._subscriptions = subscriptions
        self._downstream: ServerSession | None = None
        self._calls: dict[int, tuple[ServerSession, types.RequestId | None]] = {}
        self._on_tools_changed = on_tools_changed

    def close(self) -> None:
        """End the listen streams."""
        self._listen.close()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """The ``subscriptions/listen`` handler of 2026-era clients.

        The stream's resource URIs are subscribed upstream while it is open.
        """
        held = await self._subscriptions.hold_all(params.notifications.resource_subscriptions or ())
        try:
            return await self._listen(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in held:
                    await self._subscriptions.release(uri)

    async def remember_downstream(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware: keep the 2025-era downstream session, to notify it."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._downstream = ctx.session
        return await call_next(ctx)

    @contextmanager
    def logs_to(self, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """While a 2026-era request runs upstream, send the upstream's logs to it.

        Its session drops them unless the request opted in (its ``_meta`` log level).
        """
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            yield
            return
        key = id(ctx)
        self._calls[key] = (ctx.session, ctx.request_id)
        try:
            yield
        finally:
            self._calls.pop(key, None)

    async def tools_changed(self) -> None:
        """Tell the clients that the tool list changed (an upstream restart may do that)."""
        self._on_tools_changed()
        await self._publish(ToolsListChanged())

    async def restarted(self) -> None:
        """After an upstream restart: subscribe again, and say the tools may differ."""
        await self._subscriptions.renew()
        await self.tools_changed()

    async def on_upstream_message(self, message: IncomingMessage) -> None:
        """The upstream session's message handler."""
        if isinstance(message, Exception):
            log.warning("spillstore proxy: upstream transport error: %s", message)
            return
        if isinstance(message, types.ToolListChangedNotification):
            await self.tools_changed()
        elif isinstance(message, types.PromptListChangedNotification):
            await self._publish(PromptsListChanged())
        elif isinstance(message, types.ResourceListChangedNotification):
            await self._publish(ResourcesListChanged())
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self._publish(ResourceUpdated(uri=str(message.params.uri)))
        elif isinstance(message, types.LoggingMessageNotification):
            await self._forward_log(message.params)

    async def _forward_log(self, params: types.LoggingMessageNotificationParams) -> None:
        log.debug("upstream log [%s] %s: %s", params.level, params.logger or "-", params.data)
        targets: list[tuple[ServerSession, types.RequestId | None]] = list(self._calls.values())
        if self._downstream is not None:
            targets.append((self._downstream, None))
        for session, request_id in targets:
            try:
                with warnings.catch_warnings():  # deprecated in 2026-07-28; still forwarded
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await session.send_log_message(
                        params.level, params.data, params.logger, related_request_id=request_id
                    )
            except Exception as exc:  # the client or the request went away
                log.debug("spillstore proxy: could not forward a log message: %s", exc)

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
            elif self._subscriptions.legacy_wants(event.uri):
                await session.send_resource_updated(event.uri)
        except Exception as exc:  # the client went away: nothing to tell
            log.debug("spillstore proxy: could not forward %s: %s", event, exc)
            self._downstream = None


def progress_forwarder(ctx: ServerRequestContext[Any]) -> Any:
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
