"""Benchmark ``spillstore install`` on client configs: what an in-place edit costs
against the naive rewrite (``json.loads`` + ``json.dumps``, which loses comments and
formatting), on a small config and on a large Claude Code ``~/.claude.json``.

Run:  .venv/bin/python benchmarks/bench_clients.py [--rounds N]

Measures, side by side in one run (interleaved rounds, medians):
  (1) the naive rewrite: parse the whole file and dump it again with one entry changed;
  (2) spillstore's pure step: ``ops.install`` over every server (a fresh format each
      call, so no parse is reused between calls);
  (3) ``ops.uninstall`` of the result with the backups in memory.
Files: a 1 KB ``.mcp.json`` with 3 servers, and a 7 MB ``~/.claude.json`` (10 user
servers, 400 projects with 60 history entries each, non-ASCII text), both made here.

Prints the figures; they are copied by hand into the "## MCP clients (issue 15)"
section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._timing import fmt, machine, side_by_side  # noqa: E402
from spillstore._clients import ops  # noqa: E402
from spillstore._clients.formats import JsonFormat  # noqa: E402
from spillstore._clients.registry import CLIENTS  # noqa: E402
from spillstore._clients.wrap import ProxyOptions  # noqa: E402

LAUNCHER = ["/usr/local/bin/spillstore"]


def small() -> str:
    servers = {
        name: {"command": "npx", "args": ["-y", f"@scope/{name}"], "env": {"TOKEN": "x"}}
        for name in ("git", "fs", "web")
    }
    return json.dumps({"mcpServers": servers}, indent=2) + "\n"


def large() -> str:
    history = [{"display": "fix the flaky test é 🌙 " * 8, "pastedContents": {}}] * 60
    projects = {
        f"/home/me/src/project-{i}": {"allowedTools": [], "history": history, "mcpServers": {}}
        for i in range(400)
    }
    servers = {
        f"server-{i}": {"command": "npx", "args": ["-y", f"srv-{i}"], "env": {"K": "v"}}
        for i in range(10)
    }
    doc = {"numStartups": 300, "mcpServers": servers, "projects": projects}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def naive(text: str) -> str:
    doc: dict[str, Any] = json.loads(text)
    for name, entry in doc["mcpServers"].items():
        doc["mcpServers"][name] = {**entry, "command": LAUNCHER[0]}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def config(text: str) -> ops.Config:
    return ops.Config(JsonFormat(("mcpServers",)), CLIENTS["claude-code"].flavor, text, "cfg")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    print(f"machine: {machine()}")
    for label, text in (("small .mcp.json", small()), ("large ~/.claude.json", large())):
        wrapped, _, backups = ops.install(
            config(text), None, launcher=LAUNCHER, options=ProxyOptions()
        )
        kept = {backup.key: backup for backup in backups}
        restored, _ = ops.uninstall(config(wrapped), None, backup=kept.get)
        assert restored == text
        calls = 200 if len(text) < 10_000 else 1
        times = side_by_side(
            {
                "naive json rewrite": lambda text=text: naive(text),
                "install": lambda text=text: ops.install(
                    config(text), None, launcher=LAUNCHER, options=ProxyOptions()
                ),
                "uninstall": lambda wrapped=wrapped, kept=kept: ops.uninstall(
                    config(wrapped), None, backup=kept.get
                ),
            },
            rounds=rounds,
            calls=calls,
        )
        base = times["naive json rewrite"]
        size = len(text.encode())
        print(f"{label} ({size:,} bytes):")
        for name, seconds in times.items():
            print(f"  {name:20s} {fmt(seconds):>10s}  {seconds / base:5.2f}x naive")


if __name__ == "__main__":
    main()
