"""End to end: ``spillstore install`` rewrites a real ``.mcp.json`` (or Goose's
``config.yaml``) that runs ``mcp-server-git`` (from PyPI, in the ``test`` extra), or
that reaches a remote server over streamable HTTP with a header it requires; the
rewritten command line is launched exactly as the config states it, by the SDK's client,
as Claude Code would; a large result comes back capped and reads back byte for byte;
``uninstall`` gives the file back unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest
import yaml
from mcp import Client, StdioServerParameters

from spillstore import LocalStore
from spillstore.mcp.convert import SPILL_META_KEY
from tests.mcp.mcp_servers import served
from tests.mcp.mcp_servers.big import make_text

BIN = Path(sys.executable).parent
BUDGET = 20_000

pytestmark = pytest.mark.anyio


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@e", *args], cwd=repo, env=env, check=True
    )


def _spillstore(home: Path, cwd: Path, *args: str) -> str:
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_STATE_HOME", None)
    done = subprocess.run(
        [sys.executable, "-m", "spillstore._cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def _call(
    entry: dict[str, object],
    name: str,
    arguments: dict[str, object],
    keys: tuple[str, str] = ("command", "env"),
) -> types.CallToolResult:
    """Start the server exactly as the entry says (command, args, env over the client's
    own environment; ``keys``: where the entry keeps its program and environment) and make
    one call."""
    command, args, env = entry[keys[0]], entry.get("args", []), entry.get(keys[1], {})
    assert isinstance(command, str) and isinstance(args, list) and isinstance(env, dict)
    server = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
    async with Client(server) as client:
        return await client.call_tool(name, arguments)


def _servers() -> tuple[Path, Path]:
    """mcp-server-git and the spillstore script, next to this interpreter."""
    git_server = BIN / "mcp-server-git"
    launcher = BIN / "spillstore"
    if not git_server.exists() or not launcher.exists():
        pytest.skip("mcp-server-git or the spillstore script is not installed next to python")
    return git_server, launcher


def _repo(tmp_path: Path) -> Path:
    """A repository whose last commit's diff is far over the budget."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("start\n", encoding="utf-8")
    _git(repo, "add", "a.txt")
    _git(repo, "commit", "-q", "-m", "start")
    (repo / "big.txt").write_text(
        "".join(f"row {i:05d} é alpha beta 🌙\n" for i in range(4000)), encoding="utf-8"
    )
    _git(repo, "add", "big.txt")
    _git(repo, "commit", "-q", "-m", "big")
    return repo


async def test_installed_git_server_runs_behind_the_cap_and_reads_back_exactly(
    tmp_path: Path,
) -> None:
    """install, launch the rewritten entry, get a capped result whose spill reads back
    exactly, then uninstall to the same bytes."""
    git_server, launcher = _servers()
    repo = _repo(tmp_path)
    home, work, store = tmp_path / "home", tmp_path / "work", tmp_path / "spills"
    home.mkdir()
    work.mkdir()
    config = work / ".mcp.json"
    original = json.dumps(
        {
            "mcpServers": {
                "git": {
                    "command": str(git_server),
                    "args": ["--repository", str(repo)],
                    "env": {"SPILLSTORE_DIR": str(store), "SPILLSTORE_SESSION": "e2e"},
                }
            }
        },
        indent=2,
    )
    config.write_text(original, encoding="utf-8")
    arguments: dict[str, object] = {"repo_path": str(repo), "target": "HEAD~1"}
    direct_result = await _call(json.loads(original)["mcpServers"]["git"], "git_diff", arguments)
    [direct] = _texts(direct_result)
    assert len(direct.encode()) > 5 * BUDGET

    out = _spillstore(
        home,
        work,
        "install",
        "claude-code",
        "--scope",
        "project",
        "--all",
        "--max-bytes",
        str(BUDGET),
        "--launcher",
        str(launcher),
    )
    assert "git: wrapped" in out
    entry = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["git"]
    assert entry["command"] == str(launcher)
    assert entry["args"] == [
        "mcp",
        "proxy",
        "--max-bytes",
        str(BUDGET),
        "--",
        str(git_server),
        "--repository",
        str(repo),
    ]
    assert entry["env"] == {"SPILLSTORE_DIR": str(store), "SPILLSTORE_SESSION": "e2e"}

    result = await _call(entry, "git_diff", arguments)
    [text] = _texts(result)
    assert len(text.encode()) <= BUDGET
    spill = (result.meta or {})[SPILL_META_KEY]
    expected = direct.encode()
    assert spill["totalBytes"] == len(expected)
    assert LocalStore(store).read_bytes(spill["spillId"], 0, len(expected)) == expected
    page = await _call(entry, "read_spill", {"spill": spill["spillId"], "offset": 2000, "limit": 2})
    lines = direct.splitlines()
    assert f"  2000\t{lines[1999]}" in _texts(page)[0]

    out = _spillstore(home, work, "uninstall", "claude-code", "--scope", "project", "--all")
    assert "git: restored - from its backup, as it was" in out
    assert config.read_text(encoding="utf-8") == original


async def test_installed_goose_extension_runs_behind_the_cap_and_reads_back_exactly(
    tmp_path: Path,
) -> None:
    """The same through Goose's config.yaml: the wrapped extension's ``cmd``, ``args`` and
    ``envs`` launched as Goose would; uninstall gives the same bytes back."""
    git_server, launcher = _servers()
    repo = _repo(tmp_path)
    home, store, config = tmp_path / "home", tmp_path / "spills", tmp_path / "config.yaml"
    home.mkdir()
    original = (
        "# goose\nextensions:\n  git:  # the git server\n    enabled: true\n"
        f"    type: stdio\n    name: git\n    cmd: {json.dumps(str(git_server))}\n"
        f"    args: [--repository, {json.dumps(str(repo))}]\n"
        f"    envs: {{SPILLSTORE_DIR: {json.dumps(str(store))}}}\n    timeout: 300\n"
    )
    config.write_text(original, encoding="utf-8")
    common = ("goose", "--config", str(config), "--all")
    out = _spillstore(
        home, tmp_path, "install", *common, "--max-bytes", str(BUDGET), "--launcher", str(launcher)
    )
    assert "git: wrapped" in out
    entry = yaml.safe_load(config.read_text(encoding="utf-8"))["extensions"]["git"]
    arguments: dict[str, object] = {"repo_path": str(repo), "target": "HEAD~1"}
    result = await _call(entry, "git_diff", arguments, keys=("cmd", "envs"))
    [text] = _texts(result)
    assert len(text.encode()) <= BUDGET
    spill = (result.meta or {})[SPILL_META_KEY]
    diff = subprocess.run(
        ["git", "diff", "HEAD~1"], cwd=repo, capture_output=True, check=True
    ).stdout
    stored = LocalStore(store).read_bytes(spill["spillId"], 0, spill["totalBytes"])
    assert stored.decode() == "Diff with HEAD~1:\n" + diff.decode().rstrip("\n")
    out = _spillstore(home, tmp_path, "uninstall", *common)
    assert "git: restored - from its backup, as it was" in out
    assert config.read_text(encoding="utf-8") == original


async def test_installed_remote_server_with_a_header_runs_behind_the_cap(tmp_path: Path) -> None:
    """A remote entry whose header holds a ``${VAR}`` reference: install moves the value,
    verbatim, into the entry's env and its name onto the command line; launched as the
    config says (with the ``${VAR}`` expansion Claude Code applies to ``env``), the proxy
    reaches the upstream, which refuses requests without the header, and caps a big
    result that reads back exactly; uninstall gives back the same bytes."""
    launcher = BIN / "spillstore"
    if not launcher.exists():
        pytest.skip("the spillstore script is not installed next to python")
    home, work, store = tmp_path / "home", tmp_path / "work", tmp_path / "spills"
    home.mkdir()
    work.mkdir()
    config = work / ".mcp.json"
    with served("--require-header", "X-Spill-Token=s3cret") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        remote = {"type": "http", "url": url, "headers": {"X-Spill-Token": "${SPILL_TOKEN}"}}
        original = json.dumps({"mcpServers": {"remote": remote}}, indent=2)
        config.write_text(original, encoding="utf-8")
        out = _spillstore(
            *(home, work, "install", "claude-code", "--scope", "project", "--all"),
            *("--max-bytes", str(BUDGET), "--store", str(store), "--launcher", str(launcher)),
        )
        assert f"remote: wrapped - (--max-bytes {BUDGET} --store {store}): --url {url}" in out
        entry = json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["remote"]
        assert entry == {
            "type": "stdio",
            "command": str(launcher),
            "args": [
                *("mcp", "proxy", "--max-bytes", str(BUDGET), "--store", str(store)),
                *("--url", url, "--header-env", "X-Spill-Token=SPILLSTORE_HEADER_X_SPILL_TOKEN"),
            ],
            "env": {"SPILLSTORE_HEADER_X_SPILL_TOKEN": "${SPILL_TOKEN}"},
        }
        expanded = {
            **entry,
            "env": {k: v.replace("${SPILL_TOKEN}", "s3cret") for k, v in entry["env"].items()},
        }
        result = await _call(expanded, "big", {"size": 200_000})
        [text] = _texts(result)
        assert len(text.encode()) <= BUDGET
        spill = (result.meta or {})[SPILL_META_KEY]
        assert (
            LocalStore(store).read_bytes(spill["spillId"], 0, 200_000)
            == make_text(200_000).encode()
        )

    status = _spillstore(home, work, "status", "claude-code", "--scope", "project")
    assert "(headers X-Spill-Token)" in status and "SPILL_TOKEN}" not in status
    out = _spillstore(home, work, "uninstall", "claude-code", "--scope", "project", "--all")
    assert "remote: restored - from its backup, as it was" in out
    assert config.read_text(encoding="utf-8") == original
