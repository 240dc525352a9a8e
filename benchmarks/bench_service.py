"""Benchmark: a 100 MB tool result through the whole TruncationService vs the floor.

Run:  .venv/bin/python -m benchmarks.bench_service [--quick] [--lines | --file]

``--lines`` times only a stream written line by line (``acc.write(line)`` for each of
125,000 50-byte lines, 6.25 MB) against the same bytes written as one chunk and the floor:
what a host that forwards a pipe line by line pays per line.

``--file`` times a tool's own log handed over as ``full_output_path`` (adopted by the
store), of short lines and of long lines (10 lines of 10 MB: their cut alone fits, so
the saved spill is read back through the line shaper for append mode), each with line
shaping on (the default) and off (``max_line_bytes=None``: no read-back), against the
floor of reading and hashing the file; wall and CPU (user+sys) medians.

The floor (design.md §10) is what any spill must do at least: encode the text to UTF-8,
hash it with sha256, and write it to a new file, in sequence. The service does that plus
measuring, previews, the line index, fsyncs and the pointer. Both run side by side in
9 interleaved rounds on the same input (median); the target is <= 1.1x the floor.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from benchmarks._timing import fmt, machine, side_by_side
from spillstore import LocalStore, Settings, ToolResult, TruncationService


def floor(text: str, directory: str, counter: list[int], *, durable: bool = False) -> None:
    """Encode + sha256 + write to a new file, in sequence (``durable``: then fsync it)."""
    data = text.encode()
    hashlib.sha256(data).hexdigest()
    counter[0] += 1
    path = os.path.join(directory, f"floor-{counter[0]}.out")
    with open(path, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.unlink(path)


def compare(label: str, text: str, root: str) -> None:
    """Time the floor and the service on ``text`` in interleaved rounds; print the ratio."""
    counter = [0]
    service = TruncationService(
        LocalStore(os.path.join(root, "store")), Settings(retention_bytes=None)
    )

    def through_service() -> None:
        counter[0] += 1  # a new call id each round: a new spill, not a dedupe hit
        result = service.truncate_for_model(text, tool_name="bash", tool_call_id=f"c{counter[0]}")
        assert result.spill is not None and result.spill.spill_id is not None
        service.store.delete(result.spill.spill_id)

    times = side_by_side(
        {
            "floor": lambda: floor(text, root, counter),
            "floor + fsync": lambda: floor(text, root, counter, durable=True),
            "service": through_service,
        },
        rounds=9,
    )
    ratio = times["service"] / times["floor"]
    durable = times["service"] / times["floor + fsync"]
    print(f"\n{label}, {len(text.encode()):,} bytes")
    print(f"  floor: encode + sha256 + write   {fmt(times['floor']):>10}")
    print(f"  floor + fsync                    {fmt(times['floor + fsync']):>10}")
    print(f"  truncate_for_model               {fmt(times['service']):>10}   {ratio:.2f}x floor")
    print(f"  (target <= 1.1x; {durable:.2f}x the floor with the fsync a durable store makes)")


def compare_lines(root: str) -> None:
    """A 6.25 MB stream through the accumulator, line by line and as one chunk."""
    counter = [0]
    lines = [
        f"{n:08d} INFO worker-{n % 7} request served in {n % 97:2d} ms ok\n" for n in range(125_000)
    ]
    text = "".join(lines)
    service = TruncationService(
        LocalStore(os.path.join(root, "lines")), Settings(retention_bytes=None)
    )

    def stream(chunks: list[str]) -> None:
        counter[0] += 1
        acc = service.accumulator(tool_name="bash", tool_call_id=f"c{counter[0]}")
        for chunk in chunks:
            acc.write(chunk)
        result = acc.ok("exit code 0")
        assert result.spill is not None and result.spill.spill_id is not None
        service.store.delete(result.spill.spill_id)

    times = side_by_side(
        {
            "floor": lambda: floor(text, root, counter),
            "one chunk": lambda: stream([text]),
            "line by line": lambda: stream(lines),
        },
        rounds=7,
    )
    per_line = (times["line by line"] - times["one chunk"]) / len(lines)
    print(f"\nstream of {len(lines):,} lines, {len(text.encode()):,} bytes (accumulator)")
    print(f"  floor: encode + sha256 + write   {fmt(times['floor']):>10}")
    print(f"  one chunk                        {fmt(times['one chunk']):>10}")
    print(
        f"  line by line                     {fmt(times['line by line']):>10}   "
        f"{times['line by line'] / times['one chunk']:.2f}x one chunk, {fmt(per_line)} per line"
    )


def compare_file(size: int, root: str) -> None:
    """A file handed over as ``full_output_path``: shaping's read-back vs none, vs the floor."""
    counter = [0]
    files = {
        "short lines": "".join(f"{n:08d} INFO request served in 12ms\n" for n in range(size // 40)),
        "long lines": "".join(f"{n:03d} " + "x" * (size // 10 - 5) + "\n" for n in range(10)),
    }
    for label, text in files.items():
        path = os.path.join(root, f"{label.replace(' ', '-')}.log")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        del text
        services = {
            name: TruncationService(
                LocalStore(os.path.join(root, f"store-{name}")),
                Settings(retention_bytes=None, max_line_bytes=cap),
            )
            for name, cap in (("shaping on", 2000), ("shaping off", None))
        }

        def read_and_hash(path: str = path) -> None:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(1024**2):
                    digest.update(chunk)

        def adopt(service: TruncationService, path: str = path) -> None:
            counter[0] += 1
            result = service.truncate_for_model(
                ToolResult(content=(), full_output_path=path),
                tool_name="bash",
                tool_call_id=f"c{counter[0]}",
            )
            assert result.spill is not None and result.spill.spill_id is not None
            service.store.delete(result.spill.spill_id)

        fns = {"floor": read_and_hash} | {
            name: (lambda service=service: adopt(service)) for name, service in services.items()
        }
        wall, cpu = _wall_and_cpu(fns, rounds=7)
        print(f"\nfull_output_path, {label}, {os.path.getsize(path):,} bytes")
        for name in fns:
            print(
                f"  {name:<12} wall {fmt(wall[name]):>10} ({wall[name] / wall['floor']:.2f}x floor)"
                f"   cpu {fmt(cpu[name]):>10}"
            )
        os.unlink(path)


def _wall_and_cpu(
    fns: dict[str, Callable[[], object]], *, rounds: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and CPU (user+sys, all threads) seconds per call, interleaved."""
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return (
        {name: statistics.median(v) for name, v in wall.items()},
        {name: statistics.median(v) for name, v in cpu.items()},
    )


def main() -> None:
    size = 10_000_000 if "--quick" in sys.argv else 100_000_000
    print(f"machine: {machine()}")
    root = tempfile.mkdtemp(prefix="spillstore-bench-")
    if "--file" in sys.argv:
        try:
            compare_file(size, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    if "--lines" in sys.argv:
        try:
            compare_lines(root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    try:
        inputs = {
            "ASCII log": "".join(
                f"{n:08d} INFO request served in 12ms\n" for n in range(size // 40)
            ),
            "UTF-8 log": "".join(
                f"{n:08d} caf\u00e9 \U0001f600 served\n" for n in range(size // 30)
            ),
        }
        for label, text in inputs.items():
            compare(label, text, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
