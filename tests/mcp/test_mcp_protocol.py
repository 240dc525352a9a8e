"""MCP proxy, protocol details real clients depend on: subscriptions, logging, bad lines.

The downstream side is the SDK's ``mcp.Client`` (in-process, both protocol eras, or
the proxy's command line as a subprocess); the upstream is ``tests/mcp/mcp_servers/big.py``,
which notifies only the resource URIs a client subscribed to, as the spec asks.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from spillstore import MemoryStore
from spillstore.mcp import SpillProxy
from tests.mcp.mcp_servers.big import BLOB

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
    request that is not valid JSON-RPC gets -32600 with its id (a null one when its id is
    not a string or an integer: such a request was taken for a notification and never
    answered), and serving goes on."""
    command = [sys.executable, "-m", "spillstore.mcp", "serve", "--dir", str(tmp_path / "s")]
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    nested = '{"method": "tools/call", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    bad_request = json.dumps({"jsonrpc": "2.0", "id": 3, "method": 5})
    bad_ids = [
        json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "ping"})
        for bad_id in (1.5, None, True, [1], {"a": 1})
    ]
    lines = ["this is not json", nested, bad_request, "", *bad_ids]
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
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(stdin.encode())
    server.stdin.flush()  # stdin stays open until the last answer: EOF ends serving
    answers: list[dict[str, object]] = []
    while not any(answer.get("id") == 7 for answer in answers):
        answers.append(json.loads(server.stdout.readline()))
    server.stdin.close()
    server.wait(timeout=60)
    server.stdout.close()
    errors = [answer for answer in answers if "error" in answer]
    assert [(e["id"], e["error"]["code"]) for e in errors] == [
        (None, -32700),
        (None, -32700),
        (3, -32600),
        *[(None, -32600)] * 5,
    ]
    assert any(answer.get("id") == 7 and "result" in answer for answer in answers)  # goes on


class _Lines:
    """A proxy subprocess driven line by line over raw JSON-RPC (no SDK client)."""

    def __init__(
        self,
        tmp_path: Path,
        *upstream: str,
        timeout: float = 600,
        stderr: int = subprocess.DEVNULL,
    ) -> None:
        command = [sys.executable, "-m", "spillstore.mcp", "proxy", "--dir", str(tmp_path)]
        command += ["--max-bytes", "20000", "--timeout", str(timeout), "--", *upstream]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=ROOT,
        )

    def send(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def line(self) -> bytes:
        assert self.process.stdout is not None
        return self.process.stdout.readline()

    def response(self) -> dict[str, object]:
        """The next response (notifications such as tools/list_changed are skipped)."""
        while True:
            message: dict[str, object] = json.loads(self.line())
            if "id" in message:
                return message

    def handshake(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT_PARAMS})
        assert b'"result"' in self.line()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"},
}
RAW = [sys.executable, str(ROOT / "tests" / "mcp" / "mcp_servers" / "raw.py")]


def test_small_results_are_forwarded_as_the_upstream_wrote_them(tmp_path: Path) -> None:
    """A result line shorter than the budget goes to the client byte for byte as the
    upstream encoded it (its spacing and key order too), only the request id replaced;
    a larger one is capped, and unknown blocks still become notices."""
    proxy = _Lines(tmp_path, *RAW)
    try:
        proxy.handshake()
        call = {"name": "echo", "arguments": {"text": "h\u00e9llo \U0001f600"}}
        proxy.send({"jsonrpc": "2.0", "id": "a-1", "method": "tools/call", "params": call})
        expected = {
            "jsonrpc": "2.0",
            "id": "a-1",
            "result": {"content": [{"type": "text", "text": "h\u00e9llo \U0001f600"}]},
        }
        assert proxy.line() == json.dumps(expected).encode() + b"\n"
        big = {"name": "big", "arguments": {"size": 300_000}}
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": big})
        capped = json.loads(proxy.line())
        assert capped["id"] == 2 and len(proxy_text(capped).encode()) <= 20_000
        assert capped["result"]["_meta"]["io.github.spillstore/spill"]["totalBytes"] == 300_000
        proxy.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "odd"}})
        odd = json.loads(proxy.line())
        assert odd["id"] == 3 and "[content dropped" in json.dumps(odd)
    finally:
        proxy.close()


def test_a_client_that_closed_its_end_is_gone_not_an_upstream_failure(tmp_path: Path) -> None:
    """Answers that cannot be written because the client closed its end of the pipe end
    there: the upstream connection is not torn down as failed (nor restarted), and the
    proxy ends quietly with status 0 (it exited with a traceback and status 1 when an
    answer of the SDK path met the closed pipe)."""
    proxy = _Lines(tmp_path, *RAW, stderr=subprocess.PIPE)
    proxy.handshake()
    assert proxy.process.stdout is not None and proxy.process.stdin is not None
    proxy.process.stdout.close()
    for number in range(3):
        call = {"name": "echo", "arguments": {"text": f"call {number}"}}
        proxy.send({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": call})
    time.sleep(1.0)  # the answers come back and meet the closed pipe
    with contextlib.suppress(BrokenPipeError):  # the proxy may have ended already
        proxy.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})  # the SDK path
        time.sleep(1.0)
        proxy.process.stdin.close()
    assert proxy.process.wait(timeout=30) == 0
    assert proxy.process.stderr is not None
    with proxy.process.stderr:
        err = proxy.process.stderr.read().decode()
    assert "upstream connection failed" not in err and "restarting" not in err, err
    assert "Traceback" not in err, err


def test_a_crash_during_a_direct_call_is_an_error_result_and_the_next_call_restarts(
    tmp_path: Path,
) -> None:
    """A call forwarded without the SDK sessions still reports an upstream crash as an
    ``is_error`` result, and the next call restarts the upstream."""
    proxy = _Lines(tmp_path, *RAW)
    try:
        proxy.handshake()
        crash = {"name": "crash", "arguments": {"code": 7}}
        proxy.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": crash})
        crashed = proxy.response()
        assert crashed["id"] == 1 and crashed["result"]["isError"] is True
        assert "exited with code 7" in proxy_text(crashed)
        echo = {"name": "echo", "arguments": {"text": "back"}}
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo})
        assert proxy_text(proxy.response()) == "back"
    finally:
        proxy.close()


def proxy_text(message: dict[str, object]) -> str:
    result = message["result"]
    assert isinstance(result, dict)
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_a_cancelled_direct_call_gets_no_response_and_the_proxy_goes_on(tmp_path: Path) -> None:
    """A client's ``notifications/cancelled`` for a call in flight reaches the upstream,
    no response is sent for that call, and the next call is answered."""
    proxy = _Lines(tmp_path, *RAW)
    try:
        proxy.handshake()
        freeze = {"name": "freeze", "arguments": {"seconds": 2}}
        proxy.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": freeze})
        cancel = {"requestId": 1, "reason": "changed my mind"}
        proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        echo = {"name": "echo", "arguments": {"text": "next"}}
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo})
        answer = proxy.response()
        assert answer["id"] == 2 and proxy_text(answer) == "next"
    finally:
        proxy.close()


def test_a_direct_call_that_times_out_is_an_error_result(tmp_path: Path) -> None:
    """A call forwarded without the SDK sessions that outlives ``--timeout`` gets the
    same ``is_error`` result as through them (the server, still alive, keeps serving)."""
    proxy = _Lines(tmp_path, *RAW, timeout=1)
    try:
        proxy.handshake()
        freeze = {"name": "freeze", "arguments": {"seconds": 3}}
        proxy.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": freeze})
        late = proxy.response()
        assert late["id"] == 1 and "did not answer 'freeze' within 1 s" in proxy_text(late)
        assert "still answers other requests" in proxy_text(late)
        echo = {"name": "echo", "arguments": {"text": "after"}}
        proxy.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo})
        assert proxy_text(proxy.response()) == "after"
    finally:
        proxy.close()


async def test_a_result_that_fits_keeps_its_blob_through_the_proxy(tmp_path: Path) -> None:
    """A small result holding a blob resource (with text, image, audio and a link) comes
    back through the proxy command line unchanged: nothing is dropped or noticed."""
    command = [sys.executable, "-m", "spillstore.mcp", "proxy", "--dir", str(tmp_path), "--"]
    params = StdioServerParameters(command=command[0], args=[*command[1:], *BIG], cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        proxied = await client.call_tool("mixed", {"size": 100})
    async with Client(StdioServerParameters(command=BIG[0], args=BIG[1:]), mode="legacy") as c:
        direct = await c.call_tool("mixed", {"size": 100})
    assert proxied.content == direct.content
    [blob] = [
        block.resource
        for block in proxied.content
        if isinstance(block, types.EmbeddedResource)
        and isinstance(block.resource, types.BlobResourceContents)
    ]
    assert blob.blob == BLOB


def test_pipelined_direct_calls_each_get_their_own_answer(tmp_path: Path) -> None:
    """Calls sent back to back, before any answer is read, small and large mixed: each id
    gets its own result (a small one as it came, a large one capped), whatever the order
    in which they come back."""
    proxy = _Lines(tmp_path, *RAW)
    try:
        proxy.handshake()
        for n in range(30):
            call = (
                {"name": "big", "arguments": {"size": 100_000 + n}}
                if n % 7 == 3
                else {"name": "echo", "arguments": {"text": f"call {n}"}}
            )
            proxy.send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call})
        answers = {}
        for _ in range(30):
            answer = proxy.response()
            answers[answer["id"]] = answer
        assert sorted(answers) == list(range(30))  # type: ignore[type-var]
        for n, answer in answers.items():
            assert isinstance(n, int)
            if n % 7 == 3:
                spill = answer["result"]["_meta"]["io.github.spillstore/spill"]  # type: ignore[index]
                assert spill["totalBytes"] == 100_000 + n
                assert len(proxy_text(answer).encode()) <= 20_000
            else:
                assert proxy_text(answer) == f"call {n}"
    finally:
        proxy.close()


LATE_CLASH = [*BIG, "--late-clash", "read_spill"]


async def _late_clash_logs(
    mode: str, **client: object
) -> list[types.LoggingMessageNotificationParams]:
    """The log messages a client of ``mode`` gets while a tool named ``read_spill``
    appears upstream and it lists the tools three times."""
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with (
        SpillProxy(LATE_CLASH, store=MemoryStore()) as running,
        Client(running.server, mode=mode, logging_callback=on_log, **client) as connected,  # type: ignore[arg-type]
    ):
        await connected.call_tool("add_tool", {})
        for _ in range(3):
            names = [tool.name for tool in (await connected.list_tools()).tools]
            assert names.count("read_spill") == 1
        await anyio.sleep(0.1)
    return [params for params in logged if params.logger == "spillstore"]


@legacy_calls
async def test_a_late_clash_is_told_to_a_2025_client_as_a_log_message() -> None:
    """The warning about an upstream tool hidden by a spill tool's name reaches a
    2025-era client as one ``notifications/message`` (stderr is usually hidden)."""
    logged = await _late_clash_logs("legacy")
    assert len(logged) == 1
    assert logged[0].level == "warning"
    assert "now has a tool named 'read_spill'" in str(logged[0].data)
    assert "restart the proxy" in str(logged[0].data)


@legacy_calls
async def test_a_late_clash_respects_the_level_a_2025_client_set() -> None:
    """A 2025-era client that asked for errors only gets no warning."""
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with (
        SpillProxy(LATE_CLASH, store=MemoryStore()) as running,
        Client(running.server, mode="legacy", logging_callback=on_log) as client,
    ):
        await client.set_logging_level("error")
        await client.call_tool("add_tool", {})
        await client.list_tools()
        await anyio.sleep(0.1)
    assert [params for params in logged if params.logger == "spillstore"] == []


@pytest.mark.parametrize(("log_level", "told"), [("warning", 1), (None, 0), ("error", 0)])
async def test_a_late_clash_reaches_a_2026_list_that_opted_in(
    log_level: str | None, told: int
) -> None:
    """On 2026-07-28 the warning rides the ``tools/list`` request that found the clash,
    when that request opted in to logs at ``warning`` or below."""
    client = {} if log_level is None else {"log_level": log_level}
    logged = await _late_clash_logs("auto", **client)
    assert len(logged) == told
