"""S3Store under faults: 5xx replies and timeouts at every request of a put, for real.

A loopback proxy between obstore and moto (tests/stores/s3_server.py) fails one chosen
request per attempt. Whatever fails, a put either succeeds completely or raises one
StoreError with nothing visible and nothing of its own left behind, and the service
then falls back to the bounded "NOT saved" preview.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING

import obstore
import pytest

from spillstore._content import TextPart
from spillstore._core.utf8 import utf8_size
from spillstore._errors import StoreError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.s3_store import CONNECT_TIMEOUT, RETRIES, RETRY_SECONDS
from spillstore.s3 import S3Store

if TYPE_CHECKING:
    from tests.stores.s3_server import FaultProxy


MakeS3 = Callable[..., S3Store]
KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}
SMALL = b"".join(b"small line %d\n" % n for n in range(200))
LARGE = b"".join(b"large line %07d\n" % n for n in range(600_000))  # 10.8 MB: multipart
NO_RETRIES = {"max_retries": 0}


def _keys(store: S3Store) -> list[str]:
    return sorted(obj["path"] for obj in obstore.list(store._bucket.objects).collect())


def _attempt(
    make_s3: MakeS3, proxy: FaultProxy, base: str, n: int, data: bytes, **kwargs: object
) -> tuple[S3Store, bool]:
    """Put ``data`` through the proxy under a fresh prefix; return (store, succeeded).

    The store has no outage pause: these tests pin what one failed request leaves, and
    that the next put works (test_s3_outage.py pins the pause)."""
    store = make_s3(
        endpoint=proxy.url,
        prefix=f"{base}/attempt{n}",
        retry_config=NO_RETRIES,
        outage_pause=None,
        part_bytes=5 << 20,
        **kwargs,
    )
    try:
        meta = store.put(data, **KW, retention_bytes=None)
    except StoreError:
        return store, False
    assert store.read_bytes(meta.spill_id, 0, len(data)) == data
    return store, True


def _assert_nothing_visible(store: S3Store, checker: S3Store) -> None:
    assert store.list() == [] and checker.list() == []
    left = [k for k in _keys(checker) if not k.startswith("_ids/")]
    assert left == [], left  # no data, index or sidecar of the failed put


def _count_requests(make_s3: MakeS3, proxy: FaultProxy, base: str, data: bytes) -> int:
    proxy.requests.clear()
    _, ok = _attempt(make_s3, proxy, base, 0, data)
    assert ok
    writes = [r for r in proxy.requests if r.method != "GET"]
    return len(writes)


@pytest.mark.parametrize("data", [SMALL, LARGE], ids=["single-put", "multipart"])
def test_a_5xx_at_any_request_leaves_nothing_visible(
    make_s3: MakeS3, fault_proxy: FaultProxy, data: bytes
) -> None:
    """A 500 on any write request: one StoreError and nothing visible, or a whole spill."""
    base = make_s3().prefix
    total = _count_requests(make_s3, fault_proxy, base, data)
    assert total >= 5
    failures = 0
    for target in range(1, total + 1):
        seen = 0

        def rule(n: int, method: str, path: str, target: int = target) -> str | None:
            nonlocal seen
            if method == "GET":
                return None
            seen += 1
            return "500" if seen == target else None

        fault_proxy.rule = rule
        store, ok = _attempt(make_s3, fault_proxy, base, target, data)
        checker = make_s3(prefix=store.prefix)
        if not ok:
            failures += 1
            _assert_nothing_visible(store, checker)
        fault_proxy.rule = lambda n, method, path: None
        again = store.put(data, **KW, retention_bytes=None)  # the store still works
        assert checker.read_bytes(again.spill_id, 0, 100) == data[:100]
    assert failures == total - 1  # only the tombstone cleanup after the commit is harmless


@pytest.mark.parametrize(
    ("data", "picks"),
    [(SMALL, None), (LARGE, ("partNumber=", "uploadId="))],
    ids=["single-put", "multipart"],
)
def test_a_timeout_at_any_request_leaves_nothing_visible(
    make_s3: MakeS3, fault_proxy: FaultProxy, data: bytes, picks: tuple[str, ...] | None
) -> None:
    """A reply held past the client timeout (the server did act): all or nothing visible."""
    base = make_s3().prefix
    fault_proxy.stall_seconds = 1.2
    total = _count_requests(make_s3, fault_proxy, base, data)
    outcomes: dict[str, bool] = {}
    for target in range(1, total + 1):
        stalled: list[str] = []

        def rule(
            n: int, method: str, path: str, target: int = target, stalled: list[str] = stalled
        ) -> str | None:
            if method == "GET":
                return None
            number = sum(1 for r in fault_proxy.requests if r.method != "GET") + 1
            if number == target and (picks is None or any(p in path for p in picks)):
                stalled.append(f"{method} {path.split('?')[0].rsplit('/', 2)[-1]}")
                return "stall"
            return None

        fault_proxy.requests.clear()
        fault_proxy.rule = rule
        store, ok = _attempt(
            make_s3, fault_proxy, base, target, data, client_options={"timeout": "500ms"}
        )
        if not stalled:
            continue
        outcomes[stalled[0]] = ok
        if not ok:
            _assert_nothing_visible(store, make_s3(prefix=store.prefix))
    assert outcomes and not all(outcomes.values())
    sidecar = [ok for request, ok in outcomes.items() if request.endswith(".json")]
    if picks is None:  # every request of a single put was stalled, its sidecar's PUT too
        assert sidecar
    assert all(sidecar)  # its PUT did happen: read back, it is ours, the put succeeded


def test_a_single_5xx_is_retried(make_s3: MakeS3, fault_proxy: FaultProxy) -> None:
    """With retries on, one 500 on each write is absorbed and the spill is stored."""
    failed: set[str] = set()

    def rule(n: int, method: str, path: str) -> str | None:
        key = f"{method} {path}"
        if method != "GET" and key not in failed:
            failed.add(key)
            return "500"
        return None

    fault_proxy.rule = rule
    backoff = {"init_backoff": datetime.timedelta(milliseconds=5), "base": 1.5}
    store = make_s3(endpoint=fault_proxy.url, retry_config={"max_retries": 3, "backoff": backoff})
    meta = store.put(SMALL, **KW)
    assert store.read_bytes(meta.spill_id, 0, len(SMALL)) == SMALL
    assert any(r.action == "500" for r in fault_proxy.requests)


def test_service_falls_back_to_the_bounded_preview(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """With the backend failing every write, the tool call still gets a bounded preview."""
    fault_proxy.rule = lambda n, method, path: None if method == "GET" else "503"
    store = make_s3(endpoint=fault_proxy.url, retry_config=NO_RETRIES)
    settings = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)
    output = "".join(f"line {n} of a long tool output\n" for n in range(2_000))
    result = TruncationService(store, settings).truncate_for_model(
        output, tool_name="bash", tool_call_id="c1"
    )
    assert result.spill is not None and result.spill.saved == "none"
    text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
    assert "NOT saved (StoreError:" in text
    assert utf8_size(text) <= settings.max_bytes
    assert make_s3(prefix=store.prefix).list() == []


def test_a_dead_endpoint_costs_a_bounded_number_of_attempts_by_default(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """Without a ``retry_config``, a write that keeps failing is tried 1 + ``RETRIES``
    times within ``RETRY_SECONDS`` (obstore's own default, 10 retries within 3 minutes,
    held a tool call for minutes on an endpoint that stopped answering), connects time
    out after ``CONNECT_TIMEOUT``, and the service still gets its "NOT saved" preview."""
    fault_proxy.rule = lambda n, method, path: None if method == "GET" else "503"
    store = make_s3(endpoint=fault_proxy.url)
    objects = store._bucket.objects
    assert objects.retry_config is not None
    assert objects.retry_config["retry_timeout"] == datetime.timedelta(seconds=RETRY_SECONDS)
    assert (objects.client_options or {})["connect_timeout"] == CONNECT_TIMEOUT
    settings = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)
    output = "".join(f"line {n} of a long tool output\n" for n in range(2_000))
    result = TruncationService(store, settings).truncate_for_model(
        output, tool_name="bash", tool_call_id="c1"
    )
    assert result.spill is not None and result.spill.saved == "none"
    first = next(r for r in fault_proxy.requests if r.method == "PUT")
    tries = [r for r in fault_proxy.requests if (r.method, r.path) == (first.method, first.path)]
    assert len(tries) == 1 + RETRIES
