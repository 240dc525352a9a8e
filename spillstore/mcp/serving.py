"""Serving over this process's stdin/stdout: the spill server and the proxy.

:func:`serve`/:func:`aserve` run the spill tools' server, :func:`run_proxy`/
:func:`arun_proxy` the proxy; the command line (:mod:`spillstore._cli.mcp`) calls them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import IO, Any, Final

import anyio

from spillstore._errors import ConfigError
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._stores.unavailable import unavailable_on_failure
from spillstore._stores.url import store_for
from spillstore._tools.spill_tools import SpillTools
from spillstore.mcp.proxy import SpillProxy
from spillstore.mcp.server import serve_stdio, spill_server

__all__ = ["arun_proxy", "aserve", "run_proxy", "serve"]

log = logging.getLogger("spillstore")


def _store_for(settings: Settings, store: Store | None) -> Store:
    """``store``, else the one ``settings`` name; one that fails to open (a full disk)
    stands in as an :class:`UnavailableStore`, so the tools say why rather than the
    server failing to start."""
    if store is not None:
        return store
    return unavailable_on_failure(lambda: store_for(settings), log)


_PREVIEWS: Final = ("head_bytes", "tail_bytes")


def _explicit(settings: Settings) -> dict[str, Any]:
    """The fields of ``settings`` that someone set (arguments or the environment).

    Previews nobody set are fitted to ``max_bytes`` when they are built, and pydantic then
    counts them as set; a preview is left out when the settings come out the same without
    it, so that it fits the next budget too (an explicit preview never shrinks).
    """
    explicit = settings.model_dump(exclude_unset=True)
    for dropped in (_PREVIEWS, _PREVIEWS[1:], _PREVIEWS[:1]):
        if all(name in explicit for name in dropped):
            kept = {key: value for key, value in explicit.items() if key not in dropped}
            if Settings(**kept) == settings:
                return kept
    return explicit


def _settings(settings: Settings | None, overrides: Mapping[str, Any]) -> Settings:
    """``settings`` (or ``Settings()``) with the arguments given; ``dir`` given alone
    beats a ``store`` URL from the settings or the environment. Only what was set in
    ``settings`` is kept: a smaller ``max_bytes`` refits the previews nobody set."""
    given = {key: value for key, value in overrides.items() if value is not None}
    if "dir" in given and "store" in given:
        raise ConfigError("give the store as dir= or as store= (a URL), not both")
    if "dir" in given:
        given["store"] = None
    if settings is None:
        return Settings(**given)
    if not given:
        return settings
    return Settings(**{**_explicit(settings), **given})


async def aserve(
    *,
    dir: str | os.PathLike[str] | None = None,
    store_url: str | None = None,
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
        dir: the store root (default: ``settings.store`` or ``settings.dir``, i.e.
            ``$SPILLSTORE_STORE``, ``$SPILLSTORE_DIR`` or the user cache directory).
        store_url: instead of ``dir``, a store URL (``PATH``, ``file://PATH``,
            ``s3://BUCKET/PREFIX``, ``memory://``).
        session: the session the tools read (default: ``settings.session``).
        settings: explicit settings (default: ``Settings()``).
        store: a store object to use instead of the one the settings name.
        read_name, grep_name, list_name, query_name: the tool names.
        cross_session: let the tools read and list other sessions' spills.
    """
    resolved = _settings(settings, {"dir": dir, "store": store_url, "session": session})
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
    store_url: str | None = None,
    session: str | None = None,
    settings: Settings | None = None,
    stderr: int | IO[Any] | None = None,
    **options: Any,
) -> None:
    """Run the proxy over this process's stdin/stdout until stdin closes.

    Args:
        command: the upstream server's command line.
        url: instead of ``command``, a remote upstream (streamable HTTP; ``sse=True`` for
            an SSE endpoint; ``headers=`` for its HTTP headers).
        max_bytes: the inline budget (bytes or a human size such as ``"50KB"``).
        dir: the store root.
        store_url: instead of ``dir``, a store URL (``s3://BUCKET/PREFIX``, ...).
        session: the store session.
        settings: explicit settings; ``max_bytes``/``dir``/``store_url``/``session``
            override them.
        stderr: where the upstream's stderr goes (default: inherited).
        options: more :class:`SpillProxy` keyword arguments (``call_timeout``,
            ``max_restarts``, ``prefix``, ``env``, ``cwd``, ``headers``, ``sse``, ...).

    Raises:
        ConfigError: a bad setting or argument.
        UpstreamUnavailable: the upstream could not be started.
    """
    resolved = _settings(
        settings, {"max_bytes": max_bytes, "dir": dir, "store": store_url, "session": session}
    )
    async with SpillProxy(command, url=url, settings=resolved, stderr=stderr, **options) as proxy:
        await proxy.run_stdio()


def run_proxy(command: Sequence[str] | None = None, **kwargs: Any) -> None:
    """Blocking :func:`arun_proxy` (same arguments), for command lines."""
    anyio.run(lambda: arun_proxy(command, **kwargs))
