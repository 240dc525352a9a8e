"""TruncationService: the one decision point every tool result passes through.

The decisions are made once, in pure steps (:meth:`TruncationService._prepare` and
:func:`_render`), and driven by two thin shells: :meth:`~TruncationService.truncate_for_model`
calls the store directly, :meth:`~TruncationService.atruncate_for_model` awaits it. The
flow, in order (design.md §2):

1. a spill-exempt result comes back as the same object;
2. a result whose text (and suffix) fits the budget comes back as the same object;
3. lines longer than ``max_line_bytes`` are cut, and if that alone brings the text within
   budget the shaped text is kept and a short pointer is appended ("append mode");
4. otherwise the text is replaced by a pointer with head and tail previews ("replace");
5. the full output (up to the retention cap) is persisted *before* rendering, and if
   persisting fails the model still gets a bounded preview that says it was not saved;
6. media stay attached in order; parts that cannot be delivered leave a visible notice;
7. ``is_error``, metadata and structured content are kept;
8. the suffix goes after the pointer, never cut off by the cap.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import os
import stat
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

import anyio

from spillstore._content import (
    EmbeddedText,
    MediaPart,
    Part,
    ResourceLink,
    SpillInfo,
    TextPart,
    ToolResult,
)
from spillstore._core.cap import PART_SEPARATOR, elide_middle, joined_text_size
from spillstore._core.pointer import (
    Preview,
    Stored,
    count_newlines,
    line_count,
    plan_preview,
    plan_preview_bytes,
    quote_name,
    render_pointer,
)
from spillstore._core.shape import Shaped, shape_lines
from spillstore._core.utf8 import hash_and_size, head, utf8_size
from spillstore._errors import StoreError
from spillstore._settings import Settings

if TYPE_CHECKING:
    from spillstore._service.accumulator import OutputAccumulator
    from spillstore._stores.base import Store
    from spillstore._stores.meta import SpillMeta
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["TruncationService"]

log = logging.getLogger("spillstore")

DEFAULT_DELIVERABLE = frozenset({"image", "audio"})
"""Media kinds a model can take; others (blobs) leave a ``[content dropped: ...]`` notice."""


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An oversized output, measured, waiting to be persisted and rendered.

    It is made either from a result's text parts (:meth:`TruncationService._prepare`)
    or from a stream's kept ends (:class:`~spillstore.OutputAccumulator`); rendering
    only needs ``plan`` to cut previews, and ``measure`` when nothing was saved (when
    something was, the store's metadata already holds the size, lines and hash, so a
    large output is not measured twice).
    """

    result: ToolResult
    ends_with_newline: bool
    plan: Callable[[int, int, _Measure], Preview]
    measure: Callable[[], _Measure]
    shaped: Shaped | None
    suffix: str
    others: list[Part]
    notes: list[str]
    tool_name: str
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class _Measure:
    """The whole output's hash, size and newline count."""

    sha256: str
    total_bytes: int
    newlines: int


class _Request(abc.ABC):
    """One I/O step of the flow; the sync shell calls :meth:`run`, the async one :meth:`arun`."""

    @abc.abstractmethod
    def run(self, service: TruncationService) -> Any:
        """Do the I/O and return its result."""

    @abc.abstractmethod
    async def arun(self, service: TruncationService) -> Any:
        """Do the same I/O without blocking the event loop."""


class _StoreCall(_Request):
    """A store method: ``store.NAME(...)``, or its async twin ``store.aNAME(...)``."""

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs

    def run(self, service: TruncationService) -> Any:
        return getattr(service.store, self.name)(*self.args, **self.kwargs)

    async def arun(self, service: TruncationService) -> Any:
        return await getattr(service.store, "a" + self.name)(*self.args, **self.kwargs)


class _Blocking(_Request):
    """A blocking function: called directly, or in a worker thread by the async shell."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function, self.args = function, args

    def run(self, service: TruncationService) -> Any:
        return self.function(*self.args)

    async def arun(self, service: TruncationService) -> Any:
        return await anyio.to_thread.run_sync(self.function, *self.args)


_Flow = Generator[_Request, Any, ToolResult]
"""The service's flow: yields I/O requests, is sent their results, returns the answer."""


class _SpillArgs(TypedDict):
    session: str
    tool_name: str
    tool_call_id: str
    retention_bytes: int | None
    retained_tail_bytes: int


def _text_chunks(texts: Sequence[str]) -> Iterator[str]:
    """The joined texts as chunks, never one joined copy.

    They stay ``str``: the store encodes them in bounded pieces itself, and knows that
    text from a ``str`` is valid UTF-8, so it skips the validity check bytes need.
    """
    for index, text in enumerate(texts):
        if index:
            yield PART_SEPARATOR
        yield text


def _dropped_notice(part: MediaPart) -> str:
    size = len(part.data)
    uri = f", uri {head(part.uri, 200)}" if part.uri else ""
    return f"[content dropped: {part.kind} {head(part.mime_type, 100)}, {size} bytes{uri}]"


class TruncationService:
    """Caps tool results for the model, spilling what does not fit to a store.

    Args:
        store: where spills go; by default a :class:`~spillstore.LocalStore` at
            ``settings.dir`` (or the user cache dir).
        settings: budgets and caps; by default ``Settings()`` (environment, then defaults).
        session: the store session spills go to; by default ``settings.session``.
        read_tool, grep_tool: tool names used in the ready-to-call hints.
        deliverable_media: media kinds passed to the model; other kinds are replaced by
            a visible ``[content dropped: ...]`` notice.
    """

    def __init__(
        self,
        store: Store | None = None,
        settings: Settings | None = None,
        *,
        session: str | None = None,
        read_tool: str = "read_spill",
        grep_tool: str = "grep_spill",
        deliverable_media: frozenset[str] = DEFAULT_DELIVERABLE,
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        if store is None:
            from spillstore._stores.local import LocalStore  # noqa: PLC0415 - only when needed

            store = LocalStore(self.settings.dir)
        self.store = store
        self.session = session if session is not None else self.settings.session
        self.read_tool = read_tool
        self.grep_tool = grep_tool
        self.deliverable_media = deliverable_media

    # --- the two shells ----------------------------------------------------------

    def truncate_for_model(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> ToolResult:
        """Return what the model should see of ``result``: itself when it fits.

        Never raises because of storage: if the store fails, the returned preview says
        the output was not saved. A plain ``str`` is wrapped in a :class:`ToolResult`.

        A result with ``full_output_path`` names a file that holds the whole output (a
        shell's log): the file is the output, its text parts are not measured, and an
        oversized file is adopted by the store without a second copy.
        """
        return self._drive(self._flow(result, tool_name, tool_call_id))

    async def atruncate_for_model(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> ToolResult:
        """Async twin of :meth:`truncate_for_model`: the same flow, its I/O awaited."""
        return await self._adrive(self._flow(result, tool_name, tool_call_id))

    def _drive(self, flow: _Flow) -> ToolResult:
        """Run a flow to its answer, doing each I/O request it yields right here."""
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                request = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                return cast(ToolResult, done.value)
            try:
                reply, error = request.run(self), None
            except Exception as exc:  # handed to the flow, which decides what it means
                reply, error = None, exc

    async def _adrive(self, flow: _Flow) -> ToolResult:
        """Async twin of :meth:`_drive`: each I/O request is awaited."""
        reply: Any = None
        error: Exception | None = None
        while True:
            try:
                request = flow.send(reply) if error is None else flow.throw(error)
            except StopIteration as done:
                return cast(ToolResult, done.value)
            try:
                reply, error = await request.arun(self), None
            except Exception as exc:
                reply, error = None, exc

    # --- the flow: every decision, with its I/O as requests ------------------------

    def _flow(self, result: ToolResult | str, tool_name: str, tool_call_id: str) -> _Flow:
        """Decide what the model sees; yield each I/O step for a shell to run.

        The generator is the only place the decisions live; the sync and the async
        shell differ only in how they run a yielded :class:`_Request` (house style:
        one planner, two thin shells).
        """
        if isinstance(result, ToolResult) and result.full_output_path and not result.spill_exempt:
            return (yield from self._file_flow(result, tool_name, tool_call_id))
        step = self._prepare(result, tool_name, tool_call_id)
        if isinstance(step, ToolResult):
            return step
        try:
            saved: SpillMeta | Exception = yield _StoreCall(
                "put",
                _text_chunks(_texts(step.result)),
                suffix=step.suffix or None,
                media_notes=tuple(step.notes),
                **self._spill_args(step.tool_name, step.tool_call_id),
            )
        except Exception as exc:  # the tool call must not fail because spilling did
            log.warning("spillstore: could not save output of %s: %s", tool_name, exc)
            saved = exc
        return self._render(step, saved)

    def _file_flow(self, result: ToolResult, tool_name: str, tool_call_id: str) -> _Flow:
        """The flow for a result whose output is a file (``full_output_path``)."""
        path = result.full_output_path
        assert path is not None
        suffix, notes, others = self._file_parts(result)
        try:
            small = yield _Blocking(_read_if_small, path, self.settings.max_bytes)
            if small is not None:
                inline = _inline_file(result, small)
                return (yield from self._flow(inline, tool_name, tool_call_id))
            meta = yield _StoreCall(
                "adopt",
                path,
                suffix=suffix or None,
                media_notes=tuple(notes),
                **self._spill_args(tool_name, tool_call_id),
            )
            (h0, h1), (t0, t1) = _end_ranges(meta, self.settings)
            head_raw = yield _StoreCall("read_bytes", meta.spill_id, h0, h1)
            tail_raw = yield _StoreCall("read_bytes", meta.spill_id, t0, t1)
        except Exception as exc:
            log.warning("spillstore: could not adopt %s: %s", path, exc)
            fallback = _without_file(result, path, exc)
            return (yield from self._flow(fallback, tool_name, tool_call_id))
        step = _step_from_ends(
            self,
            result=dataclasses.replace(result, full_output_path=None),
            head_raw=head_raw,
            tail_raw=tail_raw,
            counted=None,
            suffix=suffix,
            others=others,
            notes=notes,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
        )
        return self._render(step, meta)

    def _file_parts(self, result: ToolResult) -> tuple[str, list[str], list[Part]]:
        """Suffix, notes and non-text parts of a file-backed result (its text is the file)."""
        others: list[Part] = []
        for part in result.content:
            if isinstance(part, MediaPart) and part.kind not in self.deliverable_media:
                others.append(TextPart(_dropped_notice(part)))
            elif not isinstance(part, TextPart | EmbeddedText):
                others.append(part)
        notes = []
        media = sum(isinstance(p, MediaPart | ResourceLink) for p in result.content)
        if media:
            notes.append(f"Only the text was saved; {media} media part(s) stay attached unchanged.")
        return self._bounded_suffix(result.suffix or ""), notes, others

    def spill_tools(self, **options: Any) -> SpillTools:
        """Read, Grep and List over this service's store and session.

        Their names match the ones the pointer's hints call (``read_tool``,
        ``grep_tool``), so a model can follow a hint verbatim. ``options`` go to
        :class:`~spillstore.SpillTools` (``max_page_bytes``, ``list_name``, ...).
        """
        from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415 - re2 loads on demand

        options.setdefault("read_name", self.read_tool)
        options.setdefault("grep_name", self.grep_tool)
        return SpillTools(self.store, session=self.session, **options)

    def accumulator(self, *, tool_name: str, tool_call_id: str) -> OutputAccumulator:
        """Start streaming one tool's output through the service with bounded memory."""
        from spillstore._service.accumulator import OutputAccumulator  # noqa: PLC0415 - a cycle

        return OutputAccumulator(self, tool_name=tool_name, tool_call_id=tool_call_id)

    # --- pure decisions ----------------------------------------------------------

    def _spill_args(self, tool_name: str, tool_call_id: str) -> _SpillArgs:
        """Where and how an output is spilled: the same for puts and streams."""
        return _SpillArgs(
            session=self.session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            retention_bytes=self.settings.retention_bytes,
            retained_tail_bytes=self.settings.retained_tail_bytes,
        )

    def _prepare(
        self, result: ToolResult | str, tool_name: str, tool_call_id: str
    ) -> ToolResult | _Prepared:
        """Steps 1-3: pass through, or measure and plan. No I/O."""
        if isinstance(result, str):
            result = ToolResult(content=(TextPart(result),))
        if result.spill_exempt:
            return result
        budget = self.settings.max_bytes
        texts: list[str] = []
        others: list[Part] = []
        notes: list[str] = []
        undeliverable = False
        for part in result.content:
            if isinstance(part, TextPart | EmbeddedText):
                texts.append(part.text)
                if isinstance(part, EmbeddedText):
                    notes.append(
                        f"Embedded text resource {head(part.uri, 200)} is part of the text."
                    )
            elif isinstance(part, MediaPart) and part.kind not in self.deliverable_media:
                undeliverable = True
                others.append(TextPart(_dropped_notice(part)))
            else:
                others.append(part)
        suffix = result.suffix or ""
        # Characters (and separators) bound the size from below, 4 bytes each from above.
        chars = sum(map(len, texts)) + len(suffix) + max(len(texts) + bool(suffix) - 1, 0)
        if chars * 4 <= budget or (chars <= budget and _model_text_size(texts, suffix) <= budget):
            if not suffix and not undeliverable:
                return result
            return self._inline(result, suffix, others)
        suffix = self._bounded_suffix(suffix)
        shaped = None
        if self.settings.max_line_bytes is not None:
            room = budget - utf8_size(suffix) - self._append_reserve()
            shaped = shape_lines(texts, max_line_bytes=self.settings.max_line_bytes, budget=room)
        media = [p for p in result.content if isinstance(p, MediaPart | ResourceLink)]
        if media:
            notes.append(
                f"Only the text was saved; {len(media)} media part(s) stay attached unchanged."
            )
        head_bytes, tail_bytes = self.settings.head_bytes, self.settings.tail_bytes

        def plan(head_room: int, tail_room: int, measured: _Measure) -> Preview:
            return plan_preview(
                texts,
                total_bytes=measured.total_bytes,
                newlines=measured.newlines,
                head_bytes=min(head_bytes, head_room),
                tail_bytes=min(tail_bytes, tail_room),
            )

        def measure() -> _Measure:
            sha, total = hash_and_size(_text_chunks(texts))
            return _Measure(sha, total, count_newlines(texts))

        return _Prepared(
            result=result,
            ends_with_newline=_ends_with_newline(texts),
            plan=plan,
            measure=measure,
            shaped=shaped,
            suffix=suffix,
            others=others,
            notes=notes,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
        )

    def _inline(self, result: ToolResult, suffix: str, others: list[Part]) -> ToolResult:
        """A result that fits, with its suffix folded in and undeliverable parts noticed."""
        content: list[Part] = []
        for part in result.content:
            if isinstance(part, MediaPart) and part.kind not in self.deliverable_media:
                content.append(TextPart(_dropped_notice(part)))
            else:
                content.append(part)
        if suffix:
            content.append(TextPart(suffix))
        return dataclasses.replace(result, content=tuple(content), suffix=None)

    def _bounded_suffix(self, suffix: str) -> str:
        """A suffix larger than a quarter of the budget is itself cut, with a note."""
        cap = self.settings.max_bytes // 4
        if utf8_size(suffix) <= cap:
            return suffix
        return elide_middle(suffix, cap, tool_name="the suffix")

    def _append_reserve(self) -> int:
        """Room kept for the appended pointer in append mode."""
        return 1_024

    def _render(self, step: _Prepared, saved: SpillMeta | Exception) -> ToolResult:
        """Steps 3-8 after persistence: build the model-facing result. No I/O."""
        if isinstance(saved, Exception):
            measured = step.measure()
            stored = Stored(state="none", reason=f"{type(saved).__name__}: {saved}"[:300])
            invalid = False
        else:
            last_line_open = saved.total_bytes > 0 and not step.ends_with_newline
            measured = _Measure(saved.sha256, saved.total_bytes, saved.total_lines - last_line_open)
            state: Literal["full", "partial"] = "full" if saved.complete else "partial"
            stored = Stored(
                state=state,
                spill_id=saved.spill_id,
                path=saved.path,
                stored_ranges=tuple(saved.stored_ranges),
            )
            invalid = saved.invalid_utf8
        budget = self.settings.max_bytes
        if step.shaped is not None:
            text, info = self._append_mode(step, stored, measured, invalid)
        else:
            text, info = self._replace_mode(step, stored, measured, invalid)
        if step.suffix:
            text = f"{text}\n{step.suffix}"
        if utf8_size(text) > budget:  # a pathological path or name: never exceed the budget
            text = elide_middle(text, budget, tool_name=step.tool_name)
        content: list[Part] = [TextPart(text), *step.others]
        return dataclasses.replace(step.result, content=tuple(content), suffix=None, spill=info)

    def _replace_mode(
        self, step: _Prepared, stored: Stored, measured: _Measure, invalid: bool
    ) -> tuple[str, SpillInfo]:
        budget = self.settings.max_bytes - utf8_size(step.suffix) - 1
        head_bytes, tail_bytes = self.settings.head_bytes, self.settings.tail_bytes
        while True:
            preview = step.plan(head_bytes, tail_bytes, measured)
            text = render_pointer(
                preview,
                stored,
                tool_name=step.tool_name,
                tool_call_id=step.tool_call_id,
                sha256=measured.sha256,
                invalid_utf8=invalid,
                notes=step.notes,
                read_tool=self.read_tool,
                grep_tool=self.grep_tool,
            )
            over = utf8_size(text) - budget
            if over <= 0 or head_bytes + tail_bytes == 0:
                break
            # Shrink the previews (tail first, it is the smaller) by what is over.
            cut_tail = min(tail_bytes, over // 2 + 1)
            tail_bytes -= cut_tail
            head_bytes = max(0, head_bytes - (over - cut_tail))
        return text, _info("replace", preview, stored, measured.sha256, invalid)

    def _append_mode(
        self, step: _Prepared, stored: Stored, measured: _Measure, invalid: bool
    ) -> tuple[str, SpillInfo]:
        shaped = step.shaped
        assert shaped is not None
        total_lines = line_count(measured.total_bytes, measured.newlines, step.ends_with_newline)
        line, offset = shaped.first_cut
        spill = f"spill {stored.spill_id}" + (f" at {stored.path}" if stored.path else "")
        where = {
            "full": f"saved in full as {spill}",
            "partial": (
                f"saved in part as {spill} (the retention cap"
                f" kept only bytes {' and '.join(f'[{s}, {e})' for s, e in stored.stored_ranges)})"
            ),
            "none": f"NOT saved ({stored.reason})",
        }[stored.state]
        note = (
            f"[spillstore] {shaped.cut_count} line(s) of {quote_name(step.tool_name)}"
            f" (call {quote_name(step.tool_call_id)}) were longer than"
            f" {self.settings.max_line_bytes} bytes and were cut above. The whole output"
            f" ({measured.total_bytes} bytes, {total_lines} lines, sha256 {measured.sha256})"
            f" is {where}."
        )
        if stored.state != "none":
            note += (
                f' Next: {self.read_tool}(spill="{stored.spill_id}", byte_offset={offset},'
                f" max_bytes=4096) reads on from the first cut (line {line})."
            )
        text = _dedupe_suffix(shaped.text, step.suffix)
        text = f"{text}\n{note}"
        preview = Preview(
            head_text="",
            tail_text="",
            total_bytes=measured.total_bytes,
            total_lines=total_lines,
            head_end=0,
            tail_start=0,
            head_lines=None,
            tail_lines=None,
            elided_lines=None,
            head_ends_line=True,
        )
        return text, _info("append", preview, stored, measured.sha256, invalid)


def _dedupe_suffix(text: str, suffix: str) -> str:
    """Append mode: drop a copy of the suffix already at the end of the text."""
    if suffix and text.rstrip("\n").endswith(suffix.rstrip("\n")):
        return text.rstrip("\n")[: -len(suffix.rstrip("\n"))].rstrip("\n")
    return text


def _model_text_size(texts: Sequence[str], suffix: str) -> int:
    """Size of the text the model sees when a result passes: its texts, then the suffix."""
    return joined_text_size([*texts, suffix] if suffix else texts)


def _texts(result: ToolResult) -> list[str]:
    return [p.text for p in result.content if isinstance(p, TextPart | EmbeddedText)]


def _ends_with_newline(texts: Sequence[str]) -> bool:
    for text in reversed(texts):
        if text:
            return text.endswith("\n")
    return False


def _info(
    mode: Literal["append", "replace"], preview: Preview, stored: Stored, sha: str, invalid: bool
) -> SpillInfo:
    elided_bytes = (
        () if mode == "append" or preview.tail_start <= preview.head_end else (preview.elided,)
    )
    elided_lines = () if preview.elided_lines is None else (preview.elided_lines,)
    return SpillInfo(
        mode=mode,
        saved=stored.state,
        total_bytes=preview.total_bytes,
        total_lines=preview.total_lines,
        sha256=sha,
        stored_ranges=stored.stored_ranges,
        elided_bytes=elided_bytes,
        elided_lines=elided_lines,
        spill_id=stored.spill_id,
        path=stored.path,
        error=stored.reason,
        invalid_utf8=invalid,
    )


def _read_if_small(path: str, budget: int) -> str | None:
    """The file's text when it is within ``budget`` bytes, else ``None`` (it must be adopted)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path} is not a regular file")
        if info.st_size > budget:
            return None
        data = os.read(fd, budget + 1)
    finally:
        os.close(fd)
    return None if len(data) > budget else data.decode("utf-8", "replace")


def _inline_file(result: ToolResult, text: str) -> ToolResult:
    """A file-backed result whose file is small: the file's text becomes its text part."""
    rest = [p for p in result.content if not isinstance(p, TextPart | EmbeddedText)]
    return dataclasses.replace(result, content=(TextPart(text), *rest), full_output_path=None)


def _without_file(result: ToolResult, path: str, exc: Exception) -> ToolResult:
    """A file-backed result whose file could not be adopted: say so, keep what is inline."""
    reason = f"{type(exc).__name__}: {exc}"[:300]
    note = (
        f"[spillstore] The tool's full output in {head(path, 500)} could not be saved"
        f" ({reason}); only what it returned inline is shown."
    )
    suffix = note if not result.suffix else f"{note}\n{result.suffix}"
    return dataclasses.replace(result, full_output_path=None, suffix=suffix)


def _end_ranges(meta: SpillMeta, settings: Settings) -> tuple[tuple[int, int], tuple[int, int]]:
    """The stored byte ranges to read for the head and tail previews (with a little slack)."""
    first_end = meta.stored_ranges[0][1] if meta.stored_ranges else 0
    last_start = meta.stored_ranges[-1][0] if meta.stored_ranges else 0
    total = meta.total_bytes
    head_range = (0, min(first_end, settings.head_bytes + _SLACK))
    tail_range = (max(last_start, total - settings.tail_bytes - _SLACK), total)
    return head_range, tail_range


_SLACK = 4
"""Extra bytes read at each end so cuts can land on a character and line boundary."""


def _step_from_ends(
    service: TruncationService,
    *,
    result: ToolResult,
    head_raw: bytes,
    tail_raw: bytes,
    counted: _Measure | None,
    suffix: str,
    others: list[Part],
    notes: list[str],
    tool_name: str,
    tool_call_id: str,
) -> _Prepared:
    """An oversized output known only by its first and last bytes (a stream, a file).

    ``counted`` is what the caller measured itself, used when nothing could be saved.
    """
    settings = service.settings

    def plan(head_room: int, tail_room: int, measured: _Measure) -> Preview:
        return plan_preview_bytes(
            head_raw,
            tail_raw,
            total_bytes=measured.total_bytes,
            newlines=measured.newlines,
            head_bytes=min(settings.head_bytes, head_room),
            tail_bytes=min(settings.tail_bytes, tail_room),
        )

    def measure() -> _Measure:
        if counted is None:
            raise RuntimeError("an adopted output is always measured by the store")
        return counted

    return _Prepared(
        result=result,
        ends_with_newline=tail_raw.endswith(b"\n"),
        plan=plan,
        measure=measure,
        shaped=None,
        suffix=suffix,
        others=others,
        notes=notes,
        tool_name=tool_name,
        tool_call_id=tool_call_id,
    )
