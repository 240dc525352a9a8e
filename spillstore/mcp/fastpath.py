"""Upstream ``tools/call`` round trips over stdio without the SDK sessions.

Through the SDK sessions, a small call pays for two parses, two validations and two
serializations, plus each session's dispatch. When the proxy serves stdio
(:meth:`~spillstore.mcp.proxy.SpillProxy.run_stdio`), :class:`FastCalls` sees every line
first (:data:`~spillstore.mcp.stdio.Intercept`) and takes over a ``tools/call`` of an
upstream tool (not a spill tool; no ``_meta``: no progress token, no 2026-era stamps)
once a 2025-era client finished its handshake (``notifications/initialized``), while
the upstream connection is alive:

- the request goes to the upstream's stdin with an id of its own
  (:data:`~spillstore.mcp.transport.CLAIM_PREFIX`) at once, from the task that read it,
  and the transport hands the response line back unparsed
  (:attr:`~spillstore.mcp.transport.StdioTransport.claims`);
- a response line no longer than the budget cannot hold a result over the budget (JSON
  never has fewer bytes than the text it encodes, nor base64 than the bytes), so when
  its content blocks are all of known types it goes back **as it came**, only the id
  replaced, never decoded into models or encoded again, written to stdout by the task
  that read it from the upstream (no task switch between the two pipes);
- any other response is parsed (in a worker thread when large), validated and capped by
  the same :meth:`~spillstore.mcp.proxy.SpillProxy.cap_result` as the SDK path; an
  upstream end, a timeout and a downstream ``notifications/cancelled`` get the same
  results (or silence) as there.

A call has no task of its own while it waits (a task spawn, a cancel scope and a wake-up
per call were most of what the path cost): one watcher task times calls out (they share
one timeout, so a queue in arrival order is in deadline order), and a task is started
only for what takes time: a response to parse and cap, an error result to make, a
request the pipe did not take at once.

Everything else (other methods, the spill tools, calls while the upstream is down, which
restart it) goes through the SDK sessions as before.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from spillstore.mcp.stdio import Reply
from spillstore.mcp.transport import (
    CLAIM_PREFIX,
    THREAD_PARSE_BYTES,
    Claim,
    Claimed,
    StdioTransport,
    known_blocks_only,
    load_tool_response,
)
from spillstore.mcp.upstream import Connection

if TYPE_CHECKING:
    from spillstore._settings import Settings
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["FastCalls", "ProxySide"]

log = logging.getLogger("spillstore")

_IDLE_SECONDS = 1.0
"""The longest the timeout watcher sleeps (so done calls leave its queue soon)."""

_MARKS = (
    b'"tools/call"',
    b'"notifications/cancelled"',
    b'"notifications/initialized"',
    b'"initialize"',
)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _response(request_id: Any, result: types.CallToolResult, version: str) -> bytes:
    """A result as the SDK server sends it on ``version`` (only that version's fields)."""
    body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    body = serialize_server_result("tools/call", version, body)
    return _line({"jsonrpc": "2.0", "id": request_id, "result": body})


class ProxySide(Protocol):
    """What this path needs of the proxy (:class:`~spillstore.mcp.proxy.SpillProxy` is
    one): its budget, spill tools and call timeout, its live stdio upstream, the cap
    and the error results."""

    @property
    def settings(self) -> Settings: ...
    @property
    def spill_tools(self) -> SpillTools: ...
    @property
    def call_timeout(self) -> float: ...
    def live_stdio_connection(self) -> Connection | None: ...
    async def cap_result(
        self, result: types.CallToolResult, name: str, call_id: str
    ) -> types.CallToolResult: ...
    async def ended_error(self, name: str, conn: Connection) -> types.CallToolResult: ...
    async def timeout_error(self, name: str, conn: Connection) -> types.CallToolResult: ...


@dataclass(eq=False)
class _Call(Claim):
    """One call on this path: ids both ways, the tool, where its answer goes, and when it
    times out (the transport's :class:`Claim` of its response)."""

    owner: FastCalls
    request_id: Any
    upstream_id: str
    name: str
    conn: Connection
    transport: StdioTransport
    reply: Reply
    deadline: float
    done: bool = False
    """Answered, being answered, cancelled or timed out: nothing more to do for it here."""

    async def deliver(self, claimed: Claimed) -> None:
        await self.owner.delivered(self, claimed)

    def end(self) -> None:
        self.owner.ended(self)


async def _cancel_upstream(transport: StdioTransport, upstream_id: str, reason: Any) -> None:
    cancelled = {
        "requestId": upstream_id,
        **({"reason": reason} if isinstance(reason, str) else {}),
    }
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
    try:
        await transport.send_raw(_line(message))
    except OSError as exc:
        log.debug("spillstore proxy: could not cancel %s upstream: %s", upstream_id, exc)


class FastCalls:
    """The ``tools/call`` requests a stdio proxy forwards without the SDK sessions.

    Args:
        proxy: the running proxy (:class:`ProxySide`: its upstream, spill tools, budget
            and results).
        tg: the task group the calls run in (cancelled when serving ends).
    """

    def __init__(self, proxy: ProxySide, tg: anyio.abc.TaskGroup) -> None:
        self._proxy = proxy
        self._spill_names = frozenset(proxy.spill_tools.names)  # decided at start
        self._tg = tg
        self._count = 0
        self._ready = False  # a 2025-era client finished its handshake
        self._version = HANDSHAKE_PROTOCOL_VERSIONS[-1]
        self._calls: dict[Any, _Call] = {}
        self._deadlines: deque[_Call] = deque()  # in deadline order: one timeout for all
        self._watching = False

    async def intercept(self, line: bytes | bytearray, reply: Reply) -> bool:
        """Take over ``line`` if it is a call (or a cancellation) this path handles."""
        if len(line) > THREAD_PARSE_BYTES or not any(mark in line for mark in _MARKS):
            return False
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError):  # the SDK path answers it
            return False
        if not isinstance(raw, dict):
            return False
        method = raw.get("method")
        if method == "initialize":
            params = raw.get("params")
            wanted = params.get("protocolVersion") if isinstance(params, dict) else None
            if wanted in HANDSHAKE_PROTOCOL_VERSIONS:  # else the server offers its latest
                self._version = wanted
            return False
        if method == "notifications/initialized":
            self._ready = True
            return False  # the server needs it too
        if method == "notifications/cancelled":
            return await self._cancel(raw.get("params"))
        return self._ready and self._start(raw, reply)

    def _start(self, raw: dict[str, Any], reply: Reply) -> bool:
        params = raw.get("params")
        request_id = raw.get("id")
        if (
            raw.get("method") != "tools/call"
            or raw.get("jsonrpc") != "2.0"
            or not isinstance(params, dict)
            or not isinstance(request_id, int | str)
            or isinstance(request_id, bool)
            or request_id in self._calls
        ):
            return False
        name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict | None):
            return False
        if meta is not None and (not isinstance(meta, dict) or meta):
            return False  # a progress token, a 2026-era stamp, ...: the SDK path
        conn = self._proxy.live_stdio_connection()
        if conn is None or name in self._spill_names:
            return False
        self._count += 1
        upstream_id = f"{CLAIM_PREFIX}{self._count}"
        forwarded: dict[str, Any] = {"name": name}
        if arguments:
            forwarded["arguments"] = arguments
        request = {"jsonrpc": "2.0", "id": upstream_id, "method": "tools/call", "params": forwarded}
        assert conn.transport is not None
        deadline = anyio.current_time() + self._proxy.call_timeout
        call = _Call(self, request_id, upstream_id, name, conn, conn.transport, reply, deadline)
        self._calls[request_id] = call  # now: a cancellation may be the next line
        conn.transport.claims[upstream_id] = call
        self._deadlines.append(call)
        if not self._watching:
            self._watching = True
            self._tg.start_soon(self._watch)
        data = _line(request)
        try:  # at once when the pipe takes it whole: no task switch on the way
            sent = conn.transport.send_raw_nowait(data)
        except OSError:
            self.ended(call)
            return True
        if not sent:
            self._tg.start_soon(self._send, call, data)
        return True

    async def _send(self, call: _Call, data: bytes) -> None:
        """Send a request the pipe did not take at once."""
        try:
            await call.transport.send_raw(data)
        except OSError:
            self.ended(call)

    def _settle(self, call: _Call) -> bool:
        """Mark the call done (False: it was already); it is no longer cancellable here."""
        if call.done:
            return False
        call.done = True
        self._calls.pop(call.request_id, None)
        call.transport.claims.pop(call.upstream_id, None)
        return True

    async def delivered(self, call: _Call, claimed: Claimed) -> None:
        """The upstream's response line: a small one that passes as it is goes back now,
        from the transport's reader; any other is parsed and capped in a task."""
        if not self._settle(call):
            return  # timed out or cancelled meanwhile
        answer = self._as_it_came(claimed, call.request_id)
        if answer is None:
            self._tg.start_soon(self._finish, call, [claimed])
            return
        with suppress(anyio.ClosedResourceError):  # the client is gone
            await call.reply(answer)

    def ended(self, call: _Call) -> None:
        """The upstream ended (or could not be written to) before it answered."""
        if self._settle(call):
            self._tg.start_soon(self._fail, call, False)

    def _as_it_came(self, claimed: Claimed, request_id: Any) -> bytes | None:
        """The response line with the client's id, if it can go back as it came: no
        longer than the budget, and an error or a result of known content blocks."""
        line, (start, end) = claimed
        if len(line) > self._proxy.settings.max_bytes:
            return None
        raw = json.loads(line)
        if isinstance(raw, dict) and ("error" in raw or known_blocks_only(raw.get("result"))):
            return b"".join((line[:start], json.dumps(request_id).encode(), line[end:], b"\n"))
        return None

    async def _cancel(self, params: Any) -> bool:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        call = self._calls.get(request_id) if isinstance(request_id, int | str) else None
        if call is None or not self._settle(call):
            return False
        await _cancel_upstream(call.transport, call.upstream_id, params.get("reason"))
        return True

    async def _watch(self) -> None:
        """Time out the calls that pass their deadline (every call has the same timeout,
        so the queue is in deadline order); calls done meanwhile are dropped from it."""
        while True:
            while self._deadlines and self._deadlines[0].done:
                self._deadlines.popleft()
            now = anyio.current_time()
            if self._deadlines and self._deadlines[0].deadline <= now:
                call = self._deadlines.popleft()
                self._settle(call)
                self._tg.start_soon(self._fail, call, True)
                continue
            wait = self._deadlines[0].deadline - now if self._deadlines else _IDLE_SECONDS
            await anyio.sleep(min(wait, _IDLE_SECONDS))

    async def _fail(self, call: _Call, timed_out: bool) -> None:
        """The error result of a call that timed out, or whose upstream ended."""
        if timed_out:
            await _cancel_upstream(call.transport, call.upstream_id, "timed out in the proxy")
            result = await self._proxy.timeout_error(call.name, call.conn)
        else:
            result = await self._proxy.ended_error(call.name, call.conn)
        with suppress(anyio.ClosedResourceError):
            await call.reply(_response(call.request_id, result, self._version))

    async def _finish(self, call: _Call, box: list[Claimed]) -> None:
        """Parse and cap a response that cannot go back as it came."""
        try:
            answer = await self._answer(box, call.request_id, call.name)
        except Exception as exc:  # an unreadable response: an error, not a dead proxy
            log.warning("spillstore proxy: bad response to %r from upstream: %s", call.name, exc)
            error = {"code": types.INTERNAL_ERROR, "message": f"bad upstream response: {exc}"}
            answer = _line({"jsonrpc": "2.0", "id": call.request_id, "error": error})
        with suppress(anyio.ClosedResourceError):
            await call.reply(answer)

    async def _answer(self, box: list[Claimed], request_id: Any, name: str) -> bytes:
        """The downstream line for the upstream's response line (taken out of ``box``)."""
        line, _ = box.pop()
        size = len(line)
        lines = [line]
        del line
        if size > THREAD_PARSE_BYTES:
            raw = await anyio.to_thread.run_sync(load_tool_response, lines)
        else:
            raw = load_tool_response(lines)
        if not isinstance(raw, dict) or not isinstance(raw.get("result"), dict):
            error = raw.get("error") if isinstance(raw, dict) else None
            if not isinstance(error, dict):
                error = {"code": types.INTERNAL_ERROR, "message": "unreadable upstream response"}
            return _line({"jsonrpc": "2.0", "id": request_id, "error": error})
        result = types.CallToolResult.model_validate(raw.pop("result"))
        capped = await self._proxy.cap_result(result, name, str(request_id))
        return _response(request_id, capped, self._version)
