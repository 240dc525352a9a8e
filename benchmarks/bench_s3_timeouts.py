"""What S3Store's client timeouts cost: a black hole's first call, healthy transfers.

Run:  .venv/bin/python benchmarks/bench_s3_timeouts.py --baseline DIR [--mib 100]

``DIR`` holds the baseline's ``spillstore`` package (for example
``git archive main spillstore | tar -x -C DIR``). Every measurement runs in a fresh
process (as a one-shot ``spillstore`` command does), once with the baseline's code and
once with this tree's, side by side:

1. the first capped call of a process on a "black hole" endpoint (a real listener on
   127.0.0.1 that accepts connections and never answers): its wall time;
2. the first request of a process on a healthy endpoint (moto on 127.0.0.1): a
   ``stat`` of a missing spill, which the change precedes with one HEAD probe (the
   median of ``--repeat`` processes);
3. an upload of ``--mib`` MiB (one spill, parts of 8 MiB) to moto, direct;
4. the same over a relay on 127.0.0.1 that holds each direction of each connection to
   ``--rate`` MiB/s (a slow link): an upload of 16 MiB, and a download of
   ``--download-mib`` MiB (the whole object in one GET, as Grep and Query read it), which
   obstore's default 30 s request timeout cuts below ``size / 30 s``;
5. ``--commands`` one-shot ``spillstore ls`` processes in a row on a fresh black hole:
   the baseline's, then the change's with the outage not shared (a cache directory per
   process), then the change's sharing it (one cache directory: the outage file).

Prints a text block to paste into benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "--child" not in sys.argv and str(ROOT) not in sys.path:  # a child imports PYTHONPATH's
    sys.path.insert(0, str(ROOT))

CREDENTIALS = {"access_key_id": "bench", "secret_access_key": "bench"}
BUCKET = "spillstore-tests"


def child(kind: str, endpoint: str, prefix: str, mib: int) -> dict[str, object]:
    """One measurement in this (fresh) process; returns its figures."""
    import logging

    import spillstore

    assert Path(spillstore.__file__).resolve().is_relative_to(Path(os.environ["PYTHONPATH"]))
    logging.getLogger("spillstore").setLevel(logging.CRITICAL)
    from spillstore import Settings, TruncationService
    from spillstore.s3 import S3Store

    store = S3Store(
        BUCKET,
        prefix=prefix,
        endpoint=endpoint,
        region="us-east-1",
        config=dict(CREDENTIALS),
        retention_bytes=None,
    )
    started = time.perf_counter()
    try:
        if kind == "black_hole":
            output = "".join(f"line {n} of a long tool output\n" for n in range(20_000))
            result = TruncationService(store, Settings(max_bytes=8_000)).truncate_for_model(
                output, tool_name="bash", tool_call_id="c1"
            )
            assert result.spill is not None and result.spill.saved == "none"
        elif kind == "first_request":
            with contextlib.suppress(LookupError):
                store.stat("bash-" + "0" * 20)
        elif kind == "upload":
            line = b"x" * 1023 + b"\n"
            meta = store.put([line * 1024] * mib, session="s", tool_name="t", tool_call_id="c")
            assert meta.stored_bytes == mib << 20
            return {"wall": time.perf_counter() - started, "spill_id": meta.spill_id}
        elif kind == "download":
            meta = store.stat(prefix_spill(prefix))
            started = time.perf_counter()
            with store._open(meta) as reader:
                size = len(reader.buffer())
            assert size == meta.stored_bytes
    except Exception as exc:
        return {"wall": time.perf_counter() - started, "error": f"{type(exc).__name__}: {exc}"}
    return {"wall": time.perf_counter() - started}


def prefix_spill(prefix: str) -> str:
    """The spill id a download reads (written by the parent under ``prefix``)."""
    return Path("/tmp", prefix.replace("/", "_") + ".id").read_text(encoding="utf-8")


def run_child(tree: Path, kind: str, endpoint: str, prefix: str, mib: int) -> dict[str, object]:
    """Run :func:`child` in a fresh interpreter importing ``spillstore`` from ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    args = [sys.executable, __file__, "--child", kind, endpoint, prefix, str(mib)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"wall": float("nan"), "error": done.stderr.strip().splitlines()[-1]}
    figures: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def slow_relay(upstream: str, bytes_per_second: float) -> str:
    """A TCP relay on 127.0.0.1 to ``upstream`` holding each direction of each connection
    to ``bytes_per_second``."""
    host, port = upstream.removeprefix("http://").split(":")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(100)

    def pump(source: socket.socket, sink: socket.socket) -> None:
        start, sent = time.monotonic(), 0
        try:
            while chunk := source.recv(16384):
                sink.sendall(chunk)
                sent += len(chunk)
                ahead = sent / bytes_per_second - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while True:
            client = listener.accept()[0]
            server = socket.create_connection((host, int(port)))
            threading.Thread(target=pump, args=(client, server), daemon=True).start()
            threading.Thread(target=pump, args=(server, client), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"


def describe(figures: dict[str, object]) -> str:
    """A cell: the wall time, and the error when there was one."""
    text = f"{figures['wall']:.3f} s"
    if "error" in figures:
        text += f" FAILED ({str(figures['error'])[:90]})"
    return text


def main() -> None:
    from benchmarks._endpoints import (
        black_hole,
    )  # the parent's only: a child imports PYTHONPATH's tree

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--mib", type=int, default=100)
    parser.add_argument("--download-mib", type=int, default=64)
    parser.add_argument("--commands", type=int, default=4, help="one-shot ls processes")
    parser.add_argument("--only-one-shots", action="store_true")
    parser.add_argument("--repeat", type=int, default=7, help="first requests (median)")
    parser.add_argument("--rate", type=float, default=2.0, help="the slow link, MiB/s")
    args = parser.parse_args()
    from benchmarks._timing import machine
    from tests.stores.s3_server import moto_endpoint

    moto = moto_endpoint()
    slow = slow_relay(moto, args.rate * (1 << 20))
    run = f"bench/{os.getpid()}"
    trees = {"baseline": args.baseline.resolve(), "change": ROOT}
    print(f"machine: {machine()}; load {os.getloadavg()[0]:.2f} at start")
    print("| measurement | baseline | change |")
    print("|---|---|---|")
    hole = black_hole()
    if args.only_one_shots:
        one_shots(trees, hole, args.commands)
        return
    rows = [
        ("first capped call, black hole", "black_hole", hole, 0),
        ("first request (stat), moto", "first_request", moto, 0),
        (f"upload {args.mib} MiB, moto", "upload", moto, args.mib),
        (f"upload 16 MiB at {args.rate:g} MiB/s", "upload", slow, 16),
    ]
    for title, kind, endpoint, mib in rows:
        cells = []
        for name, tree in trees.items():
            runs = [
                run_child(tree, kind, endpoint, f"{run}/{name}", mib)
                for _ in range(args.repeat if kind == "first_request" else 1)
            ]
            runs.sort(key=lambda figures: float(figures["wall"]))  # type: ignore[arg-type]
            cells.append(describe(runs[len(runs) // 2]))
        print(f"| {title} | {cells[0]} | {cells[1]} |", flush=True)
    cells = []
    for name, tree in trees.items():
        prefix = f"{run}/{name}-download"
        written = run_child(ROOT, "upload", moto, prefix, args.download_mib)
        Path("/tmp", prefix.replace("/", "_") + ".id").write_text(
            str(written["spill_id"]), encoding="utf-8"
        )
        cells.append(describe(run_child(tree, "download", slow, prefix, 0)))
    print(
        f"| download {args.download_mib} MiB (one GET) at {args.rate:g} MiB/s | "
        f"{cells[0]} | {cells[1]} |"
    )
    one_shots(trees, black_hole(), args.commands)
    print(f"load {os.getloadavg()[0]:.2f} at end")


def one_shot(tree: Path, endpoint: str, cache: Path) -> tuple[float, str]:
    """Wall seconds of one ``spillstore ls`` process on the store at ``endpoint``, and
    the last line it wrote (its error)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPILLSTORE_", "AWS_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "SPILLSTORE_S3_ENDPOINT": endpoint,
        "SPILLSTORE_S3_REGION": "us-east-1",
        "SPILLSTORE_S3_ALLOW_HTTP": "true",
        "SPILLSTORE_STORE": f"s3://{BUCKET}/bench",
        "PYTHONPATH": str(tree),
        "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_CACHE_HOME": str(cache),
    }
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spillstore._cli", "ls"],
        env=env,
        cwd=cache.parent,  # not this tree: ``-m`` imports from the working directory first
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    assert done.returncode != 0, done.stdout
    return wall, (done.stderr.strip().splitlines() or [""])[-1]


def one_shots(trees: dict[str, Path], endpoint: str, commands: int) -> None:
    """``commands`` one-shot ``spillstore ls`` processes in a row on a black hole: the
    baseline; the change with each process on a cache of its own (the outage not
    shared); the change sharing one cache (the outage file)."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="bench-outage-"))
    for tree in trees.values():  # each process imports its tree's spillstore
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        where = subprocess.run(
            [sys.executable, "-c", "import spillstore; print(spillstore.__file__)"],
            env=env,
            cwd=base,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert Path(where.strip()).resolve().is_relative_to(tree), (tree, where)
    runs = {
        "baseline": [
            one_shot(trees["baseline"], endpoint, base / f"b{n}") for n in range(commands)
        ],
        "change, not shared": [
            one_shot(trees["change"], endpoint, base / f"c{n}") for n in range(commands)
        ],
        "change": [one_shot(trees["change"], endpoint, base / "shared") for n in range(commands)],
    }
    shutil.rmtree(base)
    columns = {name: [wall for wall, _ in got] for name, got in runs.items()}
    print()
    print(f"| one-shot `spillstore ls`, black hole | {' | '.join(columns)} |")
    print("|---|" + "---|" * len(columns))
    for n in range(commands):
        cells = " | ".join(f"{walls[n]:.3f} s" for walls in columns.values())
        print(f"| process {n + 1} | {cells} |", flush=True)
    totals = " | ".join(f"{sum(walls):.1f} s" for walls in columns.values())
    print(f"| total | {totals} |")
    for name, got in runs.items():
        print(f"- {name}, last process: {got[-1][1][:160]}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, endpoint, prefix, mib = sys.argv[2:6]
        print(json.dumps(child(kind, endpoint, prefix, int(mib))))
    else:
        main()
