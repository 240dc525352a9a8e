"""Benchmark the ``spillstore`` command line: start-up, streaming speed and peak memory.

Run:  .venv/bin/python benchmarks/bench_cli.py [--quick] [--stream-only] [--pairs N]

Measures, on this machine, side by side in one run:
  (1) start-up: ``spillstore --help`` and ``spillstore run -- true`` (the installed console
      script) against ``python -c pass``, ``python -c "import typer"`` and ``python -c
      "import spillstore"``, interleaved round by round, median wall time. Target: --help
      <= 300 ms.
  (2) where the start-up goes: the largest cumulative entries of
      ``python -X importtime -m spillstore._cli --help``.
  (3) ``spillstore run`` on a 1 GiB output (``yes`` of an 80-byte log line through
      ``head -c``; issue 17), with the default retention cap (256 MiB) and with ``--retain
      off``, each against two floors in the same rounds (A B1 B2, A B1 B2, ...; ratios
      taken round by round): the *hash floor* (the same generator piped into a Python
      reader that sha256-hashes 64 KiB chunks with ``hashlib``: any spill reads and hashes
      every byte; target: spillstore at least 0.5x its throughput) and the *write floor*
      (the same reader also writes the bytes spillstore keeps, 256 MiB or all of them, to
      a file and fsyncs it: what a durable copy of the kept bytes costs on this disk).
      Wall, CPU (user + sys of the whole process tree) and peak RSS come from ``os.wait4``
      on a child spawned by a small wrapper process, so no large parent's high-water mark
      is carried through ``execve``. Memory: the peak of a 1 MiB output against a 1 GiB
      one (target: within 4 MiB).
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

WRAPPER = """
import json, os, sys
argv = sys.argv[1:]
actions = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
start = __import__("time").perf_counter()
pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
_, status, usage = os.wait4(pid, 0)
wall = __import__("time").perf_counter() - start
print(json.dumps({"wall": wall, "maxrss_kib": usage.ru_maxrss,
                  "cpu": usage.ru_utime + usage.ru_stime,
                  "exit": os.waitstatus_to_exitcode(status)}))
"""

HASH = """
import hashlib, os
digest = hashlib.sha256()
read = os.read
while chunk := read(0, 65536):
    digest.update(chunk)
print(digest.hexdigest())
"""

WRITE_FLOOR = """
import hashlib, os, sys
keep, path = int(sys.argv[1]), sys.argv[2]
digest = hashlib.sha256()
read = os.read
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
kept = 0
while chunk := read(0, 65536):
    digest.update(chunk)
    if kept < keep:
        part = chunk[: keep - kept]
        os.write(fd, part)
        kept += len(part)
os.fsync(fd)
os.close(fd)
os.unlink(path)
print(digest.hexdigest())
"""

DEFAULT_RETENTION = 256 << 20
"""The default retention cap (``Settings.retention_bytes``): what a default ``run`` keeps."""

LOG_LINE = "2026-11-30T11:49:19.123Z INFO worker-17 request=abcdef0123 served in 12 ms ok.."
"""79 characters: with its newline, the 80-byte line the generator repeats."""


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
        "spillstore run -- true": [SCRIPT, "run", "--", "true"],
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


def _summary(values: Sequence[float]) -> str:
    return f"{statistics.median(values):5.2f}x ({min(values):.2f}-{max(values):.2f})"


def streaming(total: int, pairs: int) -> list[str]:
    """``spillstore run`` against the hash and write floors, round by round; report lines."""
    gen = _generator(total)
    hash_floor = ["/bin/sh", "-c", f"{shlex.join(gen)} | {shlex.join([PYTHON, '-c', HASH])}"]
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "SPILLSTORE_DIR": str(Path(tmp) / "store")}
        for label, options, kept in (
            ("default retention (256 MiB)", [], min(total, DEFAULT_RETENTION)),
            ("--retain off", ["--retain", "off"], total),
        ):
            write = [PYTHON, "-c", WRITE_FLOOR, str(kept), str(Path(tmp) / "floor.out")]
            write_floor = ["/bin/sh", "-c", f"{shlex.join(gen)} | {shlex.join(write)}"]
            runs: dict[str, list[dict[str, float]]] = {"run": [], "hash": [], "write": []}
            for _ in range(pairs):
                runs["run"].append(_measured([SCRIPT, "run", *options, "--", *gen], env))
                shutil.rmtree(Path(tmp) / "store", ignore_errors=True)
                runs["hash"].append(_measured(hash_floor, env))
                runs["write"].append(_measured(write_floor, env))
            small = _measured([SCRIPT, "run", *options, "--", *_generator(1 << 20)], env)
            shutil.rmtree(Path(tmp) / "store", ignore_errors=True)
            run = runs["run"]
            wall = statistics.median(r["wall"] for r in run)
            lines.append(
                f"  spillstore run, {label}: median wall {fmt(wall)}, "
                f"{total / wall / 1e9:.2f} GB/s; peak RSS of a 1 MiB output "
                f"{small['maxrss_kib'] / 1024:.1f} MiB, of this one "
                f"{statistics.median(r['maxrss_kib'] for r in run) / 1024:.1f} MiB (median)"
            )
            for name in ("hash", "write"):
                floor = runs[name]
                speed = [f["wall"] / r["wall"] for f, r in zip(floor, run, strict=True)]
                cpu = [r["cpu"] / f["cpu"] for f, r in zip(floor, run, strict=True)]
                lines.append(
                    f"    {name} floor {fmt(statistics.median(f['wall'] for f in floor)):>9}"
                    f"   throughput vs it {_summary(speed)}   CPU vs it {_summary(cpu)}"
                )
    return lines


def main() -> None:
    quick = "--quick" in sys.argv
    pairs = int(sys.argv[sys.argv.index("--pairs") + 1]) if "--pairs" in sys.argv else 5
    print(f"machine: {machine()}")
    print(f"date: {time.strftime('%Y-%m-%d')}")
    if "--stream-only" not in sys.argv:
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
    pairs = 1 if quick else pairs
    print(
        f"\n(3) a {total:,}-byte output (80-byte lines), {pairs} rounds of spillstore run, "
        "hash floor, write floor; ratios round by round, median (min-max); throughput vs a "
        "floor = its wall over spillstore's (target >= 0.5x the hash floor)"
    )
    for line in streaming(total, pairs):
        print(line)


if __name__ == "__main__":
    main()
