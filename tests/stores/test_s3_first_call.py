"""S3Store's first request in a process: a black hole costs seconds, not obstore's 30 s.

The endpoints are real sockets on 127.0.0.1: a listener that accepts connections and
never answers (:class:`~tests.stores.s3_server.BlackHole`), and moto behind the fault
proxy, which records every request.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.s3_store import PROBE_TIMEOUT
from spillstore._tools.spill_tools import SpillTools
from spillstore.s3 import S3Store
from tests.stores.s3_server import BlackHole, FaultProxy

MakeS3 = Callable[..., S3Store]
SETTINGS = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)
OUTPUT = "".join(f"line {n} of a long tool output\n" for n in range(2_000))
PROBE_SECONDS = float(PROBE_TIMEOUT.removesuffix("s"))
#: What the first call may cost beyond the probe's timeout (a loaded machine's slack).
SLACK_SECONDS = 4.0


def test_the_first_capped_call_on_a_black_hole_costs_the_probe_timeout(
    make_s3: MakeS3, black_hole: BlackHole
) -> None:
    """A store whose endpoint never answers: the very first capped call gets its NOT saved
    preview within the probe's timeout (not the 30 s of a whole request), and the next
    call fails at once."""
    store = make_s3(endpoint=black_hole.url)
    service = TruncationService(store, SETTINGS, session="s1")
    started = time.monotonic()
    first = service.truncate_for_model(OUTPUT, tool_name="bash", tool_call_id="c1")
    elapsed = time.monotonic() - started
    assert first.spill is not None and first.spill.saved == "none"
    assert elapsed < PROBE_SECONDS + SLACK_SECONDS, elapsed
    started = time.monotonic()
    second = service.truncate_for_model(OUTPUT, tool_name="bash", tool_call_id="c2")
    assert second.spill is not None and second.spill.saved == "none"
    assert time.monotonic() - started < 1.0


def test_the_first_read_on_a_black_hole_costs_the_probe_timeout(
    make_s3: MakeS3, black_hole: BlackHole
) -> None:
    """A one-shot reader (``spillstore read``) of a store that never answers gets its error
    result within the probe's timeout, sync and async."""
    for twin in ("sync", "async"):
        tools = SpillTools(make_s3(endpoint=black_hole.url), session="s1")
        started = time.monotonic()
        if twin == "sync":
            result = tools.read("bash-" + "0" * 20)
        else:
            result = anyio.run(tools.aread, "bash-" + "0" * 20)
        elapsed = time.monotonic() - started
        assert result.is_error, twin
        assert "the spill store cannot be read" in result.content[0].text  # type: ignore[union-attr]
        assert elapsed < PROBE_SECONDS + SLACK_SECONDS, (twin, elapsed)


def test_a_healthy_endpoint_is_probed_once_per_store(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """On an answering endpoint the first request of a store is preceded by one HEAD
    probe; no later request is."""
    store = make_s3(endpoint=fault_proxy.url)
    first = store.put(OUTPUT, session="s1", tool_name="bash", tool_call_id="c1")
    store.put(OUTPUT + "more", session="s1", tool_name="bash", tool_call_id="c2")
    assert store.read_bytes(first.spill_id, 0, 10) == OUTPUT.encode()[:10]
    heads = [seen for seen in fault_proxy.requests if seen.method == "HEAD"]
    assert fault_proxy.requests[0].method == "HEAD"
    assert len(heads) == 1, fault_proxy.requests


def test_a_5xx_to_the_first_probe_leaves_the_request_to_its_retries(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """The first probe asks only whether the endpoint replies: a 503 to it is a reply, so
    the put goes on (and its own retries meet the next answer)."""
    fault_proxy.rule = lambda n, method, path: "503" if n == 1 else None
    store = make_s3(endpoint=fault_proxy.url)
    store.put(OUTPUT, session="s1", tool_name="bash", tool_call_id="c1")
    assert fault_proxy.requests[0].method == "HEAD"
    assert fault_proxy.requests[0].action == "503"
    assert store._bucket.breaker is not None and store._bucket.breaker.state.retry_at is None


def test_without_a_pause_nothing_is_probed(make_s3: MakeS3, fault_proxy: FaultProxy) -> None:
    """``outage_pause=None`` turns the breaker off, the first probe with it."""
    store = make_s3(endpoint=fault_proxy.url, outage_pause=None)
    store.put(OUTPUT, session="s1", tool_name="bash", tool_call_id="c1")
    assert all(seen.method != "HEAD" for seen in fault_proxy.requests)


@pytest.mark.parametrize("option", ["connect_timeout", "read_timeout", "timeout"])
def test_a_timeout_the_host_sets_is_kept(make_s3: MakeS3, option: str) -> None:
    """The defaults fill in only the timeouts the host did not set."""
    store = make_s3(client_options={option: "123s"})
    assert (store._bucket.objects.client_options or {})[option] == "123s"
