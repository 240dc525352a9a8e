"""MCP integration: a spill server, and a proxy that puts any MCP server behind the cap.

Needs the official MCP SDK (2.x): ``pip install "spillstore[mcp]"``.

**Spill server** (:func:`serve`, ``python -m spillstore.mcp serve``): an MCP server over
stdio exposing ``read_spill``, ``grep_spill`` and ``list_spills`` (names configurable)
with read-only annotations; results are plain text, not repeated as structured output.

**Proxy** (:class:`SpillProxy`, :func:`run_proxy`,
``python -m spillstore.mcp proxy [--max-bytes SIZE] [--session S] [--dir D] -- CMD ARGS``):
launches the upstream MCP server as a subprocess, forwards its tools, resources,
prompts and list-changed notifications, adds the three spill tools, and passes every
``tools/call`` result through :class:`~spillstore.TruncationService`. The upstream's
stdout is read with :class:`StdioTransport`, a linear-time line reader (the SDK's stdio
client is quadratic on one huge line). What is and is not forwarded, the structured
content policy and the failure handling are documented on :class:`SpillProxy`'s module,
:mod:`spillstore.mcp.proxy`.

Both commands log to stderr only: stdout carries the MCP protocol.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401 - fail early with the install hint
except ImportError as exc:  # pragma: no cover - the test environment has mcp
    raise ImportError('spillstore.mcp needs the MCP SDK: pip install "spillstore[mcp]"') from exc

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

import anyio

from spillstore._errors import ConfigError, UpstreamUnavailable
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.convert import SPILL_META_KEY
from spillstore.mcp.proxy import DEFAULT_CALL_TIMEOUT, SpillProxy
from spillstore.mcp.server import serve_stdio, spill_server
from spillstore.mcp.transport import LineSplitter, StdioTransport

__all__ = [
    "SPILL_META_KEY",
    "LineSplitter",
    "SpillProxy",
    "StdioTransport",
    "UpstreamUnavailable",
    "arun_proxy",
    "aserve",
    "main",
    "run_proxy",
    "serve",
    "spill_server",
]

log = logging.getLogger("spillstore")


def _store_for(settings: Settings, store: Store | None) -> Store:
    if store is not None:
        return store
    from spillstore._stores.local import LocalStore  # noqa: PLC0415 - only when needed

    return LocalStore(settings.dir)


def _settings(settings: Settings | None, overrides: Mapping[str, Any]) -> Settings:
    given = {key: value for key, value in overrides.items() if value is not None}
    if settings is None:
        return Settings(**given)
    if not given:
        return settings
    return Settings(**{**settings.model_dump(), **given})


async def aserve(
    *,
    dir: str | os.PathLike[str] | None = None,
    session: str | None = None,
    settings: Settings | None = None,
    store: Store | None = None,
    read_name: str = "read_spill",
    grep_name: str = "grep_spill",
    list_name: str = "list_spills",
    cross_session: bool = False,
) -> None:
    """Serve the spill tools over this process's stdin/stdout until stdin closes.

    Args:
        dir: the store root (default: ``settings.dir``, i.e. ``$SPILLSTORE_DIR`` or the
            user cache directory).
        session: the session the tools read (default: ``settings.session``).
        settings: explicit settings (default: ``Settings()``).
        store: a store to use instead of a ``LocalStore`` at ``dir``.
        read_name, grep_name, list_name: the tool names.
        cross_session: let the tools read and list other sessions' spills.
    """
    resolved = _settings(settings, {"dir": dir, "session": session})
    tools = SpillTools(
        _store_for(resolved, store),
        session=resolved.session,
        read_name=read_name,
        grep_name=grep_name,
        list_name=list_name,
        cross_session=cross_session,
    )
    await serve_stdio(spill_server(tools))


def serve(**kwargs: Any) -> None:
    """Blocking :func:`aserve` (same arguments), for command lines."""
    anyio.run(lambda: aserve(**kwargs))


async def arun_proxy(
    command: Sequence[str] | None = None,
    *,
    url: str | None = None,
    max_bytes: int | str | None = None,
    dir: str | os.PathLike[str] | None = None,
    session: str | None = None,
    settings: Settings | None = None,
    stderr: int | IO[Any] | None = None,
    **options: Any,
) -> None:
    """Run the proxy over this process's stdin/stdout until stdin closes.

    Args:
        command: the upstream server's command line.
        url: instead of ``command``, a streamable-HTTP upstream.
        max_bytes: the inline budget (bytes or a human size such as ``"50KB"``).
        dir: the store root.
        session: the store session.
        settings: explicit settings; ``max_bytes``/``dir``/``session`` override them.
        stderr: where the upstream's stderr goes (default: inherited).
        options: more :class:`SpillProxy` keyword arguments (``call_timeout``,
            ``max_restarts``, ``prefix``, ``env``, ``cwd``, ...).

    Raises:
        ConfigError: a bad setting or argument.
        UpstreamUnavailable: the upstream could not be started.
    """
    resolved = _settings(settings, {"max_bytes": max_bytes, "dir": dir, "session": session})
    async with SpillProxy(command, url=url, settings=resolved, stderr=stderr, **options) as proxy:
        await proxy.run_stdio()


def run_proxy(command: Sequence[str] | None = None, **kwargs: Any) -> None:
    """Blocking :func:`arun_proxy` (same arguments), for command lines."""
    anyio.run(lambda: arun_proxy(command, **kwargs))


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spillstore.mcp",
        description="spillstore MCP tools: a spill server, and a capping proxy.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="log more (stderr)")
    commands = parser.add_subparsers(dest="command", required=True)

    serve_cmd = commands.add_parser("serve", help="serve read_spill/grep_spill/list_spills")
    serve_cmd.add_argument("--dir", help="store root (default: $SPILLSTORE_DIR or cache dir)")
    serve_cmd.add_argument("--session", help="session to read (default: $SPILLSTORE_SESSION)")
    serve_cmd.add_argument("--read-name", default="read_spill")
    serve_cmd.add_argument("--grep-name", default="grep_spill")
    serve_cmd.add_argument("--list-name", default="list_spills")
    serve_cmd.add_argument(
        "--cross-session", action="store_true", help="allow reading other sessions' spills"
    )

    proxy_cmd = commands.add_parser(
        "proxy",
        help="run an MCP server behind the cap: proxy [options] -- CMD [ARGS...]",
    )
    proxy_cmd.add_argument("--max-bytes", help='inline budget, e.g. 50000 or "50KB"')
    proxy_cmd.add_argument("--dir", help="store root (default: $SPILLSTORE_DIR or cache dir)")
    proxy_cmd.add_argument("--session", help="store session (default: $SPILLSTORE_SESSION)")
    proxy_cmd.add_argument("--url", help="a streamable-HTTP upstream instead of CMD")
    proxy_cmd.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_CALL_TIMEOUT,
        help=f"seconds an upstream tool call may take (default {DEFAULT_CALL_TIMEOUT:g})",
    )
    proxy_cmd.add_argument(
        "--max-restarts", type=int, default=3, help="restarts of a crashed upstream (default 3)"
    )
    proxy_cmd.add_argument(
        "--prefix", default="spillstore_", help="spill tool name prefix on a name clash"
    )
    proxy_cmd.add_argument("upstream", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``python -m spillstore.mcp`` entry point; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    try:
        if args.command == "serve":
            serve(
                dir=args.dir,
                session=args.session,
                read_name=args.read_name,
                grep_name=args.grep_name,
                list_name=args.list_name,
                cross_session=args.cross_session,
            )
            return 0
        upstream = list(args.upstream)
        if upstream[:1] == ["--"]:
            upstream = upstream[1:]
        if bool(upstream) == bool(args.url):
            parser.error("give the upstream server as -- CMD [ARGS...] or as --url URL")
        run_proxy(
            upstream or None,
            url=args.url,
            max_bytes=args.max_bytes,
            dir=args.dir,
            session=args.session,
            call_timeout=args.timeout,
            max_restarts=args.max_restarts,
            prefix=args.prefix,
        )
    except ConfigError as exc:
        print(f"spillstore: {exc}", file=sys.stderr)
        return 2
    except UpstreamUnavailable as exc:
        print(f"spillstore: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
