"""Benchmark S3Store against LocalStore, side by side in one run.

Run:  .venv/bin/python benchmarks/bench_s3.py [--quick] [--endpoint URL --bucket NAME]

By default the S3 endpoint is moto's server started in this process on 127.0.0.1 (a
random port), the same endpoint the tests use: it is a real S3 protocol endpoint, but
a Python one, so its figures bound the client's overhead from above and say nothing
about AWS latency. ``--endpoint``/``--bucket`` point the run at MinIO or a real bucket
(credentials from the usual ``AWS_*`` variables).

Measures, interleaved round by round:
  (1) a 100 MB put (an ASCII log as one str, retention off): LocalStore.put vs
      S3Store.put (multipart, 8 MiB parts, 2 in flight);
  (2) memory of that S3 put when streamed in 64 KiB chunks: peak RSS (VmHWM) of a child
      process putting 1 MiB vs 100 MB;
  (3) reading a 2,000-line page from the middle of that spill: LocalStore.read_lines vs
      S3Store.read_lines warm (index cached) and cold (a fresh store: id lookup,
      sidecar, index, then ranged GETs), against downloading the whole object;
  (4) 200 concurrent 1 KiB reads from async code: S3Store.aread_bytes (the shared
      thread-hop twins: a stat and a ranged GET each), and the bare ranged GET in a
      thread hop vs obstore's native get_range_async (the async API considered for the
      twins).

Prints a text block to paste into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
import anyio.to_thread  # noqa: E402
import obstore  # noqa: E402

from benchmarks._timing import fmt, machine  # noqa: E402
from spillstore import LocalStore  # noqa: E402
from spillstore.s3 import PART_BYTES, UPLOAD_CONCURRENCY, S3Store  # noqa: E402

MB100 = 100_000_000
PAGE_LINES = 2_000
KW = {"session": "bench", "tool_name": "bench", "retention_bytes": None}
CREDENTIALS = {"access_key_id": "bench", "secret_access_key": "bench"}


def start_moto() -> tuple[str, str]:
    """Start moto's S3 server on loopback with a bucket; return (endpoint, bucket)."""
    logging.getLogger("werkzeug").disabled = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import boto3
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
        ).create_bucket(Bucket="spillstore-bench")
    return endpoint, "spillstore-bench"


def _log(size: int) -> str:
    line = "2026-11-29 12:00:00 INFO worker-%02d request id=%08d took %4d ms ok\n"
    block = "".join(line % (n % 97, n, n % 1000) for n in range(20_000))
    return (block * (size // len(block) + 1))[:size]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _s3(args: argparse.Namespace, prefix: str) -> S3Store:
    if args.endpoint_is_moto:
        return S3Store(
            args.bucket,
            prefix=prefix,
            endpoint=args.endpoint,
            region="us-east-1",
            config=dict(CREDENTIALS),  # type: ignore[arg-type]
        )
    return S3Store(args.bucket, prefix=prefix, endpoint=args.endpoint)


def bench_put(
    args: argparse.Namespace, directory: Path, size: int, rounds: int
) -> dict[str, float]:
    """Median seconds of a ``size``-byte put, local and S3, interleaved."""
    text = _log(size)
    local = LocalStore(directory / "local")
    s3 = _s3(args, f"bench-{os.getpid()}/put")

    def floor() -> None:
        raw = text.encode()
        obstore.put(
            s3._bucket.objects,
            "floor",
            raw,
            use_multipart=True,
            chunk_size=PART_BYTES,
            max_concurrency=UPLOAD_CONCURRENCY,
        )

    samples: dict[str, list[float]] = {"local": [], "s3": [], "s3 floor": []}
    for n in range(rounds):
        samples["local"].append(_timed(lambda: local.put(text, tool_call_id=str(n), **KW)))  # noqa: B023
        samples["s3"].append(_timed(lambda: s3.put(text, tool_call_id=str(n), **KW)))  # noqa: B023
        samples["s3 floor"].append(_timed(floor))
        local.clean("bench", grace=0)
        s3.clean("bench", grace=0)
    obstore.delete(s3._bucket.objects, "floor")
    return {name: statistics.median(values) for name, values in samples.items()}


_MEMORY_CHILD = """
import sys
from spillstore.s3 import S3Store

def hwm_kib():
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])

endpoint, bucket, prefix, total, moto = sys.argv[1:6]
total = int(total)
kwargs = {"endpoint": endpoint}
if moto == "1":
    kwargs.update(region="us-east-1",
                  config={"access_key_id": "bench", "secret_access_key": "bench"})
store = S3Store(bucket, prefix=prefix, **kwargs)
line = b"2026-11-29 12:00:00 INFO worker request ok took 12 ms\\n"
chunk = (line * (65536 // len(line) + 1))[:65536]
before = hwm_kib()
with store.writer(session="bench", tool_name="mem", tool_call_id=str(total),
                  retention_bytes=None) as w:
    for n in range(total // len(chunk)):
        w.write(b"%08d" % n + chunk[8:])  # a new object each time, like a real pipe
    meta = w.commit()
store.clean("bench", grace=0)
print(before, hwm_kib(), meta.stored_bytes)
"""


def bench_memory(args: argparse.Namespace, sizes: list[int]) -> list[tuple[int, int, int]]:
    """(bytes, peak RSS KiB before writing, peak RSS KiB after) of a child per size."""
    rows = []
    for size in sizes:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _MEMORY_CHILD,
                args.endpoint,
                args.bucket,
                f"bench-{os.getpid()}/mem-{size}",
                str(size),
                "1" if args.endpoint_is_moto else "0",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout.split()
        rows.append((size, int(out[0]), int(out[1])))
    return rows


def bench_page(
    args: argparse.Namespace, directory: Path, size: int, reads: int
) -> tuple[dict[str, float], dict[str, tuple[int, int]], int, int]:
    """Median seconds of a 2,000-line page from the middle; (times, first line, bytes)."""
    text = _log(size)
    local = LocalStore(directory / "page")
    prefix = f"bench-{os.getpid()}/page"
    s3 = _s3(args, prefix)
    local_meta = local.put(text, tool_call_id="page", **KW)
    meta = s3.put(text, tool_call_id="page", **KW)
    first = meta.total_lines // 2
    page = s3.read_lines(meta.spill_id, first, PAGE_LINES)
    assert page.data == local.read_lines(local_meta.spill_id, first, PAGE_LINES).data
    assert page.last_line == first + PAGE_LINES - 1
    data_key = next(
        o["path"]
        for o in obstore.list(s3._bucket.objects, "bench/data").collect()
        if o["path"].endswith(".out")
    )

    def cold() -> object:
        return _s3(args, prefix).read_lines(meta.spill_id, first, PAGE_LINES)

    def whole() -> object:
        return obstore.get(s3._bucket.objects, data_key).bytes()

    fns: dict[str, Callable[[], object]] = {
        "local": lambda: local.read_lines(local_meta.spill_id, first, PAGE_LINES),
        "s3 warm": lambda: s3.read_lines(meta.spill_id, first, PAGE_LINES),
        "s3 cold": cold,
    }
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reads):
        for name, fn in fns.items():
            samples[name].append(_timed(fn))
    times = {name: statistics.median(values) for name, values in samples.items()}
    times["s3 whole GET"] = statistics.median(_timed(whole) for _ in range(3))
    middle = meta.stored_bytes // 2
    times["one 1 KiB GET"] = statistics.median(
        _timed(
            lambda: obstore.get_range(s3._bucket.objects, data_key, start=middle, end=middle + 1024)
        )
        for _ in range(reads)
    )
    counts = {"s3 warm": _requests(fns["s3 warm"]), "s3 cold": _requests(cold)}
    s3.clean("bench", grace=0)
    return times, counts, first, len(page.data)


def _requests(fn: Callable[[], object]) -> tuple[int, int]:
    """(GET requests, body bytes received) while ``fn`` runs (obstore's get/get_range)."""
    seen = [0, 0]
    real_get, real_range = obstore.get, obstore.get_range

    def get(*args: Any, **kwargs: Any) -> Any:
        result = real_get(*args, **kwargs)
        seen[0] += 1
        seen[1] += result.meta["size"]
        return result

    def get_range(*args: Any, **kwargs: Any) -> Any:
        result = real_range(*args, **kwargs)
        seen[0] += 1
        seen[1] += len(result)
        return result

    obstore.get, obstore.get_range = get, get_range  # type: ignore[assignment]
    try:
        fn()
    finally:
        obstore.get, obstore.get_range = real_get, real_range  # type: ignore[assignment]
    return seen[0], seen[1]


def bench_concurrency(args: argparse.Namespace, tasks: int, rounds: int) -> dict[str, float]:
    """Median seconds for ``tasks`` concurrent 1 KiB reads: thread-hop twin vs native."""
    s3 = _s3(args, f"bench-{os.getpid()}/conc")
    meta = s3.put(_log(1 << 20), tool_call_id="conc", **KW)
    key = next(
        o["path"]
        for o in obstore.list(s3._bucket.objects, "bench/data").collect()
        if o["path"].endswith(".out")
    )

    async def twins() -> None:
        async with anyio.create_task_group() as group:
            for n in range(tasks):
                group.start_soon(s3.aread_bytes, meta.spill_id, n * 1024, n * 1024 + 1024)

    async def hops() -> None:
        def one(n: int) -> None:
            obstore.get_range(s3._bucket.objects, key, start=n * 1024, end=n * 1024 + 1024)

        async with anyio.create_task_group() as group:
            for n in range(tasks):
                group.start_soon(anyio.to_thread.run_sync, one, n)

    async def native() -> None:
        async def one(n: int) -> None:
            await obstore.get_range_async(
                s3._bucket.objects, key, start=n * 1024, end=n * 1024 + 1024
            )

        async with anyio.create_task_group() as group:
            for n in range(tasks):
                group.start_soon(one, n)

    samples: dict[str, list[float]] = {"twins": [], "hops": [], "native": []}
    for _ in range(rounds):
        for name, fn in (("twins", twins), ("hops", hops), ("native", native)):
            start = time.perf_counter()
            anyio.run(fn)
            samples[name].append(time.perf_counter() - start)
    s3.clean("bench", grace=0)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, few rounds")
    parser.add_argument("--endpoint", help="an S3 endpoint URL (default: moto on loopback)")
    parser.add_argument("--bucket", help="the bucket at --endpoint")
    args = parser.parse_args()
    args.endpoint_is_moto = args.endpoint is None
    if args.endpoint is None:
        args.endpoint, args.bucket = start_moto()
    elif not args.bucket:
        parser.error("--endpoint needs --bucket")
    size = 5_000_000 if args.quick else MB100
    rounds = 2 if args.quick else 5
    print(f"machine: {machine()}")
    print(f"S3 endpoint: {'moto (in process, loopback)' if args.endpoint_is_moto else 'given'}")
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp:
        directory = Path(tmp)
        put = bench_put(args, directory, size, rounds)
        print(f"\n(1) put of a {size / 1e6:.0f} MB str (retention off), median of {rounds}")
        for name, seconds in put.items():
            ratio = seconds / put["local"]
            print(
                f"  {name:<8} {fmt(seconds):>10}  {size / seconds / 1e6:7.0f} MB/s  {ratio:5.2f}x"
            )
        memory = bench_memory(args, [1 << 20, size])
        print("\n(2) S3 put streamed in 64 KiB chunks: peak RSS of a child process")
        for total, before, after in memory:
            print(
                f"  {total / 1e6:7.1f} MB  before {before / 1024:6.1f} MiB  "
                f"after {after / 1024:6.1f} MiB  (+{(after - before) / 1024:.1f} MiB)"
            )
        times, counts, first, page_bytes = bench_page(
            args, directory, size, 5 if args.quick else 21
        )
        print(
            f"\n(3) {PAGE_LINES:,} lines from line {first:,} ({page_bytes:,} bytes) of the "
            f"{size / 1e6:.0f} MB spill, median"
        )
        for name, seconds in times.items():
            extra = ""
            if name in counts:
                extra = f"  {counts[name][0]} GETs, {counts[name][1]:,} bytes"
            print(f"  {name:<13} {fmt(seconds):>10}  {seconds / times['local']:8.1f}x local{extra}")
        concurrency = bench_concurrency(args, 200, 3 if args.quick else 7)
        print("\n(4) 200 concurrent 1 KiB reads from async code, median")
        labels = {
            "twins": "S3Store.aread_bytes (stat + GET, hop)",
            "hops": "obstore.get_range in a thread hop",
            "native": "obstore.get_range_async (native)",
        }
        for name, seconds in concurrency.items():
            print(f"  {labels[name]:<40} {fmt(seconds):>10}")


if __name__ == "__main__":
    main()
