"""An S3 outage one process found is told to the others: a small file in the user cache.

Real endpoints on 127.0.0.1 (a black hole that never answers, moto behind the fault
proxy), real files under the test's own ``XDG_CACHE_HOME``, and real one-shot
``spillstore`` processes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from spillstore._errors import StoreError
from spillstore._stores.breaker_file import outage_path
from spillstore.s3 import OUTAGE_PAUSE_SECONDS, S3Store
from tests.stores.s3_server import BUCKET, CREDENTIALS, REGION, BlackHole, FaultProxy

MakeS3 = Callable[..., S3Store]
KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}
ROOT = Path(__file__).resolve().parents[2]


def _file(endpoint: str) -> Path:
    """The outage file of the test bucket at ``endpoint``."""
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "spillstore")
    return Path(outage_path(cache, endpoint, BUCKET))


def test_a_fresh_store_fails_at_once_on_an_outage_another_found(
    make_s3: MakeS3, black_hole: BlackHole
) -> None:
    """One store pays the first probe on a black hole and records the outage (a 0600 file
    in a 0700 directory); a second store, as a new process would, fails at once."""
    first = make_s3(endpoint=black_hole.url)
    with pytest.raises(StoreError, match="the store is down"):
        first.put("x" * 10, **KW)
    recorded = _file(black_hole.url)
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    assert stat.S_IMODE(recorded.parent.stat().st_mode) == 0o700
    held = json.loads(recorded.read_text(encoding="utf-8"))
    assert held["pause_seconds"] == OUTAGE_PAUSE_SECONDS
    connections = black_hole.connections
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"the store is down, not tried again for 1[45] s"):
        make_s3(endpoint=black_hole.url).put("y" * 10, **KW)
    assert time.monotonic() - started < 1.0
    assert black_hole.connections == connections


def test_a_one_shot_command_fails_at_once_during_the_pause(
    make_s3: MakeS3, black_hole: BlackHole, tmp_path: Path
) -> None:
    """``spillstore ls`` in a new process, after another found the endpoint down: it
    exits with the store's error in well under the probe's timeout."""
    with pytest.raises(StoreError):
        make_s3(endpoint=black_hole.url).put("x" * 10, **KW)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPILLSTORE_", "AWS_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        "SPILLSTORE_S3_ENDPOINT": black_hole.url,
        "SPILLSTORE_S3_REGION": REGION,
        "SPILLSTORE_S3_ALLOW_HTTP": "true",
        "SPILLSTORE_STORE": f"s3://{BUCKET}/elsewhere",
        "PYTHONPATH": str(ROOT),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "spillstore._cli", "ls"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert done.returncode != 0
    assert "the store is down" in done.stderr, done.stderr
    assert elapsed < 4.0, elapsed


def test_a_recovery_clears_the_record(make_s3: MakeS3, fault_proxy: FaultProxy) -> None:
    """A store whose probe finds the endpoint back removes the file, so the next process
    does not fail fast."""
    now = [time.time()]
    store = make_s3(endpoint=fault_proxy.url, retry_config={"max_retries": 0}, clock=lambda: now[0])
    fault_proxy.rule = lambda n, method, path: "503"
    with pytest.raises(StoreError):
        store.put("x" * 10, **KW)
    assert _file(fault_proxy.url).exists()
    fault_proxy.rule = lambda n, method, path: None
    now[0] += OUTAGE_PAUSE_SECONDS
    store.put("y" * 10, **KW)
    assert not _file(fault_proxy.url).exists()
    make_s3(endpoint=fault_proxy.url).put("z" * 10, **KW)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        json.dumps({"reason": "x", "retry_at": time.time() + 10_000, "pause_seconds": 15}),
        json.dumps(
            {"reason": "x", "retry_at": time.time() + 400, "pause_seconds": 2 * 400}
        ),  # more than the longest pause
        json.dumps({"reason": "x", "retry_at": time.time() - 1, "pause_seconds": 15}),
        json.dumps({"reason": 1, "retry_at": time.time() + 5, "pause_seconds": 15}),
        json.dumps([1, 2]),
        "x" * 5000,
    ],
    ids=["garbage", "beyond-its-pause", "pause-too-long", "over", "bad-reason", "list", "big"],
)
def test_a_record_is_never_trusted_beyond_its_pause(
    make_s3: MakeS3, fault_proxy: FaultProxy, content: str
) -> None:
    """A record that is not one, is over, or claims more than its pause (a skewed clock,
    a hand edit) is ignored: the store tries the endpoint."""
    recorded = _file(fault_proxy.url)
    recorded.parent.mkdir(parents=True, mode=0o700)
    recorded.write_text(content, encoding="utf-8")
    make_s3(endpoint=fault_proxy.url).put("x" * 10, **KW)
    assert any(seen.method == "PUT" for seen in fault_proxy.requests)


def test_a_running_outage_in_the_record_is_adopted(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """A record of an outage still running is adopted without a request."""
    recorded = _file(fault_proxy.url)
    recorded.parent.mkdir(parents=True, mode=0o700)
    record = {"reason": "found elsewhere", "retry_at": time.time() + 10, "pause_seconds": 15}
    recorded.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(StoreError, match=r"last failure: found elsewhere"):
        make_s3(endpoint=fault_proxy.url).put("x" * 10, **KW)
    assert fault_proxy.requests == []
