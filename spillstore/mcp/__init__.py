"""MCP integration: a spill server, and a proxy that puts any MCP server behind the cap.

Needs the official MCP SDK (2.x): ``pip install "spillstore[mcp]"``.

**Spill server** (:func:`serve`, ``spillstore mcp serve``): an MCP server over
stdio exposing ``read_spill``, ``grep_spill`` and ``list_spills`` (names configurable)
with read-only annotations; results are plain text, not repeated as structured output.

**Proxy** (:class:`SpillProxy`, :func:`run_proxy`,
``spillstore mcp proxy [--max-bytes SIZE] [--session S] [--dir D] -- CMD ARGS``):
launches the upstream MCP server as a subprocess, forwards its tools, resources,
prompts and list-changed notifications, adds the spill tools, and passes every
``tools/call`` result through :class:`~spillstore.TruncationService`. The upstream's
stdout is read with :class:`StdioTransport`, a linear-time line reader (the SDK's stdio
client is quadratic on one huge line). What is and is not forwarded, the structured
content policy and the failure handling are documented on :class:`SpillProxy`'s module,
:mod:`spillstore.mcp.proxy`.

Both commands (``spillstore mcp --help``, or ``python -m spillstore.mcp``: the same
command group, from :mod:`spillstore._cli.mcp`) log to stderr only: stdout carries the
MCP protocol.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401 - fail early with the install hint
except ImportError as exc:  # pragma: no cover - the test environment has mcp
    raise ImportError('spillstore.mcp needs the MCP SDK: pip install "spillstore[mcp]"') from exc

import os
from collections.abc import Mapping, Sequence
from typing import IO, Any

import anyio

from spillstore._errors import UpstreamUnavailable
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.convert import SPILL_META_KEY
from spillstore.mcp.proxy import SpillProxy
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
    "run_proxy",
    "serve",
    "spill_server",
]


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
    query_name: str = "query_spill",
    cross_session: bool = False,
) -> None:
    """Serve the spill tools over this process's stdin/stdout until stdin closes.

    Args:
        dir: the store root (default: ``settings.dir``, i.e. ``$SPILLSTORE_DIR`` or the
            user cache directory).
        session: the session the tools read (default: ``settings.session``).
        settings: explicit settings (default: ``Settings()``).
        store: a store to use instead of a ``LocalStore`` at ``dir``.
        read_name, grep_name, list_name, query_name: the tool names.
        cross_session: let the tools read and list other sessions' spills.
    """
    resolved = _settings(settings, {"dir": dir, "session": session})
    tools = SpillTools(
        _store_for(resolved, store),
        session=resolved.session,
        read_name=read_name,
        grep_name=grep_name,
        list_name=list_name,
        query_name=query_name,
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
