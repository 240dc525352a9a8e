"""What session 9's path agreement costs: JSON outputs and handed-over files, two trees.

Session 9 (red9) stopped parsing a JSON output the retention cap will cut (its shape is
no longer shown), ran line shaping beside a JSON shape (append mode applies when the spill
is not saved in full), and read a handed-over file over the retention cap back from the
file to shape it. This times ``truncate_for_model`` on the same outputs with the code of
two source trees, each case in a fresh child process per round, rounds interleaved, and
reports the ratio of the medians.

Run (under the benchmark lock):

    git archive main spillstore | tar -x -C /tmp/base
    flock /work/tools/bench.lock python -m benchmarks.bench_json_cut --baseline /tmp/base
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks._timing import fmt, machine

_CHILD = r"""
import json, os, sys, tempfile, time
from spillstore import LocalStore, Settings, ToolResult, TruncationService
case = sys.argv[1]
rows = [{"id": n, "name": "user%d" % n, "tags": ["a", "b"], "score": n / 7} for n in range(60_000)]
root = tempfile.mkdtemp()
settings = Settings(retention_bytes=10 * 1024**2)
service = TruncationService(LocalStore(os.path.join(root, "s")), settings)
if case == "json-cut":  # 20 MB compact JSON, over a 10 MiB retention cap
    rows = rows * 4
    value = json.dumps(rows)
elif case == "json-whole":  # 5 MB compact JSON, saved whole (shape shown)
    value = json.dumps(rows)
elif case == "json-pretty":  # 8 MB pretty JSON, saved whole
    value = json.dumps(rows, indent=2)
else:  # file-long-lines: a 20 MB file of 4 lines of 5 MB, over the retention cap
    path = os.path.join(root, "out.log")
    with open(path, "w", encoding="utf-8") as f:
        f.write(("x" * 5_000_000 + "\n") * 4)
    value = ToolResult(content=(), full_output_path=path)
best = float("inf")
for n in range(3):
    start = time.perf_counter()
    service.truncate_for_model(value, tool_name="t", tool_call_id="c%d" % n)
    best = min(best, time.perf_counter() - start)
print(best)
"""

CASES = ("json-cut", "json-whole", "json-pretty", "file-long-lines")


def _time(tree: str, case: str) -> float:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, case],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time each case with both trees, interleaved, and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--baseline", required=True, help="a source tree holding spillstore/")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    candidate = str(Path(__file__).resolve().parent.parent)
    print(f"machine: {machine()}; load: {os.getloadavg()[0]:.2f}")
    print("| case | baseline | this tree | ratio |")
    print("|---|---|---|---|")
    for case in CASES:
        base: list[float] = []
        mine: list[float] = []
        for _ in range(args.rounds):
            base.append(_time(args.baseline, case))
            mine.append(_time(candidate, case))
        b, m = statistics.median(base), statistics.median(mine)
        print(f"| {case} | {fmt(b)} | {fmt(m)} | {m / b:.2f} |")


if __name__ == "__main__":
    main()
