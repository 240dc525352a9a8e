"""Benchmark the local store against its floors, side by side in one run.

Run:  .venv/bin/python benchmarks/bench_store.py [--quick] [--no-record]

Measures, on this machine, in the same run (memory first, while this process is small):
  (1) streaming memory: peak RSS (VmHWM) of a subprocess streaming 1 MiB vs 1 GiB through
      the writer in 64 KiB chunks, retention off (so 1 GiB is really written). Target: the
      1 GiB run peaks at most 4 MiB higher. (ru_maxrss is shown too, but Linux keeps it
      across execve, so a child started by a large parent reports the parent's size.)
  (2) write: a 100 MB output (str and bytes; an ASCII log and a UTF-8 log) through
      ``LocalStore.put`` -- sha256, line count, line index, UTF-8 check, fsync -- against
      the sequential floor: encode + ``hashlib.sha256`` + write to a new file (also shown
      with an fsync, which the store does and the floor does not). Target <= 1.0x.
  (3) read: 2,000 lines at line 5,000,001 of a 1 GiB spill, median over 200 reads,
      against scanning newlines from the start. Target <= 200 us.

Figures go to the "## Store (issue 3)" section of benchmarks/RESULTS.md (replaced on
each full run; ``--no-record`` skips it, ``--quick`` shrinks the inputs and never records).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._timing import fmt, machine  # noqa: E402
from spillstore import LocalStore  # noqa: E402

WRITE_CPU: dict[str, tuple[float, float]] = {}
"""Case -> (floor, put) median CPU seconds of :func:`bench_write`'s last run."""

MB100 = 100_000_000
GIB = 1 << 30
CHUNK = 64 * 1024
KW = {"session": "bench", "tool_name": "bench", "retention_bytes": None}


def _log(size: int, non_ascii: bool) -> str:
    line = "2026-11-29 12:00:00 INFO worker-%02d request id=%08d took %4d ms ok\n"
    if non_ascii:
        line = "2026-11-29 12:00:00 INFO worker-%02d caf\u00e9 \u2713 id=%08d took %4d ms\n"
    block = "".join(line % (n % 97, n, n % 1000) for n in range(20_000))
    chars_per_byte = len(block) / len(block.encode())
    reps = size // len(block.encode()) + 1
    return (block * reps)[: int(size * chars_per_byte)]


def _floor(data: str | bytes, directory: Path, fsync: bool) -> None:
    path = directory / f"floor-{time.perf_counter_ns()}"
    raw = data.encode() if isinstance(data, str) else data
    digest = hashlib.sha256(raw)
    digest.hexdigest()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    path.unlink()


CPU: list[float] = []
"""CPU seconds (user + sys, every thread of this process) of each :func:`_timed` call."""


def _timed(fn: Callable[[], object]) -> float:
    os.sync()  # start every measurement with no writeback pending from the previous one
    cpu = time.process_time()
    start = time.perf_counter()
    fn()
    wall = time.perf_counter() - start
    CPU.append(time.process_time() - cpu)
    return wall


def bench_write(size: int, directory: Path, rounds: int) -> list[tuple[str, float, float, float]]:
    """Return (case, floor s, floor+fsync s, put s) medians for each input kind (the CPU
    medians of the floor and the put go to :data:`WRITE_CPU`, by case)."""
    rows = []
    for label, non_ascii in [("ASCII log", False), ("UTF-8 log", True)]:
        text = _log(size, non_ascii)
        raw = text.encode()
        for kind, data in [("str", text), ("bytes", raw)]:
            store = LocalStore(directory / f"store-{label[:5]}-{kind}")
            floor, floor_sync, put = [], [], []
            floor_cpu, put_cpu = [], []
            for n in range(rounds):
                floor.append(_timed(lambda: _floor(data, directory, False)))  # noqa: B023
                floor_cpu.append(CPU[-1])
                t = _timed(
                    lambda: store.put(data, tool_call_id=str(n), **KW)  # noqa: B023
                )
                put.append(t)
                put_cpu.append(CPU[-1])
                store.clean("bench")
                floor_sync.append(_timed(lambda: _floor(data, directory, True)))  # noqa: B023
            case = f"{kind} ({label}, {len(raw) / 1e6:.0f} MB)"
            WRITE_CPU[case] = (statistics.median(floor_cpu), statistics.median(put_cpu))
            rows.append(
                (
                    case,
                    statistics.median(floor),
                    statistics.median(floor_sync),
                    statistics.median(put),
                )
            )
    return rows


_MEMORY_CHILD = """
import resource, sys
from spillstore import LocalStore

def hwm_kib():
    # VmHWM belongs to this process's address space, which execve made new; ru_maxrss
    # is not reset by execve on Linux and would report the parent's size instead.
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

root, total = sys.argv[1], int(sys.argv[2])
line = b"2026-11-29 12:00:00 INFO worker request ok took 12 ms\\n"
chunk = (line * (65536 // len(line) + 1))[:65536]
store = LocalStore(root)
before = hwm_kib()
with store.writer(session="bench", tool_name="mem", tool_call_id=str(total),
                  retention_bytes=None) as w:
    for _ in range(total // len(chunk)):
        w.write(chunk)
    meta = w.commit()
assert meta.total_bytes == total // len(chunk) * len(chunk)
print(before, hwm_kib(), meta.stored_bytes, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def bench_memory(sizes: list[int], directory: Path) -> list[tuple[int, int, int, int]]:
    """Return (bytes, peak RSS before KiB, peak RSS after KiB, ru_maxrss KiB) per size.

    Each size runs in a fresh process; peak RSS is VmHWM (see the child's comment).
    """
    rows = []
    for size in sizes:
        root = directory / f"mem-{size}"
        out = subprocess.run(
            [sys.executable, "-c", _MEMORY_CHILD, str(root), str(size)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.split()
        rows.append((size, int(out[0]), int(out[1]), int(out[3])))
        shutil.rmtree(root)
    return rows


def bench_read(
    size: int, directory: Path, reads: int, store_class: type[LocalStore] = LocalStore
) -> dict[str, float]:
    """Build a spill of ``size`` bytes with >5M lines; time a 2,000-line read at 5,000,001."""
    store = store_class(directory / f"read-{store_class.__name__}")
    first = 5_000_001 if size >= GIB // 2 else 500_001
    line_bytes = max(20, size // (first + 200_000))
    lines_per_chunk = max(1, CHUNK // line_bytes)
    numbers = iter(range(1, 10**9))

    def chunks() -> object:
        written = 0
        while written < size:
            block = b"".join(
                b"%0*d\n" % (line_bytes - 1, next(numbers)) for _ in range(lines_per_chunk)
            )
            written += len(block)
            yield block

    built = time.perf_counter()
    meta = store.put(chunks(), **{**KW, "tool_call_id": "read"})  # type: ignore[arg-type]
    built = time.perf_counter() - built
    cold = _timed(lambda: store.read_lines(meta.spill_id, first, 2000))
    page = store.read_lines(meta.spill_id, first, 2000)
    assert page.first_line == first and page.last_line == first + 1999
    assert page.data.split(b"\n", 1)[0] == b"%0*d" % (line_bytes - 1, first)
    del CPU[:]
    samples = [_timed(lambda: store.read_lines(meta.spill_id, first, 2000)) for _ in range(reads)]
    cpu_median = statistics.median(CPU)
    assert meta.path is not None

    def scan() -> bytes:
        wanted = first - 1
        seen = 0
        carry = b""
        with open(meta.path, "rb") as handle:  # type: ignore[arg-type]
            while True:
                block = handle.read(1 << 20)
                if not block:
                    return b""
                found = block.count(b"\n")
                if seen + found < wanted:
                    seen += found
                    continue
                data = carry + block + handle.read(2000 * (line_bytes + 1))
                position = 0
                for _ in range(wanted - seen):
                    position = data.index(b"\n", position) + 1
                end = position
                for _ in range(2000):
                    end = data.index(b"\n", end) + 1
                return data[position:end]

    assert scan() == page.data
    scans = [_timed(scan) for _ in range(5)]
    store.clean("bench")
    return {
        "size": float(meta.total_bytes),
        "lines": float(meta.total_lines),
        "build_s": built,
        "cold_s": cold,
        "median_s": statistics.median(samples),
        "cpu_median_s": cpu_median,
        "scan_s": statistics.median(scans),
        "first": float(first),
    }


def _cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    quick = "--quick" in sys.argv
    record = not quick and "--no-record" not in sys.argv
    size = MB100 // 10 if quick else MB100
    big = GIB // 16 if quick else GIB
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    say(f"machine: {machine()}; nproc {nproc}; CPU {_cpu_model()}; Python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        directory = Path(tmp)
        say()
        say("(1) streaming memory: peak RSS (VmHWM) of a fresh process streaming 64 KiB chunks")
        say("| streamed | peak RSS after imports | peak RSS at the end | growth | ru_maxrss |")
        say("|---|---|---|---|---|")
        rows = bench_memory([1 << 20, big], directory)
        for streamed, before, peak, maxrss in rows:
            say(f"| {streamed:,} B | {before / 1024:.1f} MiB | {peak / 1024:.1f} MiB "
                f"| {(peak - before) / 1024:.2f} MiB | {maxrss / 1024:.1f} MiB |")  # fmt: skip
        delta = (rows[1][2] - rows[0][2]) / 1024
        say(f"peak RSS difference, {rows[1][0]:,} B vs 1 MiB: {delta:.2f} MiB (target <= 4 MiB)")
        say()
        say("(2) write through LocalStore.put (retention off) vs the sequential floor")
        say("| input | floor | floor + fsync | put | put / floor | put / (floor + fsync) |")
        say("|---|---|---|---|---|---|")
        for case, floor, floor_sync, put in bench_write(size, directory, 3 if quick else 9):
            say(
                f"| {case} | {fmt(floor)} | {fmt(floor_sync)} | {fmt(put)} "
                f"| {put / floor:.2f}x | {put / floor_sync:.2f}x |"
            )
        say()
        result = bench_read(big, directory, 40 if quick else 200)
        say(
            f"(3) read 2,000 lines at line {int(result['first']):,} of a "
            f"{result['size'] / GIB:.2f} GiB spill ({int(result['lines']):,} lines)"
        )
        say("| method | median | ratio to scan |")
        say("|---|---|---|")
        say(f"| scan newlines from the start | {fmt(result['scan_s'])} | 1.00x |")
        say(
            f"| LocalStore.read_lines (index cached) | {fmt(result['median_s'])} "
            f"| {result['median_s'] / result['scan_s']:.5f}x |"
        )
        say(
            f"| LocalStore.read_lines (first call, index loaded) | {fmt(result['cold_s'])} "
            f"| {result['cold_s'] / result['scan_s']:.5f}x |"
        )
        say(f"(building that spill through put took {fmt(result['build_s'])})")
    if record:
        _record(lines)


# --------------------------------------------------------------------------- issue 14

SMALL_SPILL = 17_000
V2_PATTERN = "needle-0042"


def _small_output(n: int) -> bytes:
    """About 17 KB of log text, distinct per spill, the needle in every 500th."""
    lines = [f"{n:06d} line {i:04d} INFO worker ok took {i % 97} ms" for i in range(400)]
    if n % 500 == 42:
        lines[200] = f"{n:06d} ERROR {V2_PATTERN} here"
    return ("\n".join(lines) + "\n").encode()[:SMALL_SPILL]


def _files_under(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())


def _write_floor(
    directory: Path, data: bytes, rounds: int, *, catalog: bool, tag: str = ""
) -> float:
    """Median of one write + fsync of ``data`` to a new file (+ one SQLite FULL commit)."""
    import sqlite3

    db = sqlite3.connect(directory / "floor.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
    times = []
    for n in range(rounds):
        start = time.perf_counter()
        path = directory / f"floor-{catalog:d}-{tag}{n}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        if catalog:
            db.execute("INSERT INTO t (v) VALUES (?)", (data[:400],))
        times.append(time.perf_counter() - start)
    db.close()
    return statistics.median(times)


def _fresh_lists(root: Path, rounds: int, session: str = "s") -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``list(session)``, each from a fresh store object."""
    walls, cpus = [], []
    for _ in range(rounds):
        fresh = LocalStore(root)
        wall, cpu = time.perf_counter(), time.process_time()
        listed = fresh.list(session)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
        assert listed
    return walls, cpus


def bench_v2(count: int, directory: Path, rounds: int) -> dict[str, float]:
    """Issue 14's targets for the local store (the catalog), against their floors."""
    from spillstore import SpillTools

    kw = {"session": "s", "tool_name": "bash"}
    root = directory / "store"
    store = LocalStore(root)
    before = _files_under(root)
    put_times = []
    floor_times = []  # interleaved with the puts, so both see the same machine load
    floors = directory / "floors"
    floors.mkdir()
    for n in range(count):
        data = _small_output(n)
        start = time.perf_counter()
        store.put(data, tool_call_id=str(n), **kw)
        put_times.append(time.perf_counter() - start)
        if n % 10 == 0:
            floor_times.append(_write_floor(floors, data, 1, catalog=False, tag=str(n)))
    after = _files_under(root)
    walls, cpus = _fresh_lists(root, rounds)
    tools = SpillTools(LocalStore(root), session="s")
    grep_times = []
    for _ in range(rounds):
        start = time.perf_counter()
        found = tools.grep(V2_PATTERN, output_mode="count", literal=True)
        grep_times.append(time.perf_counter() - start)
    grep_rn = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(
            ["grep", "-rn", "--include=*.out", V2_PATTERN, str(root / "s")],
            stdout=subprocess.DEVNULL,
            check=False,
        )
        grep_rn.append(time.perf_counter() - start)
    shutil.rmtree(floors)
    floors.mkdir()
    data = _small_output(1)
    result = {
        "put_median": statistics.median(put_times),
        "floor_median": statistics.median(floor_times),
        "files_before": float(before),
        "files_after": float(after),
        "files_per_spill": (after - before) / count,
        "list_wall_median": statistics.median(walls),
        "list_wall_min": min(walls),
        "list_cpu_median": statistics.median(cpus),
        "grep_median": statistics.median(grep_times),
        "grep_rn_median": statistics.median(grep_rn),
        "grep_hits": float(str(found).count(V2_PATTERN)),
        "write_fsync": _write_floor(floors, data, 200, catalog=False),
        "write_fsync_sqlite": _write_floor(floors, data, 200, catalog=True),
    }
    shutil.rmtree(floors)
    return result


def bench_list(count: int, directory: Path, rounds: int) -> dict[str, float]:
    """``list`` of ``count`` spills written through ``put`` (small bodies), fresh objects."""
    root = directory / f"list{count}"
    store = LocalStore(root)
    start = time.perf_counter()
    for n in range(count):
        store.put(b"line %d\n" % n, session="s", tool_name="bash", tool_call_id=str(n))
    written = time.perf_counter() - start
    walls, cpus = _fresh_lists(root, rounds)
    shutil.rmtree(root)
    return {
        "write_s": written,
        "wall_median": statistics.median(walls),
        "wall_min": min(walls),
        "cpu_median": statistics.median(cpus),
    }


def main_v2() -> None:
    """``--v2 [N]``: issue 14's targets (default N = 10,000 spills); ``--list N``: only
    ``list`` of N spills; ``--read``: the 1 GiB read. Never records: copy the figures."""
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    count = int(args[0]) if args else 10_000
    base = os.environ.get("BENCH_DIR")

    def say(text: str = "") -> None:
        print(text, flush=True)

    say(f"machine: {machine()}; CPU {_cpu_model()}; BENCH_DIR {base or tempfile.gettempdir()}")
    say(f"uptime before: {os.getloadavg()}")
    if "--list" in sys.argv:
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            r = bench_list(count, Path(tmp), 7)
        say(f"list of {count:,} spills (written through put in {r['write_s']:.1f} s), from a "
            f"fresh store object, 7 rounds: wall median {fmt(r['wall_median'])} (min "
            f"{fmt(r['wall_min'])}), CPU median {fmt(r['cpu_median'])}")  # fmt: skip
    elif "--write" in sys.argv:
        say("write through LocalStore.put (retention off) vs the sequential floor, median of 5")
        say("| input | floor | floor + fsync | put | put / floor | put / (floor + fsync) "
            "| CPU floor / put |")  # fmt: skip
        say("|---|---|---|---|---|---|---|")
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            for case, floor, floor_sync, put in bench_write(MB100, Path(tmp), 5):
                floor_cpu, put_cpu = WRITE_CPU[case]
                say(f"| {case} | {fmt(floor)} | {fmt(floor_sync)} | {fmt(put)} "
                    f"| {put / floor:.2f}x | {put / floor_sync:.2f}x "
                    f"| {fmt(floor_cpu)} / {fmt(put_cpu)} |")  # fmt: skip
    elif "--read" in sys.argv:
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            result = bench_read(GIB, Path(tmp), 200)
        say("read: 2,000 lines at line 5,000,001 of a 1 GiB spill, median of 200 reads: "
            f"{fmt(result['median_s'])} (CPU {fmt(result['cpu_median_s'])}); first call (index "
            f"loaded) {fmt(result['cold_s'])}; "
            f"scan from the start {fmt(result['scan_s'])}")  # fmt: skip
    else:
        with tempfile.TemporaryDirectory(dir=base) as tmp:
            r = bench_v2(count, Path(tmp), 5)
        say(f"{count:,} spills of ~17 KB in one session, written through `put`")
        say("| files per spill | put 17 KB | write+fsync (interleaved) | put / (write+fsync) "
            "| list (fresh object), wall median / min | list CPU | session grep | grep -rn "
            "| grep ratio |")  # fmt: skip
        say("|---|---|---|---|---|---|---|---|---|")
        say(
            f"| {r['files_per_spill']:.2f} ({int(r['files_before'])} -> "
            f"{int(r['files_after'])}) | {fmt(r['put_median'])} | {fmt(r['floor_median'])} "
            f"| {r['put_median'] / r['floor_median']:.2f}x "
            f"| {fmt(r['list_wall_median'])} / {fmt(r['list_wall_min'])} "
            f"| {fmt(r['list_cpu_median'])} | {fmt(r['grep_median'])} "
            f"| {fmt(r['grep_rn_median'])} | {r['grep_median'] / r['grep_rn_median']:.1f}x |"
        )
        say(f"after the puts: write + fsync {fmt(r['write_fsync'])}, the same plus one SQLite "
            f"WAL commit (synchronous=FULL) {fmt(r['write_fsync_sqlite'])}")  # fmt: skip
    say(f"uptime after: {os.getloadavg()}")


def _record(
    lines: list[str], heading: str = "## Store (issue 3)", how: str = "bench_store.py"
) -> None:
    path = ROOT / "benchmarks" / "RESULTS.md"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if heading in text:
        before, _, rest = text.partition(heading)
        following = rest.find("\n## ")
        after = rest[following + 1 :] if following >= 0 else ""
        text = before.rstrip("\n") + "\n\n" + (after and after + "\n")
    section = [heading, "", f"Run: `.venv/bin/python benchmarks/{how}` on "
               f"{time.strftime('%Y-%m-%d')}.", "", *lines]  # fmt: skip
    path.write_text(
        text.rstrip("\n") + "\n\n" + "\n".join(section).rstrip() + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    if {"--v2", "--list", "--read", "--write"} & set(sys.argv):
        main_v2()
    else:
        main()
