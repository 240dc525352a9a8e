"""One server entry, behind the proxy and back: the decisions, on plain values.

A client's entry is a JSON/TOML object. :func:`wrap` turns it into the entry that runs
``spillstore mcp proxy [OPTIONS] -- <the original command>`` (a local server) or
``spillstore mcp proxy [OPTIONS] --url URL [--sse] [--header-env NAME=VAR ...]`` (a
remote server, streamable HTTP or SSE), keeping every other field (name, env, cwd,
timeouts, unknown fields) as it was. A remote server's headers move into the entry's
environment (``SPILLSTORE_HEADER_<NAME>``, the value verbatim, so ``${input:...}`` and
``${VAR}`` references are still expanded by the client, and no secret shows in the process
list) and the proxy reads them from there. :func:`unwrap` is the way back when no backup
of the original entry is at hand: it rebuilds the original from the wrapped command line
and environment (same values; the formatting may differ).

What cannot be wrapped comes back as a :class:`Skip` with the reason: an entry already
wrapped (by spillstore or by another capping proxy), a remote server that signs in
through the client (OAuth, Codex's token variables: the proxy cannot), a URL whose scheme
is not http(s) (``ws://``), headers that are not name/text pairs, an entry with neither a
command nor a URL.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spillstore._clients.errors import ClientConfigError
from spillstore._core.checks import header_problem

__all__ = [
    "OTHER_PROXIES",
    "Flavor",
    "ProxyOptions",
    "Remote",
    "Skip",
    "Wrapped",
    "check_launcher",
    "describe",
    "migrated",
    "new_entry",
    "unwrap",
    "wrap",
    "wrapped_by",
]

OTHER_PROXIES = ("ctxtual",)
"""Programs that already cap results: an entry run through one is not wrapped again."""

_SIGN_IN_KEYS = ("env_http_headers", "bearer_token_env_var", "oauth", "authProviderType")
"""Remote-entry fields through which the client itself signs in: such entries stay as
they are."""
_HEADER_VAR = "SPILLSTORE_HEADER_"
_SSE_TYPES = frozenset({"sse"})
_HTTP_TYPES = frozenset({"http", "streamable-http", "streamablehttp", "streamable_http", "remote"})


@dataclass(frozen=True)
class Flavor:
    """How one client writes a server entry.

    Attributes:
        url_keys: the keys that hold a streamable-HTTP server's URL, first one preferred
            when a URL is written back.
        sse_keys: the keys that hold an SSE server's URL (Gemini CLI's ``url``).
        command_list: the command is one list, program first (opencode), not
            ``command`` + ``args``.
        stdio_type: what ``type`` says for a local server (``stdio``, opencode's
            ``local``), or None when the client writes no type.
        remote_type: what ``type`` says for a remote server, when the client writes one.
        headers_key: where a remote server's HTTP headers are (Codex: ``http_headers``).
        env_key: where a local server's environment is (opencode: ``environment``,
            Goose: ``envs``).
        command_key: where the program (or, with ``command_list``, the whole command
            line) is (Goose: ``cmd``); its arguments are under ``args``.
        new_fields: fields a new entry needs besides its command (Goose: ``enabled``,
            ``timeout``, ``description``).
        name_key: where a new entry repeats its own name, when the client wants that
            (Goose: ``name``).
        nested_command: the command may also be an object ``{"path", "args", "env"}``
            (Zed's older form, which Zed still reads): such an entry is read, wrapped and
            given back in that form.
    """

    url_keys: tuple[str, ...] = ("url",)
    sse_keys: tuple[str, ...] = ()
    command_list: bool = False
    stdio_type: str | None = "stdio"
    remote_type: str = "http"
    headers_key: str = "headers"
    env_key: str = "env"
    command_key: str = "command"
    new_fields: tuple[tuple[str, Any], ...] = ()
    name_key: str | None = None
    nested_command: bool = False


@dataclass(frozen=True)
class ProxyOptions:
    """The proxy's options written into a wrapped entry (None: not written).

    ``store`` is passed through as given (a store URL or path).
    """

    max_bytes: str | None = None
    store: str | None = None

    def args(self) -> list[str]:
        """The options as command-line arguments."""
        found: list[str] = []
        if self.max_bytes is not None:
            found += ["--max-bytes", self.max_bytes]
        if self.store is not None:
            found += ["--store", self.store]
        return found


@dataclass(frozen=True)
class Remote:
    """A remote server to put behind the proxy: its URL, whether it speaks SSE (not
    streamable HTTP), and the HTTP headers it is sent."""

    url: str
    sse: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Skip:
    """An entry left as it is, and why."""

    reason: str


@dataclass(frozen=True)
class Wrapped:
    """What a wrapped entry runs: the proxy's options, and the upstream (a command line,
    or a URL)."""

    options: tuple[str, ...]
    command: tuple[str, ...] = ()
    url: str | None = None
    sse: bool = False
    headers: tuple[tuple[str, str], ...] = ()
    """``--header NAME=VALUE`` pairs."""
    header_vars: tuple[tuple[str, str], ...] = ()
    """``--header-env NAME=VAR`` pairs."""


def _argv(entry: dict[str, Any], flavor: Flavor) -> list[str] | None:
    """The entry's command line (program first), or None when it has none."""
    nested = _nested(entry, flavor)
    if nested is not None:
        path, args = nested.get("path"), nested.get("args", [])
        return [path, *args] if isinstance(path, str) and path and _words(args) else None
    command = entry.get(flavor.command_key)
    if flavor.command_list:
        if isinstance(command, list) and command and _words(command):
            return list(command)
        return None
    args = entry.get("args", [])
    if isinstance(command, str) and command and _words(args):
        return [command, *args]
    return None


def _words(args: Any) -> bool:
    return isinstance(args, list) and all(isinstance(a, str) for a in args)


def _nested(entry: dict[str, Any], flavor: Flavor) -> dict[str, Any] | None:
    """The command object of an entry in Zed's older form, else None."""
    command = entry.get(flavor.command_key)
    return dict(command) if flavor.nested_command and isinstance(command, dict) else None


def migrated(entry: dict[str, Any], flavor: Flavor) -> dict[str, Any] | None:
    """What Zed's settings migration makes of an entry in its older form (the command
    object flattened: ``command`` its path, then its ``args`` and ``env`` where it had
    them; the other keys as they were), else None."""
    nested = _nested(entry, flavor)
    if nested is None:
        return None
    flat = {key: value for key, value in entry.items() if key != flavor.command_key}
    flat[flavor.command_key] = nested.get("path")
    flat |= {key: nested[key] for key in ("args", "env") if key in nested}
    return flat


def _set_argv(entry: dict[str, Any], flavor: Flavor, argv: list[str]) -> dict[str, Any]:
    """``entry`` running ``argv``, written in the entry's own form (its ``args`` only
    when there are arguments)."""
    new = dict(entry)
    nested = _nested(entry, flavor)
    if flavor.command_list and nested is None:
        new[flavor.command_key] = argv
        return new
    target = new if nested is None else nested
    target[flavor.command_key if nested is None else "path"] = argv[0]
    if argv[1:]:
        target["args"] = argv[1:]
    else:
        target.pop("args", None)
    if nested is not None:
        new[flavor.command_key] = nested
    return new


def _program(path: str) -> str:
    name = re.split(r"[\\/]", path)[-1].lower()
    return name.removesuffix(".exe").removesuffix(".cmd")


def _proxy_args(argv: list[str]) -> list[str] | None:
    """The arguments after ``mcp proxy`` in ``argv`` when something before them names
    spillstore (``/usr/bin/spillstore``, ``uvx spillstore``, ``python -m spillstore._cli``,
    also ``python -m spillstore.mcp proxy``), or None when ``argv`` does not run the proxy."""
    for i in range(len(argv) - 1):
        if argv[i : i + 2] == ["mcp", "proxy"] and any(_names_spillstore(a) for a in argv[:i]):
            return argv[i + 2 :]
        if argv[i : i + 2] == ["spillstore.mcp", "proxy"]:
            return argv[i + 2 :]
    return None


def _names_spillstore(word: str) -> bool:
    return "spillstore" in _program(word)


def check_launcher(launcher: list[str]) -> None:
    """Refuse a launcher that a later ``install``/``uninstall`` could not recognise.

    Raises:
        ClientConfigError: no word of it names spillstore.
    """
    if not launcher or not any(_names_spillstore(word) for word in launcher):
        raise ClientConfigError(
            f"the launcher {' '.join(launcher)!r} must name spillstore (its program or an "
            "argument, e.g. /usr/local/bin/spillstore or 'uvx spillstore'), so that "
            "wrapped servers can be recognised later",
            path="--launcher",
        )


def _parse_proxy(rest: list[str]) -> Wrapped:
    if "--" in rest:
        cut = rest.index("--")
        return Wrapped(options=tuple(rest[:cut]), command=tuple(rest[cut + 1 :]))
    options: list[str] = []
    url = None
    sse = False
    pairs: dict[str, list[tuple[str, str]]] = {"--header": [], "--header-env": []}
    words = iter(rest)
    for word in words:
        if word == "--url":
            url = next(words, None)
        elif word == "--sse":
            sse = True
        elif word in pairs:
            name, _, value = next(words, "").partition("=")
            pairs[word].append((name, value))
        else:
            options.append(word)
    return Wrapped(
        options=tuple(options),
        url=url,
        sse=sse,
        headers=tuple(pairs["--header"]),
        header_vars=tuple(pairs["--header-env"]),
    )


def wrapped_by(entry: dict[str, Any], flavor: Flavor) -> Wrapped | str | None:
    """What already wraps ``entry``: spillstore (a :class:`Wrapped`), another capping
    proxy (its name), or nothing (None)."""
    argv = _argv(entry, flavor)
    if argv is None:
        return None
    rest = _proxy_args(argv)
    if rest is not None:
        return _parse_proxy(rest)
    for word in argv:
        program = _program(word)
        for other in OTHER_PROXIES:
            if program == other or program.startswith((f"{other}==", f"{other}[", f"{other}@")):
                return other
    return None


def _url(entry: dict[str, Any], flavor: Flavor) -> tuple[str, str, bool] | None:
    """(key, URL, is SSE) of a remote entry, or None for a local one."""
    declared = str(entry.get("type") or entry.get("transport") or "").lower()
    for key in (*flavor.url_keys, *flavor.sse_keys):
        value = entry.get(key)
        if isinstance(value, str) and value:
            sse = key in flavor.sse_keys or declared in _SSE_TYPES
            if not declared and re.search(r"/sse/?(?:[?#].*)?$", value):
                sse = True
            return key, value, sse
    return None


def wrap(
    entry: Any, flavor: Flavor, launcher: list[str], options: ProxyOptions
) -> dict[str, Any] | Skip:
    """The entry that runs ``entry`` behind the proxy, or why it stays as it is.

    Args:
        entry: the server entry as the config holds it.
        flavor: how the client writes entries.
        launcher: how to run spillstore (``["/path/to/spillstore"]``).
        options: the proxy options to write.
    """
    if not isinstance(entry, dict):
        return Skip("not an object")
    already = wrapped_by(entry, flavor)
    if isinstance(already, Wrapped):
        return Skip("already wrapped by spillstore")
    if already is not None:
        return Skip(f"already wrapped by {already}")
    argv = _argv(entry, flavor)
    remote = _url(entry, flavor)
    if argv is not None:
        return _with_command(
            entry, flavor, [*launcher, "mcp", "proxy", *options.args(), "--"], argv
        )
    if remote is None:
        return Skip("neither a command nor a URL")
    key, url, sse = remote
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", url)
    if scheme is not None and scheme.group(1).lower() not in ("http", "https"):
        return Skip(f"its URL is {scheme.group(1)}://, and the proxy speaks only http(s)")
    signs_in = [k for k in _SIGN_IN_KEYS if entry.get(k)]
    if signs_in:
        return Skip(f"signs in through the client ({signs_in[0]}), which the proxy cannot do")
    headers = entry.get(flavor.headers_key) or {}
    if not isinstance(headers, dict):
        return Skip(f"its {flavor.headers_key} are not an object")
    problem = next(filter(None, (header_problem(k, v) for k, v in headers.items())), None)
    if problem is not None:
        return Skip(f"{problem}, so it cannot be sent")
    if headers and not isinstance(entry.get(flavor.env_key, {}), dict):
        return Skip(f"its {flavor.env_key} is not an object, so its headers have nowhere to go")
    new = {k: v for k, v in entry.items() if k not in (key, flavor.headers_key)}
    if "type" in new or flavor.command_list:
        new["type"] = flavor.stdio_type or "stdio"
    proxy = [*launcher, "mcp", "proxy", *options.args()]
    return _remote(new, flavor, proxy, Remote(url, sse, headers))


def _remote(
    entry: dict[str, Any], flavor: Flavor, proxy: list[str], remote: Remote
) -> dict[str, Any]:
    """``entry`` running ``proxy --url URL``; each header's value goes into the entry's
    environment under a ``SPILLSTORE_HEADER_`` name the command line gives."""
    args = ["--url", remote.url, *(["--sse"] if remote.sse else [])]
    env = dict(entry.get(flavor.env_key) or {})
    for name, value in remote.headers.items():
        var = _HEADER_VAR + re.sub(r"[^0-9A-Za-z]", "_", name).upper()
        base, n = var, 1
        while var in env:
            n += 1
            var = f"{base}_{n}"
        env[var] = value
        args += ["--header-env", f"{name}={var}"]
    new = _with_command(entry, flavor, [*proxy, *args], [])
    if remote.headers:
        new[flavor.env_key] = env
    return new


def _with_command(
    entry: dict[str, Any], flavor: Flavor, head: list[str], tail: list[str]
) -> dict[str, Any]:
    return _set_argv(entry, flavor, [*head, *tail])


def new_entry(
    flavor: Flavor,
    launcher: list[str],
    options: ProxyOptions,
    upstream: list[str] | Remote,
    name: str = "",
) -> dict[str, Any]:
    """A new wrapped entry ``name`` (``spillstore add``): a command line, or a remote
    server."""
    base: dict[str, Any] = {} if flavor.stdio_type is None else {"type": flavor.stdio_type}
    if flavor.name_key is not None:
        base[flavor.name_key] = name
    base.update(flavor.new_fields)
    proxy = [*launcher, "mcp", "proxy", *options.args()]
    if isinstance(upstream, Remote):
        return _remote(base, flavor, proxy, upstream)
    return _with_command(base, flavor, [*proxy, "--"], upstream)


def unwrap(entry: dict[str, Any], flavor: Flavor) -> dict[str, Any] | None:
    """The original entry rebuilt from a spillstore-wrapped one (None: not wrapped by
    spillstore, or its command line cannot be read back)."""
    found = wrapped_by(entry, flavor)
    if not isinstance(found, Wrapped):
        return None
    if found.url is not None:
        return _unwrap_remote(entry, flavor, found)
    if not found.command:
        return None
    return _set_argv(entry, flavor, list(found.command))


def _unwrap_remote(entry: dict[str, Any], flavor: Flavor, found: Wrapped) -> dict[str, Any] | None:
    """The remote entry back: its URL, and its headers from the command line and the
    environment (None when a header's variable is not in the entry's environment)."""
    assert found.url is not None
    new = {k: v for k, v in entry.items() if k not in (flavor.command_key, "args")}
    env = dict(new.get(flavor.env_key) or {})
    headers = dict(found.headers)
    for name, var in found.header_vars:
        if not isinstance(env.get(var), str):
            return None
        headers[name] = env.pop(var)
    if found.header_vars:
        if env:
            new[flavor.env_key] = env
        else:
            new.pop(flavor.env_key, None)
    keys = flavor.sse_keys if found.sse and flavor.sse_keys else flavor.url_keys
    new[keys[0]] = found.url
    if headers:
        new[flavor.headers_key] = headers
    if "type" in new:
        new["type"] = "sse" if found.sse and not flavor.command_list else flavor.remote_type
    return new


def describe(entry: Any, flavor: Flavor) -> str:
    """One line about an entry for ``status``: how it runs, and what wraps it."""
    if not isinstance(entry, dict):
        return "not an object"
    found = wrapped_by(entry, flavor)
    if isinstance(found, Wrapped):
        upstream = f"--url {found.url}" if found.url else "-- " + " ".join(found.command)
        names = [name for name, _ in (*found.headers, *found.header_vars)]
        if found.sse or names:  # header names only: their values may be secrets
            sent = ["SSE"] if found.sse else []
            sent += [f"headers {', '.join(names)}"] if names else []
            upstream += f" ({'; '.join(sent)})"
        options = " ".join(found.options) or "default options"
        return f"wrapped ({options}): {upstream}"
    if found is not None:
        return f"wrapped by {found}"
    remote = _url(entry, flavor)
    if remote is not None:
        return f"not wrapped: {'SSE' if remote[2] else 'HTTP'} {remote[1]}"
    argv = _argv(entry, flavor)
    return "not wrapped: " + (" ".join(argv) if argv else "no command")
