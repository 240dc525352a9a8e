"""Running one case through one entry point, on one store, into a checked :class:`Case`.

The stores are real: :class:`~spillstore.MemoryStore`, a :class:`~spillstore.LocalStore`
in a temporary directory, and a memory store whose writes fail once a random number of
bytes went in (a disk filling up, a backend dying mid-stream).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Sequence

from spillstore import (
    LocalStore,
    MemoryStore,
    Settings,
    StoreError,
    ToolResult,
    TruncationService,
)
from spillstore._stores.writer import Sink
from tests.oracle.facts import Case
from tests.oracle.model import Truth
from tests.oracle.reader import Pager
from tests.oracle.strategies import StoreChoice


class _FailingSink(Sink):
    def __init__(self, inner: Sink, store: FailingStore) -> None:
        self._inner = inner
        self._store = store
        self._written = 0

    def write(self, data: bytes | memoryview) -> None:
        self._written += len(data)
        if self._written > self._store.fail_after:
            self._store.failed = True
            raise StoreError(28, "No space left on device")
        self._inner.write(data)

    def publish(self, meta, index):  # type: ignore[no-untyped-def]
        return self._inner.publish(meta, index)

    def discard(self) -> None:
        self._inner.discard()


class FailingStore(MemoryStore):
    """A memory store whose writes fail once more than ``fail_after`` bytes went in."""

    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.fail_after = fail_after
        self.failed = False

    def _create(self, session: str) -> Sink:
        return _FailingSink(super()._create(session), self)


_LOCAL_ROOT = tempfile.mkdtemp(prefix="spillstore-oracle-")
_LOCAL: list[LocalStore] = []


def make_store(choice: StoreChoice) -> MemoryStore | LocalStore:
    """A fresh memory or failing store; the one local store of this process."""
    if choice.kind == "memory":
        return MemoryStore()
    if choice.kind == "failing":
        return FailingStore(choice.fail_after)
    if not _LOCAL:
        _LOCAL.append(LocalStore(os.path.join(_LOCAL_ROOT, "spills")))
    return _LOCAL[0]


def output_file(data: bytes) -> str:
    """A tool's own log file holding ``data`` (for ``full_output_path``)."""
    fd, path = tempfile.mkstemp(dir=_LOCAL_ROOT, suffix=".log")
    with os.fdopen(fd, "wb") as file:
        file.write(data)
    return path


def finish(
    service: TruncationService,
    result: ToolResult,
    truth: Truth,
    *,
    suffix: str | None,
    page_bytes: int,
    needle: str | None,
    context: int,
    byte_page: int | None,
    blobs: tuple[tuple[str, bytes], ...] = (),
) -> Case:
    """The case to check for ``result``, with a pager over the service's store."""
    store = service.store
    failed = isinstance(store, FailingStore) and store.failed
    pager = None
    if result.spill is not None and result.spill.spill_id is not None:
        tools = service.spill_tools(max_page_bytes=page_bytes)
        stored = tuple(tuple(r) for r in result.spill.stored_ranges)
        pager = Pager(tools, result.spill.spill_id, truth, stored)  # type: ignore[arg-type]
    return Case(
        truth=truth,
        result=result,
        max_bytes=service.settings.max_bytes,
        suffix=suffix,
        pager=pager,
        store_failed=failed,
        needle=needle,
        context=context,
        byte_page=byte_page,
        blobs=blobs,
    )


def truncate(
    service: TruncationService, result: ToolResult | str, *, use_async: bool
) -> ToolResult:
    """``truncate_for_model`` or its async twin."""
    if use_async:
        return asyncio.run(service.atruncate_for_model(result, tool_name="bash", tool_call_id="c1"))
    return service.truncate_for_model(result, tool_name="bash", tool_call_id="c1")


def stream(
    service: TruncationService,
    chunks: Sequence[bytes | str],
    *,
    suffix: str | None,
    is_error: bool,
    use_async: bool,
) -> ToolResult:
    """Feed ``chunks`` to an accumulator and finish it (sync or async)."""
    acc = service.accumulator(tool_name="bash", tool_call_id="c1")
    if not use_async:
        for chunk in chunks:
            acc.write(chunk)
        return acc.error(suffix or "") if is_error else acc.ok(suffix)

    async def run() -> ToolResult:
        for chunk in chunks:
            await acc.awrite(chunk)
        return await (acc.aerror(suffix or "") if is_error else acc.aok(suffix))

    return asyncio.run(run())


def service_for(choice: StoreChoice, settings: Settings) -> TruncationService:
    """A service over the chosen store."""
    return TruncationService(make_store(choice), settings)
