"""Benchmark two checkouts of spillstore side by side: did a change slow any path?

Run:  .venv/bin/python -m benchmarks.bench_layout --old DIR [--new DIR] [--rounds N]
      [--case NAME ...] [--quick]

Each checkout runs in its own long-lived worker process (``PYTHONPATH`` pointing at it),
and the parent asks the two workers for one timing after the other, case by case and
round by round, so both see the same machine load. A case is one path of
``bench_service`` (a 100 MB result through ``truncate_for_model``, ASCII and UTF-8) or of
``bench_tools`` (grep_spill: rare literal, rare regex, first 100 hits of a common word,
every hit, count; read_spill deep in a spill). Only public names are used, so any two
versions of the package can be compared. Each worker imports spillstore first, from its
own tree only (``python -P``, run in a scratch directory), and the report names the file
each one loaded. The report gives each case's median for both and the ratio new/old; the
refactor's target was no path more than 5% slower (<= 1.05x). Run it once with
``--old`` set to the tree under test as well: that control shows how far the same code
strays from itself on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._timing import fmt, machine  # noqa: E402

CASES = (
    "service ascii",
    "service utf8",
    "grep rare literal",
    "grep rare regex",
    "grep word head_limit=100",
    "grep word every hit",
    "grep word count",
    "read deep line",
)

WORKER = r"""
import json, os, sys, time
import spillstore  # first, from PYTHONPATH: the tree under test, nothing else
from spillstore import LocalStore, Settings, SpillTools, TruncationService
tree = os.environ["PYTHONPATH"]
if not spillstore.__file__.startswith(tree + os.sep):
    raise SystemExit(f"worker for {tree} imported {spillstore.__file__}")
sys.path.append(os.environ["BENCH_ROOT"])
from benchmarks.bench_tools import RARE, RARE_REGEX, WORD, log_data

size = int(os.environ["BENCH_SIZE"])
root = os.environ["BENCH_DIR"]
store = LocalStore(os.path.join(root, "store"), retention_bytes=None)
service = TruncationService(store, Settings(retention_bytes=None), session="svc")
ascii_text = "".join(f"{n:08d} INFO request served in 12ms\n" for n in range(size // 40))
utf8_text = "".join(f"{n:08d} caf\u00e9 \U0001f600 served\n" for n in range(size // 30))
data = log_data(size)
meta = store.put(data, session="bench", tool_name="bash", tool_call_id="bench")
deep_line = data.count(b"\n") * 9 // 10
del data
spill = meta.spill_id
tools = SpillTools(store, session="bench")
unlimited = SpillTools(store, session="bench", max_page_bytes=1 << 30)
calls = [0]

def through(text):
    calls[0] += 1
    result = service.truncate_for_model(text, tool_name="bash", tool_call_id=f"c{calls[0]}")
    store.delete(result.spill.spill_id)

cases = {
    "service ascii": lambda: through(ascii_text),
    "service utf8": lambda: through(utf8_text),
    "grep rare literal": lambda: tools.grep(RARE, spill),
    "grep rare regex": lambda: tools.grep(RARE_REGEX, spill),
    "grep word head_limit=100": lambda: tools.grep(WORD, spill),
    "grep word every hit": lambda: unlimited.grep(WORD, spill, head_limit=0),
    "grep word count": lambda: tools.grep(WORD, spill, output_mode="count"),
    "read deep line": lambda: tools.read(spill, offset=deep_line, limit=2000),
}
repeat = {"read deep line": 200, "grep rare literal": 5, "grep rare regex": 5}
for name in os.environ["BENCH_CASES"].split(","):  # warm up: page cache, patterns, caches
    cases[name]()
print("ready", spillstore.__file__, flush=True)
for line in sys.stdin:
    name = line.strip()
    n = repeat.get(name, 1)
    start = time.perf_counter()
    for _ in range(n):
        cases[name]()
    print(json.dumps((time.perf_counter() - start) / n), flush=True)
"""


def start_worker(
    tree: Path, size: int, directory: str, cases: tuple[str, ...]
) -> subprocess.Popen[str]:
    """A worker importing spillstore from ``tree``, ready once it printed ``ready``."""
    env = dict(os.environ, PYTHONPATH=str(tree), BENCH_ROOT=str(ROOT), BENCH_SIZE=str(size))
    env["BENCH_DIR"] = directory
    env["BENCH_CASES"] = ",".join(cases)
    os.makedirs(directory, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-P", "-c", WORKER],  # -P: no cwd on sys.path
        cwd=directory,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready, _, loaded = proc.stdout.readline().strip().partition(" ")
    if ready != "ready":
        raise SystemExit(f"worker for {tree} failed to start")
    print(f"worker for {tree}: spillstore from {loaded}")
    return proc


def ask(proc: subprocess.Popen[str], case: str) -> float:
    """One timing of ``case`` from a worker."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(case + "\n")
    proc.stdin.flush()
    return float(json.loads(proc.stdout.readline()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True, type=Path, help="checkout to compare against")
    parser.add_argument("--new", default=ROOT, type=Path, help="checkout under test (this one)")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--quick", action="store_true", help="10 MB inputs instead of 100 MB")
    parser.add_argument("--case", action="append", choices=CASES, help="only these cases")
    args = parser.parse_args()
    cases = tuple(args.case or CASES)
    size = 10_000_000 if args.quick else 100_000_000
    print(f"machine: {machine()}")
    print(f"old: {args.old}\nnew: {args.new}\ninputs: {size:,} bytes, {args.rounds} rounds")
    samples: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in cases}
    with tempfile.TemporaryDirectory(prefix="spillstore-layout-") as tmp:
        workers = {
            "old": start_worker(args.old.resolve(), size, os.path.join(tmp, "old"), cases),
            "new": start_worker(args.new.resolve(), size, os.path.join(tmp, "new"), cases),
        }
        try:
            for round_no in range(args.rounds):
                order = ("old", "new") if round_no % 2 == 0 else ("new", "old")
                for case in cases:
                    for side in order:
                        samples[case][side].append(ask(workers[side], case))
        finally:
            for proc in workers.values():
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait()
    print("\n| case | old | new | new/old |\n|---|---|---|---|")
    for case in cases:
        old = statistics.median(samples[case]["old"])
        new = statistics.median(samples[case]["new"])
        print(f"| {case} | {fmt(old)} | {fmt(new)} | {new / old:.3f}x |")


if __name__ == "__main__":
    main()
