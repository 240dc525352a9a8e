"""OutputAccumulator: stream a tool's output into the service with bounded memory.

A subprocess pipe or a streaming tool hands over chunks as they come. The accumulator
keeps up to the inline budget in memory; the moment the output outgrows it, it opens a
store writer, hands it what it kept, and from then on streams every chunk straight
through, keeping only the first bytes (for the head preview) and a small ring of the
last bytes (for the tail). Each byte is measured once: while the store writer works, it
hashes, counts and checks every byte; if the store fails, the writer hands its measure
over (:attr:`~spillstore._stores.writer.SpillWriter.taken`) and the accumulator continues
it with the bytes the writer never took, so a "not saved" preview still states the
output's real size, lines, sha256 and UTF-8 validity.

When the stream ends, :meth:`~OutputAccumulator.ok` or :meth:`~OutputAccumulator.error`
finishes it with a suffix that no cap can drop, and returns the same kind of result
``TruncationService.truncate_for_model`` returns: both finish through the service's
flow (:mod:`spillstore._service.decide`), run by the flow's drivers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from spillstore._content import TextPart, ToolResult
from spillstore._core.json_prefix import starts_like_json
from spillstore._core.shape import LineShaper
from spillstore._core.utf8 import encode, strict, utf8_size
from spillstore._errors import ConfigError, UsageError
from spillstore._service.decide import (
    APPEND_RESERVE_BYTES,
    SpillArgs,
    bounded_suffix,
    result_flow,
    spill_args,
)
from spillstore._service.flow import (
    SLACK,
    STORE_FAILURES,
    Flow,
    Host,
    Measure,
    adrive,
    call,
    drive,
    step_from_ends,
)
from spillstore._service.readback import stored_shape
from spillstore._service.render import render
from spillstore._service.sides import suffix_flow
from spillstore._stores.tally import Tally

if TYPE_CHECKING:
    from spillstore._stores.meta import SpillMeta
    from spillstore._stores.writer import AsyncSpillWriter, SpillWriter

__all__ = ["OutputAccumulator"]

_FINISHED = "this accumulator is finished; start a new one"
_SMALL_CHUNK_BYTES = 16 * 1024
_BATCH_BYTES = 256 * 1024
"""Once spilling, chunks under ``_SMALL_CHUNK_BYTES`` are joined into batches of about
this size before the store's writer takes them: the writer's cost is per call (about 10
us), so a stream of short lines costs little more than one chunk (RESULTS.md, "A stream
written line by line"). Larger chunks go straight through, uncopied."""
_Twin = Literal["sync", "async"]
_MIXED = "use either the sync or the async methods of one accumulator, not both"


class OutputAccumulator:
    """Takes ``str`` or ``bytes`` chunks; ends in the model-facing result.

    Get one from :meth:`TruncationService.accumulator`. Use either the sync methods
    (:meth:`write`, :meth:`ok`, :meth:`error`) or the async ones (:meth:`awrite`,
    :meth:`aok`, :meth:`aerror`) on one accumulator, not both.

    Args:
        service: the service (or anything with its settings, store, session and tool
            names) the output goes through.
        tool_name, tool_call_id: the call that produces the output.

    Raises:
        UsageError: (from the methods) a chunk or a finish after the accumulator was
            finished, or sync and async methods mixed on one spilling accumulator.
    """

    def __init__(self, service: Host, *, tool_name: str, tool_call_id: str):
        self._host = service
        self._tool_name = tool_name
        self._tool_call_id = tool_call_id
        self._budget = service.settings.max_bytes
        self._keep_head = service.settings.head_bytes + SLACK
        self._keep_tail = service.settings.tail_bytes + SLACK
        self._buffer = bytearray()
        self._head = b""
        self._tail = bytearray()
        self._total = 0
        self._owner: _Twin | None = None  # the twin whose chunk outgrew the budget
        self._pending: list[bytes] = []  # spilled bytes not yet handed to the writer
        self._pending_size = 0
        self._measure: Tally | None = None  # the output's measure, once no writer takes it
        self._writer: SpillWriter | None = None
        self._awriter: AsyncSpillWriter | None = None
        self._write_error: Exception | None = None
        self._done = False
        line_cap = service.settings.max_line_bytes
        self._shaper = (
            None
            if line_cap is None
            else LineShaper(max_line_bytes=line_cap, budget=service.settings.max_bytes)
        )

    @property
    def total_bytes(self) -> int:
        """Bytes taken so far."""
        return self._total

    @property
    def spilling(self) -> bool:
        """Whether the output outgrew the budget and is streaming to the store."""
        return self._owner is not None

    # --- shared decisions ----------------------------------------------------------

    def _take(self, chunk: str | bytes, *, twin: _Twin) -> list[bytes]:
        """Account for a chunk; return the bytes to send to the store now, in order.

        ``twin`` says which methods call: the twin that outgrew the budget owns the
        store's writer, and the other one is refused from then on.
        """
        if self._done:
            raise UsageError(_FINISHED)
        if self._owner not in (None, twin):
            raise UsageError(_MIXED)
        if isinstance(chunk, str):
            data = encode(chunk)
        elif isinstance(chunk, bytes | bytearray | memoryview):
            data = bytes(chunk)
        else:  # bytes(5) would be five NUL bytes, bytes([65]) an "A": never guess
            raise ConfigError(f"a chunk must be str or bytes; got {type(chunk).__name__}")
        self._total += len(data)
        if self._shaper is not None:
            self._shaper.feed(data)  # one check per chunk once shaping cannot fit
        if self._owner is None:
            self._buffer += data
            if len(self._buffer) <= self._budget:
                return []
            self._owner = twin
            self._head = bytes(self._buffer[: self._keep_head])
            data, self._buffer = bytes(self._buffer), bytearray()
        if self._measure is not None:  # the store failed: no writer measures them any more
            self._keep_tail_of(data)
            self._measure.feed(data)
            return []
        if len(data) >= _SMALL_CHUNK_BYTES:  # worth its own call: no copy
            pieces = self._batch()
            self._keep_tail_of(data)
            return [*pieces, data]
        self._pending.append(data)
        self._pending_size += len(data)
        return self._batch() if self._pending_size >= _BATCH_BYTES else []

    def _batch(self) -> list[bytes]:
        """The pending small chunks as one piece (none if there are none); the tail
        ring takes its end, so a stream of small chunks updates it once per batch."""
        if not self._pending:
            return []
        pending, self._pending, self._pending_size = self._pending, [], 0
        joined = b"".join(pending)
        self._keep_tail_of(joined)
        return [joined]

    def _keep_tail_of(self, data: bytes) -> None:
        """Keep the last bytes for the tail preview, ``data`` being the output's newest."""
        self._tail += data[-self._keep_tail :]
        del self._tail[: -self._keep_tail]

    def _take_over(
        self, taken: Tally, rest: Sequence[bytes | bytearray | memoryview | str]
    ) -> None:
        """Once the store failed: continue the writer's measure of the output.

        ``taken`` is the writer's measure of the bytes it took (a fresh one if no writer
        was made); the output's bytes past them are the end of ``rest``, the chunks
        whose hand-over failed.
        """
        missing = self._total - taken.total_bytes
        parts: list[bytes] = []
        for chunk in reversed(rest):
            if missing <= 0:
                break
            data = encode(chunk) if isinstance(chunk, str) else bytes(chunk)
            part = data[-missing:] if missing < len(data) else data
            parts.append(part)
            missing -= len(part)
        assert missing == 0, "the failed chunks end where the output ends"
        for part in reversed(parts):
            taken.feed(part)
        self._measure = taken

    def _spill_args(self) -> SpillArgs:
        return spill_args(self._host, self._tool_name, self._tool_call_id)

    def _finish_flow(self, suffix: str | None, is_error: bool, *, twin: _Twin) -> Flow[ToolResult]:
        """Every decision of :meth:`ok`/:meth:`error` and their async twins.

        ``twin`` as in :meth:`_take`: a refused finish leaves the accumulator as it was,
        to be finished by the twin that owns it.
        """
        if self._done:
            raise UsageError(_FINISHED)
        if self._owner not in (None, twin):
            raise UsageError(_MIXED)
        self._done = True
        host = self._host
        saved: SpillMeta | Exception | None = self._write_error
        if not self.spilling:
            raw = bytes(self._buffer)
            text = _text_of(raw, suffix, self._budget)
            if text is not None:
                inline = ToolResult(content=(TextPart(text),), suffix=suffix, is_error=is_error)
                return (yield from result_flow(host, inline, self._tool_name, self._tool_call_id))
            # Invalid UTF-8 that outgrows the budget once decoded: the raw bytes are the
            # output, so they are what is saved, measured and ranged.
            self._head, self._tail = raw[: self._keep_head], bytearray(raw[-self._keep_tail :])
            try:
                saved = yield call(
                    host.store.put,
                    host.store.aput,
                    raw,
                    suffix=_stored(suffix),
                    **self._spill_args(),
                )
            except STORE_FAILURES as exc:
                saved = exc
                self._take_over(Tally(), (raw,))  # small: measured only when not saved
        elif saved is None:
            try:
                saved = yield call(self._commit, self._acommit, suffix)
            except STORE_FAILURES as exc:
                saved = yield call(self._fail, self._afail, exc)
        assert saved is not None
        shown = yield from suffix_flow(host, suffix or "", self._spill_args())
        shape = yield from stored_shape(host, saved, self._head)
        counted = self._counted()  # None once saved: the store's metadata states it
        if counted is not None:
            invalid = counted.invalid_utf8
        else:
            invalid = not isinstance(saved, Exception) and saved.invalid_utf8
        shaped = None
        if shape is None and self._shaper is not None and not invalid:
            # As the whole output: the room left by the suffix and the appended pointer.
            room = self._budget - utf8_size(bounded_suffix(suffix or "", self._budget))
            shaped = self._shaper.finish(room - APPEND_RESERVE_BYTES)
        step = step_from_ends(
            host.settings,
            result=ToolResult(content=(), is_error=is_error),
            head_raw=self._head,
            tail_raw=bytes(self._tail),
            counted=counted,
            suffix=shown,
            tool_name=self._tool_name,
            tool_call_id=self._tool_call_id,
            json_shape=shape,
            shaped=shaped,
            looks_json=starts_like_json(self._head, self._keep_head),
        )
        return render(host, step, saved)

    def _counted(self) -> Measure | None:
        """The output's measure for a "not saved" preview (``None`` once saved: the
        store's metadata states it)."""
        measure = self._measure
        if measure is None:
            return None
        return Measure(measure.sha256, measure.total_bytes, measure.newlines, measure.invalid_utf8)

    # --- sync shell ----------------------------------------------------------------

    def write(self, chunk: str | bytes) -> None:
        """Take one chunk (a UTF-8 sequence may be split across chunks)."""
        self._send(self._take(chunk, twin="sync"))

    def _send(self, pieces: Sequence[bytes]) -> None:
        """Hand ``pieces`` to the store's writer (made on the first one), in order."""
        for n, data in enumerate(pieces):
            try:
                if self._writer is None:
                    self._writer = self._host.store.writer(**self._spill_args())
                self._writer.write(data)
            except STORE_FAILURES as exc:  # spilling must never fail the tool call
                self._fail(exc, pieces[n:])
                return

    def ok(self, suffix: str | None = None) -> ToolResult:
        """Finish a successful run; ``suffix`` (e.g. ``"exit code 0"``) always shows."""
        return drive(self._finish_flow(suffix, is_error=False, twin="sync"))

    def error(self, message: str) -> ToolResult:
        """Finish a failed run; ``message`` always shows and the result is an error."""
        return drive(self._finish_flow(message, is_error=True, twin="sync"))

    def _commit(self, suffix: str | None) -> SpillMeta | Exception:
        """Hand over the last batch, then commit; the store's error if the batch failed."""
        self._send(self._batch())
        if self._write_error is not None:
            return self._write_error
        assert self._writer is not None  # _finish_flow refused a mix
        return self._writer.commit(suffix=_stored(suffix))

    def _fail(self, exc: Exception, unsent: Sequence[bytes] = ()) -> Exception:
        """Remember why spilling failed; the sync writer (if any) is dropped.

        ``unsent`` are the pieces from the one whose hand-over failed to the last one
        taken (none when the commit failed).
        """
        self._write_error = exc
        writer, self._writer = self._writer, None
        if writer is None:
            self._take_over(Tally(), unsent)
            return exc
        with contextlib.suppress(*STORE_FAILURES):  # the first error is the one to report
            writer.abort()
        self._take_over(writer.taken, unsent)
        return exc

    # --- async shell ---------------------------------------------------------------

    async def awrite(self, chunk: str | bytes) -> None:
        """Async twin of :meth:`write`."""
        await self._asend(self._take(chunk, twin="async"))

    async def _asend(self, pieces: Sequence[bytes]) -> None:
        """Async twin of :meth:`_send`."""
        for n, data in enumerate(pieces):
            try:
                if self._awriter is None:
                    self._awriter = self._host.store.awriter(**self._spill_args())
                await self._awriter.write(data)
            except STORE_FAILURES as exc:
                await self._afail(exc, pieces[n:])
                return

    async def aok(self, suffix: str | None = None) -> ToolResult:
        """Async twin of :meth:`ok`."""
        return await adrive(self._finish_flow(suffix, is_error=False, twin="async"))

    async def aerror(self, message: str) -> ToolResult:
        """Async twin of :meth:`error`."""
        return await adrive(self._finish_flow(message, is_error=True, twin="async"))

    async def _acommit(self, suffix: str | None) -> SpillMeta | Exception:
        """Async twin of :meth:`_commit`."""
        await self._asend(self._batch())
        if self._write_error is not None:
            return self._write_error
        assert self._awriter is not None  # _finish_flow refused a mix
        return await self._awriter.commit(suffix=_stored(suffix))

    async def _afail(self, exc: Exception, unsent: Sequence[bytes] = ()) -> Exception:
        """Async twin of :meth:`_fail` (the async writer batches too: its failed batch
        ends with the first unsent piece)."""
        self._write_error = exc
        writer, self._awriter = self._awriter, None
        if writer is None:
            self._take_over(Tally(), unsent)
            return exc
        with contextlib.suppress(*STORE_FAILURES):
            await writer.abort()
        failed = writer.failed_batch
        self._take_over(writer.taken, [*failed, *unsent[1:]] if failed else unsent)
        return exc


def _text_of(raw: bytes, suffix: str | None, budget: int) -> str | None:
    """The text of an output kept in memory, or ``None`` when its raw bytes must be saved.

    Valid UTF-8, and invalid bytes whose decoded text still fits with the suffix, go
    through the service as text. Invalid bytes that outgrow the budget once decoded
    (an invalid byte becomes a 3-byte U+FFFD) are saved raw: decoding them first would
    save, measure and range text the tool never wrote.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
    size = utf8_size(text) + (utf8_size(suffix) + 1 if suffix else 0)
    return text if size <= budget else None


def _stored(suffix: str | None) -> str | None:
    """The suffix as stored: whole, strict UTF-8, ``None`` when empty."""
    return strict(suffix) if suffix else None
