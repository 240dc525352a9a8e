"""Benchmark the ``spillstore`` command line: start-up, streaming speed and peak memory.

Run:  .venv/bin/python benchmarks/bench_cli.py [--quick]

Measures, on this machine, side by side in one run:
  (1) start-up: ``spillstore --help`` (the installed console script) against
      ``python -c pass``, ``python -c "import typer"`` and ``python -c "import spillstore"``,
      interleaved round by round, median wall time. Target: --help <= 300 ms.
  (2) where the start-up goes: the largest cumulative entries of
      ``python -X importtime -m spillstore._cli --help``.
  (3) ``spillstore run`` on a 1 GiB output (``yes`` of an 80-byte log line through
      ``head -c``), with the default retention cap and with ``--retain off``: wall time and
      peak RSS against the floor (the same generator piped into a Python reader that
      sha256-hashes 64 KiB chunks with ``hashlib``; any spill reads and hashes every byte;
      target: spillstore at least 0.5x its throughput), against a reader that only
      discards, and against ``subprocess.run(capture_output=True)``. Peak RSS comes
      from ``os.wait4`` on a child spawned by a small wrapper process, so no large
      parent's high-water mark is carried through ``execve``; the wrapper alone (``python
      -c pass``) is shown as the baseline.

Prints the figures; they are copied by hand into the "## CLI (issue 6)" section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._timing import fmt, machine  # noqa: E402

PYTHON = sys.executable
SCRIPT = str(Path(PYTHON).with_name("spillstore"))
GIB = 1 << 30
FLOOR = "floor: pipe read in 64 KiB chunks, sha256 (hashlib)"

WRAPPER = """
import json, os, sys
argv = sys.argv[1:]
actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
start = __import__("time").perf_counter()
pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
_, status, usage = os.wait4(pid, 0)
wall = __import__("time").perf_counter() - start
print(json.dumps({"wall": wall, "maxrss_kib": usage.ru_maxrss,
                  "exit": os.waitstatus_to_exitcode(status)}))
"""

DISCARD = """
import os, sys
read = os.read
while read(0, 65536):
    pass
"""

HASH = """
import hashlib, os
digest = hashlib.sha256()
read = os.read
while chunk := read(0, 65536):
    digest.update(chunk)
print(digest.hexdigest())
"""

LOG_LINE = "2026-11-30T11:49:19.123Z INFO worker-17 request=abcdef0123 served in 12 ms ok.."
"""79 characters: with its newline, the 80-byte line the generator repeats."""

CAPTURE = """
import subprocess, sys
subprocess.run(sys.argv[1:], capture_output=True, check=True)
"""


def _generator(total: int) -> list[str]:
    return ["/bin/sh", "-c", f"yes {shlex.quote(LOG_LINE)} | head -c {total}"]


def _wall(argv: Sequence[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup(rounds: int) -> dict[str, float]:
    """Median wall time of each start-up, interleaved round by round."""
    cases: dict[str, list[str]] = {
        "python -c pass": [PYTHON, "-c", "pass"],
        'python -c "import typer"': [PYTHON, "-c", "import typer"],
        'python -c "import spillstore"': [PYTHON, "-c", "import spillstore"],
        "spillstore --help": [SCRIPT, "--help"],
    }
    for argv in cases.values():  # warm the caches (pyc, page cache)
        _wall(argv)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, argv in cases.items():
            samples[name].append(_wall(argv))
    return {name: statistics.median(values) for name, values in samples.items()}


def importtime(top: int) -> list[tuple[str, int]]:
    """The largest cumulative import times (us) of ``spillstore --help``."""
    result = subprocess.run(
        [PYTHON, "-X", "importtime", "-m", "spillstore._cli", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    entries: list[tuple[str, int]] = []
    for line in result.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)", line)
        if match and len(match.group(2)) <= 8:  # four levels deep
            entries.append((match.group(2) + match.group(3), int(match.group(1))))
    return sorted(entries, key=lambda e: -e[1])[:top]


def _measured(argv: Sequence[str], env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [PYTHON, "-c", WRAPPER, *argv], capture_output=True, text=True, env=env, check=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    assert result["exit"] == 0, out.stderr
    return result


def streaming(total: int, rounds: int) -> dict[str, dict[str, float]]:
    """Wall time and peak RSS of each way of taking a ``total``-byte output."""
    gen = _generator(total)
    shell_floor = f"{shlex.join(gen)} | {shlex.join([PYTHON, '-c', DISCARD])}"
    hash_floor = f"{shlex.join(gen)} | {shlex.join([PYTHON, '-c', HASH])}"
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SPILLSTORE_DIR": str(Path(tmp) / "store")}
        cases: dict[str, list[str]] = {
            "wrapper alone (python -c pass)": [PYTHON, "-c", "pass"],
            FLOOR: ["/bin/sh", "-c", hash_floor],
            "pipe read in 64 KiB chunks, discarded": ["/bin/sh", "-c", shell_floor],
            "spillstore run (retention 10 MiB)": [SCRIPT, "run", "--", *gen],
            "spillstore run --retain off": [SCRIPT, "run", "--retain", "off", "--", *gen],
            "subprocess.run(capture_output=True)": [PYTHON, "-c", CAPTURE, *gen],
        }
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, argv in cases.items():
                samples[name].append(_measured(argv, env))
                shutil.rmtree(Path(tmp) / "store", ignore_errors=True)
    return {
        name: {
            "wall": statistics.median(s["wall"] for s in runs),
            "maxrss_kib": max(s["maxrss_kib"] for s in runs),
        }
        for name, runs in samples.items()
    }


def main() -> None:
    quick = "--quick" in sys.argv
    print(f"machine: {machine()}")
    print(f"date: {time.strftime('%Y-%m-%d')}")
    rounds = 5 if quick else 15
    times = startup(rounds)
    base = times["python -c pass"]
    print(f"\n(1) start-up, median of {rounds} interleaved rounds")
    for name, seconds in times.items():
        extra = "" if name == "python -c pass" else f"  (+{fmt(seconds - base)} over pass)"
        target = ""
        if name == "spillstore --help":
            target = "  ok (<= 300 ms)" if seconds <= 0.300 else "  OVER 300 ms"
        print(f"  {name:<36} {fmt(seconds):>10}{extra}{target}")

    print("\n(2) python -X importtime -m spillstore._cli --help: largest cumulative imports")
    for name, micros in importtime(16):
        print(f"  {micros / 1000:8.1f} ms  {name}")

    total = (256 << 20) if quick else GIB
    stream_rounds = 1 if quick else 3
    print(
        f"\n(3) a {total:,}-byte output (80-byte lines), median wall of {stream_rounds}, "
        "max peak RSS; x floor = the floor's throughput over this one's (target >= 0.5x)"
    )
    figures = streaming(total, stream_rounds)
    floor = figures[FLOOR]["wall"]
    for name, fig in figures.items():
        ratio = f"{floor / fig['wall']:5.2f}x floor" if "wrapper" not in name else ""
        rate = f"{total / fig['wall'] / 1e9:5.2f} GB/s" if "wrapper" not in name else ""
        print(
            f"  {name:<46} {fmt(fig['wall']):>10} {rate:>10} {ratio:>12}"
            f"   peak RSS {fig['maxrss_kib'] / 1024:7.1f} MiB"
        )


if __name__ == "__main__":
    main()
