"""The public sync and async API has the types a host's type checker should see.

``mypy --strict`` reads this file (the last test runs it): each ``assert_type`` pins a
type, and each ``type: ignore[...]`` pins a call the checker must refuse (under
``--strict`` an ignore that is no longer needed is itself an error; those calls sit under
``if TYPE_CHECKING:`` and never run). pytest runs the other calls on a memory store, so
they are working examples too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, assert_type

import anyio

from spillstore import (
    GcReport,
    MemoryStore,
    OutputAccumulator,
    Settings,
    SpillMeta,
    SpillTools,
    ToolResult,
    TruncationService,
    wrap,
)

ROOT = Path(__file__).resolve().parents[2]
BIG = "line of output\n" * 10_000


def service_on_memory() -> TruncationService:
    """A service on a fresh memory store with the default settings."""
    return TruncationService(MemoryStore(), Settings())


def test_sync_api_types() -> None:
    """The sync service, store, tools, accumulator and wrapper return what they declare."""
    service = service_on_memory()
    result = service.truncate_for_model(BIG, tool_name="shell", tool_call_id="c1")
    assert_type(result, ToolResult)
    if TYPE_CHECKING:  # refused by the checker, so never run
        service.truncate_for_model(BIG, tool_name=None, tool_call_id="c1")  # type: ignore[arg-type]

    meta = service.store.put(BIG, session="s", tool_name="shell", tool_call_id="c2")
    assert_type(meta, SpillMeta)
    assert_type(service.store.stat(meta.spill_id), SpillMeta)
    assert_type(service.store.read_bytes(meta.spill_id, 0, 10), bytes)
    assert_type(service.store.gc(dry_run=True), GcReport)

    tools = service.spill_tools()
    assert_type(tools, SpillTools)
    assert_type(tools.read(meta.spill_id, offset=2, limit=5), ToolResult)
    assert_type(tools.grep("output", meta.spill_id), ToolResult)
    assert_type(tools.list(), ToolResult)
    if TYPE_CHECKING:
        tools.read(meta.spill_id, offset="2")  # type: ignore[arg-type]

    accumulator = service.accumulator(tool_name="shell", tool_call_id="c3")
    assert_type(accumulator, OutputAccumulator)
    accumulator.write(BIG)
    assert_type(accumulator.ok(), ToolResult)

    @wrap(service=service)
    def shout(text: str, times: int = 1) -> str:
        return text.upper() * times

    assert_type(shout("a", times=2), str)
    if TYPE_CHECKING:
        shout(1)  # type: ignore[arg-type]


def test_async_api_types() -> None:
    """Each async twin returns the same type as its sync twin, once awaited."""

    async def main() -> None:
        service = service_on_memory()
        result = await service.atruncate_for_model(BIG, tool_name="shell", tool_call_id="c1")
        assert_type(result, ToolResult)

        meta = await service.store.aput(BIG, session="s", tool_name="shell", tool_call_id="c2")
        assert_type(meta, SpillMeta)
        assert_type(await service.store.astat(meta.spill_id), SpillMeta)
        assert_type(await service.store.aread_bytes(meta.spill_id, 0, 10), bytes)
        assert_type(await service.store.agc(dry_run=True), GcReport)

        tools = service.spill_tools()
        assert_type(await tools.aread(meta.spill_id, offset=2, limit=5), ToolResult)
        assert_type(await tools.agrep("output", meta.spill_id), ToolResult)
        assert_type(await tools.alist(), ToolResult)
        assert_type(await tools.aquery(meta.spill_id, "."), ToolResult)
        assert_type(tools.query(meta.spill_id, ".", offset=0, limit=5), ToolResult)
        tools.close()

        accumulator = service.accumulator(tool_name="shell", tool_call_id="c3")
        await accumulator.awrite(BIG)
        assert_type(await accumulator.aok(), ToolResult)

        @wrap(service=service)
        async def shout(text: str, times: int = 1) -> str:
            return text.upper() * times

        assert_type(await shout("a", times=2), str)

    anyio.run(main)


def test_this_file_passes_mypy_strict() -> None:
    """mypy --strict accepts this file: the types above are the ones the checker sees."""
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(Path(__file__).relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
