"""MCP integration, out of process: the real command lines, a real third-party server, HTTP.

- ``python -m spillstore.mcp proxy ... -- CMD`` and ``python -m spillstore.mcp serve`` are
  started as subprocesses and driven by the SDK's ``mcp.Client``;
- the end-to-end test puts ``mcp-server-git`` (from PyPI, in the ``test`` extra) behind
  the proxy, on a repository built here with thousands of commits and a multi-MB diff,
  and checks the spilled copies byte for byte against what the server returns directly;
- a streamable-HTTP upstream sends a 3 MB result as one server-sent event.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from spillstore import ConfigError, LocalStore, Settings, TruncationService
from spillstore.mcp import SpillProxy, StdioTransport, arun_proxy
from spillstore.mcp.convert import SPILL_META_KEY
from tests.mcp.mcp_servers import served
from tests.mcp.mcp_servers.big import make_text

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "mcp" / "mcp_servers"
BIG = [sys.executable, str(SERVERS / "big.py")]
RAW = [sys.executable, str(SERVERS / "raw.py")]
BUDGET = 20_000

pytestmark = pytest.mark.anyio


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


def proxy_command(store_dir: Path, *upstream: str, session: str = "sub") -> list[str]:
    return [
        sys.executable,
        "-m",
        "spillstore.mcp",
        "proxy",
        "--dir",
        str(store_dir),
        "--session",
        session,
        "--max-bytes",
        str(BUDGET),
        "--",
        *upstream,
    ]


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_proxy_command_line_reaches_a_remote_upstream_that_requires_a_header(
    tmp_path: Path, transport: str
) -> None:
    """``proxy --url URL [--sse] --header-env NAME=VAR``: the header's value comes from the
    environment (not the command line) and goes with every request, over streamable HTTP
    and SSE; a big result is capped and reads back exactly. Without the header the
    upstream answers 401 and the proxy says what to do, and exits."""
    sse = ["--sse"] if transport == "sse" else []
    with served(*sse, "--require-header", "X-Spill-Token=s3cret token") as port:
        url = f"http://127.0.0.1:{port}/{'sse' if sse else 'mcp'}"
        command = proxy_command(tmp_path / "spills")[:-1]  # no "--": a URL, not a command
        command += ["--url", url, *sse]
        params = StdioServerParameters(
            command=command[0],
            args=[*command[1:], "--header-env", "X-Spill-Token=SPILL_TOKEN"],
            env={**os.environ, "SPILL_TOKEN": "s3cret token"},
            cwd=str(ROOT),
        )
        async with Client(params, mode="legacy") as client:
            result = await client.call_tool("big", {"size": 300_000})
            [text] = texts(result)
            assert len(text.encode()) <= BUDGET
            spill = (result.meta or {})[SPILL_META_KEY]
            page = await client.call_tool("read_spill", {"spill": spill["spillId"], "offset": -1})
            assert "line 3000 of 3000, bytes [299900, 300000)" in texts(page)[0]
        stored = LocalStore(tmp_path / "spills").read_bytes(spill["spillId"], 0, 300_000)
        assert stored == make_text(300_000).encode()

        refused = subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=60
        )
    assert refused.returncode == 1 and refused.stdout == ""
    assert "answered 401" in refused.stderr and "--header-env NAME=VAR" in refused.stderr
    assert "could not be connected to" in refused.stderr  # a remote upstream


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--header", "X-A=1"], "go with --url"),
        (["--url", "http://127.0.0.1:1/mcp", "--header", "X A=1"], "not an HTTP header name"),
        (["--url", "http://127.0.0.1:1/mcp", "--header", "X-A"], "give NAME=VALUE"),
        (["--url", "http://127.0.0.1:1/mcp", "--header-env", "X-A=NOT_SET_HERE"], "not set"),
        (["--url", "http://127.0.0.1:1/mcp", "--header", "X-A=é"], "printable ASCII"),
    ],
)
def test_proxy_command_line_refuses_bad_headers(args: list[str], message: str) -> None:
    """A malformed header option is a one-line usage error (exit 2), before any connection."""
    command = [sys.executable, "-m", "spillstore.mcp", "proxy", *args]
    if "--url" not in args:
        command += ["--", *RAW]
    env = {k: v for k, v in os.environ.items() if k != "NOT_SET_HERE"}
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stdout == ""


# --------------------------------------------------------------------------- command lines


async def test_proxy_command_line_caps_a_big_result_for_the_sdk_stdio_client(
    tmp_path: Path,
) -> None:
    """The proxy as a subprocess, driven by the SDK's own stdio client, caps and pages."""
    command = proxy_command(tmp_path / "spills", *BIG)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"big", "read_spill", "grep_spill", "list_spills"} <= names
        result = await client.call_tool("big", {"size": 5_000_000})
        [text] = texts(result)
        assert len(text.encode()) <= BUDGET
        spill = (result.meta or {})[SPILL_META_KEY]
        page = await client.call_tool(
            "read_spill", {"spill": spill["path"], "offset": -2, "limit": 2}
        )
        assert "lines 49999-50000 of 50000" in texts(page)[0]
    store = LocalStore(tmp_path / "spills")
    stored = store.read_bytes(spill["spillId"], 0, 5_000_000)
    assert hashlib.sha256(stored).hexdigest() == spill["sha256"]
    assert stored == make_text(5_000_000).encode()
    assert store.stat(spill["spillId"]).session == "sub"


async def test_proxy_command_line_logs_to_stderr_and_restarts_a_crashed_upstream(
    tmp_path: Path,
) -> None:
    """A crash is reported to the caller and logged on stderr; stdout stays protocol-only."""
    errlog = tmp_path / "stderr.txt"
    command = proxy_command(tmp_path / "spills", *RAW)
    with errlog.open("wb") as err:
        transport = StdioTransport(command[0], command[1:], cwd=str(ROOT), stderr=err)
        async with Client(transport, mode="legacy") as client:
            crashed = await client.call_tool("crash", {"code": 9})
            assert crashed.is_error and "exited with code 9" in texts(crashed)[0]
            assert texts(await client.call_tool("echo", {"text": "ok"})) == ["ok"]
    logged = errlog.read_text()
    assert "raw.py: crashing on request" in logged  # the upstream's stderr
    assert "restarting it (1 of 3)" in logged  # the proxy's own log


async def test_proxy_command_line_refuses_a_bad_budget(tmp_path: Path) -> None:
    """A bad --max-bytes is a one-line error naming the setting, exit status 2."""
    command = proxy_command(tmp_path, *RAW)
    command[command.index("--max-bytes") + 1] = "12K"
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "max_bytes" in done.stderr and "KiB" in done.stderr


_RUN_PROXY = (
    "import sys; from spillstore import Settings; from spillstore.mcp import run_proxy; "
    "run_proxy(sys.argv[2:], settings=Settings(), max_bytes='4KB', dir=sys.argv[1])"
)


@pytest.mark.parametrize(
    ("how", "budget_env"),
    [("option", "20KB"), ("environment", "4KB"), ("library", "10KB")],
)
async def test_proxy_with_a_small_budget_alone_fits_the_previews_and_caps(
    tmp_path: Path, how: str, budget_env: str
) -> None:
    """A 4 KB budget given alone (``--max-bytes 4KB`` over a bigger
    ``$SPILLSTORE_MAX_BYTES``, the environment alone, or ``run_proxy(settings=Settings(),
    max_bytes="4KB")``) is accepted: previews nobody set shrink to fit it, and a big
    result comes back capped to 4,000 bytes and reads back exactly."""
    spills = str(tmp_path / "spills")
    args = {
        "option": ["-m", "spillstore.mcp", "proxy", "--dir", spills, "--max-bytes", "4KB", "--"],
        "environment": ["-m", "spillstore.mcp", "proxy", "--dir", spills, "--"],
        "library": ["-c", _RUN_PROXY, spills],
    }[how]
    env = {**os.environ, "SPILLSTORE_MAX_BYTES": budget_env}
    env = {
        k: v for k, v in env.items() if k not in ("SPILLSTORE_HEAD_BYTES", "SPILLSTORE_TAIL_BYTES")
    }
    params = StdioServerParameters(
        command=sys.executable, args=[*args, *BIG], env=env, cwd=str(ROOT)
    )
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("big", {"size": 100_000})
    [text] = texts(result)
    assert len(text.encode()) <= 4_000
    spill = (result.meta or {})[SPILL_META_KEY]
    assert (
        LocalStore(spills).read_bytes(spill["spillId"], 0, 100_000) == make_text(100_000).encode()
    )


async def test_proxy_budget_override_keeps_explicit_previews_explicit() -> None:
    """``arun_proxy(settings=..., max_bytes=...)``: a preview the settings set is never
    shrunk, so one that cannot fit the new budget is refused, naming it, before any
    upstream starts."""
    with pytest.raises(ConfigError, match="head_bytes"):
        await arun_proxy(["true"], settings=Settings(head_bytes=3_000), max_bytes="4KB")


@pytest.mark.parametrize("entry", ["module", "cli"])
async def test_serve_command_line_reads_the_spills_of_a_session(tmp_path: Path, entry: str) -> None:
    """``serve --dir D --session S`` (or ``spillstore --session S mcp serve``) reads spills."""
    store = LocalStore(tmp_path / "spills")
    settings = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=200)
    service = TruncationService(store, settings, session="work")
    capped = service.truncate_for_model(make_text(100_000), tool_name="build", tool_call_id="c9")
    assert capped.spill is not None and capped.spill.spill_id is not None
    spills = str(tmp_path / "spills")
    args = {
        "module": ["-m", "spillstore.mcp", "serve", "--dir", spills, "--session", "work"],
        "cli": ["-m", "spillstore._cli", "--session", "work", "mcp", "serve", "--dir", spills],
    }[entry]
    env = {**os.environ, "SPILLSTORE_MAX_BYTES": "4KB"}  # a small budget alone is fine
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        assert all(t.annotations and t.annotations.read_only_hint for t in tools)
        listing = texts(await client.call_tool("list_spills", {}))[0]
        assert capped.spill.spill_id in listing and "build" in listing
        page = await client.call_tool(
            "read_spill", {"spill": capped.spill.spill_id, "offset": 500, "limit": 1}
        )
        assert page.structured_content is None
        assert "00000499 xxx" in texts(page)[0]


# --------------------------------------------------------------------------- mcp-server-git


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=repo, input=stdin, check=True, env=env)


@pytest.fixture(scope="module")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A repository with 3,000 small commits, then one adding a 150,000-line file."""
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q", "-b", "main")
    stream: list[bytes] = []
    for number in range(3001):
        message = f"commit {number}: touch line {number}\n".encode()
        if number < 3000:
            data = f"line {number}\n".encode()
            path = b"small.txt"
        else:
            data = "".join(f"row {i:06d} alpha beta gamma delta\n" for i in range(150_000)).encode()
            path = b"big.txt"
        stream.append(
            b"commit refs/heads/main\nmark :%d\ncommitter Test <test@example.com> %d +0000\n"
            % (number + 1, 1_700_000_000 + number * 60)
        )
        stream.append(b"data %d\n%s" % (len(message), message))
        if number:
            stream.append(b"from :%d\n" % number)
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path, len(data), data))
    _git(repo, "fast-import", "--quiet", stdin=b"".join(stream))
    _git(repo, "checkout", "-q", "main")
    yield repo


async def test_mcp_server_git_behind_the_proxy_spills_byte_exact_and_pages(
    git_repo: Path, tmp_path: Path
) -> None:
    """git_log and git_diff through the proxy: byte-exact spills, paged with read_spill."""
    upstream = [sys.executable, "-m", "mcp_server_git", "--repository", str(git_repo)]
    calls = {
        "git_log": {"repo_path": str(git_repo), "max_count": 3001},
        "git_diff": {"repo_path": str(git_repo), "target": "HEAD~1"},
    }
    direct: dict[str, str] = {}
    async with Client(StdioTransport(upstream[0], upstream[1:]), mode="legacy") as client:
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            assert not result.is_error
            [direct[name]] = texts(result)
    assert len(direct["git_log"].encode()) > 300_000
    assert len(direct["git_diff"].encode()) > 4_000_000

    command = proxy_command(tmp_path / "spills", *upstream, session="git")
    store = LocalStore(tmp_path / "spills")
    spill_ids: dict[str, str] = {}
    async with Client(StdioTransport(command[0], command[1:], cwd=str(ROOT))) as client:
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            [text] = texts(result)
            assert len(text.encode()) <= BUDGET
            spill = (result.meta or {})[SPILL_META_KEY]
            spill_ids[name] = spill["spillId"]
            expected = direct[name].encode()
            assert spill["totalBytes"] == len(expected)
            assert store.read_bytes(spill["spillId"], 0, len(expected)) == expected
            lines = direct[name].splitlines()
            for offset in (1, len(lines) // 2, len(lines) - 3):
                page = await client.call_tool(
                    "read_spill", {"spill": spill["spillId"], "offset": offset, "limit": 3}
                )
                body = texts(page)[0].splitlines()
                for number in range(offset, offset + 3):
                    assert f"{number:>6}\t{lines[number - 1]}" in body
        grep = await client.call_tool(
            "grep_spill", {"pattern": "commit 1234:", "output_mode": "count"}
        )
        assert not grep.is_error
        assert texts(grep) == [
            'grep_spill "commit 1234:" in the 2 spills of session "git": '
            "1 matching lines in 1 spills; counts 1-1\n"
            f'{spill_ids["git_log"]}: 1 (tool "git_log")\n'
            "end of results"
        ]


# --------------------------------------------------------------------------- streamable HTTP


@pytest.fixture
def http_upstream() -> Iterator[str]:
    """big.py serving streamable HTTP on a free loopback port."""
    with served() as port:
        yield f"http://127.0.0.1:{port}/mcp"


async def test_http_upstream_result_over_one_mebibyte(http_upstream: str, tmp_path: Path) -> None:
    """A 3 MB result in one server-sent event: the SDK's default client refuses it, the proxy
    (no event size cap) caps and spills it exactly.

    On a 2025-era (handshake) connection the SDK server answers a tools/call with
    server-sent events, which its client caps at 1 MiB by default; 2026-era answers that
    come within the keepalive window are plain JSON and are not capped.
    """
    async with Client(http_upstream, mode="legacy") as plain:
        with pytest.raises(MCPError, match="exceeded the 1048576 byte limit"):
            await plain.call_tool("big", {"size": 3_000_000})
    store = LocalStore(tmp_path / "spills")
    async with (
        SpillProxy(url=http_upstream, store=store, settings=Settings(max_bytes=BUDGET)) as proxy,
        Client(proxy.server) as client,
    ):
        result = await client.call_tool("big", {"size": 3_000_000})
    [text] = texts(result)
    assert len(text.encode()) <= BUDGET
    spill = (result.meta or {})[SPILL_META_KEY]
    assert store.read_bytes(spill["spillId"], 0, 3_000_000) == make_text(3_000_000).encode()


async def test_a_remote_upstream_that_went_away_is_reconnected_not_restarted(
    tmp_path: Path,
) -> None:
    """A remote upstream has no process to restart: when it goes away, the error results
    say it will be reconnected, could not be connected to, and is not reconnected again."""
    servers = contextlib.ExitStack()
    port = servers.enter_context(served())
    store = LocalStore(tmp_path / "spills")
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        SpillProxy(url=url, store=store, max_restarts=1) as proxy,
        Client(proxy.server, mode="legacy") as client,
    ):
        assert texts(await client.call_tool("big", {"size": 10})) == ["x" * 10]
        servers.close()  # the server is gone
        said = [texts(await client.call_tool("big", {"size": 10}))[0] for _ in range(3)]
    assert "closed the connection while running 'big'" in said[0]
    assert "it will be reconnected on the next call (1 reconnection(s) left)" in said[0]
    assert "'big' was not called: the upstream MCP server could not be connected to" in said[1]
    assert "could not be connected to (ConnectError" in said[2]
    assert "and was reconnected 1 time(s) already" in said[2]
    assert "it is not reconnected again" in said[2]
    assert not any(word in text for text in said for word in ("restarted", "restarting"))


async def test_proxy_whose_store_cannot_be_opened_still_answers_every_call(
    tmp_path: Path,
) -> None:
    """A store that cannot be opened at start (here a catalog that is not a database; a
    full disk gives the same ``StoreError``) does not stop the proxy: small results pass,
    a big one gets the bounded "NOT saved" preview, and the spill tools say why they
    cannot read; so does ``mcp serve``."""
    spills = tmp_path / "spills"
    made = [sys.executable, "-m", "spillstore._cli", "--dir", str(spills), "ls"]
    subprocess.run(made, check=True, capture_output=True, cwd=ROOT)  # a store, closed
    (spills / "catalog.sqlite3").write_bytes(b"not a database " * 1_000)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "spillstore.mcp",
            "proxy",
            "--dir",
            str(spills),
            "--max-bytes",
            "4KB",
            "--",
            *BIG,
        ],
        cwd=str(ROOT),
    )
    async with Client(params, mode="legacy") as client:
        small = await client.call_tool("echo", {"text": "hello"})
        big = await client.call_tool("big", {"size": 100_000})
        listed = await client.call_tool("list_spills", {})
    assert texts(small) == ["hello"]
    [text] = texts(big)
    assert len(text.encode()) <= 4_000
    assert "NOT saved" in text and "not a database" in text
    assert listed.is_error
    assert "not a database" in texts(listed)[0]
    serve = ["-m", "spillstore.mcp", "serve", "--dir", str(spills)]
    params = StdioServerParameters(command=sys.executable, args=serve, cwd=str(ROOT))
    async with Client(params) as client:  # the spill server starts too, and says why
        listed = await client.call_tool("list_spills", {})
    assert listed.is_error
    assert "not a database" in texts(listed)[0]
