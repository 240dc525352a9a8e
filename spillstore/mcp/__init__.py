"""MCP integration: a spill server, and a proxy that puts any MCP server behind the cap.

Needs the official MCP SDK (2.x): ``pip install "spillstore[mcp]"``.

**Spill server** (:func:`serve`, ``spillstore mcp serve``): an MCP server over
stdio exposing ``read_spill``, ``grep_spill``, ``list_spills`` and ``query_spill`` (names
configurable) with read-only annotations; results are plain text, not repeated as structured output.

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

The names below load lazily (PEP 562): importing :mod:`spillstore.mcp` (or the
stdlib-only :mod:`spillstore.mcp.launch` and :mod:`spillstore.mcp.defaults`) does not
import the SDK, so ``spillstore mcp proxy`` starts its upstream first and imports the SDK
while the upstream boots. A missing SDK still fails at once, with the install line.
"""

from __future__ import annotations

import importlib
import importlib.util

TYPE_CHECKING = False  # not typing's: see spillstore/__init__.py

if importlib.util.find_spec("mcp") is None:  # pragma: no cover - the tests have mcp
    raise ImportError('spillstore.mcp needs the MCP SDK: pip install "spillstore[mcp]"')

if TYPE_CHECKING:  # exactly _EXPORTS, for type checkers
    from typing import Any

    from spillstore._errors import UpstreamUnavailable
    from spillstore.mcp.convert import SPILL_META_KEY
    from spillstore.mcp.proxy import SpillProxy
    from spillstore.mcp.server import spill_server
    from spillstore.mcp.serving import arun_proxy, aserve, run_proxy, serve
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

_EXPORTS: dict[str, str] = {
    "SPILL_META_KEY": "spillstore.mcp.convert",
    "LineSplitter": "spillstore.mcp.transport",
    "SpillProxy": "spillstore.mcp.proxy",
    "StdioTransport": "spillstore.mcp.transport",
    "UpstreamUnavailable": "spillstore._errors",
    "arun_proxy": "spillstore.mcp.serving",
    "aserve": "spillstore.mcp.serving",
    "run_proxy": "spillstore.mcp.serving",
    "serve": "spillstore.mcp.serving",
    "spill_server": "spillstore.mcp.server",
}
"""Each public name and the module it lives in."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
