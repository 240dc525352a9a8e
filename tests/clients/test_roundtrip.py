"""install then uninstall gives back the same bytes, for every client format, over
generated configs (comments, unicode, CRLF, tabs, unknown fields, every transport)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._clients import ops
from spillstore._clients.formats import JsonFormat
from spillstore._clients.registry import CLIENTS, Place
from spillstore._clients.wrap import Flavor, ProxyOptions, Wrapped, wrapped_by
from tests.clients.configs import LAUNCHER, json_config, toml_config, yaml_config

PLACE = Place(home=Path("/home/é"), system="linux", env={}, cwd=Path("/home/é/app 🌙"))
ENTRY_STYLE = {
    "claude-code": "mcp",
    "claude-desktop": "mcp",
    "cursor": "mcp",
    "zed": "zed",
    "vscode": "vscode",
    "gemini": "gemini",
    "windsurf": "windsurf",
    "opencode": "opencode",
    "codex": "codex",
    "goose": "goose",
}
SCOPED = [(client, scope) for client in CLIENTS for scope in CLIENTS[client].scopes]
OPTIONS = ProxyOptions(max_bytes="20KB", store="s3://bucket/spills")


def _config(client: str, scope: str, data: st.DataObject) -> ops.Config:
    _, fmt = CLIENTS[client].locate(PLACE, scope, lambda path: False)
    if client == "codex":
        text = data.draw(toml_config())
    elif client == "goose":
        text = data.draw(yaml_config())
    else:
        assert isinstance(fmt, JsonFormat)
        section = data.draw(st.sampled_from(fmt.sections))  # opencode: v2 and v1 layouts
        beside = fmt.mixed and section == fmt.sections[0] and data.draw(st.booleans())
        text = data.draw(json_config(ENTRY_STYLE[client], section, beside))
    return ops.Config(fmt, CLIENTS[client].flavor, text, "cfg")


def _argv(entry: dict[str, Any], flavor: Flavor) -> list[str]:
    command = entry[flavor.command_key]
    if isinstance(command, dict):  # Zed's older form
        return [command["path"], *command.get("args", [])]
    if flavor.command_list:
        return list(entry[flavor.command_key])
    return [entry[flavor.command_key], *entry.get("args", [])]


def _check_remote(
    original: dict[str, Any], entry: dict[str, Any], found: Wrapped, flavor: Flavor
) -> None:
    """A wrapped remote entry reaches the same URL, over the same transport, with the same
    headers (each value verbatim in the entry's environment, its name on the command line;
    no value on the command line), and keeps the original environment."""
    assert found.url in (original.get(k) for k in (*flavor.url_keys, *flavor.sse_keys))
    assert found.headers == ()
    env = dict(entry.get(flavor.env_key) or {})
    sent = {name: env.pop(var) for name, var in found.header_vars}
    assert all(var.startswith("SPILLSTORE_HEADER_") for _, var in found.header_vars)
    assert sent == (original.get(flavor.headers_key) or {})
    assert env == (original.get(flavor.env_key) or {})
    assert found.sse == (
        original.get("type") == "sse" or ("url" in flavor.sse_keys and "url" in original)
    )


def _one_url_key(entry: dict[str, Any], flavor: Flavor) -> dict[str, Any]:
    """``entry`` with its URL under one key, whichever of the client's keys held it."""
    keys = (*flavor.url_keys, *flavor.sse_keys)
    urls = [v for k, v in entry.items() if k in keys]
    return {**{k: v for k, v in entry.items() if k not in keys}, **({"URL": urls} if urls else {})}


@pytest.mark.parametrize(("client", "scope"), SCOPED)
@settings(max_examples=40)
@given(data=st.data())
def test_install_then_uninstall_gives_back_the_same_bytes(
    client: str, scope: str, data: st.DataObject
) -> None:
    """Every server is wrapped or skipped with a reason; installing again changes nothing;
    uninstall with the backups restores the original text exactly."""
    config = _config(client, scope, data)
    flavor = config.flavor
    before = config.fmt.entries(config.text, "cfg")
    wrapped, changes, backups = ops.install(config, None, launcher=LAUNCHER, options=OPTIONS)
    assert [change.name for change in changes] == list(before)
    after = config.fmt.entries(wrapped, "cfg")
    assert list(after) == list(before)
    for change in changes:
        entry = after[change.name]
        if change.action == "skipped":
            assert entry == before[change.name]
            continue
        found = wrapped_by(entry, flavor)
        assert isinstance(found, Wrapped)
        assert found.options == ("--max-bytes", "20KB", "--store", "s3://bucket/spills")
        original = before[change.name]
        if found.url is None:
            assert list(found.command) == _argv(original, flavor)
        else:
            _check_remote(original, entry, found, flavor)
        skip = (flavor.command_key, "args", "type", flavor.env_key)
        kept = {k: v for k, v in entry.items() if k not in skip}
        assert all(original.get(k) == v for k, v in kept.items())

    again, _, more = ops.install(
        dataclasses.replace(config, text=wrapped), None, launcher=LAUNCHER, options=OPTIONS
    )
    assert (again, more) == (wrapped, [])

    kept_backups = {backup.key: backup for backup in backups}
    restored, _ = ops.uninstall(
        dataclasses.replace(config, text=wrapped), None, backup=kept_backups.get
    )
    assert restored == config.text


@pytest.mark.parametrize(("client", "scope"), SCOPED)
@settings(max_examples=20)
@given(data=st.data())
def test_uninstall_without_backups_rebuilds_every_local_server(
    client: str, scope: str, data: st.DataObject
) -> None:
    """With the backups lost, uninstall still gives back each server's command line or URL,
    transport and headers, and every other field (its formatting may differ; an empty
    ``env`` of a remote server with headers is not written back, and a URL comes back
    under the client's first URL key: Windsurf's ``url`` as ``serverUrl``)."""
    config = _config(client, scope, data)
    before = config.fmt.entries(config.text, "cfg")
    wrapped, changes, _ = ops.install(config, None, launcher=LAUNCHER, options=OPTIONS)
    rebuilt, _ = ops.uninstall(
        dataclasses.replace(config, text=wrapped), None, backup=lambda key: None
    )
    after = config.fmt.entries(rebuilt, "cfg")
    for change in changes:
        original = before[change.name]
        if change.action != "wrapped":
            continue
        if config.flavor.command_key in original and not original.get("args", True):
            original = {k: v for k, v in original.items() if k != "args"}  # not written back
        nested = original.get(config.flavor.command_key)
        if isinstance(nested, dict) and not nested.get("args", True):
            nested = {k: v for k, v in nested.items() if k != "args"}
            original = {**original, config.flavor.command_key: nested}
        env_key = config.flavor.env_key
        if original.get(config.flavor.headers_key) and original.get(env_key) == {}:
            original = {k: v for k, v in original.items() if k != env_key}
        flavor = config.flavor
        assert _one_url_key(after[change.name], flavor) == _one_url_key(original, flavor)
