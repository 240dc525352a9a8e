"""Every client's files on fake macOS, Windows and Linux homes (pyfakefs): status finds
them where each client keeps them, install wraps and keeps a 0600 backup where the
system keeps state, uninstall gives back the same bytes.

The expected paths are written out here, one table per system, not derived from the
code under test.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path, PureWindowsPath
from typing import Any

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem, OSType
from typer.testing import CliRunner

import spillstore._cli.clients as clients_cli
from spillstore._cli.app import app
from spillstore._clients.registry import Place

LAUNCHER = "/opt/spillstore/bin/spillstore"

SYSTEMS: dict[str, dict[str, Any]] = {
    "linux": {
        "home": "/home/me",
        "env": {},
        "backups": "~/.local/state/spillstore/clients",
        "desktop": "~/.config/Claude/claude_desktop_config.json",
        "vscode": "~/.config/Code/User/mcp.json",
        "zed": "~/.config/zed/settings.json",
        "goose": "~/.config/goose/config.yaml",
    },
    "darwin": {
        "home": "/Users/me",
        "env": {},
        "backups": "~/Library/Application Support/spillstore/clients",
        "desktop": "~/Library/Application Support/Claude/claude_desktop_config.json",
        "vscode": "~/Library/Application Support/Code/User/mcp.json",
        "zed": "~/.config/zed/settings.json",
        "goose": "~/.config/goose/config.yaml",
    },
    "windows": {
        "home": "C:\\Users\\me",
        "env": {
            "APPDATA": "C:\\Users\\me\\AppData\\Roaming",
            "LOCALAPPDATA": "C:\\Users\\me\\AppData\\Local",
        },
        "backups": "~/AppData/Local/spillstore/clients",
        "desktop": "~/AppData/Roaming/Claude/claude_desktop_config.json",
        "vscode": "~/AppData/Roaming/Code/User/mcp.json",
        "zed": "~/AppData/Roaming/Zed/settings.json",
        "goose": "~/AppData/Roaming/Block/goose/config/config.yaml",
    },
}

LAYOUT: list[tuple[str, str, str]] = [
    ("claude-code", "user", "~/.claude.json"),
    ("claude-code", "local", "~/.claude.json"),
    ("claude-code", "project", "./.mcp.json"),
    ("claude-desktop", "user", "{desktop}"),
    ("cursor", "user", "~/.cursor/mcp.json"),
    ("cursor", "project", "./.cursor/mcp.json"),
    ("windsurf", "user", "~/.codeium/windsurf/mcp_config.json"),
    ("vscode", "user", "{vscode}"),
    ("vscode", "project", "./.vscode/mcp.json"),
    ("gemini", "user", "~/.gemini/settings.json"),
    ("gemini", "project", "./.gemini/settings.json"),
    ("codex", "user", "~/.codex/config.toml"),
    ("codex", "project", "./.codex/config.toml"),
    ("zed", "user", "{zed}"),
    ("zed", "project", "./.zed/settings.json"),
    ("opencode", "user", "~/.config/opencode/opencode.json"),
    ("opencode", "project", "./opencode.json"),
    ("goose", "user", "{goose}"),
]
"""Client, scope, file: ``~`` is the home, ``.`` the working directory."""

SECTIONS = {
    "vscode": ("servers",),
    "zed": ("context_servers",),
    "opencode": ("mcp",),
}


def _place(system: str, env: dict[str, str] | None = None) -> Place:
    home = SYSTEMS[system]["home"]
    path = PureWindowsPath if system == "windows" else Path
    return Place(
        home=Path(home),
        system=system,
        env={**SYSTEMS[system]["env"], **(env or {})},
        cwd=Path(str(path(home) / "project")),
    )


def _expand(place: Place, system: str, pattern: str) -> Path:
    pattern = pattern.format(**SYSTEMS[system])
    base, _, rest = pattern.partition("/")
    root = {"~": place.home, ".": place.cwd}[base]
    return root.joinpath(*rest.split("/"))


def _content(client: str, scope: str, place: Place) -> str:
    if client == "codex":
        return '# mine\n[mcp_servers.git]\ncommand = "uvx"  # fast\nargs = ["mcp-server-git"]\n'
    if client == "goose":
        return (
            "# mine\nextensions:\n  git:\n    enabled: true\n    type: stdio  # fast\n"
            "    cmd: uvx\n    args: [mcp-server-git]\n    envs: {K: é}\nGOOSE_MODEL: m\n"
        )
    entry: dict[str, Any] = {"command": "uvx", "args": ["mcp-server-git"], "env": {"K": "é"}}
    if client == "opencode":
        entry = {"type": "local", "command": ["uvx", "mcp-server-git"]}
    tree: dict[str, Any] = {"git": entry}
    section = SECTIONS.get(client, ("mcpServers",))
    if (client, scope) == ("claude-code", "local"):
        section = ("projects", str(place.cwd), "mcpServers")
    for key in reversed(section):
        tree = {key: tree}
    return json.dumps({"numStartups": 3, **tree}, indent=2, ensure_ascii=False) + "\n"


@pytest.fixture
def fake_home(
    fs: FakeFilesystem, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Place:
    system = request.param
    if system == "windows":
        fs.os = OSType.WINDOWS
    elif system == "darwin":
        fs.os = OSType.MACOS
    place = _place(system)
    fs.create_dir(place.cwd)
    monkeypatch.setattr(clients_cli, "_place", lambda: place)
    return place


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("fake_home", list(SYSTEMS), indirect=True)
@pytest.mark.parametrize(("client", "scope", "pattern"), LAYOUT)
def test_each_client_file_is_found_wrapped_and_restored_on_each_system(
    fake_home: Place, client: str, scope: str, pattern: str
) -> None:
    """status, install and uninstall find each client's file where that client keeps it
    on macOS, Windows and Linux; the backup lands in the system's state dir, 0600."""
    system = fake_home.system
    path = _expand(fake_home, system, pattern)
    original = _content(client, scope, fake_home).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(original)
    if system != "windows":
        path.chmod(0o640)

    code, out = _cli("status", client, "--scope", scope)
    assert code == 0, out
    assert f"{path}\n  git: not wrapped: uvx mcp-server-git" in out

    code, out = _cli("install", client, "--scope", scope, "--all", "--launcher", LAUNCHER)
    assert code == 0, out
    assert "git: wrapped" in out
    assert b"mcp-server-git" in path.read_bytes()
    assert path.read_bytes() != original
    backups = list(_expand(fake_home, system, SYSTEMS[system]["backups"]).iterdir())
    assert len(backups) == 1
    if system != "windows":
        assert stat.S_IMODE(path.stat().st_mode) == 0o640
        assert stat.S_IMODE(backups[0].stat().st_mode) == 0o600

    code, out = _cli("status", client, "--scope", scope)
    assert "git: wrapped (default options): -- uvx mcp-server-git" in out

    code, out = _cli("uninstall", client, "--scope", scope, "--all")
    assert code == 0, out
    assert "git: restored - from its backup, as it was" in out
    assert path.read_bytes() == original

    code, out = _cli("add", client, "fetch", "--scope", scope, "--launcher", LAUNCHER, "--", "uvx")
    assert code == 0, out
    code, out = _cli("status", client, "--scope", scope)
    assert "git: not wrapped: uvx mcp-server-git" in out
    assert "fetch: wrapped (default options): -- uvx" in out


@pytest.mark.parametrize("fake_home", ["linux"], indirect=True)
@pytest.mark.parametrize(("client", "scope", "pattern"), LAYOUT)
def test_add_makes_each_client_file_that_is_missing(
    fake_home: Place, client: str, scope: str, pattern: str
) -> None:
    """add on a fresh home makes the client's file (0600) where the client reads it,
    with a wrapped server that status then lists."""
    path = _expand(fake_home, "linux", pattern.format(**SYSTEMS["linux"]))
    args = ("add", client, "fetch", "--scope", scope, "--launcher", LAUNCHER, "--", "uvx", "x")
    code, out = _cli(*args)
    assert code == 0, out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    code, out = _cli("status", client, "--scope", scope)
    assert f"{path}\n  fetch: wrapped (default options): -- uvx x" in out


@pytest.mark.parametrize("fake_home", ["linux"], indirect=True)
@pytest.mark.parametrize(
    ("client", "env", "pattern"),
    [
        ("codex", {"CODEX_HOME": "/srv/codex"}, "/srv/codex/config.toml"),
        ("claude-code", {"CLAUDE_CONFIG_DIR": "/srv/claude"}, "/srv/claude/.claude.json"),
        ("vscode", {"XDG_CONFIG_HOME": "/srv/xdg"}, "/srv/xdg/Code/User/mcp.json"),
        ("zed", {"XDG_CONFIG_HOME": "/srv/xdg"}, "/srv/xdg/zed/settings.json"),
        ("goose", {"XDG_CONFIG_HOME": "/srv/xdg"}, "/srv/xdg/goose/config.yaml"),
        ("goose", {"GOOSE_PATH_ROOT": "/srv/g"}, "/srv/g/config/config.yaml"),
    ],
)
def test_the_clients_own_environment_variables_move_their_files(
    fake_home: Place,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
    env: dict[str, str],
    pattern: str,
) -> None:
    """CODEX_HOME, CLAUDE_CONFIG_DIR, GOOSE_PATH_ROOT and XDG_CONFIG_HOME are honoured."""
    place = _place("linux", env)
    monkeypatch.setattr(clients_cli, "_place", lambda: place)
    path = Path(pattern)
    path.parent.mkdir(parents=True)
    path.write_text(_content(client, "user", place), encoding="utf-8")
    code, out = _cli("status", client, "--scope", "user")
    assert code == 0
    assert f"{path}\n  git: not wrapped" in out


@pytest.mark.parametrize("fake_home", ["linux"], indirect=True)
@pytest.mark.parametrize(
    "name", ["opencode.jsonc", ".opencode/opencode.json", ".opencode/opencode.jsonc"]
)
def test_opencode_jsonc_is_used_when_only_it_exists(fake_home: Place, name: str) -> None:
    """opencode reads ``opencode.jsonc`` and a project's ``.opencode/opencode.json[c]``
    too: a config written so is the one edited."""
    path = fake_home.cwd / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '{\n  // mine\n  "mcp": {"git": {"type": "local", "command": ["uvx"]}}\n}\n',
        encoding="utf-8",
    )
    code, out = _cli("install", "opencode", "--scope", "project", "--all", "--launcher", LAUNCHER)
    assert code == 0, out
    assert json.loads(path.read_text(encoding="utf-8").replace("// mine", ""))["mcp"]["git"] == {
        "type": "local",
        "command": [LAUNCHER, "mcp", "proxy", "--", "uvx"],
    }
