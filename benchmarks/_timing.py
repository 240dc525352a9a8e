"""Side-by-side timing helpers shared by the benchmark scripts.

The machine is shared and noisy, so a baseline and a candidate are always timed in the
same run, interleaved round by round, and compared by the ratio of their medians.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable


def machine() -> str:
    """One line naming the machine: CPU model, cores, Python."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def per_call(fn: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``fn`` over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def side_by_side(
    fns: dict[str, Callable[[], object]], *, rounds: int, calls: int = 1
) -> dict[str, float]:
    """Median seconds per call of each function, timed in interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(per_call(fn, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def fmt(seconds: float) -> str:
    """Seconds in a readable unit."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"
