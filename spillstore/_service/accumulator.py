"""OutputAccumulator: stream a tool's output into the service with bounded memory.

A subprocess pipe or a streaming tool hands over chunks as they come. The accumulator
keeps up to the inline budget in memory; the moment the output outgrows it, it opens a
store writer, hands it what it kept, and from then on streams every chunk straight
through, keeping only the first bytes (for the head preview) and a small ring of the
last bytes (for the tail). Sizes, newlines and the hash are counted as it goes (the
store writer hashes; the accumulator counts newlines, which costs a ``bytes.count``).

When the stream ends, :meth:`ok` or :meth:`error` finishes it with a suffix that no cap
can drop, and returns the same kind of result :meth:`TruncationService.truncate_for_model`
returns.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from spillstore._content import TextPart, ToolResult
from spillstore._core.utf8 import encode
from spillstore._errors import UsageError
from spillstore._service.service import (
    _SLACK,
    _Flow,
    _Measure,
    _Prepared,
    _Request,
    _step_from_ends,
)

if TYPE_CHECKING:
    from spillstore._service.service import TruncationService
    from spillstore._stores.meta import SpillMeta
    from spillstore._stores.writer import AsyncSpillWriter, SpillWriter

__all__ = ["OutputAccumulator"]


class OutputAccumulator:
    """Takes ``str`` or ``bytes`` chunks; ends in the model-facing result.

    Get one from :meth:`TruncationService.accumulator`. Use either the sync methods
    (:meth:`write`, :meth:`ok`, :meth:`error`) or the async ones (:meth:`awrite`,
    :meth:`aok`, :meth:`aerror`) on one accumulator, not both.
    """

    def __init__(self, service: TruncationService, *, tool_name: str, tool_call_id: str):
        self._service = service
        self._tool_name = tool_name
        self._tool_call_id = tool_call_id
        self._budget = service.settings.max_bytes
        self._keep_head = service.settings.head_bytes + _SLACK
        self._keep_tail = service.settings.tail_bytes + _SLACK
        self._buffer = bytearray()
        self._head = b""
        self._tail = bytearray()
        self._total = 0
        self._newlines = 0
        self._writer: SpillWriter | None = None
        self._awriter: AsyncSpillWriter | None = None
        self._write_error: Exception | None = None
        self._done = False

    @property
    def total_bytes(self) -> int:
        """Bytes taken so far."""
        return self._total

    @property
    def spilling(self) -> bool:
        """Whether the output outgrew the budget and is streaming to the store."""
        return (
            self._writer is not None or self._awriter is not None or self._write_error is not None
        )

    # --- shared decisions ----------------------------------------------------------

    def _take(self, chunk: str | bytes) -> bytes | None:
        """Account for a chunk; return the bytes to send to the store, if any."""
        if self._done:
            raise UsageError("this accumulator is finished; start a new one")
        data = encode(chunk) if isinstance(chunk, str) else bytes(chunk)
        self._total += len(data)
        self._newlines += data.count(b"\n")
        if not self.spilling:
            self._buffer += data
            if len(self._buffer) <= self._budget:
                return None
            self._head = bytes(self._buffer[: self._keep_head])
            data, self._buffer = bytes(self._buffer), bytearray()
        self._tail += data[-self._keep_tail :]
        del self._tail[: -self._keep_tail]
        return data

    def _finish_inline(self, suffix: str | None, is_error: bool) -> ToolResult:
        text = self._buffer.decode("utf-8", "replace")
        return ToolResult(content=(TextPart(text),), suffix=suffix, is_error=is_error)

    def _prepared(self, suffix: str | None, is_error: bool) -> _Prepared:
        return _step_from_ends(
            self._service,
            result=ToolResult(content=(), is_error=is_error),
            head_raw=self._head,
            tail_raw=bytes(self._tail),
            counted=_Measure(
                "unknown (the output could not be saved)", self._total, self._newlines
            ),
            suffix=self._service._bounded_suffix(suffix or ""),
            others=[],
            notes=[],
            tool_name=self._tool_name,
            tool_call_id=self._tool_call_id,
        )

    # --- sync shell ----------------------------------------------------------------

    def write(self, chunk: str | bytes) -> None:
        """Take one chunk (a UTF-8 sequence may be split across chunks)."""
        data = self._take(chunk)
        if data is None or self._write_error is not None:
            return
        try:
            if self._writer is None:
                self._writer = self._service.store.writer(
                    **self._service._spill_args(self._tool_name, self._tool_call_id)
                )
            self._writer.write(data)
        except Exception as exc:  # spilling must never fail the tool call
            self._fail(exc)

    def ok(self, suffix: str | None = None) -> ToolResult:
        """Finish a successful run; ``suffix`` (e.g. ``"exit code 0"``) always shows."""
        return self._finish(suffix, is_error=False)

    def error(self, message: str) -> ToolResult:
        """Finish a failed run; ``message`` always shows and the result is an error."""
        return self._finish(message, is_error=True)

    def _finish(self, suffix: str | None, *, is_error: bool) -> ToolResult:
        return self._service._drive(self._finish_flow(suffix, is_error))

    def _finish_flow(self, suffix: str | None, is_error: bool) -> _Flow:
        """Every decision of :meth:`ok`/:meth:`error` and their async twins."""
        self._done = True
        if not self.spilling:
            inline = self._finish_inline(suffix, is_error)
            return (yield from self._service._flow(inline, self._tool_name, self._tool_call_id))
        saved: SpillMeta | Exception | None = self._write_error
        if saved is None:
            try:
                saved = yield _Commit(self, suffix)
            except Exception as exc:
                saved = yield _Fail(self, exc)
        assert saved is not None
        return self._service._render(self._prepared(suffix, is_error), saved)

    def _fail(self, exc: Exception) -> Exception:
        """Remember why spilling failed; the sync writer (if any) is dropped."""
        self._write_error = exc
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):  # the original error is the one to report
                writer.abort()
        return exc

    async def _afail(self, exc: Exception) -> Exception:
        """Async twin of :meth:`_fail`."""
        self._write_error = exc
        writer, self._awriter = self._awriter, None
        if writer is not None:
            with contextlib.suppress(Exception):
                await writer.abort()
        return exc

    # --- async shell ---------------------------------------------------------------

    async def awrite(self, chunk: str | bytes) -> None:
        """Async twin of :meth:`write`."""
        data = self._take(chunk)
        if data is None or self._write_error is not None:
            return
        try:
            if self._awriter is None:
                self._awriter = self._service.store.awriter(
                    **self._service._spill_args(self._tool_name, self._tool_call_id)
                )
            await self._awriter.write(data)
        except Exception as exc:
            await self._afail(exc)

    async def aok(self, suffix: str | None = None) -> ToolResult:
        """Async twin of :meth:`ok`."""
        return await self._afinish(suffix, is_error=False)

    async def aerror(self, message: str) -> ToolResult:
        """Async twin of :meth:`error`."""
        return await self._afinish(message, is_error=True)

    async def _afinish(self, suffix: str | None, *, is_error: bool) -> ToolResult:
        return await self._service._adrive(self._finish_flow(suffix, is_error))


class _Commit(_Request):
    """Commit the accumulator's spill writer (the sync or the async one)."""

    def __init__(self, accumulator: OutputAccumulator, suffix: str | None) -> None:
        self.accumulator, self.suffix = accumulator, suffix

    def run(self, service: TruncationService) -> SpillMeta:
        assert self.accumulator._writer is not None
        return self.accumulator._writer.commit(suffix=self.suffix)

    async def arun(self, service: TruncationService) -> SpillMeta:
        assert self.accumulator._awriter is not None
        return await self.accumulator._awriter.commit(suffix=self.suffix)


class _Fail(_Request):
    """Record why spilling failed and drop the writer; answers with the error."""

    def __init__(self, accumulator: OutputAccumulator, error: Exception) -> None:
        self.accumulator, self.error = accumulator, error

    def run(self, service: TruncationService) -> Exception:
        return self.accumulator._fail(self.error)

    async def arun(self, service: TruncationService) -> Exception:
        return await self.accumulator._afail(self.error)
