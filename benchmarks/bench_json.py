"""Benchmark: JSON spills: query_spill vs the jq command line, the shape vs json.loads.

Run:  .venv/bin/python -m benchmarks.bench_json [--quick | --big | --hostile | --shape]
      [--query-only]

``--quick``: the ~6.9 MB document only; ``--big``: the ~100 MB one only (3 rounds);
``--query-only``: leave out the shape (on 100 MB) and the non-JSON path;
``--hostile``: only the never-ending programs on the ~6.9 MB spill (wall, CPU, message);
``--shape``: only the shape against ``json.loads``, 6.9 MB (5 rounds) and 100 MB (3).

Side by side in one run (design: the machine is shared, so only ratios mean anything):

- the needle query ``.items[] | select(.name == "NEEDLE")`` on a ~6.9 MB document and
  (without ``--quick``) on a ~100 MB one: ``query_spill`` first call (a new worker: it
  starts, gets the document and parses it) and second call (the worker kept the
  document), against ``jq -c`` on the same file (``apt-get install jq``; only the
  benchmark needs it) and against ``json.loads`` plus a Python loop;
- the tool output's size for the needle (target <= 2 KB) and its byte range read back;
- a second, different query on the same spill (``.items[] | select(.id == N)``): the
  worker kept the parsed document, so this is the evaluator alone;
- peak RSS of the query worker (``VmHWM``) against the document's size (target <= 4x),
  beside the floors: a fresh interpreter that only reads the file and ``json.loads``
  it, and the ``jq`` CLI on the same file;
- the shape summary (:func:`~spillstore._core.json_shape.json_shape`) against a plain
  ``json.loads`` of the same text (target <= 1.0x);
- the non-JSON path: ``truncate_for_model`` on a text log with JSON detection, and with
  detection switched off (the service before this change), interleaved.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from benchmarks._timing import fmt, machine, side_by_side
from spillstore import LocalStore, MemoryStore, Settings, SpillTools, TruncationService
from spillstore._core.json_shape import json_shape
from spillstore._service import decide
from tests.mcp.mcp_servers.big import make_users


def document(count: int) -> str:
    """``{"total": N, "items": [...]}`` with N users as one line (about 100 bytes each):
    the upstream test server's listing (``tests/mcp/mcp_servers/big.py``)."""
    return json.dumps(make_users(count), separators=(",", ":"))


def worker_peak_rss(tools: SpillTools) -> int:
    """The query worker's peak resident set (bytes), from /proc."""
    proc = tools._queries._proc  # a benchmark looks inside
    assert proc is not None
    with open(f"/proc/{proc.pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_of(command: list[str]) -> int:
    """The peak resident set (bytes) of ``command`` run alone, from a fresh process."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True,"
        " stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True, capture_output=True)
    return int(out.stdout) * 1024


def loads_rss(path: str) -> int:
    """Peak RSS of a fresh interpreter that reads ``path`` and ``json.loads`` it."""
    script = f"import json; json.loads(open({path!r}, 'rb').read())"
    return peak_rss_of([sys.executable, "-c", script])


class Needle(NamedTuple):
    """The needle query on one document, written to ``path`` and spilled in memory."""

    data: bytes
    path: str
    count: int
    expression: str
    tools: SpillTools
    spill: str
    jq_cli: str | None


def needle(text: str, root: str) -> Needle:
    """Write the document, spill it whole, and build the needle (the last item's name)."""
    data = text.encode()
    path = os.path.join(root, "doc.json")
    with open(path, "wb") as f:
        f.write(data)
    count = json.loads(text)["total"]
    expression = f'.items[] | select(.name == "user{count - 1}")'
    store = MemoryStore()
    spill = store.put(
        data, session="default", tool_name="fetch", tool_call_id="c1", retention_bytes=None
    ).spill_id
    return Needle(data, path, count, expression, SpillTools(store), spill, shutil.which("jq"))


def query_figures(label: str, text: str, rounds: int, root: str) -> None:
    """Time the needle query every way, side by side."""
    data, path, count, expression, tools, spill, jq_cli = needle(text, root)

    def first() -> None:
        tools.close()  # a new worker: it starts, loads and parses the document
        assert not tools.query(spill, expression).is_error

    def second() -> None:
        assert not tools.query(spill, expression).is_error

    def other() -> None:
        assert not tools.query(spill, f".items[] | select(.id == {count // 2})").is_error

    def cli() -> None:
        assert jq_cli is not None
        subprocess.run([jq_cli, "-c", expression, path], check=True, capture_output=True)

    def python_loads() -> None:
        with open(path, "rb") as f:
            loaded = json.loads(f.read())
        assert [i for i in loaded["items"] if i["name"] == f"user{count - 1}"]

    fns = {
        "query_spill first": first,
        "query_spill second": second,
        "query_spill other": other,
        "json.loads + loop": python_loads,
    }
    if jq_cli:
        fns["jq -c (CLI)"] = cli
    times = side_by_side(fns, rounds=rounds)
    result = tools.query(spill, expression)
    page = result.content[0].text  # type: ignore[union-attr]
    peak = worker_peak_rss(tools)
    tools.close()
    floor = loads_rss(path)
    jq_peak = peak_rss_of([jq_cli, "-c", expression, path]) if jq_cli else 0
    print(f"\n{label}: {len(data):,} bytes, {count:,} items, {rounds} rounds (median)")
    base = times.get("jq -c (CLI)")
    for name, seconds in times.items():
        ratio = f"   {seconds / base:.2f}x jq" if base else ""
        print(f"  {name:<22} {fmt(seconds):>10}{ratio}")
    speedup = times["query_spill first"] / times["query_spill second"]
    print(f"  second query is {speedup:.2f}x faster than the first (target >= 3x)")
    speedup = times["query_spill first"] / times["query_spill other"]
    print(f"  a different second query is {speedup:.2f}x faster than the first")
    print(f"  tool output for the needle: {len(page.encode())} bytes (target <= 2048)")
    for name, rss in (
        ("query worker", peak),
        ("floor: python + json.loads", floor),
        ("jq -c (CLI)", jq_peak),
    ):
        print(f"  peak RSS, {name:<27} {rss / 1e6:6.0f} MB = {rss / len(data):.2f}x the document")


def cpu_figures(text: str, rounds: int, root: str) -> None:
    """CPU seconds (user + sys, this process and its children) of the needle query's
    first call (worker start, transfer, parse, index, evaluation) and of ``jq -c``: on a
    loaded machine wall time mostly measures the wait for a core."""
    import resource  # POSIX only, the benchmark alone

    data, path, _count, expression, tools, spill, jq_cli = needle(text, root)

    def cpu() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    samples: dict[str, list[float]] = {"query_spill first": [], "jq -c (CLI)": []}
    for _ in range(rounds):
        before = cpu()
        assert not tools.query(spill, expression).is_error
        tools.close()  # the worker is reaped, so its CPU time is counted
        samples["query_spill first"].append(cpu() - before)
        if jq_cli:
            before = cpu()
            subprocess.run([jq_cli, "-c", expression, path], check=True, capture_output=True)
            samples["jq -c (CLI)"].append(cpu() - before)
    first = statistics.median(samples["query_spill first"])
    print(f"\nCPU time (user + sys), needle on {len(data):,} bytes, {rounds} rounds (median):")
    print(f"  query_spill first call {first * 1e3:8.0f} ms")
    if samples["jq -c (CLI)"]:
        cli = statistics.median(samples["jq -c (CLI)"])
        print(f"  jq -c (CLI)            {cli * 1e3:8.0f} ms   first call = {first / cli:.2f}x jq")


HOSTILE = {"native": "last(range(1e12))", "jq": "def f: f; f"}
"""Programs that never end: one the native evaluator runs, one only jq runs."""


def _worker_cpu(tools: SpillTools) -> float:
    """CPU seconds (user + sys) the live query worker has used so far, from /proc."""
    proc = tools._queries._proc  # a benchmark looks inside
    assert proc is not None
    with open(f"/proc/{proc.pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hostile_figures(text: str, rounds: int, root: str) -> None:
    """Wall and CPU time of each never-ending program on a spill the worker already
    holds (a legitimate query ran first), and what the error says. CPU is the worker's
    (reaped after the kill) less what it had used before, plus this process's."""
    import resource  # POSIX only, the benchmark alone

    data, _path, _count, expression, tools, spill, _jq = needle(text, root)

    def spent() -> float:
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

    print(f"\nhostile programs on a kept {len(data):,}-byte spill, {rounds} rounds (median):")
    for name, program in HOSTILE.items():
        walls: list[float] = []
        cpus: list[float] = []
        message = ""
        for _ in range(rounds):
            tools.close()
            assert not tools.query(spill, expression).is_error  # the worker holds the spill
            before, worker = spent(), _worker_cpu(tools)
            started = time.perf_counter()
            result = tools.query(spill, program)
            walls.append(time.perf_counter() - started)
            tools.close()  # reaped: its CPU time is counted
            cpus.append(spent() - before - worker)
            assert result.is_error
            message = result.content[0].text  # type: ignore[union-attr]
        print(
            f"  {name:<6} {program!r:<22} wall {fmt(statistics.median(walls)):>9}"
            f"  CPU {statistics.median(cpus) * 1e3:6.0f} ms  (max wall {fmt(max(walls))})"
        )
        print(f"         says: {message.splitlines()[0][:160]}")
    tools.close()


def shape_figures(label: str, text: str, rounds: int) -> None:
    """The shape summary against a plain json.loads of the same text: wall and CPU time
    (this process's user + sys) per call, interleaved round by round, medians."""
    fns = {"json.loads": lambda: json.loads(text), "json_shape": lambda: json_shape([text], 2048)}
    walls: dict[str, list[float]] = {name: [] for name in fns}
    cpus: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            cpus[name].append(time.process_time() - cpu)
            walls[name].append(time.perf_counter() - wall)
    wall = {name: statistics.median(values) for name, values in walls.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    print(
        f"\nshape of {label} ({rounds} rounds): json.loads {fmt(wall['json.loads'])}, json_shape "
        f"{fmt(wall['json_shape'])} = {wall['json_shape'] / wall['json.loads']:.2f}x wall;"
        f" CPU {cpu['json.loads'] * 1e3:.0f} vs {cpu['json_shape'] * 1e3:.0f} ms ="
        f" {cpu['json_shape'] / cpu['json.loads']:.2f}x (target <= 1.0x)"
    )


def non_json_figures(size: int, rounds: int, root: str) -> None:
    """truncate_for_model on a text log, JSON detection on and off, interleaved."""
    text = "".join(f"{n:08d} INFO request served in 12ms\n" for n in range(size // 40))
    service = TruncationService(
        LocalStore(os.path.join(root, "store")), Settings(retention_bytes=None)
    )
    counter = [0]
    real = decide.json_shape

    def run(detect: bool) -> None:
        decide.json_shape = real if detect else (lambda texts, budget: None)  # type: ignore[assignment]
        counter[0] += 1
        result = service.truncate_for_model(text, tool_name="bash", tool_call_id=f"c{counter[0]}")
        assert result.spill is not None and result.spill.spill_id is not None
        service.store.delete(result.spill.spill_id)

    try:
        times = side_by_side(
            {"detection off": lambda: run(False), "detection on": lambda: run(True)},
            rounds=rounds,
        )
    finally:
        decide.json_shape = real
    ratio = times["detection on"] / times["detection off"]
    print(f"\nnon-JSON path, a {len(text.encode()):,}-byte log through truncate_for_model:")
    print(
        f"  detection off {fmt(times['detection off'])}, on {fmt(times['detection on'])}"
        f" = {ratio:.3f}x"
    )


def main() -> None:
    quick = "--quick" in sys.argv
    only_query = "--query-only" in sys.argv
    only_big = "--big" in sys.argv
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    root = tempfile.mkdtemp(prefix="spillstore-bench-json-")
    started = time.perf_counter()
    try:
        if "--hostile" in sys.argv:
            hostile_figures(document(72_000), 3, root)
            return
        if "--shape" in sys.argv:
            shape_figures("the ~6.9 MB document", document(72_000), 5)
            shape_figures("the ~100 MB document", document(1_000_000), 3)
            return
        if not only_big:
            small = document(72_000)
            query_figures("needle, ~6.9 MB document", small, 5, root)
            shape_figures("the ~6.9 MB document", small, 5)
            cpu_figures(small, 5, root)
            del small
            if not only_query:
                non_json_figures(10_000_000, 7, root)
        if not quick:
            big = document(1_000_000)
            query_figures("needle, ~100 MB document", big, 3 if only_big else 1, root)
            cpu_figures(big, 3, root)
            if not only_query:
                shape_figures("the ~100 MB document", big, 1)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n(total {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
