"""S3Store when its endpoint goes down and comes back: fail fast for a pause, then probe.

The endpoint is real: moto's server on 127.0.0.1, stopped and started again on the same
port (a stopped port refuses connections at once, so this is cheap), or the fault proxy
in front of it answering 503. The pauses run on an injected clock, so nothing sleeps.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore._content import TextPart
from spillstore._errors import ConfigError, StoreError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.breaker import (
    CLOSED,
    OUTAGE_MAX_PAUSE_SECONDS,
    OUTAGE_PAUSE_SECONDS,
    Outage,
    admit,
    after_failure,
    after_probe,
)
from spillstore._tools.spill_tools import SpillTools
from spillstore.s3 import S3Store
from tests.stores.s3_server import FaultProxy, moto_endpoint

MakeS3 = Callable[..., S3Store]
KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}
SETTINGS = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)
OUTPUT = "".join(f"line {n} of a long tool output\n" for n in range(2_000))
NO_RETRIES = {"max_retries": 0}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _capped(store: S3Store, call_id: str) -> str:
    """Cap OUTPUT through the service; return the pointer's text (asserting it is bounded)."""
    result = TruncationService(store, SETTINGS, session="s1").truncate_for_model(
        OUTPUT, tool_name="bash", tool_call_id=call_id
    )
    assert result.spill is not None
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


class Moto:
    """A moto server of its own on 127.0.0.1, which the test stops and starts again on
    the same port (moto keeps buckets per process, so the bucket is still there)."""

    def __init__(self) -> None:
        moto_endpoint()  # the bucket
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from moto.server import ThreadedMotoServer

        self._make = ThreadedMotoServer
        self._servers = [ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)]
        self._servers[0].start()
        self.port = self._servers[0].get_host_and_port()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._servers[-1].stop()

    def start(self) -> None:
        self._servers.append(self._make(ip_address="127.0.0.1", port=self.port, verbose=False))
        self._servers[-1].start()

    def close(self) -> None:
        for server in self._servers:
            with contextlib.suppress(Exception):  # stopped already
                server.stop()


@pytest.fixture
def own_moto() -> Iterator[Moto]:
    """A :class:`Moto`, stopped at the end."""
    moto = Moto()
    try:
        yield moto
    finally:
        moto.close()


def test_a_stopped_endpoint_fails_fast_until_it_is_probed_back(
    make_s3: MakeS3, own_moto: Moto, caplog: pytest.LogCaptureFixture
) -> None:
    """Moto stopped: the first capped call gets its NOT saved preview, the next ones fail
    fast saying when the store is tried again; started again, the first call after the
    pause probes it and stores, and the spill from before the outage reads back."""
    caplog.set_level(logging.WARNING, "spillstore")
    clock = Clock()
    store = make_s3(
        endpoint=own_moto.url,
        clock=clock,
        # A connection per request: a stopped werkzeug server still serves the
        # keep-alive connections it accepted before.
        client_options={"pool_max_idle_per_host": "0"},
    )
    before = store.put(OUTPUT, **KW)
    own_moto.stop()

    first = _capped(store, "c1")
    assert "NOT saved (StoreError: [Errno 5] cannot store spill" in first
    assert store._bucket.breaker is not None
    assert store._bucket.breaker.state.pause_seconds == OUTAGE_PAUSE_SECONDS
    clock.now += OUTAGE_PAUSE_SECONDS - 1
    second = _capped(store, "c2")
    assert "NOT saved (StoreError: [Errno 112] the store is down, not tried again for 1 s" in (
        second
    )
    tools = SpillTools(store, session="s1")
    read = tools.read(before.spill_id)
    assert read.is_error and "the spill store cannot be read: [Errno 112] the store is down" in (
        read.content[0].text  # type: ignore[union-attr]
    )

    clock.now += 1  # the pause is over, the endpoint still down: the probe fails
    assert "NOT saved (StoreError: [Errno 112] the store is down, not tried again for 30 s" in (
        _capped(store, "c3")
    )
    own_moto.start()  # same port, same buckets
    clock.now += 29
    assert "NOT saved" in _capped(store, "c4")  # still within the doubled pause
    clock.now += 1
    stored = _capped(store, "c5")
    assert "NOT saved" not in stored
    assert store._bucket.breaker.state.retry_at is None
    assert tools.read(before.spill_id).is_error is False
    assert store.read_bytes(before.spill_id, 0, 100) == OUTPUT.encode()[:100]
    logged = [r.getMessage() for r in caplog.records]
    assert sum("requests fail fast for 15 s" in m for m in logged) == 1
    assert sum("still down" in m for m in logged) == 1
    assert sum("answers again" in m for m in logged) == 1


def test_while_paused_no_request_reaches_the_endpoint(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """During the pause a put, a read, a list and their async twins fail at once without a
    request; after it, one HEAD probes, and an answering endpoint takes the put."""
    clock = Clock()
    store = make_s3(endpoint=fault_proxy.url, clock=clock, retry_config=NO_RETRIES)
    before = store.put(OUTPUT, **KW)
    fault_proxy.rule = lambda n, method, path: "503"
    with pytest.raises(StoreError, match="503"):
        store.put("x" * 10, **KW)
    fault_proxy.requests.clear()
    for operation in (
        lambda: store.put("y" * 10, **KW),
        lambda: store.read_bytes(before.spill_id, 0, 10),
        lambda: store.list("s1"),
        lambda: store.stat(before.spill_id),
    ):
        with pytest.raises(StoreError, match="the store is down"):
            operation()

    async def twins() -> None:
        with pytest.raises(StoreError, match="the store is down"):
            await store.aput("z" * 10, **KW)
        with pytest.raises(StoreError, match="the store is down"):
            await store.aread_bytes(before.spill_id, 0, 10)

    anyio.run(twins)
    assert fault_proxy.requests == []
    clock.now += OUTAGE_PAUSE_SECONDS
    fault_proxy.rule = lambda n, method, path: None
    meta = store.put("w" * 10, **KW)
    assert fault_proxy.requests[0].method == "HEAD"
    assert store.read_bytes(meta.spill_id, 0, 10) == b"w" * 10


def test_an_answering_endpoint_that_fails_writes_pauses_longer_each_time(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """Probes answered but puts failing (503 on writes only): each round doubles the pause
    up to the maximum, so such an endpoint costs one full put per pause, not per call."""
    clock = Clock()
    store = make_s3(endpoint=fault_proxy.url, clock=clock, retry_config=NO_RETRIES)
    fault_proxy.rule = lambda n, method, path: None if method in ("GET", "HEAD") else "503"
    pauses = []
    for _ in range(8):
        with pytest.raises(StoreError):
            store.put("x" * 10, **KW)
        assert store._bucket.breaker is not None
        pauses.append(store._bucket.breaker.state.pause_seconds)
        clock.now += pauses[-1]
    assert pauses == [15, 30, 60, 120, 240, 300, 300, 300]


def test_requests_already_running_when_the_endpoint_fails_do_not_lengthen_the_pause(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """A list reads many sidecars at once: when they all fail, the pause is the first
    one, not doubled per request."""
    clock = Clock()
    store = make_s3(endpoint=fault_proxy.url, clock=clock, retry_config=NO_RETRIES)
    for n in range(12):
        store.put(f"output {n}", **{**KW, "tool_call_id": f"call-{n}"})
    fresh = make_s3(endpoint=fault_proxy.url, clock=clock, retry_config=NO_RETRIES)
    fault_proxy.rule = lambda n, method, path: None if "delimiter" in path else "503"
    with pytest.raises(StoreError):
        fresh.list("s1")
    assert fresh._bucket.breaker is not None
    assert fresh._bucket.breaker.state.pause_seconds == OUTAGE_PAUSE_SECONDS
    assert sum(r.action == "503" for r in fault_proxy.requests) > 1  # several in flight


def test_without_a_pause_every_request_tries_the_endpoint(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """``outage_pause=None`` turns the breaker off; a bad value is a ConfigError."""
    store = make_s3(endpoint=fault_proxy.url, retry_config=NO_RETRIES, outage_pause=None)
    fault_proxy.rule = lambda n, method, path: "503"
    for _ in range(2):
        with pytest.raises(StoreError, match="503"):
            store.put("x" * 10, **KW)
    for bad in (0, -1, float("nan"), float("inf"), "15"):
        with pytest.raises(ConfigError, match="outage_pause"):
            make_s3(outage_pause=bad)


def test_a_refusal_from_the_endpoint_is_not_an_outage(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """A 4xx (here 403 on every request, the first probe's too) is an answer: it fails
    that request, not the next."""
    store = make_s3(endpoint=fault_proxy.url, retry_config=NO_RETRIES)

    def rule(n: int, method: str, path: str) -> str | None:
        return "403"

    fault_proxy.rule = rule
    fault_proxy.requests.clear()
    for _ in range(2):
        with pytest.raises(StoreError):
            store.list("s1")
    assert [r.method for r in fault_proxy.requests] == ["HEAD", "GET", "GET"]
    assert store._bucket.breaker is not None and store._bucket.breaker.state == CLOSED


EVENTS = st.lists(
    st.tuples(st.sampled_from(["fail", "probe_ok", "admit"]), st.floats(0, 400)), max_size=30
)


@given(EVENTS)
def test_the_pause_doubles_within_its_bounds_and_one_request_probes(
    events: list[tuple[str, float]],
) -> None:
    """Whatever happens, a pause is the first one or twice the last (at most the maximum),
    a failed probe doubles it, a request that fails once the pause began leaves it as
    it is, a request is refused exactly while the pause runs or another request probes,
    and a good probe closes the breaker."""
    state, now = CLOSED, 0.0
    for event, elapsed in events:
        now += elapsed
        if event == "fail":
            before = state
            state = after_failure(state, now, "down", first_pause=15, max_pause=300)
            if before.retry_at is not None and not before.probing:
                assert state == before  # a request let through before the pause
                continue
            assert state.pause_seconds in (15, min(2 * before.pause_seconds, 300))
            if before.probing:
                assert state.pause_seconds == min(2 * before.pause_seconds, 300)
            if not before.probing and (
                before.recovered_at is None or now - before.recovered_at >= before.pause_seconds
            ):
                assert state.pause_seconds == 15
            assert state.retry_at == now + state.pause_seconds and not state.probing
        elif event == "probe_ok":
            state = after_probe(state, now)
            assert state.retry_at is None and not state.probing and state.recovered_at == now
        else:
            decision, after = admit(state, now)
            if state.retry_at is None:
                assert decision == "go" and after == state
            elif state.probing or now < state.retry_at:
                assert decision == "refuse" and after == state
            else:
                assert decision == "probe" and after.probing
            state = after
        assert state.pause_seconds == 0 or 15 <= state.pause_seconds <= 300
    assert OUTAGE_PAUSE_SECONDS <= OUTAGE_MAX_PAUSE_SECONDS
    assert isinstance(state, Outage)
