"""MCP proxy benchmark: big results and per-call overhead, proxy vs direct, in one run.

Run: ``.venv/bin/python benchmarks/bench_mcp.py`` (about 2-4 minutes). Options:

- ``--size-mb 100``: the big result; ``--rounds 3``; ``--small-calls 100``,
  ``--small-rounds 15``; ``--skip-small``: only the big results;
- ``--retention off``: the proxy stores whole outputs (default: the 10 MiB retention cap
  keeps the first 9 MiB and the last 1 MiB of a larger output);
- ``--sdk-big``: also time the SDK's own stdio client on the big result (quadratic);
- ``--cold N``: N interleaved rounds of the cold start (``--only-cold``: nothing else;
  ``--cold-upstream-sleep 4``: an upstream that boots in 4 s instead of mcp-server-git);
- ``--only-small``: only the small calls; ``--baseline DIR``: also the proxy of the
  source tree DIR (``git archive main | tar -x -C DIR``) in the same small-call and
  cold-start rounds;
- ``--ctxtual PATH``: a ``ctxtual`` executable to compare with (``pip install
  "ctxtual[mcp]"`` in a throwaway venv); ``--ctxtual-max-mb 10``: sizes above this are
  not run through ctxtual (its stdio client is quadratic too).

What is measured (every scenario in a fresh worker process, the upstream always
``tests/mcp/mcp_servers/big.py``, an SDK low-level server; rounds interleaved):

1. one big text result (``--size-mb``) and one of 5 MB:
   - **direct (linear)**: an SDK ``mcp.Client`` over spillstore's linear
     ``StdioTransport`` straight to the upstream: the time the upstream needs to produce
     and send the result, plus parsing it;
   - **direct (SDK stdio)**: the SDK's own stdio client (quadratic; 5 MB only);
   - **proxy**: the same client to ``python -m spillstore.mcp proxy -- upstream``: the
     result is read, parsed, spilled to a local store and capped (50,000 bytes);
   - **ctxtual** (if given): ``ctxtual wrap -- upstream``.
   Time is the ``tools/call`` round trip seen by the client; peak RSS is the VmHWM of
   the proxy process (for direct: of the client process, which holds the whole result).
2. per-call overhead on a small result (``echo``): median per call, direct vs proxy,
   both connections open in one worker, interleaved rounds;
3. (``--cold``) cold start: the SDK's stdio client entering (spawn, ``initialize``)
   ``mcp-server-git`` directly vs behind ``python -m spillstore._cli mcp proxy``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._timing import machine  # noqa: E402

BIG = [sys.executable, str(ROOT / "tests" / "mcp" / "mcp_servers" / "big.py")]
MB = 1_000_000


def vm_hwm(pid: int) -> float:
    """Peak resident set size of a process, in MiB (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- workers


async def _big_worker(kind: str, size: int, ctxtual: str | None) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    from spillstore.mcp import StdioTransport

    with tempfile.TemporaryDirectory() as tmp:
        pid: int | None = None
        server: Any
        if kind == "direct":
            server = StdioTransport(BIG[0], BIG[1:])
        elif kind == "sdk":
            server = StdioServerParameters(command=BIG[0], args=BIG[1:])
        elif kind == "proxy":
            args = ["-m", "spillstore.mcp", "proxy", "--dir", tmp, "--", *BIG]
            server = StdioTransport(sys.executable, args, cwd=str(ROOT))
        else:
            assert ctxtual is not None
            args = ["wrap", "--store", os.path.join(tmp, "ctxtual.db"), "--", *BIG]
            server = StdioTransport(ctxtual, args)
        async with Client(server, mode="legacy") as client:
            await client.list_tools()
            if isinstance(server, StdioTransport):
                pid = server.pid
            measured = pid if kind in ("proxy", "ctxtual") else os.getpid()
            assert measured is not None
            before = vm_hwm(measured)
            start = time.perf_counter()
            result = await client.call_tool("big", {"size": size})
            seconds = time.perf_counter() - start
            after = vm_hwm(measured)
            returned = sum(len(getattr(block, "text", "").encode()) for block in result.content)
    return {
        "kind": kind,
        "size": size,
        "seconds": seconds,
        "hwm_before_mib": before,
        "hwm_mib": after,
        "returned_bytes": returned,
    }


async def _small_worker(calls: int, rounds: int, baseline: str) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from mcp import Client

    from spillstore.mcp import StdioTransport

    with tempfile.TemporaryDirectory() as tmp:
        proxy_args = ["-m", "spillstore.mcp", "proxy", "--dir", tmp, "--", *BIG]
        transports = {
            "direct": StdioTransport(BIG[0], BIG[1:]),
            "proxy": StdioTransport(sys.executable, proxy_args, cwd=str(ROOT)),
        }
        if baseline:  # the proxy of another source tree (e.g. `git archive main`)
            env = {**os.environ, "PYTHONPATH": baseline}
            # its own store: another tree may not open this one's store format
            base_args = ["-m", "spillstore.mcp", "proxy", "--dir", tmp + "/baseline", "--", *BIG]
            transports["baseline"] = StdioTransport(
                sys.executable, base_args, cwd=baseline, env=env
            )
        async with AsyncExitStack() as stack:
            clients = {
                name: await stack.enter_async_context(Client(transport, mode="legacy"))
                for name, transport in transports.items()
            }
            for client in clients.values():
                await client.list_tools()
                for _ in range(30):
                    await client.call_tool("echo", {"text": "hello"})
            samples: dict[str, list[float]] = {name: [] for name in clients}
            cpu = dict.fromkeys(clients, 0.0)  # CPU seconds of each proxy process
            for _ in range(rounds):
                for name, client in clients.items():
                    times = []
                    before = cpu_seconds(transports[name].pid)
                    for _ in range(calls):
                        start = time.perf_counter()
                        await client.call_tool("echo", {"text": "hello"})
                        times.append(time.perf_counter() - start)
                    cpu[name] += cpu_seconds(transports[name].pid) - before
                    samples[name].append(statistics.median(times))
    return {name: statistics.median(values) for name, values in samples.items()} | {
        "rounds": dict(samples),
        "cpu_per_call": {name: value / (rounds * calls) for name, value in cpu.items()},
    }


async def _cold_worker(rounds: int, baseline: str, sleep: float) -> dict[str, Any]:
    """Time ``initialize`` (spawn to handshake done) with mcp-server-git, direct vs proxy.

    With ``sleep``, the upstream is instead a shell that sleeps that long, then runs
    ``raw.py`` (a standard-library server): an upstream slower to boot than the proxy.
    """
    from mcp import Client, StdioServerParameters

    git = [str(Path(sys.executable).with_name("mcp-server-git")), "--repository", str(ROOT)]
    if sleep:
        raw = [sys.executable, str(ROOT / "tests" / "mcp" / "mcp_servers" / "raw.py")]
        git = ["/bin/sh", "-c", f'sleep {sleep:g}; exec "$0" "$@"', *raw]
    samples: dict[str, list[float]] = {"direct": [], "proxy": [], "late": []}
    with tempfile.TemporaryDirectory() as tmp:
        proxy = [sys.executable, "-m", "spillstore._cli", "mcp", "proxy", "--dir", tmp, "--"]
        # another tree gets its own store: it may not open this one's store format
        base = [*proxy[:-2], os.path.join(tmp, "baseline"), "--"]
        # The control: the library entry point imports the SDK, then starts the upstream.
        late = [
            sys.executable,
            "-c",
            f"import sys; from spillstore.mcp import run_proxy; "
            f"run_proxy(sys.argv[1:], dir={tmp!r})",
        ]
        commands = {"direct": git, "proxy": [*proxy, *git], "late": [*late, *git]}
        where = dict.fromkeys(commands, str(ROOT))
        if baseline:  # the proxy's command line from another source tree
            commands["baseline"] = [*base, *git]
            where["baseline"] = baseline
            samples["baseline"] = []
        cpu: dict[str, list[float]] = {name: [] for name in samples}
        ready: dict[str, list[tuple[float, ...]]] = {name: [] for name in samples}
        for _ in range(rounds):
            for name, command in commands.items():
                env = {**os.environ, "PYTHONPATH": where[name]}
                params = StdioServerParameters(
                    command=command[0], args=command[1:], cwd=where[name], env=env
                )
                before = _children_cpu()
                start = time.perf_counter()
                async with Client(params, mode="legacy"):
                    samples[name].append(time.perf_counter() - start)
                await asyncio.sleep(0.05)  # let the exited process tree be reaped
                cpu[name].append(_children_cpu() - before)
                ready[name].append(_raw_initialize(command, where[name], env))
    return {name: statistics.median(values) for name, values in samples.items()} | {
        "rounds": samples,
        "cpu": {name: statistics.median(values) for name, values in cpu.items()},
        "ready": {
            name: [statistics.median(r[i] for r in values) for i in range(4)]
            for name, values in ready.items()
        },
    }


def _raw_initialize(command: list[str], cwd: str, env: dict[str, str]) -> tuple[float, ...]:
    """Spawn ``command``, send ``initialize`` by hand, and read its answer.

    Returns the wall time to the answer, and the CPU (user + system) of the answering
    process and of its children (the proxy's upstream) at that moment: CPU does not
    depend on what else the machine runs, so these show whose work is on the path.
    """
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(request).encode() + b"\n")
    process.stdin.flush()
    answer = process.stdout.readline()
    wall = time.perf_counter() - start
    own = cpu_seconds(process.pid)
    try:
        with open(f"/proc/{process.pid}/task/{process.pid}/children", encoding="ascii") as f:
            children = [int(pid) for pid in f.read().split()]
    except OSError:
        children = []
    upstream = sum(cpu_seconds(pid) for pid in children)
    # when the upstream was started, after the proxy (clock ticks since boot: 10 ms)
    delay = min((_start_ticks(pid) - _start_ticks(process.pid) for pid in children), default=0)
    process.stdin.close()
    process.wait(timeout=30)
    assert b'"result"' in answer, answer[:300]
    return wall, own, upstream, delay / os.sysconf("SC_CLK_TCK")


def _start_ticks(pid: int) -> int:
    """When a process started, in clock ticks since boot (0 when unknown)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _children_cpu() -> float:
    """User + system CPU of this process's reaped children (and theirs) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _worker(argv: list[str]) -> None:
    if argv[0] == "big":
        out = asyncio.run(_big_worker(argv[1], int(argv[2]), argv[3] or None))
    elif argv[0] == "cold":
        out = asyncio.run(_cold_worker(int(argv[1]), argv[2], float(argv[3])))
    else:
        out = asyncio.run(_small_worker(int(argv[1]), int(argv[2]), argv[3]))
    print(json.dumps(out))


def _spawn(*args: str, timeout: float) -> dict[str, Any] | None:
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------- report


def _big_table(size: int, kinds: list[str], rounds: int, ctxtual: str, limit: float) -> None:
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    for _ in range(rounds):
        for kind in kinds:
            out = _spawn("big", kind, str(size), ctxtual, timeout=limit)
            if out is not None:
                runs[kind].append(out)
    base = statistics.median(r["seconds"] for r in runs["direct"]) if runs["direct"] else 0.0
    print(f"\n{size / MB:g} MB text result ({size:,} bytes), {rounds} round(s), medians:")
    print("| path | time | vs direct (linear) | peak RSS (process measured) | returned to client |")
    print("|---|---|---|---|---|")
    labels = {
        "direct": "direct, linear reader",
        "sdk": "direct, SDK stdio client",
        "proxy": "spillstore proxy",
        "ctxtual": "ctxtual wrap",
    }
    for kind in kinds:
        done = runs[kind]
        if not done:
            print(f"| {labels[kind]} | did not finish in {limit:g} s | | | |")
            continue
        seconds = statistics.median(r["seconds"] for r in done)
        hwm = statistics.median(r["hwm_mib"] for r in done)
        before = statistics.median(r["hwm_before_mib"] for r in done)
        who = "client" if kind in ("direct", "sdk") else kind
        ratio = f"{seconds / base:.2f}x" if base else "-"
        returned = statistics.median(r["returned_bytes"] for r in done)
        print(
            f"| {labels[kind]} | {seconds:.2f} s | {ratio} | {hwm:.0f} MiB ({who}; "
            f"{before:.0f} MiB before the call; {hwm * 2**20 / size:.2f}x the result) "
            f"| {returned:,.0f} B |"
        )


def _cold_table(rounds: int, baseline: str, sleep: float) -> None:
    cold = _spawn("cold", str(rounds), baseline, str(sleep), timeout=900)
    if cold is None:
        print("cold start: did not finish")
        return
    direct = cold["direct"]
    print(
        f"\ncold start (SDK stdio client: spawn to initialize done, "
        f"{f'sh -c sleep {sleep:g}; raw.py' if sleep else 'mcp-server-git'}), "
        f"{rounds} interleaved rounds, medians:"
    )
    cpu = cold["cpu"]
    print("| path | initialize | vs direct | CPU of the process tree, start to exit |")
    print("|---|---|---|---|")
    print(f"| direct | {direct:.3f} s | | {cpu['direct']:.3f} s |")
    rows = {
        "proxy": "spillstore proxy (command line: upstream first)",
        "late": "control: run_proxy() (SDK imported first)",
    }
    if baseline:
        rows["baseline"] = f"baseline proxy ({baseline})"
    for name, label in rows.items():
        value = cold[name]
        print(
            f"| {label} | {value:.3f} s | {value / direct:.2f}x | {cpu[name]:.3f} s "
            f"({cpu[name] / cpu['direct']:.2f}x) |"
        )
    print(
        "\nthe same, initialize sent by hand (medians): wall to the answer, and CPU at "
        "that moment of the answering process and of its upstream; when the upstream "
        "started after the proxy (10 ms ticks)"
    )
    print("| path | wall | CPU of the answering process | CPU of its upstream | upstream started |")
    print("|---|---|---|---|---|")
    for name, (wall, own, upstream, delay) in cold["ready"].items():
        started = f"+{delay * 1e3:.0f} ms" if name != "direct" else "-"
        print(f"| {name} | {wall:.3f} s | {own:.2f} s | {upstream:.2f} s | {started} |")
    for name in ("proxy", "baseline") if baseline else ("proxy",):
        pairs = zip(cold["rounds"]["direct"], cold["rounds"][name], strict=True)
        ratios = [p / d for d, p in pairs]
        print(
            f"{name} per-round ratio: min {min(ratios):.2f}x, median "
            f"{statistics.median(ratios):.2f}x, max {max(ratios):.2f}x; per round: "
            + ", ".join(f"{r:.2f}" for r in ratios)
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs="+")
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-calls", type=int, default=100)
    parser.add_argument("--skip-small", action="store_true", help="only the big results")
    parser.add_argument("--small-rounds", type=int, default=15)
    parser.add_argument("--ctxtual", default="")
    parser.add_argument("--ctxtual-max-mb", type=float, default=10)
    parser.add_argument(
        "--retention",
        default=None,
        help='SPILLSTORE_RETENTION_BYTES for the proxy (default 10MiB; "off" stores it all)',
    )
    parser.add_argument(
        "--sdk-big", action="store_true", help="also time the SDK's stdio client on the big result"
    )
    parser.add_argument(
        "--cold", type=int, default=0, help="rounds of the cold start (initialize) comparison"
    )
    parser.add_argument("--only-cold", action="store_true", help="only the cold start")
    parser.add_argument(
        "--cold-upstream-sleep",
        type=float,
        default=0,
        metavar="SECONDS",
        help="cold start with an upstream that sleeps this long before it runs raw.py "
        "(slower to boot than the proxy) instead of mcp-server-git",
    )
    parser.add_argument(
        "--baseline",
        default="",
        help="small calls and cold start: also time the proxy of this source tree "
        "(e.g. `git archive main | tar -x -C DIR`)",
    )
    parser.add_argument("--only-small", action="store_true", help="only the small calls")
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker)
        return
    if args.retention is not None:
        os.environ["SPILLSTORE_RETENTION_BYTES"] = args.retention
    print(f"machine: {machine()}")
    if args.cold:
        _cold_table(args.cold, args.baseline, args.cold_upstream_sleep)
        if args.only_cold:
            return
    print(f"date: {time.strftime('%Y-%m-%d')}")
    retention = os.environ.get("SPILLSTORE_RETENTION_BYTES", "default (10MiB)")
    print(f"proxy retention cap (SPILLSTORE_RETENTION_BYTES): {retention}")
    size = int(args.size_mb * MB)
    kinds = ["direct", "sdk", "proxy"] if args.sdk_big else ["direct", "proxy"]
    if args.ctxtual and size <= args.ctxtual_max_mb * MB:
        kinds.append("ctxtual")
    if not args.only_small:
        _big_tables(args, size, kinds)
    if args.skip_small:
        return
    _small_table(args)


def _big_tables(args: argparse.Namespace, size: int, kinds: list[str]) -> None:
    _big_table(size, kinds, args.rounds, args.ctxtual, limit=900)
    small_kinds = ["direct", "sdk", "proxy"] + (["ctxtual"] if args.ctxtual else [])
    _big_table(5 * MB, small_kinds, args.rounds, args.ctxtual, limit=300)
    if args.ctxtual and args.ctxtual_max_mb >= 10 and size != 10 * MB:
        _big_table(10 * MB, ["direct", "sdk", "proxy", "ctxtual"], 1, args.ctxtual, limit=300)


def _small_table(args: argparse.Namespace) -> None:
    small = _spawn(
        "small", str(args.small_calls), str(args.small_rounds), args.baseline, timeout=900
    )
    if small is not None:
        direct = small["direct"]
        print(
            f"\nsmall result (echo), {args.small_rounds} interleaved rounds of "
            f"{args.small_calls} calls, median of the per-round medians:"
        )
        print("| path | per call | overhead |")
        print("|---|---|---|")
        print(f"| direct, linear reader | {direct * 1e3:.3f} ms | |")
        for name in ("proxy", "baseline") if args.baseline else ("proxy",):
            label = "spillstore proxy" if name == "proxy" else f"baseline proxy ({args.baseline})"
            value = small[name]
            print(
                f"| {label} | {value * 1e3:.3f} ms | +{(value - direct) * 1e3:.3f} ms "
                f"({value / direct:.2f}x) |"
            )
        cpu = small["cpu_per_call"]
        print(
            "CPU per call of each process (user + system): "
            + ", ".join(f"{name} {seconds * 1e6:.0f} us" for name, seconds in cpu.items())
        )
        for name in ("proxy", "baseline") if args.baseline else ("proxy",):
            pairs = list(zip(small["rounds"]["direct"], small["rounds"][name], strict=True))
            deltas = [(p - d) * 1e3 for d, p in pairs]
            ratios = [p / d for d, p in pairs]
            print(
                f"{name} per round: overhead min +{min(deltas):.3f} ms, median "
                f"+{statistics.median(deltas):.3f} ms, max +{max(deltas):.3f} ms; ratio min "
                f"{min(ratios):.2f}x, median {statistics.median(ratios):.2f}x, "
                f"max {max(ratios):.2f}x; per round: " + ", ".join(f"{r:.2f}" for r in ratios)
            )


if __name__ == "__main__":
    main()
