"""Hypothesis strategies for client configs: entries of every transport, written the way
people and clients write them (comments, unicode, CRLF, tabs, trailing commas, unknown
fields), in JSON/JSONC and in Codex's TOML."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.strategies import valid_utf8_text

LAUNCHER = ["/opt/spill store/bin/spillstore"]

words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8
) | st.sampled_from(["npx", "-y", "--repository", "é", "\U0001f600", "${input:token}", " "])
"""Command-line words and names: printable text, 4-byte characters included."""

json_text = valid_utf8_text | words

HEADER_NAMES = st.sampled_from(["Authorization", "X-Api-Key", "x_key", "X.Y", "Bad Name", ""])
"""Header names, two of them not HTTP field names."""
"""Text values for JSON files (control characters and CRLF included: JSON escapes them)."""


def _extra(values: st.SearchStrategy[str], null: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Unknown fields and the usual ones every client keeps (env, cwd, timeouts)."""
    scalars = (st.none() if null else st.nothing()) | st.booleans() | values
    return st.fixed_dictionaries(
        {},
        optional={
            "env": st.dictionaries(words, values, max_size=2),
            "cwd": values,
            "timeout": st.integers(0, 10**6),
            "x-unknown": st.recursive(scalars, lambda v: st.lists(v, max_size=2), max_leaves=3),
        },
    )


def entries(flavor: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """One server entry of any transport, for a client of ``flavor`` (``mcp``, ``vscode``,
    ``gemini``, ``windsurf``, ``opencode``, ``codex``, ``zed``: ``mcp`` entries and Zed's
    older ``"command": {"path", "args", "env"}`` ones)."""
    if flavor == "zed":
        nested = st.builds(
            lambda path, args, env, extra: {
                "command": {
                    "path": path,
                    **({} if args is None else {"args": args}),
                    **({} if env is None else {"env": env}),
                },
                **extra,
            },
            values,
            st.none() | st.lists(values, max_size=4),
            st.none() | st.dictionaries(words, values, max_size=2),
            st.fixed_dictionaries(
                {},
                optional={
                    "source": st.just("custom"),
                    "settings": st.dictionaries(words, values, max_size=2),
                    "enabled": st.booleans(),
                },
            ),
        )
        return entries("mcp", values).map(dict) | nested  # half in the older form
    if flavor == "opencode":
        local = st.builds(
            lambda cmd, extra: {"type": "local", "command": cmd, **extra},
            st.lists(values, min_size=1, max_size=4),
            _extra(values),
        )
        remote = st.builds(
            lambda url, extra: {"type": "remote", "url": url, **extra},
            values,
            st.fixed_dictionaries(
                {},
                optional={
                    "enabled": st.booleans(),
                    "headers": st.dictionaries(HEADER_NAMES, values, min_size=1, max_size=2),
                    "environment": st.dictionaries(words, values, max_size=2),
                },
            ),
        )
        return local | remote
    stdio = st.builds(
        lambda cmd, args, typed, extra: {
            **({"type": "stdio"} if typed else {}),
            "command": cmd,
            **({} if args is None else {"args": args}),
            **extra,
        },
        values,
        st.none() | st.lists(values, max_size=4),
        st.booleans() if flavor not in ("codex", "gemini") else st.just(False),
        _extra(values, null=flavor != "codex"),
    )
    url_key = {"gemini": "httpUrl", "windsurf": "serverUrl"}.get(flavor, "url")
    http = st.builds(
        lambda url, typed, extra: {**({"type": "http"} if typed else {}), url_key: url, **extra},
        values.map(lambda s: "https://h/" + s),
        st.booleans() if flavor not in ("codex", "gemini", "windsurf") else st.just(False),
        _extra(values, null=flavor != "codex"),
    )
    sse = st.builds(lambda url: {"type": "sse", "url": url}, values)
    if flavor == "gemini":
        sse = st.builds(lambda url: {"url": url}, values)
    headers_key = "http_headers" if flavor == "codex" else "headers"
    header_values = values | st.sampled_from(
        ["Bearer ${input:token}", "${TOKEN}", "Bearer ${env:TOKEN}", "$TOKEN", ""]
    )
    sent = st.dictionaries(HEADER_NAMES, header_values, min_size=1, max_size=3)
    headers = st.builds(
        lambda remote, sent, extra: {**remote, headers_key: sent, **extra},
        http | sse,
        sent,
        st.fixed_dictionaries({}, optional={"env": st.dictionaries(words, values, max_size=2)})
        if flavor not in ("opencode", "codex")
        else st.just({}),
    )
    signs_in = st.builds(
        lambda url, key: {url_key: "https://h/" + url, key: "TOKEN" if flavor == "codex" else {}},
        values,
        st.sampled_from(
            ["bearer_token_env_var", "env_http_headers"] if flavor == "codex" else ["oauth"]
        ),
    ).map(lambda e: {**e, "env_http_headers": {"X-Key": "KEY"}} if "env_http_headers" in e else e)
    other = st.builds(
        lambda args: {"command": "ctxtual", "args": ["wrap", "--", *args]}, st.lists(values)
    )
    return stdio | http | sse | headers | signs_in | other


@st.composite
def json_config(
    draw: st.DrawFn, flavor: str, section: tuple[str, ...], beside: bool = False
) -> str:
    """A JSON or JSONC config holding the servers at ``section``, in a drawn style; with
    ``beside``, more servers (other names) directly in the object holding ``section``
    (opencode's v1 entries left beside its v2 ``mcp.servers``)."""
    servers = draw(st.dictionaries(words, entries(flavor, json_text), max_size=5))
    others: dict[str, Any] = {}
    if beside:
        others = draw(
            st.dictionaries(
                words.filter(lambda name: name not in servers and name != section[-1]),
                entries(flavor, json_text),
                min_size=1,
                max_size=3,
            )
        )
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    step = draw(st.sampled_from(["  ", "    ", "\t"]))
    comments = draw(st.booleans())
    trailing = draw(st.booleans()) and comments
    ascii_ = draw(st.booleans())
    one_line_entries = draw(st.booleans())

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=ascii_)

    def obj(value: dict[str, Any], indent: str, depth: int) -> str:
        if not value:
            return "{}"
        inner = indent + step
        lines = []
        for i, (key, item) in enumerate(value.items()):
            if isinstance(item, dict) and depth < len(section) + 1:
                text = obj(item, inner, depth + 1)
            elif isinstance(item, dict) and one_line_entries:
                text = dump(item)
            elif isinstance(item, dict):
                text = json.dumps(item, ensure_ascii=ascii_, indent=len(step)).replace(
                    "\n", newline + inner
                )
            else:
                text = dump(item)
            comment = f" // {key[:3]} é {i}" if comments and i % 2 == 0 else ""
            lines.append(f"{inner}{dump(key)}: {text}{{COMMA}}{comment}")
        body = [
            line.replace("{COMMA}", "," if i < len(lines) - 1 or trailing else "")
            for i, line in enumerate(lines)
        ]
        return "{" + newline + newline.join(body) + newline + indent + "}"

    tree: Any = servers
    for depth, key in enumerate(reversed(section)):
        tree = {key: tree, **(others if depth == 0 else {})}
    tree = {"$schema": "x", **tree, "theme": "dark 🌙"}
    head = f"/* settings {draw(words)} */{newline}" if comments else ""
    return head + obj(tree, "", 0) + newline


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


@st.composite
def toml_config(draw: st.DrawFn) -> str:
    """A Codex config.toml: ``[mcp_servers.NAME]`` tables (or inline tables), comments,
    CRLF or LF, unknown keys and tables around them."""
    servers = draw(st.dictionaries(words, entries("codex", words), max_size=5))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    lines = ["# Codex é 🌙", 'model = "o3"', ""]
    inline = {name: entry for name, entry in servers.items() if draw(st.booleans())}
    if inline:
        lines += ["[mcp_servers]"]
        for name, entry in inline.items():
            lines += [f"{_toml_string(name)} = {_toml_value(entry)}"]
        lines += [""]
    for name, entry in servers.items():
        if name in inline:
            continue
        lines += [f"[mcp_servers.{_toml_string(name)}]"]
        for k, v in entry.items():
            comment = "  # kept" if draw(st.booleans()) else ""
            if isinstance(v, list) and v and draw(st.booleans()):
                items = "".join(f"  {_toml_value(x)},{newline}" for x in v)
                lines.append(f"{_toml_string(k)} = [{newline}{items}]{comment}")
            else:
                lines.append(f"{_toml_string(k)} = {_toml_value(v)}{comment}")
        lines.append("")
    lines += ["[profiles.x]", 'model = "y"', ""]
    return newline.join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ "
            + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items())
            + " }"
        )
    raise TypeError(value)


def goose_entries(values: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """One Goose extension: stdio (``cmd``/``args``/``envs``), streamable HTTP or SSE
    (``uri``, ``headers``), built-in, or already behind another proxy; with the fields
    Goose writes (``enabled``, ``name``, ``timeout``, ``description``, ``env_keys``, ...)."""
    common = st.fixed_dictionaries(
        {"enabled": st.booleans()},
        optional={
            "name": values,
            "timeout": st.integers(0, 10**6),
            "description": values,
            "env_keys": st.lists(words, max_size=2),
            "bundled": st.none() | st.booleans(),
            "envs": st.dictionaries(words, values, max_size=2),
        },
    )
    stdio = st.builds(
        lambda cmd, args, extra: {"type": "stdio", "cmd": cmd, "args": args, **extra},
        values,
        st.lists(values, max_size=4),
        common,
    )
    remote = st.builds(
        lambda kind, uri, headers, extra: {
            "type": kind,
            "uri": "https://h/" + uri,
            **({"headers": headers} if headers else {}),
            **extra,
        },
        st.sampled_from(["streamable_http", "sse"]),
        values,
        st.dictionaries(HEADER_NAMES, values, max_size=2),
        common,
    )
    builtin = st.builds(lambda extra: {"type": "builtin", **extra}, common)
    other = st.builds(
        lambda args: {"type": "stdio", "cmd": "ctxtual", "args": ["wrap", "--", *args]},
        st.lists(values),
    )
    return stdio | remote | builtin | other


@st.composite
def yaml_config(draw: st.DrawFn) -> str:
    """A Goose config.yaml: settings and comments around ``extensions`` and between the
    keys of an entry, each entry in block or flow style, LF or CRLF, 2 or 4 spaces."""
    import yaml

    servers = draw(st.dictionaries(words, goose_entries(json_text), max_size=5))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    step = draw(st.sampled_from([2, 4]))
    comments = draw(st.booleans())

    def dump(value: Any, flow: bool) -> str:
        text = yaml.safe_dump(
            value, default_flow_style=flow, allow_unicode=True, sort_keys=False, width=1 << 30
        )
        return text.removesuffix("\n...\n").rstrip("\n")

    lines = ["# goose é 🌙" if comments else "", "GOOSE_PROVIDER: anthropic"]
    if servers or draw(st.booleans()):
        lines.append("extensions:" + (" # mine" if comments else "") + ("" if servers else " {}"))
    for i, (name, entry) in enumerate(servers.items()):
        key = dump(name, True)
        if comments and i % 2:
            lines.append(" " * step + "# " + key[:5])
        if draw(st.booleans()):
            lines.append(" " * step + f"{key}: {dump(entry, True)}")
            continue
        lines.append(" " * step + f"{key}:")
        body = dump(entry, False).split("\n")
        for j, line in enumerate(body):
            if comments and j and line[:1] not in ("", " ", "-"):  # between two keys
                lines.append(" " * (2 * step) + f"# before {line[:4]}")
            lines.append(" " * (2 * step) + line if line else line)
        if comments:
            lines.append(" " * (2 * step) + "# end of " + key[:5])
    lines += ["GOOSE_MODEL: claude  # after", ""]
    return newline.join(line for line in lines if line is not None)
