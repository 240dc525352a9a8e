"""The proxy's defaults, in a module that imports neither the MCP SDK nor anyio.

The command line shows them in ``--help`` without paying for the SDK's import, which
``spillstore mcp proxy`` does only after it has started the upstream.
"""

from __future__ import annotations

from typing import Final

from spillstore._tools.args import SPECS

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_PREFIX",
    "DEFAULT_PROBE_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "MAX_TOOL_PAGES",
    "SPILL_TOOL_NAMES",
]

DEFAULT_CALL_TIMEOUT: Final = 600.0
"""Seconds an upstream ``tools/call`` may take before the proxy gives up on it."""

DEFAULT_START_TIMEOUT: Final = 60.0
"""Seconds the upstream has to answer ``initialize``."""

DEFAULT_PROBE_TIMEOUT: Final = 10.0
"""After a timed-out call, seconds the upstream has to answer ``tools/list``."""

DEFAULT_REQUEST_TIMEOUT: Final = 120.0
"""Seconds for forwarded requests other than ``tools/call`` (lists, reads, prompts)."""

MAX_TOOL_PAGES: Final = 100
"""Pages of ``tools/list`` read from the upstream at most (a paginator that never ends)."""

DEFAULT_MAX_RESTARTS: Final = 3
"""How many times a crashed or hung upstream is restarted."""

DEFAULT_PREFIX: Final = "spillstore_"
"""Put before the spill tools' names when an upstream tool already has one of them."""

SPILL_TOOL_NAMES: Final = tuple(spec.default_name for spec in SPECS)
"""The spill tools' names, unless an upstream tool has one of them."""
