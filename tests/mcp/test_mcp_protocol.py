"""MCP proxy, protocol details real clients depend on: subscriptions, logging, bad lines.

The downstream side is the SDK's ``mcp.Client`` (in-process, both protocol eras, or
the proxy's command line as a subprocess); the upstream is ``tests/mcp/mcp_servers/big.py``,
which notifies only the resource URIs a client subscribed to, as the spec asks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from spillstore import MemoryStore
from spillstore.mcp import SpillProxy

ROOT = Path(__file__).resolve().parents[2]
BIG = [sys.executable, str(ROOT / "tests" / "mcp" / "mcp_servers" / "big.py")]

pytestmark = pytest.mark.anyio

legacy_calls = pytest.mark.filterwarnings(
    "ignore:.* (is removed|is deprecated) as of 2026-07-28:mcp.MCPDeprecationWarning"
)
"""The 2025-era client methods (subscribe, setLevel) warn that 2026-07-28 removed them."""


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def test_listen_stream_subscribes_its_resources_upstream() -> None:
    """A 2026-era listen on a resource URI subscribes it upstream, so its updates arrive,
    and closing the stream unsubscribes it."""
    async with (
        SpillProxy(BIG, store=MemoryStore()) as running,
        Client(running.server, mode="auto") as client,
    ):
        assert texts(await client.call_tool("touch", {"uri": "test://small"})) == [
            "test://small is not subscribed"
        ]
        async with client.listen(resource_subscriptions=["test://small"]) as subscription:
            assert texts(await client.call_tool("touch", {"uri": "test://small"})) == [
                "notified test://small"
            ]
            with anyio.fail_after(10):
                event = await subscription.__anext__()
        assert type(event).__name__ == "ResourceUpdated"
        assert event.uri == "test://small"  # type: ignore[attr-defined]
        with anyio.fail_after(10):
            while texts(await client.call_tool("touch", {"uri": "test://small"})) != [
                "test://small is not subscribed"
            ]:
                await anyio.sleep(0.05)  # the stream's end unsubscribes after it returns


@legacy_calls
async def test_subscriptions_are_counted_across_clients_of_both_eras() -> None:
    """A URI stays subscribed upstream while any holder is left: the 2025-era client's
    unsubscribe does not end a 2026-era stream's subscription."""
    updates: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with (
        SpillProxy(BIG, store=MemoryStore()) as running,
        Client(running.server, mode="legacy", message_handler=on_message) as legacy,
        Client(running.server, mode="auto") as modern,
    ):
        await legacy.subscribe_resource("test://small")
        await legacy.subscribe_resource("test://small")  # repeated: still one holder
        async with modern.listen(resource_subscriptions=["test://small"]) as subscription:
            await legacy.unsubscribe_resource("test://small")
            assert texts(await modern.call_tool("touch", {"uri": "test://small"})) == [
                "notified test://small"
            ]
            with anyio.fail_after(10):
                event = await subscription.__anext__()
            assert event.uri == "test://small"  # type: ignore[attr-defined]
        await legacy.subscribe_resource("test://small")
        assert texts(await legacy.call_tool("touch", {"uri": "test://small"})) == [
            "notified test://small"
        ]
        with anyio.fail_after(10):
            while not updates:
                await anyio.sleep(0.01)
    assert updates == ["test://small"]  # not the update sent while it had unsubscribed


@legacy_calls
async def test_subscriptions_survive_an_upstream_restart() -> None:
    """After the upstream crashed and was restarted, held URIs are subscribed again."""
    async with (
        SpillProxy(BIG, store=MemoryStore()) as running,
        Client(running.server, mode="legacy") as client,
    ):
        await client.subscribe_resource("test://small")
        crashed = await client.call_tool("crash", {"code": 4})
        assert crashed.is_error
        assert texts(await client.call_tool("touch", {"uri": "test://small"})) == [
            "notified test://small"
        ]
        assert running.restarts == 1


@legacy_calls
async def test_set_level_and_log_messages_reach_a_2025_client() -> None:
    """``logging/setLevel`` goes upstream (which filters by it) and the upstream's log
    messages reach the client; the proxy declares the logging capability it forwards."""
    logged: list[tuple[str, object]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append((params.level, params.data))

    async with (
        SpillProxy(BIG, store=MemoryStore()) as running,
        Client(running.server, mode="legacy", logging_callback=on_log) as client,
    ):
        capabilities = client.session.server_capabilities
        assert capabilities is not None and capabilities.logging is not None
        await client.set_logging_level("warning")
        assert texts(await client.call_tool("log", {"level": "info", "data": "quiet"})) == [
            "not logged below warning"
        ]
        assert texts(await client.call_tool("log", {"level": "error", "data": "loud"})) == [
            "logged"
        ]
        with anyio.fail_after(10):
            while not logged:
                await anyio.sleep(0.01)
    assert logged == [("error", "loud")]


async def test_log_messages_reach_a_2026_call_that_opted_in() -> None:
    """On 2026-07-28, the upstream's log messages during a call reach that call when it
    opted in (``_meta`` log level), and only at or above its level."""
    logged: list[tuple[str, object]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append((params.level, params.data))

    async with SpillProxy(BIG, store=MemoryStore()) as running:
        async with Client(running.server, mode="auto", logging_callback=on_log) as silent:
            assert texts(await silent.call_tool("log", {"level": "error", "data": "a"})) == [
                "logged"
            ]
        async with Client(
            running.server, mode="auto", logging_callback=on_log, log_level="error"
        ) as client:
            await client.call_tool("log", {"level": "info", "data": "b"})
            await client.call_tool("log", {"level": "error", "data": "c"})
            with anyio.fail_after(10):
                while not logged:
                    await anyio.sleep(0.01)
    assert logged == [("error", "c")]


def test_non_json_lines_on_stdin_get_a_parse_error(tmp_path: Path) -> None:
    """A line that is not JSON gets a JSON-RPC -32700 parse error with a null id, a JSON
    request that is not valid JSON-RPC gets -32600 with its id, and serving goes on."""
    command = [sys.executable, "-m", "spillstore.mcp", "serve", "--dir", str(tmp_path / "s")]
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    lines = ["this is not json", json.dumps({"jsonrpc": "2.0", "id": 3, "method": 5}), ""]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    stdin = "\n".join([json.dumps(initialize), *lines, json.dumps(ping)]) + "\n"
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    errors = [answer for answer in answers if "error" in answer]
    assert [(e["id"], e["error"]["code"]) for e in errors] == [(None, -32700), (3, -32600)]
    assert any(answer.get("id") == 7 and "result" in answer for answer in answers)
