"""What the proxy forwards as it is: requests, notifications and progress.

- :class:`Passthrough`: resources (list, templates, read, subscribe), prompts (list,
  get) and completions, sent upstream unchanged when the upstream has them; their
  results come back uncapped.
- :class:`Notifications`: the upstream's list-changed and resource-updated
  notifications, to 2025-era clients on their session and to 2026-era clients on their
  ``subscriptions/listen`` streams; the upstream's log messages go to the ``spillstore``
  logger.
- :func:`progress_forwarder`: progress of an upstream call, to the downstream request.
- :class:`ProxyServer`: the downstream server, advertising the notifications it forwards.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from spillstore.mcp.upstream import Connection

__all__ = ["Notifications", "Passthrough", "ProxyServer", "progress_forwarder"]

log = logging.getLogger("spillstore")

_Result = TypeVar("_Result", bound=types.Result)


class ProxyServer(Server[Any]):
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


class Passthrough:
    """The requests the proxy sends upstream unchanged, as downstream server handlers.

    Args:
        acquire: returns the live upstream connection (restarting it when allowed).
        request_timeout: seconds each request may take.
    """

    def __init__(self, acquire: Callable[[], Awaitable[Connection]], request_timeout: float):
        self._acquire = acquire
        self.request_timeout = request_timeout

    def handlers(self, caps: types.ServerCapabilities) -> dict[str, Any]:
        """The ``on_*`` server handlers for what the upstream's capabilities offer."""
        handlers: dict[str, Any] = {}
        if caps.resources is not None:
            handlers["on_list_resources"] = self.list_resources
            handlers["on_list_resource_templates"] = self.list_resource_templates
            handlers["on_read_resource"] = self.read_resource
            if caps.resources.subscribe:
                handlers["on_subscribe_resource"] = self.subscribe
                handlers["on_unsubscribe_resource"] = self.unsubscribe
        if caps.prompts is not None:
            handlers["on_list_prompts"] = self.list_prompts
            handlers["on_get_prompt"] = self.get_prompt
        if caps.completions is not None:
            handlers["on_completion"] = self.complete
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

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=params.uri))
        return await self._forward(request, types.EmptyResult)

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=params.uri))
        return await self._forward(request, types.EmptyResult)

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


class Notifications:
    """The upstream's notifications, passed to every downstream client that listens.

    Args:
        on_tools_changed: called when the upstream's tool list changed (before clients
            are told), e.g. to forget a cached list.
    """

    def __init__(self, on_tools_changed: Callable[[], None]) -> None:
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        """The ``subscriptions/listen`` handler of 2026-era clients."""
        self._downstream: ServerSession | None = None
        self._on_tools_changed = on_tools_changed

    def close(self) -> None:
        """End the listen streams."""
        self.listen.close()

    async def remember_downstream(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware: keep the 2025-era downstream session, to notify it."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._downstream = ctx.session
        return await call_next(ctx)

    async def tools_changed(self) -> None:
        """Tell the clients that the tool list changed (an upstream restart may do that)."""
        self._on_tools_changed()
        await self._publish(ToolsListChanged())

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
            params = message.params
            log.info("upstream log [%s] %s: %s", params.level, params.logger or "-", params.data)

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
