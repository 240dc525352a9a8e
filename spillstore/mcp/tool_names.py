"""The proxy's tool list: the spill tools' names, and upstream tools that clash with them.

At start, an upstream tool named like a spill tool (``read_spill``, ...) makes the proxy
serve the spill tools under the prefix (``spillstore_read_spill``, ...), with one
warning; the names are then fixed for the proxy's life, since every pointer names them.
An upstream tool of such a name that appears later (``tools/list_changed``, or a
restarted upstream) is therefore not served: the spill tool keeps the name, and one
warning per name says so and that restarting the proxy serves both: on stderr (the
``spillstore`` logger), and to the client that listed the tools as an MCP log message
(:meth:`LateClashes.take_news`), since a client usually hides the server's stderr.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import mcp_types as types

from spillstore._errors import ConfigError
from spillstore.mcp.defaults import SPILL_TOOL_NAMES

__all__ = ["LateClashes", "spill_names"]

log = logging.getLogger("spillstore")


def spill_names(upstream_names: set[str], prefix: str) -> tuple[str, ...]:
    """The spill tools' names beside an upstream with ``upstream_names``: the defaults,
    or all of them prefixed (with a warning) when an upstream tool has one of them.

    Raises:
        ConfigError: the upstream has a tool of a prefixed name too.
    """
    names = SPILL_TOOL_NAMES
    if upstream_names.isdisjoint(names):
        return names
    prefixed = tuple(f"{prefix}{name}" for name in names)
    if not upstream_names.isdisjoint(prefixed):
        raise ConfigError(
            f"the upstream has tools named like the spill tools even with the prefix "
            f"{prefix!r}; choose another prefix"
        )
    log.warning(
        "spillstore proxy: the upstream has a tool named like a spill tool; the spill "
        "tools are served as %s",
        ", ".join(prefixed),
    )
    return prefixed


class LateClashes:
    """Upstream tools hidden because a spill tool has their name, each reported once."""

    def __init__(self) -> None:
        self._reported: set[str] = set()
        self._news: list[str] = []

    def take_news(self) -> list[str]:
        """The warnings reported since the last call (for the client), once each."""
        news, self._news = self._news, []
        return news

    def merge(
        self, upstream: Iterable[types.Tool], spill: Sequence[types.Tool]
    ) -> list[types.Tool]:
        """The tools to list: the upstream's (without ``output_schema``: a capped result
        may not match it) except those a spill tool's name hides, then the spill tools."""
        own = {tool.name for tool in spill}
        forwarded: list[types.Tool] = []
        for tool in upstream:
            if tool.name in own:
                self._report(tool.name)
                continue
            forwarded.append(tool.model_copy(update={"output_schema": None}))
        return [*forwarded, *spill]

    def _report(self, name: str) -> None:
        if name in self._reported:
            return
        self._reported.add(name)
        fix = (
            "restart the proxy to serve both (the spill tools then get the prefix)"
            if name in SPILL_TOOL_NAMES
            else "restart the proxy with another --prefix to serve both"
        )
        message = (
            f"spillstore proxy: the upstream now has a tool named {name[:200]!r}, the name "
            f"of a spill tool; the spill tool keeps it (the pointers given so far name it), "
            f"so the upstream's is not served; {fix}"
        )
        log.warning("%s", message)
        self._news.append(message)
