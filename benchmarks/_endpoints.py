"""Endpoints the S3 benchmarks point a store at (standard library only, so a child
process that imports another tree's spillstore can use them too)."""

from __future__ import annotations

import socket
import threading

__all__ = ["black_hole"]


def black_hole() -> str:
    """An endpoint that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(100)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"
