"""The query worker's CPU bound: a query gets ``max_seconds`` of CPU for itself, and each
parse of the document an allowance of its own, only while the parse runs.

Real worker processes on multi-MB documents. The figures checked are the worker's CPU
time (user + system, read from ``/proc`` before and from the reaped child after), not
wall time, and with margins far from the limits: a hostile program must end near
``max_seconds`` of CPU (before, it also got the whole parse allowance, several seconds
here), and a legitimate query whose parse alone takes longer than ``max_seconds`` must
still answer.
"""

from __future__ import annotations

import json
import os
import resource
import signal
from collections.abc import Iterator

import pytest

from spillstore._tools.query_limits import parse_seconds
from spillstore._tools.query_worker import QueryFailed, QueryWorker, Results
from tests.mcp.mcp_servers.big import make_users

MAX_SECONDS = 0.5


@pytest.fixture(scope="module")
def listing() -> bytes:
    """An ~8 MB listing (parsed whole a chunk at a time: kept parsed by the worker)."""
    return json.dumps(make_users(84_000), separators=(",", ":")).encode()


@pytest.fixture
def worker() -> Iterator[QueryWorker]:
    """A worker whose queries may take half a second of CPU."""
    queries = QueryWorker(max_seconds=MAX_SECONDS)
    yield queries
    queries.close()


def _ask(worker: QueryWorker, data: bytes, expression: str) -> Results:
    return worker.query(
        "doc",
        len(data),
        lambda: data,
        expression,
        skip=0,
        limit=5,
        max_result_bytes=2000,
        max_total_bytes=8000,
    )


def _worker_cpu(worker: QueryWorker) -> float:
    proc = worker._proc  # the test looks inside: the child's own counters
    assert proc is not None
    with open(f"/proc/{proc.pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reaped_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.parametrize(
    ("expression", "engine"),
    [("last(range(1e12))", "native"), ("def f: f; f", "jq")],
)
def test_an_endless_program_on_a_kept_document_ends_near_its_cpu_limit(
    worker: QueryWorker, listing: bytes, expression: str, engine: str
) -> None:
    """On a spill the worker already holds, an endless program (run natively, or by jq,
    which parses the text again first) is stopped by the CPU limit, and says so."""
    assert _ask(worker, listing, ".total").found[0].text == "84000"
    before = _reaped_cpu() + _worker_cpu(worker)
    with pytest.raises(QueryFailed) as failed:
        _ask(worker, listing, expression)
    spent = _reaped_cpu() - before
    assert failed.value.kind == "time"
    assert "0.5 s of CPU time" in failed.value.message
    assert "wall" not in failed.value.message
    assert spent >= MAX_SECONDS * 0.9
    # The query's own half second, plus jq's parse of the text for the jq program;
    # far below the query's time plus the whole parse allowance it used to get.
    allowance = parse_seconds(len(listing))
    assert allowance > 1.5
    margin = 1.0 if engine == "jq" else 0.3
    assert spent < MAX_SECONDS + margin < MAX_SECONDS + allowance, (engine, spent)
    assert _ask(worker, listing, ".total").found[0].text == "84000"  # a new worker answers


def test_a_parse_longer_than_the_query_limit_is_not_cut(worker: QueryWorker) -> None:
    """A legitimate query whose parses take more CPU than ``max_seconds``: a kept-lazy
    document (from 16 MiB) on its first load, parsed whole again for a query that does
    not iterate its array, then a jq-only query (jq parses the whole text, and frees
    it after the program ends: both on the parse's allowance)."""
    data = json.dumps(make_users(200_000), separators=(",", ":")).encode()
    assert len(data) > 16 * 1024 * 1024
    before = _reaped_cpu()
    found = _ask(worker, data, ".items[-1].id").found
    assert found[0].text == "199999" and found[0].byte_range is not None
    found = _ask(worker, data, "def last_item: .items[-1]; last_item | .name").found
    assert found[0].text == '"user199999"' and found[0].byte_range is not None
    start, end = found[0].byte_range
    assert data[start:end] == b'"user199999"'
    worker.close()
    assert _reaped_cpu() - before > 2 * MAX_SECONDS  # the parses took longer than a query may


def test_a_worker_that_gets_no_cpu_is_stopped_by_the_wall_deadline_and_says_so(
    worker: QueryWorker,
) -> None:
    """The wall-time deadline (a busy machine, a stuck child) is the other bound; its
    message names wall time, not the CPU limit. The child is paused (SIGSTOP) here."""
    data = b'{"a": [1, 2]}'
    assert _ask(worker, data, ".a[0]").found[0].text == "1"
    proc = worker._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGSTOP)
    with pytest.raises(QueryFailed) as failed:
        _ask(worker, data, ".a[1]")
    assert failed.value.kind == "time"
    assert "of wall time" in failed.value.message and "CPU" not in failed.value.message
    assert _ask(worker, data, ".a[1]").found[0].text == "2"  # a new worker answers
