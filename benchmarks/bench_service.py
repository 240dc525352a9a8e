"""Benchmark: a 100 MB tool result through the whole TruncationService vs the floor.

Run:  .venv/bin/python -m benchmarks.bench_service [--quick]

The floor (design.md §10) is what any spill must do at least: encode the text to UTF-8,
hash it with sha256, and write it to a new file, in sequence. The service does that plus
measuring, previews, the line index, fsyncs and the pointer. Both run side by side in
9 interleaved rounds on the same input (median); the target is <= 1.1x the floor.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile

from benchmarks._timing import fmt, machine, side_by_side
from spillstore import LocalStore, Settings, TruncationService


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


def main() -> None:
    size = 10_000_000 if "--quick" in sys.argv else 100_000_000
    print(f"machine: {machine()}")
    root = tempfile.mkdtemp(prefix="spillstore-bench-")
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
