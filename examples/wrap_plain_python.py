"""Plain Python tools behind spillstore.wrap, driven by the reference loop with a turn cap.

Shows `spillstore.wrap` on an ordinary function (the framework-free way to cap a tool),
`call_context` naming the tool call in the pointer, and the reference loop runner with a
`TurnGuard`: a scripted "model" calls the tool, receives the pointer, reads the spill
with `read_spill`, and the run stops within `max_turns`.

Run:  python examples/wrap_plain_python.py        (uses a temporary store; no network)
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence

from spillstore import LocalStore, SpillTools, TruncationService, call_context, wrap
from spillstore.loop import Message, ModelTurn, ToolCall, run_loop

store = LocalStore(tempfile.mkdtemp(prefix="spillstore-wrap-"))
service = TruncationService(store)


@wrap(service=service)
def build_log(target: str) -> str:
    """Build ``target`` and return its ~2 MB log, with one error in the middle."""
    lines = [f"[{i:05d}] compiling {target}/module_{i}.c ... ok" for i in range(40_000)]
    lines[27_182] = f"[27182] compiling {target}/module_27182.c ... error: undefined symbol"
    return "\n".join(lines) + "\n"


def model(messages: Sequence[Message]) -> ModelTurn:
    """A scripted model: build, then grep the spill for the error, then answer."""
    last = messages[-1]
    if last["role"] == "user":
        return ModelTurn("Building.", [ToolCall("call_build", "build_log", {"target": "app"})])
    if last["name"] == "build_log":
        spill = re.search(r'spill="([^"]+)"', last["content"])
        assert spill is not None
        args = {"pattern": "error", "spill": spill.group(1)}
        return ModelTurn("Searching the log.", [ToolCall("call_grep", "grep_spill", args)])
    return ModelTurn(f"The build failed:\n{last['content']}")


def main() -> None:
    with call_context("call_direct"):
        pointer = build_log("app")
    print(f"A direct call returns a {len(pointer.encode()):,}-byte pointer instead of the log:")
    print(pointer.split("\n--- head")[0])
    print()
    result = run_loop(
        model,
        {"build_log": build_log},
        "Build the app and tell me what failed.",
        max_turns=5,
        service=service,
        spill_tools=SpillTools(store),
    )
    print(f"The loop stopped: reason={result.reason!r} after {result.turns} model turns.")
    print(result.text)


if __name__ == "__main__":
    main()
