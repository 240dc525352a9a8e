"""MCP integration, in-process: the spill server, the proxy and its linear transport.

The downstream side is always the SDK's own ``mcp.Client`` connected in-process (both
protocol eras), so every result here passed the SDK's validation, output schemas
included. The upstreams are real subprocesses: ``tests/mcp/mcp_servers/big.py`` (an SDK
server) and ``tests/mcp/mcp_servers/raw.py`` (hand-written JSON-RPC, no SDK).
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError

from spillstore import MemoryStore, Settings, TruncationService
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp import LineSplitter, SpillProxy, StdioTransport, spill_server
from spillstore.mcp.convert import SPILL_META_KEY
from spillstore.mcp.transport import parse_line
from tests.mcp.mcp_servers.big import BLOB, PNG, WAV, make_text

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
BIG = [sys.executable, str(SERVERS / "big.py")]
RAW = [sys.executable, str(SERVERS / "raw.py")]
MODES = ("legacy", "auto")
BUDGET = 20_000


@pytest.fixture(scope="module")
def proxy_store() -> MemoryStore:
    """One in-memory store for the shared proxy."""
    return MemoryStore()


@pytest.fixture(scope="module")
async def proxy(proxy_store: MemoryStore) -> AsyncIterator[SpillProxy]:
    """A proxy in front of big.py, shared by the tests that do not break it."""
    async with SpillProxy(BIG, store=proxy_store, settings=Settings(max_bytes=BUDGET)) as running:
        yield running


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def size(text: str) -> int:
    return len(text.encode("utf-8"))


# --------------------------------------------------------------------------- transport


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=10),
    st.booleans(),
)
def test_line_splitter_recovers_every_line_for_any_chunking(
    lines: list[bytes], cuts: list[int], trailing: bool
) -> None:
    """Lines come back exactly, whatever the chunk boundaries; an unterminated rest is kept."""
    data = b"".join(line + b"\n" for line in lines) + (b"tail" if trailing else b"")
    splitter = LineSplitter()
    out: list[bytes] = []
    position, index = 0, 0
    while position < len(data):
        step = cuts[index % len(cuts)]
        out.extend(bytes(line) for line in splitter.feed(data[position : position + step]))
        position += step
        index += 1
    assert out == lines
    rest = splitter.finish()
    assert (bytes(rest) if rest is not None else None) == (b"tail" if trailing else None)


def test_line_splitter_grows_one_buffer_for_a_long_line() -> None:
    """A line longer than many chunks is held as one growing buffer until its newline."""
    splitter = LineSplitter()
    chunk = b"a" * 65_536
    for count in range(1, 50):
        assert splitter.feed(chunk) == []
        assert splitter.pending_bytes == count * len(chunk)
    [line] = splitter.feed(b"b\nc")
    assert len(line) == 49 * 65_536 + 1 and line.endswith(b"ab")
    assert splitter.pending_bytes == 1


def test_parse_line_accepts_lone_surrogates_and_reports_bad_json_as_a_value() -> None:
    """Lone surrogate escapes parse as json does; a bad line is an exception value, not raised."""
    message = parse_line(b'{"jsonrpc":"2.0","id":1,"result":{"t":"\\ud800x"}}')
    assert not isinstance(message, Exception)
    assert isinstance(message.message, types.JSONRPCResponse)
    assert message.message.result == {"t": "\ud800x"}
    assert isinstance(parse_line(b"not json"), Exception)
    assert not isinstance(parse_line(bytearray(b'{"jsonrpc":"2.0","method":"x"}')), Exception)


def test_parse_line_replaces_unknown_blocks_only_in_tool_call_results() -> None:
    """Unknown content blocks of a tracked tools/call response become visible notices."""
    line = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"content": [{"type": "text", "text": "a"}, {"type": "hologram"}]},
        }
    ).encode()
    untracked = parse_line(line, set())
    assert not isinstance(untracked, Exception)
    assert isinstance(untracked.message, types.JSONRPCResponse)
    assert untracked.message.result["content"][1] == {"type": "hologram"}
    ids: set[Any] = {7}
    tracked = parse_line(line, ids)
    assert not isinstance(tracked, Exception) and ids == set()
    assert isinstance(tracked.message, types.JSONRPCResponse)
    notice = tracked.message.result["content"][1]
    assert notice["type"] == "text"
    assert notice["text"].startswith("[content dropped: content block of unknown type 'hologram'")


@pytest.mark.anyio
async def test_transport_reads_a_multi_megabyte_line_exactly() -> None:
    """The linear transport delivers an 8 MB result byte-exact to an SDK client."""
    async with Client(StdioTransport(BIG[0], BIG[1:]), mode="legacy") as client:
        result = await client.call_tool("big", {"size": 8_000_000, "char": "é"})
    [body] = texts(result)
    assert body == make_text(8_000_000, char="é")


# --------------------------------------------------------------------------- spill server


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_spill_server_serves_read_only_plain_text_tools(mode: str) -> None:
    """serve's tools are read-only, have no output schema, and answer in text only."""
    store = MemoryStore()
    service = TruncationService(store, Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=200))
    capped = service.truncate_for_model(make_text(50_000), tool_name="t", tool_call_id="c1")
    assert capped.spill is not None and capped.spill.spill_id is not None
    server = spill_server(SpillTools(store))
    async with Client(server, mode=mode) as client:
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == [
            "read_spill",
            "grep_spill",
            "list_spills",
            "query_spill",
        ]
        for tool in tools:
            assert tool.annotations is not None and tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert tool.output_schema is None
        page = await client.call_tool(
            "read_spill", {"spill": capped.spill.spill_id, "offset": 100, "limit": 3}
        )
        assert page.structured_content is None and not page.is_error
        [text] = texts(page)
        assert "00000099 xxx" in text and "lines 100-102 of 500" in text
        listing = texts(await client.call_tool("list_spills", {}))[0]
        assert capped.spill.spill_id in listing
        bad = await client.call_tool("read_spill", {"spill": "nope-00000000000000000000"})
        assert bad.is_error and "list_spills" in texts(bad)[0]


@pytest.mark.anyio
async def test_spill_server_tool_names_are_configurable() -> None:
    """Renamed tools are listed and callable under their new names."""
    tools = SpillTools(
        MemoryStore(), read_name="Read", grep_name="Grep", list_name="List", query_name="Query"
    )
    async with Client(spill_server(tools)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == ["Read", "Grep", "List", "Query"]
        assert not (await client.call_tool("List", {})).is_error


# --------------------------------------------------------------------------- proxy: results


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_proxy_lists_upstream_tools_without_output_schemas_plus_spill_tools(
    proxy: SpillProxy, mode: str
) -> None:
    """Upstream tools are forwarded (output schema stripped) and the spill tools added."""
    async with Client(proxy.server, mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert {"big", "echo", "structured", "read_spill", "grep_spill", "list_spills"} <= set(tools)
    assert all(tool.output_schema is None for tool in tools.values())
    assert tools["structured"].input_schema["required"] == ["size"]
    assert tools["read_spill"].annotations is not None
    assert tools["read_spill"].annotations.read_only_hint is True


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_proxy_passes_small_results_through_unchanged(proxy: SpillProxy, mode: str) -> None:
    """A result within the budget reaches the client exactly as the upstream sent it."""
    async with Client(proxy.server, mode=mode) as client:
        result = await client.call_tool("echo", {"text": "héllo\n" * 100})
    assert texts(result) == ["héllo\n" * 100]
    assert not result.is_error and (result.meta or {}).get(SPILL_META_KEY) is None


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_proxy_caps_a_big_result_and_the_spill_pages_through_the_proxy(
    proxy: SpillProxy, proxy_store: MemoryStore, mode: str
) -> None:
    """A 3 MB result is capped to the budget, spilled byte-exact, and paged with read_spill."""
    expected = make_text(3_000_000, char="ü")
    async with Client(proxy.server, mode=mode) as client:
        result = await client.call_tool("big", {"size": 3_000_000, "char": "ü"})
        [text] = texts(result)
        assert size(text) <= BUDGET
        spill = (result.meta or {})[SPILL_META_KEY]
        assert spill["totalBytes"] == 3_000_000
        assert spill["sha256"] == hashlib.sha256(expected.encode()).hexdigest()
        assert f"Saved in full as spill {spill['spillId']}" in text
        assert proxy_store.read_bytes(spill["spillId"], 0, 3_000_000) == expected.encode()
        page = await client.call_tool(
            "read_spill", {"spill": spill["spillId"], "offset": 20_000, "limit": 2}
        )
        assert not page.is_error
        lines = texts(page)[0].splitlines()
        assert any(line.endswith("\t" + expected.splitlines()[19_999]) for line in lines)
        grep = await client.call_tool(
            "grep_spill", {"pattern": "^00029999 ", "spill": spill["spillId"]}
        )
        assert "30000:00029999 ü" in texts(grep)[0]


@pytest.mark.anyio
async def test_proxy_keeps_media_spills_embedded_text_and_notices_blobs(
    proxy: SpillProxy, proxy_store: MemoryStore
) -> None:
    """Images, audio and links stay in order; big embedded text is spilled; blobs saved."""
    async with Client(proxy.server) as client:
        small = await client.call_tool("mixed", {"size": 100})
        large = await client.call_tool("mixed", {"size": 200_000})
    for result in (small, large):
        kinds = [block.type for block in result.content]
        image, audio = result.content[1], result.content[2]
        assert isinstance(image, types.ImageContent) and image.data == PNG
        assert isinstance(audio, types.AudioContent) and audio.data == WAV
        assert isinstance(result.content[-1], types.ResourceLink)
        assert kinds[-1] == "resource_link"
    assert isinstance(small.content[3], types.EmbeddedResource)  # fits: kept as it was
    assert any(  # a result that fits, blob included, comes back unchanged
        isinstance(block, types.EmbeddedResource)
        and isinstance(block.resource, types.BlobResourceContents)
        for block in small.content
    )
    assert not any(
        isinstance(block, types.EmbeddedResource)
        and isinstance(block.resource, types.BlobResourceContents)
        for block in large.content
    )
    notices = [t for t in texts(large) if t.startswith("[blob ")]
    assert notices and "test://blob" in notices[0] and "saved as spill" in notices[0]
    blob_spill = notices[0].split("saved as spill ")[1].split(";")[0]
    decoded = base64.b64decode(BLOB)
    assert proxy_store.read_bytes(blob_spill, 0, len(decoded)) == decoded
    assert size("\n".join(texts(large))) <= BUDGET  # every notice counts toward the budget
    spill = (large.meta or {})[SPILL_META_KEY]
    stored = proxy_store.read_bytes(spill["spillId"], 0, spill["totalBytes"]).decode()
    assert stored.startswith("mixed result\n") and make_text(200_000) in stored
    assert len(BLOB) > 0 and base64.b64decode(BLOB)[:1] == b"\0"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_proxy_structured_content_never_makes_the_sdk_client_reject(
    proxy: SpillProxy, proxy_store: MemoryStore, mode: str
) -> None:
    """Small structured content is forwarded; large is dropped or spilled; the client accepts."""
    async with Client(proxy.server, mode=mode) as client:
        small = await client.call_tool("structured", {"size": 100})
        assert small.structured_content == {"lines": 1, "text": make_text(100)[:20]}
        cut = await client.call_tool("structured", {"size": 500_000})
        assert cut.structured_content == {"lines": 5000, "text": make_text(100)[:20]}
        assert size(texts(cut)[0]) <= BUDGET
        wrapped = await client.call_tool("structured", {"size": 500_000, "wrapped": True})
        assert wrapped.structured_content is None
        spill = (wrapped.meta or {})[SPILL_META_KEY]
        assert spill["totalBytes"] == 500_000  # the text only: the wrapper duplicated it


@pytest.mark.anyio
async def test_sdk_client_would_reject_a_rewritten_result_under_the_upstream_schema() -> None:
    """Why the schema is stripped: the SDK client rejects results without valid structure."""
    async with Client(StdioTransport(BIG[0], BIG[1:]), mode="legacy") as client:
        await client.list_tools()
        bad = types.CallToolResult(content=[types.TextContent(text="cut")])
        with pytest.raises(RuntimeError, match="output schema"):
            await client.session.validate_tool_result("structured", bad)


@pytest.mark.anyio
async def test_proxy_keeps_is_error_on_capped_results(proxy: SpillProxy) -> None:
    """An upstream error result stays an error, capped or not."""
    async with Client(proxy.server) as client:
        small = await client.call_tool("fails", {"size": 10})
        large = await client.call_tool("fails", {"size": 300_000})
    assert small.is_error and large.is_error
    assert size(texts(large)[0]) <= BUDGET and SPILL_META_KEY in (large.meta or {})


@pytest.mark.anyio
async def test_proxy_forwards_resources_prompts_and_progress(proxy: SpillProxy) -> None:
    """Resources, templates, prompts and a call's progress notifications get through."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(proxy.server, mode="legacy") as client:
        resources = await client.list_resources()
        assert [str(r.uri) for r in resources.resources] == ["test://small"]
        templates = await client.list_resource_templates()
        assert templates.resource_templates[0].uri_template == "test://big/{size}"
        read = await client.read_resource("test://small")
        assert isinstance(read.contents[0], types.TextResourceContents)
        assert read.contents[0].text == "small resource"
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["greet"]
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert isinstance(prompt.messages[0].content, types.TextContent)
        assert prompt.messages[0].content.text == "Hello, Ada!"
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert texts(result) == ["3 steps"]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.anyio
async def test_proxy_forwards_protocol_errors_as_errors(proxy: SpillProxy) -> None:
    """A JSON-RPC error from the upstream reaches the client as a JSON-RPC error."""
    async with Client(proxy.server, mode="legacy") as client:
        with pytest.raises(MCPError):
            await client.read_resource("test://big/not-a-number")


# --------------------------------------------------------------------------- proxy: lifecycle


@pytest.mark.anyio
async def test_proxy_forwards_tools_list_changed_to_both_eras() -> None:
    """An upstream tools/list_changed reaches a 2025 client and a 2026 listen stream."""
    received: list[IncomingMessage] = []

    async def handler(message: IncomingMessage) -> None:
        received.append(message)

    async with SpillProxy(BIG, store=MemoryStore()) as running:
        async with Client(running.server, mode="legacy", message_handler=handler) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "extra" not in names
            await client.call_tool("add_tool", {})
            with anyio.fail_after(10):
                while not any(isinstance(m, types.ToolListChangedNotification) for m in received):
                    await anyio.sleep(0.01)
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "extra" in names
            assert texts(await client.call_tool("extra", {})) == ["extra called"]
        async with Client(running.server, mode="auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool("add_tool", {})
                with anyio.fail_after(10):
                    event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"


@pytest.mark.anyio
async def test_proxy_prefixes_the_spill_tools_on_a_name_clash() -> None:
    """With an upstream read_spill, the spill tools are prefixed, pointers included."""
    store = MemoryStore()
    async with (
        SpillProxy([*BIG, "--clash"], store=store, settings=Settings(max_bytes=BUDGET)) as running,
        Client(running.server) as client,
    ):
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "read_spill" in names and "spillstore_read_spill" in names
        assert names.count("read_spill") == 1
        assert texts(await client.call_tool("read_spill", {})) == ["read_spill called"]
        capped = await client.call_tool("big", {"size": 100_000})
        assert 'spillstore_read_spill(spill="big-' in texts(capped)[0]
        spill = (capped.meta or {})[SPILL_META_KEY]["spillId"]
        page = await client.call_tool("spillstore_read_spill", {"spill": spill, "limit": 1})
        assert "00000000 xxx" in texts(page)[0]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("late", "flags", "fix"),
    [
        ("read_spill", [], "the spill tools then get the prefix"),
        ("spillstore_read_spill", ["--clash"], "another --prefix"),
    ],
    ids=["default-names", "prefixed-names"],
)
async def test_an_upstream_tool_added_later_under_a_spill_tool_name_is_reported_once(
    late: str, flags: list[str], fix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A clashing upstream tool that appears after start (tools/list_changed) is not
    served, since pointers already name the spill tool: one warning says so and how to
    serve both, and the spill tool keeps working under its name."""
    store = MemoryStore()
    command = [*BIG, *flags, "--late-clash", late]
    async with (
        SpillProxy(command, store=store, settings=Settings(max_bytes=BUDGET)) as running,
        Client(running.server, mode="legacy") as client,
    ):
        capped = await client.call_tool("big", {"size": 100_000})
        spill = (capped.meta or {})[SPILL_META_KEY]["spillId"]
        assert f'{late}(spill="big-' in texts(capped)[0]
        await client.call_tool("add_tool", {})
        for _ in range(3):
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names.count(late) == 1
        page = await client.call_tool(late, {"spill": spill, "limit": 1})
        assert "00000000 xxx" in texts(page)[0]
    warned = [r.getMessage() for r in caplog.records if "now has a tool named" in r.getMessage()]
    assert len(warned) == 1
    assert repr(late) in warned[0] and "not served" in warned[0] and fix in warned[0]


@pytest.mark.anyio
async def test_proxy_reports_a_crash_and_restarts_the_upstream() -> None:
    """A crash mid-call is a clear error result; the next call restarts the server."""
    async with (
        SpillProxy(RAW, store=MemoryStore(), max_restarts=1) as running,
        Client(running.server, mode="legacy") as client,
    ):
        crashed = await client.call_tool("crash", {"code": 7})
        assert crashed.is_error
        assert "exited with code 7" in texts(crashed)[0]
        assert "restarted on the next call" in texts(crashed)[0]
        assert texts(await client.call_tool("echo", {"text": "back"})) == ["back"]
        assert running.restarts == 1
        again = await client.call_tool("crash", {})
        assert again.is_error and "will not be restarted" in texts(again)[0]
        gone = await client.call_tool("echo", {"text": "x"})
        assert gone.is_error
        assert "exited with code 3" in texts(gone)[0]
        assert "not restarted again" in texts(gone)[0]


@pytest.mark.anyio
async def test_proxy_answers_a_hung_call_and_restarts_a_hung_server() -> None:
    """A call past the timeout is an error result; a server that answers nothing is replaced."""
    async with (
        SpillProxy(RAW, store=MemoryStore(), call_timeout=2, probe_timeout=1) as running,
        Client(running.server, mode="legacy") as client,
    ):
        hung = await client.call_tool("freeze", {"seconds": 30})
        assert hung.is_error
        assert "did not answer 'freeze' within 2 s" in texts(hung)[0]
        assert "stopped and will be restarted" in texts(hung)[0]
        assert texts(await client.call_tool("echo", {"text": "fresh"})) == ["fresh"]
        assert running.restarts == 1


@pytest.mark.anyio
async def test_proxy_survives_garbage_lines_and_unknown_blocks() -> None:
    """A non-JSON line is skipped; unknown block types become notices in order."""
    async with (
        SpillProxy(RAW, store=MemoryStore()) as running,
        Client(running.server, mode="legacy") as client,
    ):
        assert texts(await client.call_tool("garbage", {})) == ["after garbage"]
        odd = await client.call_tool("odd", {})
    found = texts(odd)
    assert found[0] == "before" and found[-1] == "after"
    assert found[1].startswith("[content dropped: content block of unknown type 'hologram'")
    assert found[2].startswith("[content dropped: content block of unknown type without")


@pytest.mark.anyio
async def test_proxy_that_cannot_start_its_upstream_says_so() -> None:
    """An upstream that exits at once fails the proxy's start with UpstreamUnavailable."""
    from spillstore.mcp import UpstreamUnavailable

    with pytest.raises(UpstreamUnavailable, match="could not be started"):
        async with SpillProxy([sys.executable, "-c", "raise SystemExit(5)"], start_timeout=10):
            pass


def test_command_line_needs_exactly_one_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    """``proxy`` without ``-- CMD`` (or with both CMD and --url) is a usage error, exit 2."""
    from spillstore._cli.mcp import main

    for argv in (["proxy"], ["proxy", "--url", "http://127.0.0.1:1/mcp", "--", "x"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
    assert "-- CMD [ARGS...] or as --url URL" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # an unknown option is not the upstream command
        main(["proxy", "--max-b", "5KB", "--", "true"])
    assert exited.value.code == 2
    assert "no such option: --max-b" in capsys.readouterr().err


def test_proxy_refuses_bad_arguments() -> None:
    """Developer mistakes raise ConfigError before anything starts."""
    from spillstore import ConfigError

    with pytest.raises(ConfigError, match="exactly one"):
        SpillProxy()
    with pytest.raises(ConfigError, match="non-empty sequence"):
        SpillProxy("python server.py")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="call_timeout"):
        SpillProxy(RAW, call_timeout=0)
    with pytest.raises(ConfigError, match="max_restarts"):
        SpillProxy(RAW, max_restarts=-1)


def test_proxy_used_before_it_is_entered_raises_usage_error() -> None:
    """The server and the spill tools exist only inside ``async with``: UsageError before."""
    from spillstore._errors import UsageError

    proxy = SpillProxy(RAW)
    for attribute in ("server", "spill_tools"):
        with pytest.raises(UsageError, match="enter the proxy"):
            getattr(proxy, attribute)
