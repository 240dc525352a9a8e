"""The command line's safe edits on real files: a malformed or concurrently changed
config is never written, --dry-run only prints, a second install changes nothing, links,
byte-order marks and modes survive, a moved config still uninstalls byte for byte, and
what cannot be wrapped is reported."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from spillstore._cli import main
from spillstore._clients import files
from spillstore._clients.errors import ClientConfigError

LAUNCHER = "/opt/spillstore/bin/spillstore"
CONFIG = """{
  // my servers
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git"]},
    "docs": {"type": "http", "url": "https://docs.example/mcp"},
    "feed": {"type": "sse", "url": "https://feed.example/sse"},
    "private": {"type": "http", "url": "https://p.example/mcp", "headers": {"X-Key": "${KEY}"}},
    "login": {"type": "http", "url": "https://l.example/mcp", "oauth": {"clientId": "c"}},
    "capped": {"command": "uvx", "args": ["ctxtual", "wrap", "--", "npx", "srv"]}
  }
}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding ``.mcp.json``, with a home of its own."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / ".mcp.json").write_text(CONFIG, encoding="utf-8")
    return work / ".mcp.json"


class Cli:
    """The real entry point (one-line errors, exit codes), run in-process."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str) -> tuple[int, str]:
        """Run ``spillstore ARGS``: the exit status, and stdout then stderr."""
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            main(list(args))
        captured = self.capsys.readouterr()
        return int(exit_.value.code or 0), captured.out + captured.err

    def install(self, *args: str) -> tuple[int, str]:
        """``install claude-code --scope project`` with a fixed launcher."""
        return self("install", "claude-code", "--scope", "project", "--launcher", LAUNCHER, *args)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)


def backups(project: Path) -> list[Path]:
    folder = project.parent.parent / "home" / ".local" / "state" / "spillstore" / "clients"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_install_wraps_what_it_can_and_says_why_not_for_the_rest(project: Path, cli: Cli) -> None:
    """Local, streamable-HTTP and SSE servers are wrapped, headers included (their values
    move to the entry's env verbatim, their names to the command line); servers that sign
    in through the client and already-capped servers are reported and left byte for byte."""
    code, out = cli.install("--all", "--max-bytes", "20KB")
    assert code == 0, out
    assert "git: wrapped - (--max-bytes 20KB): -- uvx mcp-server-git" in out
    assert "docs: wrapped - (--max-bytes 20KB): --url https://docs.example/mcp" in out
    assert "feed: wrapped - (--max-bytes 20KB): --url https://feed.example/sse (SSE)" in out
    assert (
        "private: wrapped - (--max-bytes 20KB): --url https://p.example/mcp (headers X-Key)" in out
    )
    assert "${KEY}" not in out
    assert "login: skipped - signs in through the client (oauth)" in out
    assert "capped: skipped - already wrapped by ctxtual" in out
    text = project.read_text(encoding="utf-8")
    for kept in ("// my servers", '"oauth": {"clientId": "c"}', '"ctxtual", "wrap"'):
        assert kept in text
    servers = json.loads(text.replace("// my servers", ""))["mcpServers"]
    assert servers["git"]["args"] == [
        "mcp",
        "proxy",
        "--max-bytes",
        "20KB",
        "--",
        "uvx",
        "mcp-server-git",
    ]
    assert servers["docs"] == {
        "type": "stdio",
        "command": LAUNCHER,
        "args": ["mcp", "proxy", "--max-bytes", "20KB", "--url", "https://docs.example/mcp"],
    }
    assert servers["feed"]["args"][-3:] == ["--url", "https://feed.example/sse", "--sse"]
    assert servers["private"] == {
        "type": "stdio",
        "command": LAUNCHER,
        "args": [
            *("mcp", "proxy", "--max-bytes", "20KB", "--url", "https://p.example/mcp"),
            *("--header-env", "X-Key=SPILLSTORE_HEADER_X_KEY"),
        ],
        "env": {"SPILLSTORE_HEADER_X_KEY": "${KEY}"},
    }


def test_installing_twice_changes_nothing(project: Path, cli: Cli) -> None:
    """A second install finds every server wrapped already and does not write."""
    cli.install("--all")
    first = project.read_bytes()
    before = project.stat().st_mtime_ns
    code, out = cli.install("--all")
    assert code == 0
    assert "git: skipped - already wrapped by spillstore" in out
    assert project.read_bytes() == first
    assert project.stat().st_mtime_ns == before


def test_dry_run_prints_a_diff_and_writes_nothing(project: Path, cli: Cli) -> None:
    """--dry-run shows the unified diff and leaves the file and the backups alone."""
    code, out = cli.install("--server", "git", "--dry-run")
    assert code == 0
    assert '-    "git": {"command": "uvx", "args": ["mcp-server-git"]},' in out
    assert f'+    "git": {{"command": "{LAUNCHER}", "args": ["mcp", "proxy", "--", "uvx"' in out
    assert project.read_text(encoding="utf-8") == CONFIG
    assert backups(project) == []


def test_a_malformed_config_is_one_error_line_and_left_untouched(project: Path, cli: Cli) -> None:
    """Broken JSON: exit 1, one line naming the file, line and column; nothing written."""
    broken = CONFIG.replace('"mcp-server-git"]', '"mcp-server-git"')
    project.write_text(broken, encoding="utf-8")
    code, out = cli.install("--all")
    assert code == 1
    assert out.count("\n") == 1
    assert f"{project}: not valid JSON at line 4" in out
    assert project.read_text(encoding="utf-8") == broken


def test_a_file_changed_between_read_and_write_is_not_overwritten(project: Path) -> None:
    """The write checks the file still holds what was read; if not, it refuses."""
    snapshot = files.read(project)
    project.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    with pytest.raises(ClientConfigError, match="changed since it was read"):
        files.write(snapshot, "{}\n")
    assert project.read_text(encoding="utf-8") == '{"mcpServers": {}}\n'
    assert [p.name for p in project.parent.iterdir()] == [".mcp.json"]


def test_mode_link_and_byte_order_mark_survive(project: Path, tmp_path: Path, cli: Cli) -> None:
    """The file keeps its mode; a symlinked config stays a link to the edited target; a
    UTF-8 byte-order mark stays in front."""
    target = tmp_path / "dotfiles" / "mcp.json"
    target.parent.mkdir()
    target.write_bytes(b"\xef\xbb\xbf" + CONFIG.encode())
    target.chmod(0o640)
    project.unlink()
    project.symlink_to(target)
    code, out = cli.install("--all")
    assert code == 0, out
    assert project.is_symlink()
    assert target.read_bytes().startswith(b"\xef\xbb\xbf{")
    assert b"mcp-server-git" in target.read_bytes()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert target.read_bytes() == b"\xef\xbb\xbf" + CONFIG.encode()


def test_a_moved_config_still_uninstalls_byte_for_byte(
    project: Path, tmp_path: Path, cli: Cli
) -> None:
    """Backups are keyed by the wrapped entry, not the file's place: move the file, edit
    another part of it, and uninstall still restores each entry exactly."""
    cli.install("--all")
    moved = tmp_path / "elsewhere.json"
    os.replace(project, moved)
    text = moved.read_text(encoding="utf-8").replace("// my servers", "// my servers, moved")
    moved.write_text(text, encoding="utf-8")
    code, out = cli("uninstall", "claude-code", "--config", str(moved), "--all")
    assert code == 0, out
    assert out.count("restored - from its backup, as it was") == 4
    assert moved.read_text(encoding="utf-8") == CONFIG.replace(
        "// my servers", "// my servers, moved"
    )


def test_without_its_backup_an_entry_is_rebuilt_from_its_command_line(
    project: Path, cli: Cli
) -> None:
    """Lost backups: uninstall rebuilds the original values from the wrapped command line,
    and says so."""
    cli.install("--server", "git")
    for backup in backups(project):
        backup.unlink()
    code, out = cli("uninstall", "claude-code", "--scope", "project", "--server", "git")
    assert code == 0
    assert "git: restored - rebuilt from its command line (no backup found)" in out
    servers = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    assert servers["mcpServers"]["git"] == {"command": "uvx", "args": ["mcp-server-git"]}


def test_without_its_backup_a_remote_entry_gets_its_url_and_headers_back(
    project: Path, cli: Cli
) -> None:
    """Lost backups: a remote entry's URL, transport and headers (from the command line
    and the entry's env) come back as values."""
    cli.install("--server", "private", "--server", "feed")
    for backup in backups(project):
        backup.unlink()
    code, out = cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert code == 0, out
    servers = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    original = json.loads(CONFIG.replace("// my servers", ""))
    assert servers == original


def test_bad_choices_are_refused_before_anything_is_read(project: Path, cli: Cli) -> None:
    """No server chosen, an unknown client or scope, an unknown server: one line each."""
    assert cli.install()[0] == 2
    assert cli("install", "emacs", "--all")[0] == 2
    assert cli("install", "cursor", "--scope", "local", "--all")[0] == 2
    code, out = cli.install("--server", "nope")
    assert code == 1
    assert "no server named nope (servers: git, docs, feed, private, login, capped)" in out
    assert project.read_text(encoding="utf-8") == CONFIG


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--max-bytes", "1KB"], "at least 2048 bytes"),
        (["--max-bytes", "12K"], '"K" is ambiguous'),
        (["--store", "bogus://x"], "unknown scheme 'bogus'"),
        (["--store", "s3://"], "s3://BUCKET"),
        (["--store", ""], "non-empty path"),
    ],
)
def test_proxy_options_the_proxy_would_refuse_are_refused_by_install_and_add(
    project: Path, cli: Cli, option: list[str], message: str
) -> None:
    """A budget or store URL the proxy would refuse is a usage error now, naming the
    option, and nothing is written: written into a client's config, it would show only as
    a server that fails to start."""
    code, out = cli.install("--all", *option)
    assert code == 2 and f"{option[0]} {option[1]}: " in out and message in out
    code, out = cli("add", "claude-code", "new", "--scope", "project", *option, "--", "uvx")
    assert code == 2 and message in out
    assert project.read_text(encoding="utf-8") == CONFIG
    assert backups(project) == []


def test_add_writes_a_wrapped_entry_and_refuses_a_taken_name(tmp_path: Path, cli: Cli) -> None:
    """add creates the file (0600) and section when missing, wraps the new server, and
    will not replace a server of the same name."""
    config = tmp_path / "new" / "mcp.json"
    code, out = cli(
        "add",
        "cursor",
        "git",
        "--config",
        str(config),
        "--launcher",
        LAUNCHER,
        "--",
        "uvx",
        "mcp-server-git",
    )
    assert code == 0, out
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text(encoding="utf-8")) == {
        "mcpServers": {
            "git": {"command": LAUNCHER, "args": ["mcp", "proxy", "--", "uvx", "mcp-server-git"]}
        }
    }
    code, out = cli("add", "cursor", "git", "--config", str(config), "--url", "https://x/mcp")
    assert code == 1
    assert "already there" in out
    code, out = cli("add", "cursor", "web", "--config", str(config), "--url", "https://x/mcp")
    assert code == 0
    assert "web: added - wrapped (default options): --url https://x/mcp" in out
    code, out = cli(
        *("add", "cursor", "feed", "--config", str(config), "--url", "https://x/sse", "--sse"),
        *("--header", "Authorization=Bearer ${env:TOKEN}", "--launcher", LAUNCHER),
    )
    assert code == 0, out
    assert "feed: added - wrapped (default options): --url https://x/sse (SSE; headers" in out
    assert json.loads(config.read_text(encoding="utf-8"))["mcpServers"]["feed"] == {
        "command": LAUNCHER,
        "args": [
            *("mcp", "proxy", "--url", "https://x/sse", "--sse"),
            *("--header-env", "Authorization=SPILLSTORE_HEADER_AUTHORIZATION"),
        ],
        "env": {"SPILLSTORE_HEADER_AUTHORIZATION": "Bearer ${env:TOKEN}"},
    }
    for bad, message in (
        (["--url", "https://x/mcp", "--header", "No Name=1"], "not an HTTP header name"),
        (["--header", "A=1", "--", "uvx"], "--sse and --header go with --url"),
    ):
        code, out = cli("add", "cursor", "bad", "--config", str(config), *bad)
        assert code == 2 and message in out


def test_status_json_lists_each_file_and_server(project: Path, cli: Cli) -> None:
    """status --json: one record per file, one per server, with what wraps it."""
    cli.install("--server", "git")
    _, out = cli("--json", "status", "claude-code", "--scope", "project")
    document = json.loads(out)
    assert document["version"] == 1
    [row] = document["files"]
    assert (row["client"], row["scope"], row["exists"]) == ("claude-code", "project", True)
    assert row["servers"][0] == {
        "name": "git",
        "action": "seen",
        "detail": "wrapped (default options): -- uvx mcp-server-git",
    }


def test_each_config_gets_its_own_original_back(project: Path, tmp_path: Path, cli: Cli) -> None:
    """The same server, written differently in two configs, wraps to the same entry; each
    file still gets its own text back."""
    other = tmp_path / "other.json"
    other.write_text(
        '{"mcpServers": {"git": {"command": "uvx",\n  "args": [\n    "mcp-server-git"\n  ]}}}\n',
        encoding="utf-8",
    )
    first = other.read_bytes()
    cli.install("--server", "git")
    cli("install", "claude-code", "--config", str(other), "--launcher", LAUNCHER, "--all")
    cli("uninstall", "claude-code", "--scope", "project", "--all")
    cli("uninstall", "claude-code", "--config", str(other), "--all")
    assert project.read_text(encoding="utf-8") == CONFIG
    assert other.read_bytes() == first


def test_a_backup_that_does_not_fit_gives_its_values_not_its_text(project: Path, cli: Cli) -> None:
    """A backup edited by hand whose text no longer reads as the value it recorded is not
    spliced in: the recorded value is written instead, and the output says so."""
    cli.install("--server", "git")
    [backup] = backups(project)
    record = json.loads(backup.read_text(encoding="utf-8"))
    for copy in record["copies"].values():
        copy["original_text"] = '{"command": "rm", "args": ["-rf", "/"]'
    backup.write_text(json.dumps(record), encoding="utf-8")
    code, out = cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert code == 0, out
    assert "git: restored - from its backup's values (its text did not fit)" in out
    servers = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    assert servers["mcpServers"]["git"] == {"command": "uvx", "args": ["mcp-server-git"]}


def test_a_module_launcher_is_recognised_as_spillstore(project: Path, cli: Cli) -> None:
    """``python -m spillstore._cli`` (the fallback when no spillstore script is found)
    counts as spillstore: a second install skips it, uninstall restores it."""
    launcher = ["install", "claude-code", "--scope", "project", "--launcher"]
    module = "/usr/bin/python3 -m spillstore._cli"
    cli(*launcher, module, "--server", "git")
    servers = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    assert servers["mcpServers"]["git"] == {
        "command": "/usr/bin/python3",
        "args": ["-m", "spillstore._cli", "mcp", "proxy", "--", "uvx", "mcp-server-git"],
    }
    _, out = cli(*launcher, module, "--server", "git")
    assert "git: skipped - already wrapped by spillstore" in out
    cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert project.read_text(encoding="utf-8") == CONFIG


def test_add_nests_a_new_project_entry_in_the_files_own_indent(project: Path, cli: Cli) -> None:
    """Claude Code's local scope: a server for a project not yet in ``~/.claude.json`` is
    added under ``projects.CWD.mcpServers``, indented like the rest of the file."""
    claude = project.parent.parent / "home" / ".claude.json"
    claude.write_text('{\n  "projects": {\n    "/other": {}\n  }\n}\n', encoding="utf-8")
    code, out = cli(
        "add",
        "claude-code",
        "git",
        "--scope",
        "local",
        "--launcher",
        "/bin/spillstore",
        "--",
        "uvx",
    )
    assert code == 0, out
    key = json.dumps(str(project.parent))
    assert claude.read_text(encoding="utf-8") == (
        '{\n  "projects": {\n    "/other": {},\n'
        f"    {key}: {{\n"
        '      "mcpServers": {\n'
        '        "git": {\n'
        '          "type": "stdio",\n'
        '          "command": "/bin/spillstore",\n'
        '          "args": ["mcp", "proxy", "--", "uvx"]\n'
        "        }\n      }\n    }\n  }\n}\n"
    )


def test_a_launcher_must_name_spillstore(project: Path, cli: Cli) -> None:
    """A launcher that does not name spillstore is refused (a later install or uninstall
    could not tell the entry is wrapped); ``uvx spillstore`` is recognised."""
    code, out = cli("install", "claude-code", "--scope", "project", "--launcher", "/s", "--all")
    assert code == 2
    assert "must name spillstore" in out
    assert project.read_text(encoding="utf-8") == CONFIG
    uvx = ["install", "claude-code", "--scope", "project", "--launcher", "uvx spillstore"]
    cli(*uvx, "--server", "git")
    _, out = cli(*uvx, "--server", "git")
    assert "git: skipped - already wrapped by spillstore" in out
    cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert project.read_text(encoding="utf-8") == CONFIG


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"mcpServers": {"git": {"command": "\xff"}}}', "not UTF-8"),
        (b"[]", "the top level is not an object"),
        (b'{"mcpServers": ["git"]}', "mcpServers is not an object"),
        (b'{"mcpServers": {"git": {"command": "uvx"}', "not valid JSON at line 1"),
    ],
)
def test_configs_of_the_wrong_shape_are_one_error_line(
    project: Path, cli: Cli, data: bytes, message: str
) -> None:
    """Not UTF-8, not an object, a servers section that is not an object, cut short:
    one error line naming the file, exit 1, the file unchanged."""
    project.write_bytes(data)
    for command in (
        ("status", "claude-code", "--scope", "project"),
        ("install", "claude-code", "--scope", "project", "--all"),
    ):
        code, out = cli(*command)
        assert code == 1
        assert out.count("\n") == 1
        assert message in out
        assert str(project) in out
    assert project.read_bytes() == data


def test_status_of_every_client_shows_the_good_files_before_the_broken_one(
    project: Path, cli: Cli
) -> None:
    """``status`` without a client lists every readable file, then fails with one line
    for the broken one."""
    cursor = project.parent / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text("{oops", encoding="utf-8")
    code, out = cli("status")
    assert code == 1
    assert f"claude-code (project): {project}\n  git: not wrapped: uvx mcp-server-git" in out
    assert out.rstrip().splitlines()[-1].startswith(f"spillstore: {cursor}: not valid JSON")


def test_the_default_launcher_is_the_spillstore_on_path_as_an_absolute_path(
    project: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --launcher, entries run the ``spillstore`` found on PATH by its absolute
    path (links not resolved: a pipx link survives upgrades), since desktop clients
    start servers with a bare PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "real").write_text("#!/bin/sh\n", encoding="utf-8")
    (tmp_path / "real").chmod(0o755)
    (bin_dir / "spillstore").symlink_to(tmp_path / "real")
    monkeypatch.setenv("PATH", str(bin_dir))
    cli("install", "claude-code", "--scope", "project", "--server", "git")
    servers = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    assert servers["mcpServers"]["git"]["command"] == str(bin_dir / "spillstore")


@pytest.mark.parametrize(
    "text",
    [
        'mcp_servers.git.command = "uvx"\nmcp_servers.git.args = ["mcp-server-git"]\n',
        '[mcp_servers]\ngit.command = "uvx"\ngit.args = ["mcp-server-git"]\n',
        '[mcp_servers]\ngit.command = "uvx"\n',
        '[mcp_servers.git]\ncommand = "uvx"\n[profiles.x]\nm = 1\n[mcp_servers.git.env]\nK = "v"\n',
    ],
    ids=["dotted-from-the-root", "dotted-in-the-section", "one-dotted-key", "split-in-two"],
)
def test_a_toml_server_written_in_dotted_keys_or_pieces_is_refused_in_one_line(
    tmp_path: Path, cli: Cli, text: str
) -> None:
    """A Codex server given as dotted keys or split around another table cannot be
    edited in place: install says so in one line and writes nothing (it used to crash,
    or wrap a server that uninstall then could not restore)."""
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    code, out = cli("install", "codex", "--all", "--config", str(config), "--launcher", LAUNCHER)
    assert code == 1
    assert out.count("\n") == 1
    assert "'git'" in out
    assert "dotted keys" in out
    assert config.read_text(encoding="utf-8") == text
    code, out = cli("status", "codex", "--config", str(config))
    assert code == 0
    assert "git: not wrapped: uvx" in out


def test_a_toml_server_with_dotted_keys_inside_uninstalls_byte_for_byte(
    tmp_path: Path, cli: Cli
) -> None:
    """Dotted keys inside a ``[mcp_servers.NAME]`` table (``env.K = ...``) and a comment
    come back where they were: uninstall restores the file byte for byte."""
    text = (
        "# mine\n[mcp_servers.git]\n"
        'command = "uvx"  # the runner\nenv.K = "v"\nx.y.z = 1\n\n'
        '[mcp_servers.git.env2]\nK = "v"\n[other]\nq = 1\n'
    )
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    code, _ = cli("install", "codex", "--all", "--config", str(config), "--launcher", LAUNCHER)
    assert code == 0
    assert f'command = "{LAUNCHER}"' in config.read_text(encoding="utf-8")
    code, out = cli("uninstall", "codex", "--all", "--config", str(config))
    assert code == 0, out
    assert config.read_text(encoding="utf-8") == text


def test_a_config_that_is_a_fifo_is_one_error_line_not_a_hang(project: Path, cli: Cli) -> None:
    """A config path that is a FIFO (or any non-regular file) is refused at once, never
    opened for a blocking read."""
    project.unlink()
    os.mkfifo(project)
    for command in (
        ("status", "claude-code", "--scope", "project"),
        ("install", "claude-code", "--scope", "project", "--all"),
        ("add", "claude-code", "--scope", "project", "srv", "--", "echo"),
    ):
        code, out = cli(*command)
        assert code == 1
        assert out.strip().splitlines()[-1] == f"spillstore: {project}: not a regular file"
    assert stat.S_ISFIFO(project.lstat().st_mode)


def test_names_and_commands_from_a_config_are_printed_without_control_characters(
    project: Path, cli: Cli
) -> None:
    """A hostile project config (a cloned repository's ``.mcp.json``) cannot forge output
    lines, retitle the terminal or reorder text: control characters, separators and bidi
    overrides in names, commands, arguments and the diff are printed escaped."""
    hostile = {
        "mcpServers": {
            "ev\x1b]0;pwned\x07il\u202e": {"command": "x\x1b[31m", "args": ["\r\nfake: line"]}
        }
    }
    project.write_text(json.dumps(hostile), encoding="utf-8")
    for command in (
        ("status", "claude-code", "--scope", "project"),
        ("install", "claude-code", "--scope", "project", "--all", "--dry-run"),
        ("install", "claude-code", "--scope", "project", "--all"),
        ("uninstall", "claude-code", "--scope", "project", "--all"),
    ):
        code, out = cli(*command)
        assert code == 0
        assert not any(ch in out for ch in "\x1b\x07\r\u202e"), repr(out)
        assert "\nfake: line" not in out
        assert "ev\\x1b]0;pwned\\x07il\\u202e" in out


def test_a_remote_server_the_proxy_cannot_reach_is_skipped_not_broken(
    project: Path, cli: Cli
) -> None:
    """A remote entry whose URL is not http(s) (a WebSocket ``ws://`` server) is left as
    it is, with the reason: wrapping it gave a server that can never start. A URL the
    client expands (``${BASE}/mcp``) is still wrapped."""
    config = {
        "mcpServers": {
            "sock": {"type": "websocket", "url": "ws://127.0.0.1:9/mcp"},
            "tmpl": {"type": "http", "url": "${BASE}/mcp"},
        }
    }
    project.write_text(json.dumps(config), encoding="utf-8")
    code, out = cli("install", "claude-code", "--scope", "project", "--all")
    assert code == 0, out
    assert "sock: skipped - its URL is ws://, and the proxy speaks only http(s)" in out
    assert "tmpl: wrapped" in out
    servers = json.loads(project.read_text(encoding="utf-8"))["mcpServers"]
    assert servers["sock"] == config["mcpServers"]["sock"]


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "tab\there", "bidi\u202ename"])
def test_add_refuses_a_name_that_is_blank_or_holds_control_characters(
    tmp_path: Path, cli: Cli, name: str
) -> None:
    """``add`` with a blank name, or one holding line breaks, tabs or bidi overrides, is a
    usage error and writes nothing (such a name was written, and a Goose config with a
    multi-line key then refused every later edit)."""
    config = tmp_path / "config.yaml"
    code, out = cli("add", "goose", name, "--config", str(config), "--", "echo", "hi")
    assert code == 2
    assert out.count("\n") == 1 and "a server name must be visible text" in out
    assert not config.exists()


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away"
)
def test_an_edit_by_root_keeps_the_configs_owner(project: Path, cli: Cli) -> None:
    """``sudo spillstore install`` keeps the config's owner and group (the edit used to
    leave it owned by root, mode 0600: unreadable by the client it configures)."""
    os.chown(project, 65534, 65534)
    project.chmod(0o600)
    code, _ = cli("install", "claude-code", "--scope", "project", "--all")
    assert code == 0
    after = project.stat()
    assert (after.st_uid, after.st_gid, stat.S_IMODE(after.st_mode)) == (65534, 65534, 0o600)
    code, _ = cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert code == 0
    assert (project.stat().st_uid, project.read_text(encoding="utf-8")) == (65534, CONFIG)


def test_uninstall_all_with_nothing_wrapped_says_so(project: Path, cli: Cli) -> None:
    """``uninstall --all`` on a file whose servers are not wrapped says that none is
    wrapped (it said "no servers" about a file full of them), and changes nothing."""
    code, out = cli("uninstall", "claude-code", "--scope", "project", "--all")
    assert code == 0
    assert out.endswith(f"{project}\n  no servers wrapped by spillstore\n")
    assert project.read_text(encoding="utf-8") == CONFIG


def test_a_relative_store_path_is_written_absolute(project: Path, cli: Cli) -> None:
    """``install --store ./spills`` writes the absolute path (the client starts the server
    in a working directory of its own, where ``./spills`` means something else); ``~``
    paths and URLs are written as given."""
    code, out = cli("install", "claude-code", "--scope", "project", "-s", "git", "--store", "./sp")
    assert code == 0, out
    args = json.loads(project.read_text(encoding="utf-8").replace("// my servers", ""))
    git = args["mcpServers"]["git"]["args"]
    assert git[git.index("--store") + 1] == str(project.parent / "sp")
    cli("uninstall", "claude-code", "--scope", "project", "--all")
    code, _ = cli("install", "claude-code", "--scope", "project", "-s", "git", "--store", "~/sp")
    assert code == 0
    assert '"--store", "~/sp"' in project.read_text(encoding="utf-8")


def test_a_toml_server_with_a_trailing_comment_uninstalls_byte_for_byte(
    tmp_path: Path, cli: Cli
) -> None:
    """A comment after a Codex server's last key, and a quoted unicode name, come back in
    place: uninstall puts the table's own text back (its values checked against the
    key-by-key restore), so "as it was" is true to the byte."""
    text = '[mcp_servers."é 😀"]\ncommand = "z"\nstartup_timeout_sec = 20\n# trailing comment\n'
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    code, _ = cli("install", "codex", "--all", "--config", str(config), "--launcher", LAUNCHER)
    assert code == 0
    code, out = cli("uninstall", "codex", "--all", "--config", str(config))
    assert code == 0 and "as it was" in out
    assert config.read_text(encoding="utf-8") == text


def test_a_toml_edit_that_would_move_tables_is_refused(tmp_path: Path, cli: Cli) -> None:
    """A ``[mcp_servers.NAME]`` table between the parts of an array of tables would be
    moved to the end by the edit (and uninstall could not move it back): install refuses
    in one line and writes nothing."""
    text = '[[profiles]]\nname = "a"\n[mcp_servers.g]\ncommand = "g"\n[[profiles]]\nname = "b"\n'
    config = tmp_path / "config.toml"
    config.write_text(text, encoding="utf-8")
    code, out = cli("install", "codex", "--all", "--config", str(config), "--launcher", LAUNCHER)
    assert code == 1 and out.count("\n") == 1
    assert "cannot stay in their order" in out
    assert config.read_text(encoding="utf-8") == text
