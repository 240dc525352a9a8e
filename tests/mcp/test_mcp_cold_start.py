"""The proxy's cold start: its upstream starts before the command line is parsed.

``spillstore mcp proxy ... -- CMD`` (and ``python -m spillstore.mcp proxy ...``) start CMD
from the raw arguments, before typer and pydantic load (:mod:`spillstore._cli.early`);
the parsed command then adopts that process. These tests run the real command lines
with an upstream that records each start, so a second start or a leftover process shows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from spillstore._cli.early import upstream_command

ROOT = Path(__file__).resolve().parents[2]
RAW = str(ROOT / "tests" / "mcp" / "mcp_servers" / "raw.py")

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("argv", "words", "expected"),
    [
        (["mcp", "proxy", "--", "srv", "-x"], ("mcp", "proxy"), ["srv", "-x"]),
        (["--dir", "d", "mcp", "-v", "proxy", "--", "srv"], ("mcp", "proxy"), None),
        (
            ["--dir", "d", "mcp", "proxy", "--max-bytes", "9K", "--", "srv"],
            ("mcp", "proxy"),
            ["srv"],
        ),
        (["proxy", "--session", "s", "--", "srv", "--", "x"], ("proxy",), ["srv", "--", "x"]),
        (["mcp", "proxy", "--"], ("mcp", "proxy"), None),
        (["mcp", "proxy", "srv"], ("mcp", "proxy"), None),
        (["mcp", "proxy", "--url", "http://h/mcp", "--", "srv"], ("mcp", "proxy"), None),
        (["mcp", "proxy", "--url=http://h/mcp", "--", "srv"], ("mcp", "proxy"), None),
        (["mcp", "proxy", "--help", "--", "srv"], ("mcp", "proxy"), None),
        (["run", "--", "spillstore", "mcp", "proxy", "--", "srv"], ("mcp", "proxy"), None),
        (["mcp", "serve", "--", "srv"], ("mcp", "proxy"), None),
        ([], ("proxy",), None),
    ],
)
def test_only_a_proxy_command_line_names_an_upstream_to_start_early(
    argv: list[str], words: tuple[str, ...], expected: list[str] | None
) -> None:
    """The guess made before parsing: ``mcp proxy`` before the first ``--``, a command after."""
    assert upstream_command(argv, words) == expected


def _recording_upstream(starts: Path) -> list[str]:
    """raw.py, started through a shell that first appends its pid to ``starts``."""
    script = f'echo $$ >> "{starts}"; exec "{sys.executable}" "{RAW}"'
    return ["/bin/sh", "-c", script]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell records the starts")
@pytest.mark.parametrize(
    "entry",
    [["-m", "spillstore._cli", "mcp", "proxy"], ["-m", "spillstore.mcp", "proxy"]],
    ids=["spillstore", "python-m-spillstore.mcp"],
)
async def test_the_upstream_started_before_parsing_is_the_one_the_proxy_serves(
    tmp_path: Path, entry: list[str]
) -> None:
    """One start of the upstream per proxy run, and the proxy talks to it."""
    starts = tmp_path / "starts.txt"
    args = [*entry, "--dir", str(tmp_path / "spills"), "--", *_recording_upstream(starts)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("echo", {"text": "early"})
        assert [block.text for block in result.content] == ["early"]  # type: ignore[union-attr]
        assert len(starts.read_text().split()) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX shell records the starts")
def test_an_upstream_started_before_a_usage_error_is_stopped(tmp_path: Path) -> None:
    """A bad option is found after the early start: the process is stopped, exit status 2."""
    starts = tmp_path / "starts.txt"
    command = [
        sys.executable,
        "-m",
        "spillstore._cli",
        "mcp",
        "proxy",
        "--max-restarts",
        "many",
        "--",
        *_recording_upstream(starts),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and "--max-restarts" in done.stderr
    [pid] = starts.read_text().split()  # it did start (the parse takes far longer)
    deadline = time.monotonic() + 5
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(int(pid))


def test_listing_the_spill_tools_loads_none_of_their_implementations(tmp_path: Path) -> None:
    """A proxy's start builds the spill tools and lists them; a tool's modules load on its
    first call (a List call loads List's alone).

    (Run in a fresh interpreter: this test process has imported everything already.)
    """
    code = f"""
import sys
from spillstore import LocalStore
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.proxy import SpillProxy
from spillstore.mcp.server import spill_tool_definitions
tools = SpillTools(LocalStore({str(tmp_path)!r}))
assert len(spill_tool_definitions(tools)) == 4
lazy = ("grep", "list", "query", "query_worker", "read", "regex")
print(sorted(name for name in lazy if f"spillstore._tools.{{name}}" in sys.modules))
print(tools.list().is_error)
print(sorted(name for name in lazy if f"spillstore._tools.{{name}}" in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    before, error, after = done.stdout.splitlines()
    assert before == "[]" and error == "False"
    assert after == str(["list"])
