"""What a dead S3 endpoint costs each capped tool call, with and without the outage pause.

Run:  .venv/bin/python benchmarks/bench_s3_outage.py [--calls 5] [--baseline-calls 2]

Two dead endpoints on 127.0.0.1, both real sockets: one that refuses connections (a
closed port) and a "black hole" that accepts connections and never answers. For each,
``--calls`` oversized results go through ``TruncationService.truncate_for_model`` on an
``S3Store`` with the default outage pause, and ``--baseline-calls`` on one with
``outage_pause=None`` (every call pays the whole retry budget: about 60 s each on the
black hole, so keep it small). Then the store's clock is moved past the pause and one
more call probes the endpoint, still dead. Wall and CPU (user+sys of this process) per
call; every result must be the "NOT saved" preview. Timeouts, not CPU, bound these, so
load barely moves them.

Prints a text block to paste into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._endpoints import black_hole  # noqa: E402
from benchmarks._timing import machine  # noqa: E402
from spillstore import Settings, TruncationService  # noqa: E402
from spillstore._content import TextPart  # noqa: E402
from spillstore.s3 import OUTAGE_PAUSE_SECONDS, S3Store  # noqa: E402

OUTPUT = "".join(f"line {n} of a long tool output\n" for n in range(20_000))
SETTINGS = Settings(max_bytes=8_000)


def refusing() -> str:
    """An endpoint whose port refuses connections (bound, then closed)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"


class Clock:
    """Epoch seconds, plus an offset the run moves to end a pause."""

    offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def one_call(service: TruncationService, n: int) -> tuple[float, float]:
    """One capped call: (wall s, CPU s); it must be the "NOT saved" preview."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = service.truncate_for_model(OUTPUT, tool_name="bash", tool_call_id=f"c{n}")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    text = "".join(p.text for p in result.content if isinstance(p, TextPart))
    assert result.spill is not None and result.spill.saved == "none", text[:300]
    assert "NOT saved" in text
    return wall, cpu


def run(endpoint: str, calls: int, pause: float | None) -> dict[str, object]:
    clock = Clock()
    store = S3Store(
        "bench",
        endpoint=endpoint,
        region="us-east-1",
        config={"access_key_id": "bench", "secret_access_key": "bench"},
        outage_pause=pause,
        clock=clock,
    )
    service = TruncationService(store, SETTINGS, session="bench")
    times = [one_call(service, n) for n in range(calls)]
    probe = None
    if pause is not None:
        clock.offset += pause
        probe = one_call(service, calls)
    return {"times": times, "probe": probe}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--baseline-calls", type=int, default=2)
    args = parser.parse_args()
    logging.getLogger("spillstore").setLevel(logging.ERROR)
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.2f} at start")
    print(
        "| endpoint | outage pause | calls | first call wall (CPU) | each later call wall, "
        "median (CPU) | call after the pause: probe (CPU) | total wall |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, endpoint in (("refuses connections", refusing()), ("black hole", black_hole())):
        for pause, calls in ((None, args.baseline_calls), (OUTAGE_PAUSE_SECONDS, args.calls)):
            if calls <= 0:
                continue
            got = run(endpoint, calls, pause)
            times: list[tuple[float, float]] = got["times"]  # type: ignore[assignment]
            first = times[0]
            later = times[1:]
            later_text = (
                f"{statistics.median(w for w, _ in later):.3f} s "
                f"({statistics.median(c for _, c in later):.3f} s)"
                if later
                else "-"
            )
            probe = got["probe"]
            probe_text = "-" if probe is None else f"{probe[0]:.3f} s ({probe[1]:.3f} s)"  # type: ignore[index]
            print(
                f"| {name} | {'off' if pause is None else f'{pause:.0f} s'} | {calls} | "
                f"{first[0]:.3f} s ({first[1]:.3f} s) | {later_text} | {probe_text} | "
                f"{sum(w for w, _ in times):.1f} s |",
                flush=True,
            )
    print(f"load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
