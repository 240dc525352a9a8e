"""``spillstore demo``: the whole idea in one command, on a temporary store."""

from __future__ import annotations

import sys

import typer

from spillstore._cli.options import command_app, refuse_json
from spillstore._cli.output import tool_text
from spillstore._cli.run import stream

__all__ = ["app"]

app = command_app()

_DEMO_LINES = 60_000
_DEMO_NEEDLE_LINE = 37_411
_DEMO_GENERATOR = f"""
import sys
out = sys.stdout
for i in range(1, {_DEMO_LINES} + 1):
    if i == {_DEMO_NEEDLE_LINE}:
        out.write("tests/test_checkout.py::test_refund_after_partial_capture FAILED\\n")
        out.write("E   AssertionError: refund of 19.99 EUR sent twice (idempotency key reused)\\n")
    else:
        percent = i * 100 // {_DEMO_LINES}
        test = f"tests/test_suite_{{i % 97:02d}}.py::test_case_{{i:05d}}"
        out.write(f"{{test}} PASSED [{{percent:3d}}%]\\n")
out.write("==== 1 failed, {_DEMO_LINES - 1} passed in 61.02s ====\\n")
sys.exit(1)
"""


@app.command()
def demo(ctx: typer.Context) -> None:
    """Walk through the whole idea on a temporary store (removed afterwards)."""
    refuse_json(ctx)
    import re  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from spillstore._settings import Settings  # noqa: PLC0415
    from spillstore._stores.local import LocalStore  # noqa: PLC0415
    from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415

    console = Console(highlight=False, soft_wrap=True)

    def say(text: str) -> None:
        console.out(text, highlight=False)

    def call(text: str) -> None:
        console.print(f"> {text}", style="bold cyan", markup=False, highlight=False)

    root = tempfile.mkdtemp(prefix="spillstore-demo-")
    try:
        store = LocalStore(root)
        settings = Settings(dir=root, session="demo", head_bytes=600, tail_bytes=300)
        console.rule("spillstore demo")
        say(
            "A tool runs a test suite and prints 60,000 lines; one test failed in the\n"
            "middle. The model may take 50,000 bytes per tool result, so spillstore saves\n"
            "the whole output and hands the model a pointer instead.\n"
            f"(Temporary store: {root}, removed at the end.)\n"
        )
        call("spillstore run -- python -c '<print 60,000 lines of test log, exit 1>'")
        outcome = stream(
            [sys.executable, "-c", _DEMO_GENERATOR],
            settings,
            store,
            tool_name="pytest",
            tool_call_id="call_1",
            progress=False,
        )
        info = outcome.result.spill
        assert info is not None and info.spill_id is not None
        spill_id = info.spill_id
        pointer = tool_text(outcome.result)
        console.rule(
            f"1. what the model sees: {len(pointer.encode()):,} bytes instead of "
            f"{info.total_bytes:,}"
        )
        say(pointer + "\n")
        say(
            "(This demo shows a 600-byte head and a 300-byte tail; the defaults are 4,096 "
            "and 1,024.)\n"
        )
        tools = SpillTools(store, session="demo")
        console.rule("2. the model searches the saved output with Grep")
        call(f'grep_spill(pattern="FAILED|Error", spill="{spill_id}")')
        found = tool_text(tools.grep("FAILED|Error", spill_id))
        say(found + "\n")
        hit = re.search(r"^(\d+):", found, re.MULTILINE)
        line = int(hit.group(1)) if hit else _DEMO_NEEDLE_LINE
        console.rule("3. ... and reads around the match with Read")
        call(f'read_spill(spill="{spill_id}", offset={line - 2}, limit=6)')
        say(tool_text(tools.read(spill_id, offset=line - 2, limit=6)) + "\n")
        console.rule("the same from a shell")
        say(
            "spillstore run -- pytest -x            # print the pointer, save the output, "
            "keep the exit status\n"
            "spillstore grep 'FAILED|Error' SPILL   # search one spill (or the whole "
            "session without SPILL)\n"
            f"spillstore read SPILL --offset {line - 2} --limit 6\n"
            "spillstore read 'read_spill(spill=\"SPILL\", offset=70, limit=200)'   "
            "# a pointer's hint works as is\n"
            "spillstore ls                          # the spills of the session\n"
            "spillstore show SPILL                  # sizes, stored ranges, sha256, path\n"
            "spillstore gc --max-age 7d             # or: spillstore clean --session NAME\n"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
