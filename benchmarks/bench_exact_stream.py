"""Stream 32 MiB through an accumulator into a MemoryStore; print the best CPU seconds of 3.

Run it once per tree to compare, e.g.
``PYTHONPATH=/work/main python benchmarks/bench_exact_stream.py utf8`` against the same
with this tree. ``ascii`` streams 80-byte ASCII lines, ``utf8`` lines of 2-4 byte
characters (the case that pays for the UTF-8 check).
"""

import sys
import time

from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.memory import MemoryStore

kind = sys.argv[1]
line = (b"x" * 79 + b"\n") if kind == "ascii" else ("é€😀 " * 8 + "\n").encode()
chunk = line * (65536 // len(line))
n = (32 * 1024 * 1024) // len(chunk)
svc = TruncationService(MemoryStore(), Settings(retention_bytes="off"))
best = None
for _ in range(3):
    acc = svc.accumulator(tool_name="t", tool_call_id="c")
    t0 = time.process_time()
    for _ in range(n):
        acc.write(chunk)
    acc.ok()
    t = time.process_time() - t0
    best = t if best is None else min(best, t)
print(f"{best:.3f}")
