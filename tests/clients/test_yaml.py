"""Goose's config.yaml: what cannot be edited safely is one error line and left untouched;
what can is edited in place, and a new server goes where Goose reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from spillstore._cli import main

LAUNCHER = "/opt/spillstore/bin/spillstore"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backups go to a home of the test's own."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    captured = capsys.readouterr()
    return int(exit_.value.code or 0), captured.out + captured.err


def _installed(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> Path:
    """A config.yaml holding ``text``, after ``install goose --all`` succeeded on it."""
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    code, out = _run(
        capsys, "install", "goose", "--config", str(config), "--all", "--launcher", LAUNCHER
    )
    assert code == 0, out
    return config


def _uninstall_gives_back(capsys: pytest.CaptureFixture[str], config: Path, text: str) -> None:
    """``uninstall goose --all`` succeeds and gives ``text`` back byte for byte."""
    code, out = _run(capsys, "uninstall", "goose", "--config", str(config), "--all")
    assert code == 0, out
    assert config.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extensions: {git: {type: stdio, cmd: uvx}}\n", "extensions is written inline"),
        ("{extensions: {git: {cmd: uvx}}}\n", "the file is written inline"),
        ("extensions:\n  a: &x {type: stdio, cmd: uvx}\n  b: *x\n", "anchors or aliases"),
        ("a: 1\n---\nb: 2\n", "expected a single document"),
        ("- 1\n- 2\n", "not a mapping of settings"),
        ("extensions: [1]\n", "extensions is not a mapping"),
        ("extensions:\n  1: {cmd: x}\n", "a name under extensions is not text"),
        ("extensions: " + "[" * 5000 + "]" * 5000 + "\n", "not valid YAML"),
        ("extensions:\n  x: !!python/object:os.system {}\n", "could not determine a constructor"),
        ("extensions:\n\tgit: {}\n", "not valid YAML"),
    ],
)
def test_a_config_that_cannot_be_edited_safely_is_one_error_line_and_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    code, out = _run(
        capsys, "install", "goose", "--config", str(config), "--all", "--launcher", LAUNCHER
    )
    assert code == 1, out
    assert message in out and out.count("\n") == 1
    assert config.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a: 1",
        "a: 1\nextensions:\nb: 2\n",
        "extensions: {}\n",
        "extensions:\r\n  old:\r\n    type: builtin\r\n    enabled: true  # on\r\n# end\r\n",
    ],
)
def test_add_puts_a_goose_extension_under_extensions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """The new extension has the fields Goose needs (``enabled``, ``name``, ``type``,
    ``cmd``, ``args``); the rest of the file reads as before."""
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    args = ("add", "goose", "fetch", "--config", str(config), "--launcher", LAUNCHER)
    code, out = _run(capsys, *args, "--", "uvx", "mcp-server-fetch")
    assert code == 0, out
    before = yaml.safe_load(text) or {}
    after = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert after["extensions"].pop("fetch") == {
        "type": "stdio",
        "name": "fetch",
        "enabled": True,
        "timeout": 300,
        "description": "",
        "cmd": LAUNCHER,
        "args": ["mcp", "proxy", "--", "uvx", "mcp-server-fetch"],
    }
    assert after == {**before, "extensions": before.get("extensions") or {}}
    if "# on" in text:  # a comment stays on its line, the line ends stay CRLF
        new = config.read_bytes().decode()
        assert "enabled: true  # on\r\n  fetch:\r\n" in new and new.endswith("\r\n# end\r\n")


def test_a_remote_extension_goes_through_the_proxy_with_its_headers_in_envs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``type: streamable_http`` with ``uri`` and ``headers`` becomes a stdio extension
    running ``proxy --url``, the header's value in ``envs``; uninstall gives the bytes
    back."""
    text = (
        "# goose\nextensions:\n  web:  # remote\n    enabled: true\n    type: streamable_http\n"
        "    name: web\n    uri: https://mcp.example/mcp\n    headers:\n"
        "      Authorization: Bearer ${TOKEN}\n    timeout: 300\nGOOSE_MODEL: m\n"
    )
    config = _installed(tmp_path, capsys, text)
    web = yaml.safe_load(config.read_text(encoding="utf-8"))["extensions"]["web"]
    assert web == {
        "enabled": True,
        "type": "stdio",
        "name": "web",
        "timeout": 300,
        "envs": {"SPILLSTORE_HEADER_AUTHORIZATION": "Bearer ${TOKEN}"},
        "cmd": LAUNCHER,
        "args": [
            *("mcp", "proxy", "--url", "https://mcp.example/mcp"),
            *("--header-env", "Authorization=SPILLSTORE_HEADER_AUTHORIZATION"),
        ],
    }
    _uninstall_gives_back(capsys, config, text)


def test_a_wrapped_extension_keeps_its_comments_and_untouched_keys_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the keys that change are rewritten (``cmd``, ``args``): the comments between
    an extension's keys and the way its other keys are written stay; uninstall gives the
    bytes back."""
    text = (
        "extensions:\n  git:\n    # the git server\n    enabled: yes  # Goose: the text 'yes'\n"
        "    type: stdio\n    # how it starts\n    cmd: uvx\n    args:\n    - mcp-server-git\n"
        "    timeout: 0x12c  # hex\n    description: 'Git'\nGOOSE_MODEL: m\n"
    )
    config = _installed(tmp_path, capsys, text)
    wrapped = config.read_text(encoding="utf-8")
    for kept in (
        "    # the git server\n    enabled: yes  # Goose: the text 'yes'\n",
        "    type: stdio\n    # how it starts\n",
        "    timeout: 0x12c  # hex\n    description: 'Git'\nGOOSE_MODEL: m\n",
    ):
        assert kept in wrapped
    git = yaml.safe_load(wrapped)["extensions"]["git"]
    assert git["cmd"] == LAUNCHER
    assert git["args"] == ["mcp", "proxy", "--", "uvx", "mcp-server-git"]
    _uninstall_gives_back(capsys, config, text)


def test_goose_values_are_read_as_yaml_1_2_as_goose_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``yes``/``on``/``off``/``no`` are text to Goose (YAML 1.2), not booleans: an
    extension whose arguments hold them is wrapped with those words (quoted where PyYAML
    would read them otherwise), not skipped or turned into ``true``."""
    text = "extensions:\n  flags:\n    type: stdio\n    cmd: tool\n    args: [--color, on, no]\n"
    status = tmp_path / "status.yaml"
    status.write_text(text, encoding="utf-8")
    code, out = _run(capsys, "status", "goose", "--config", str(status))
    assert code == 0, out
    assert "flags: not wrapped: tool --color on no" in out, out
    config = _installed(tmp_path, capsys, text)
    args = yaml.safe_load(config.read_text(encoding="utf-8"))["extensions"]["flags"]["args"]
    assert args == ["mcp", "proxy", "--", "tool", "--color", "on", "no"]
    _uninstall_gives_back(capsys, config, text)


YAML_11_SCALARS = ["0755", "1_000", "0o17", "1:20", "~", "0x1F", "0b11", "1e3", ".inf", "+12"]
"""Plain scalars that PyYAML's YAML 1.1 reads otherwise than their text (octal, 1_000,
sexagesimal 1:20, null, ...); Goose reads an argument's text as it is written."""


def test_goose_arguments_are_their_text_whatever_yaml_1_1_makes_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Arguments such as ``0755``, ``1_000``, ``0o17``, ``1:20`` and ``~`` are text to
    Goose (its ``args`` are strings): status shows them as written, install wraps them
    with that text, the other keys stay as written, and uninstall gives the bytes back."""
    words = " ".join(YAML_11_SCALARS)
    text = (
        "extensions:\n  perms:\n    type: stdio\n    cmd: chmod\n"
        f"    args: [{', '.join(YAML_11_SCALARS)}]\n"
        "    envs:\n      MODE: 0755\n      LIMIT: 1_000\n      AT: 1:20\n"
        "    timeout: 0755\n"
    )
    status = tmp_path / "status.yaml"
    status.write_text(text, encoding="utf-8")
    code, out = _run(capsys, "status", "goose", "--config", str(status))
    assert code == 0, out
    assert f"perms: not wrapped: chmod {words}" in out, out
    config = _installed(tmp_path, capsys, text)
    wrapped = config.read_text(encoding="utf-8")
    assert "    envs:\n      MODE: 0755\n      LIMIT: 1_000\n      AT: 1:20\n" in wrapped
    assert "    timeout: 0755\n" in wrapped
    as_text = yaml.load(wrapped, Loader=yaml.BaseLoader)["extensions"]["perms"]
    assert as_text["args"] == ["mcp", "proxy", "--", "chmod", *YAML_11_SCALARS]
    _uninstall_gives_back(capsys, config, text)


def test_an_inline_goose_extension_keeps_the_values_it_did_not_change_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An extension written inline is rewritten as a block, but the values install does
    not change keep their text (``timeout: 0755`` stays ``0755``, not ``493`` or a quoted
    string); uninstall gives the bytes back."""
    text = (
        "extensions:\n  perms: {type: stdio, cmd: chmod, args: [0755, '~'], timeout: 0755, "
        "envs: {MODE: 0o17, AT: 1:20}, enabled: yes}\n"
    )
    config = _installed(tmp_path, capsys, text)
    wrapped = config.read_text(encoding="utf-8")
    for kept in ("timeout: 0755\n", "envs: {MODE: 0o17, AT: 1:20}\n", "enabled: yes\n"):
        assert kept in wrapped, wrapped
    as_text = yaml.load(wrapped, Loader=yaml.BaseLoader)["extensions"]["perms"]
    assert as_text["args"] == ["mcp", "proxy", "--", "chmod", "0755", "~"]
    _uninstall_gives_back(capsys, config, text)
