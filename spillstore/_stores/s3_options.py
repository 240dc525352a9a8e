"""The S3 client's timeouts and retries: the defaults, and a host's options over them.

Figures behind the numbers are in benchmarks/RESULTS.md ("Integrations, session 9").
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig

__all__ = [
    "CONNECT_TIMEOUT",
    "PROBE_TIMEOUT",
    "READ_TIMEOUT",
    "REQUEST_TIMEOUT",
    "RETRIES",
    "RETRY_SECONDS",
    "default_retries",
    "with_timeouts",
]

RETRIES: Final = 3
"""Default retries of a failed request (5xx, connection errors, timeouts), within
:data:`RETRY_SECONDS` (obstore's own default, 10 within 3 minutes, held a tool call
for minutes when the endpoint stopped answering)."""

RETRY_SECONDS: Final = 20.0
"""Default time after a request's first attempt past which it is not retried."""

CONNECT_TIMEOUT: Final = "5s"
"""Default timeout of the connect phase."""

READ_TIMEOUT: Final = "30s"
"""Default time a request may go without a byte from the endpoint: from its start until
the reply's head (so an upload's part, 8 MiB by default, must go up within it: at
280 KB/s or more), then between two reads of the reply's body. A stall costs this; a
black hole met by the first request costs :data:`PROBE_TIMEOUT` instead (the breaker
probes first)."""

REQUEST_TIMEOUT: Final = "1h"
"""Default timeout of a whole request, reply body included (obstore's own, 30 s, cut the
download of a large spill's data on any link under its size per 30 s: 64 MiB needed
2.2 MB/s)."""

PROBE_TIMEOUT: Final = "5s"
"""Timeout of the one request (a HEAD, no retries) that probes an endpoint before the
store's first request, and once more after each pause (its connect phase:
:data:`CONNECT_TIMEOUT` at most)."""


def with_timeouts(client_options: ClientConfig | None) -> dict[str, Any]:
    """A host's obstore ``ClientConfig`` with the default timeouts where it set none."""
    options: dict[str, Any] = dict(client_options or {})
    options.setdefault("connect_timeout", CONNECT_TIMEOUT)
    options.setdefault("read_timeout", READ_TIMEOUT)
    options.setdefault("timeout", REQUEST_TIMEOUT)
    return options


def default_retries() -> RetryConfig:
    """The default obstore ``RetryConfig``: :data:`RETRIES` within :data:`RETRY_SECONDS`."""
    return {"max_retries": RETRIES, "retry_timeout": datetime.timedelta(seconds=RETRY_SECONDS)}
