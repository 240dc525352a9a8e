"""Older config forms clients still read, through the real command line on real files:
opencode entries left directly under ``mcp`` beside its v2 ``mcp.servers``, and Zed's
``"command": {"path", "args", "env"}`` entries. Each is seen by ``status``, wrapped in
place in its own form, and given back byte for byte by ``uninstall``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.clients.test_safe_edits import LAUNCHER, Cli

OPENCODE = """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    // v2
    "servers": {
      "git": {"type": "local", "command": ["uvx", "mcp-server-git"]},
    },
    // left from v1
    "docs": {"type": "remote", "url": "https://docs.example/mcp", "enabled": true},
    "files": {"type": "local", "command": ["npx", "-y", "server-filesystem", "/tmp"]},
  },
}
"""

ZED = """{
  "theme": "One Dark",
  "context_servers": {
    "old": {
      "source": "custom",
      "command": {
        "path": "npx",
        "args": ["-y", "@supabase/mcp-server-supabase"],
        "env": {"TOKEN": "secret"}  // kept in the command object
      },
      "settings": {}
    },
    "new": {"source": "custom", "command": "uvx", "args": ["mcp-server-git"], "env": {}},
    "ext": {"source": "extension", "settings": {"key": "v"}}
  }
}
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a home of its own."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _plain(text: str) -> dict[str, object]:
    """JSONC without its comments and trailing commas (these test files hold no '//' in
    strings other than URLs, which are left alone)."""
    text = re.sub(r"(?m)^\s*//.*$|\s//[^\n\"]*$", "", text)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))  # type: ignore[no-any-return]


def test_opencode_entries_beside_mcp_servers_are_seen_wrapped_and_given_back(
    work: Path, cli: Cli
) -> None:
    """A file with both layouts: status lists the servers of both, install wraps each
    where it stands (the v1 ones stay directly under mcp), uninstall gives the bytes back."""
    config = work / "opencode.json"
    config.write_text(OPENCODE, encoding="utf-8")
    code, out = cli("status", "opencode", "--scope", "project")
    assert code == 0, out
    for line in (
        "git: not wrapped: uvx mcp-server-git",
        "docs: not wrapped: HTTP https://docs.example/mcp",
        "files: not wrapped: npx -y server-filesystem /tmp",
    ):
        assert line in out
    code, out = cli("install", "opencode", "--scope", "project", "--all", "--launcher", LAUNCHER)
    assert code == 0, out
    mcp = _plain(config.read_text(encoding="utf-8"))["mcp"]
    assert isinstance(mcp, dict)
    assert set(mcp) == {"servers", "docs", "files"}
    assert mcp["files"]["command"] == [LAUNCHER, "mcp", "proxy", "--", *OPENCODE_FILES]
    assert mcp["docs"]["command"][-2:] == ["--url", "https://docs.example/mcp"]
    assert mcp["servers"]["git"]["command"][-2:] == ["uvx", "mcp-server-git"]
    code, out = cli("uninstall", "opencode", "--scope", "project", "--all")
    assert code == 0, out
    assert config.read_text(encoding="utf-8") == OPENCODE


OPENCODE_FILES = ["npx", "-y", "server-filesystem", "/tmp"]


def test_an_opencode_server_in_both_layouts_is_one_error_line(work: Path, cli: Cli) -> None:
    """The same name under mcp.servers and directly under mcp: which one opencode runs is
    not known, so status and install say so in one line and change nothing."""
    text = OPENCODE.replace('"files":', '"git":')
    config = work / "opencode.json"
    config.write_text(text, encoding="utf-8")
    for command in ("status", "install"):
        extra = ("--all", "--launcher", LAUNCHER) if command == "install" else ()
        code, out = cli(command, "opencode", "--scope", "project", *extra)
        assert code == 1
        assert out.count("\n") == 1
        assert (
            "server 'git' is both in mcp.servers and directly in mcp (the one directly in "
            "mcp is run); keep one"
        ) in out
    assert config.read_text(encoding="utf-8") == text


def test_zed_entries_with_a_command_object_are_wrapped_in_that_form(work: Path, cli: Cli) -> None:
    """Zed's older ``command: {path, args, env}`` is wrapped as such (the proxy in
    ``path``/``args``, ``env`` and ``settings`` kept), the newer form beside it as usual,
    an extension's entry is reported, and uninstall restores the file byte for byte, or
    rebuilds the object from the command line when the backup is gone."""
    config = work / ".zed" / "settings.json"
    config.parent.mkdir()
    config.write_text(ZED, encoding="utf-8")
    code, out = cli("status", "zed", "--scope", "project")
    assert code == 0, out
    assert "old: not wrapped: npx -y @supabase/mcp-server-supabase" in out
    code, out = cli("install", "zed", "--scope", "project", "--all", "--launcher", LAUNCHER)
    assert code == 0, out
    assert "old: wrapped" in out and "new: wrapped" in out
    assert "ext: skipped - neither a command nor a URL" in out
    servers = _plain(config.read_text(encoding="utf-8"))["context_servers"]
    assert isinstance(servers, dict)
    assert servers["old"] == {
        "source": "custom",
        "command": {
            "path": LAUNCHER,
            "args": ["mcp", "proxy", "--", "npx", "-y", "@supabase/mcp-server-supabase"],
            "env": {"TOKEN": "secret"},
        },
        "settings": {},
    }
    assert servers["new"]["command"] == LAUNCHER
    code, out = cli("status", "zed", "--scope", "project")
    assert "old: wrapped (default options): -- npx -y @supabase/mcp-server-supabase" in out
    wrapped = config.read_text(encoding="utf-8")
    assert cli("uninstall", "zed", "--scope", "project", "--all")[0] == 0
    assert config.read_text(encoding="utf-8") == ZED

    config.write_text(wrapped, encoding="utf-8")  # the same, without the backups
    backups = work.parent / "home" / ".local" / "state" / "spillstore" / "clients"
    for backup in backups.iterdir():
        backup.unlink()
    assert cli("uninstall", "zed", "--scope", "project", "--all")[0] == 0
    assert _plain(config.read_text(encoding="utf-8")) == _plain(ZED)


def _zed_migrated(entry: dict[str, object]) -> dict[str, object]:
    """What Zed's settings migration makes of an entry with a command object: the object
    flattened into ``command``, ``args`` and ``env`` (Zed's ``m_2025`` migration)."""
    nested = entry["command"]
    assert isinstance(nested, dict)
    flat = {key: value for key, value in entry.items() if key != "command"}
    flat["command"] = nested["path"]
    flat |= {key: nested[key] for key in ("args", "env") if key in nested}
    return flat


def test_a_wrapped_zed_entry_zed_migrated_comes_back_in_its_older_form(
    work: Path, cli: Cli
) -> None:
    """Zed flattened the command object of an entry spillstore wrapped in its older form:
    uninstall still finds the entry's backup and gives the entry back as it was found
    (the command object, its comment included), not rebuilt flat."""
    config = work / ".zed" / "settings.json"
    config.parent.mkdir()
    config.write_text(ZED, encoding="utf-8")
    code, out = cli("install", "zed", "--scope", "project", "--all", "--launcher", LAUNCHER)
    assert code == 0, out
    settings = _plain(config.read_text(encoding="utf-8"))
    servers = settings["context_servers"]
    assert isinstance(servers, dict)
    servers["old"] = _zed_migrated(servers["old"])
    config.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    code, out = cli("uninstall", "zed", "--scope", "project", "--all")
    assert code == 0, out
    assert "old: restored - from its backup, as it was" in out, out
    restored = config.read_text(encoding="utf-8")
    assert '"env": {"TOKEN": "secret"}  // kept in the command object' in restored
    assert _plain(restored) == _plain(ZED)
