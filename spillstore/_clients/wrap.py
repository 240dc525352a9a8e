"""One server entry, behind the proxy and back: the decisions, on plain values.

A client's entry is a JSON/TOML object. :func:`wrap` turns it into the entry that runs
``spillstore mcp proxy [OPTIONS] -- <the original command>`` (a local server) or
``spillstore mcp proxy [OPTIONS] --url URL`` (a streamable-HTTP server), keeping every
other field (name, env, cwd, timeouts, unknown fields) as it was. :func:`unwrap` is the
way back when no backup of the original entry is at hand: it rebuilds the original
from the wrapped command line (same values; the formatting may differ).

What cannot be wrapped comes back as a :class:`Skip` with the reason: an entry already
wrapped (by spillstore or by another capping proxy), an SSE server (the proxy speaks
streamable HTTP to its upstream), a remote server that sends headers or tokens (the
proxy has no way to send them yet), an entry with neither a command nor a URL.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from spillstore._clients.errors import ClientConfigError

__all__ = [
    "OTHER_PROXIES",
    "Flavor",
    "ProxyOptions",
    "Skip",
    "Wrapped",
    "check_launcher",
    "describe",
    "new_entry",
    "unwrap",
    "wrap",
    "wrapped_by",
]

OTHER_PROXIES = ("ctxtual",)
"""Programs that already cap results: an entry run through one is not wrapped again."""

_HEADER_KEYS = ("headers", "http_headers", "env_http_headers", "bearer_token_env_var", "oauth")
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
    """

    url_keys: tuple[str, ...] = ("url",)
    sse_keys: tuple[str, ...] = ()
    command_list: bool = False
    stdio_type: str | None = "stdio"
    remote_type: str = "http"


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


def _argv(entry: dict[str, Any], flavor: Flavor) -> list[str] | None:
    """The entry's command line (program first), or None when it has none."""
    command = entry.get("command")
    if flavor.command_list:
        if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
            return list(command)
        return None
    args = entry.get("args", [])
    if (
        isinstance(command, str)
        and command
        and isinstance(args, list)
        and all(isinstance(a, str) for a in args)
    ):
        return [command, *args]
    return None


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
    options = list(rest)
    url = None
    if "--url" in options:
        at = options.index("--url")
        url = options[at + 1] if at + 1 < len(options) else None
        del options[at : at + 2]
    return Wrapped(options=tuple(options), url=url)


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
    if sse:
        return Skip("an SSE server: the proxy reaches upstreams over streamable HTTP only")
    if any(entry.get(k) for k in _HEADER_KEYS):
        return Skip("sends headers or a token, which the proxy cannot send yet")
    new = {k: v for k, v in entry.items() if k not in (key, *_HEADER_KEYS)}
    if "type" in new or flavor.command_list:
        new["type"] = flavor.stdio_type or "stdio"
    proxy = [*launcher, "mcp", "proxy", *options.args(), "--url", url]
    return _with_command(new, flavor, proxy, [])


def _with_command(
    entry: dict[str, Any], flavor: Flavor, head: list[str], tail: list[str]
) -> dict[str, Any]:
    new = dict(entry)
    if flavor.command_list:
        new["command"] = [*head, *tail]
    else:
        new["command"] = head[0]
        new["args"] = [*head[1:], *tail]
    return new


def new_entry(
    flavor: Flavor, launcher: list[str], options: ProxyOptions, command: list[str], url: str | None
) -> dict[str, Any]:
    """A new wrapped entry (``spillstore add``): a command line, or a URL."""
    base: dict[str, Any] = {} if flavor.stdio_type is None else {"type": flavor.stdio_type}
    proxy = [*launcher, "mcp", "proxy", *options.args()]
    if url is not None:
        return _with_command(base, flavor, [*proxy, "--url", url], [])
    return _with_command(base, flavor, [*proxy, "--"], command)


def unwrap(entry: dict[str, Any], flavor: Flavor) -> dict[str, Any] | None:
    """The original entry rebuilt from a spillstore-wrapped one (None: not wrapped by
    spillstore, or its command line cannot be read back)."""
    found = wrapped_by(entry, flavor)
    if not isinstance(found, Wrapped):
        return None
    if found.url is not None:
        new = {k: v for k, v in entry.items() if k not in ("command", "args")}
        new[flavor.url_keys[0]] = found.url
        if "type" in new:
            new["type"] = flavor.remote_type
        return new
    if not found.command:
        return None
    new = dict(entry)
    if flavor.command_list:
        new["command"] = list(found.command)
        return new
    new["command"] = found.command[0]
    args = list(found.command[1:])
    if args:
        new["args"] = args
    else:
        new.pop("args", None)
    return new


def describe(entry: Any, flavor: Flavor) -> str:
    """One line about an entry for ``status``: how it runs, and what wraps it."""
    if not isinstance(entry, dict):
        return "not an object"
    found = wrapped_by(entry, flavor)
    if isinstance(found, Wrapped):
        upstream = f"--url {found.url}" if found.url else "-- " + " ".join(found.command)
        options = " ".join(found.options) or "default options"
        return f"wrapped ({options}): {upstream}"
    if found is not None:
        return f"wrapped by {found}"
    remote = _url(entry, flavor)
    if remote is not None:
        return f"not wrapped: {'SSE' if remote[2] else 'HTTP'} {remote[1]}"
    argv = _argv(entry, flavor)
    return "not wrapped: " + (" ".join(argv) if argv else "no command")
