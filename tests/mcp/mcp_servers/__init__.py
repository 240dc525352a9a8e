"""Upstream MCP servers for the tests, and :func:`served`: one of them over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIG = [sys.executable, str(Path(__file__).with_name("big.py"))]
ROOT = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def served(*flags: str) -> Iterator[int]:
    """big.py serving HTTP (``flags``: ``--sse``, ``--require-header``) on a free loopback
    port, until the block ends."""
    port = free_port()
    process = subprocess.Popen([*BIG, "--http", str(port), *flags], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)
