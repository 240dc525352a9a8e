"""A hand-written MCP server (no SDK): JSON-RPC over stdio with the standard library only.

It starts in a few tens of milliseconds, so the crash and hang tests can restart it
cheaply, and it can send what an SDK server cannot: content blocks of unknown types.
Run it as ``python tests/mcp/mcp_servers/raw.py``. It speaks the 2025-11-25 handshake.

Tools: ``echo(text)``, ``big(size)`` (``size`` bytes of ``x`` in 100-byte lines),
``odd()`` (a text block, a block of the unknown type ``hologram`` and one without a
type), ``crash(code=3)``, ``freeze(seconds=60)`` (stops answering anything), ``garbage()``
(writes a line that is not JSON, then answers).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

TOOLS = [
    {"name": name, "inputSchema": {"type": "object"}}
    for name in ("echo", "big", "odd", "crash", "freeze", "garbage")
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    if name == "echo":
        return {"content": [text(args.get("text", ""))]}
    if name == "big":
        size = args.get("size", 1000)
        body = ("x" * 99 + "\n") * (size // 100) + "x" * (size % 100)
        return {"content": [text(body)]}
    if name == "odd":
        return {
            "content": [
                text("before"),
                {"type": "hologram", "data": "zzz"},
                {"data": "no type"},
                text("after"),
            ]
        }
    if name == "crash":
        sys.stderr.write("raw.py: crashing on request\n")
        sys.stderr.flush()
        os._exit(args.get("code", 3))
    if name == "freeze":
        time.sleep(args.get("seconds", 60))
        return {"content": [text("thawed")]}
    if name == "garbage":
        sys.stdout.write("this is not JSON\n")
        sys.stdout.flush()
        return {"content": [text("after garbage")]}
    return {"content": [text(f"unknown tool {name}")], "isError": True}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications and responses
        method, request_id = message["method"], message["id"]
        params = message.get("params") or {}
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-test-server", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            result = call(params["name"], params.get("arguments") or {})
        elif method == "ping":
            result = {}
        else:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": f"no method {method}"},
                }
            )
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
