"""The decisions of the service, as one flow: what the model sees of a tool result.

:func:`result_flow` is the generator both twins of ``truncate_for_model`` drive (see
:mod:`spillstore._service.flow`): it makes every decision of design.md §2 and yields
each store call as a request. Steps 1-3 (pass through, keep the text of a result over
the budget only by its blobs or its suffix, or measure and plan) are pure
(:func:`prepare`); the output is persisted next; :func:`~spillstore._service.render.render`
turns the plan and the store's answer into the pointer. An output handed over as a file
is adopted by the store, and read back to shape its long lines (:func:`stored_shaped`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, TypedDict

from spillstore._content import EmbeddedText, MediaPart, Part, ResourceLink, TextPart, ToolResult
from spillstore._core.cap import PART_SEPARATOR, joined_text_size, strict_parts
from spillstore._core.json_prefix import JSON_PROBE_BYTES, starts_like_json
from spillstore._core.json_shape import JsonShape
from spillstore._core.pointer import Preview, count_newlines, plan_preview, printable
from spillstore._core.shape import shape_lines
from spillstore._core.utf8 import hash_and_size, head, strict, utf8_size
from spillstore._errors import SpillNotFound
from spillstore._service.files import (
    read_ends,
    read_if_small,
)
from spillstore._service.flow import (
    SLACK,
    STORE_FAILURES,
    Flow,
    Host,
    Measure,
    Prepared,
    blocking,
    call,
    step_from_ends,
)
from spillstore._service.inputs import check_result
from spillstore._service.readback import (
    JSON_SHAPE_MAX_CHARS,
    adopted_ends,
    file_shaped,
    shape_of,
    stored_shape,
)
from spillstore._service.render import render
from spillstore._service.sides import (
    blob_cost,
    blob_room,
    is_blob,
    keep_text_flow,
    spill_blobs,
    suffix_flow,
    suffix_view,
)

if TYPE_CHECKING:
    from spillstore._settings import Settings
    from spillstore._stores.meta import SpillMeta

__all__ = [
    "APPEND_RESERVE_BYTES",
    "SpillArgs",
    "TextKept",
    "bounded_suffix",
    "prepare",
    "result_flow",
    "spill_args",
]

log = logging.getLogger("spillstore")

APPEND_RESERVE_BYTES = 1_024
"""Room kept for the appended pointer in append mode."""


class SpillArgs(TypedDict):
    """Where and how an output is spilled: the same for puts, adoptions and streams."""

    session: str
    tool_name: str
    tool_call_id: str
    retention_bytes: int | None
    retained_tail_bytes: int


def spill_args(host: Host, tool_name: str, tool_call_id: str) -> SpillArgs:
    """The spill arguments of one tool call (every store records the names as strict
    UTF-8: :class:`~spillstore._stores.writer.SpillWriter`)."""
    return SpillArgs(
        session=host.session,
        tool_name=tool_name,
        tool_call_id=tool_call_id,
        retention_bytes=host.settings.retention_bytes,
        retained_tail_bytes=host.settings.retained_tail_bytes,
    )


def bounded_suffix(suffix: str, max_bytes: int) -> str:
    """A suffix larger than a quarter of the budget, as sized before it is saved whole.

    The flows replace it with :func:`~spillstore._service.sides.suffix_flow`'s view,
    which names the spill holding the whole suffix and is never larger.
    """
    return suffix_view(suffix, max_bytes, None, None)


def result_flow(
    host: Host, result: ToolResult | str, tool_name: str, tool_call_id: str
) -> Flow[ToolResult]:
    """Decide what the model sees of ``result``; yield each store call as a request.

    Raises:
        ConfigError: ``result`` is neither a ``str`` nor a ``ToolResult`` (a developer
            error: bytes go through the accumulator, which takes them).
    """
    check_result(result)
    if isinstance(result, ToolResult) and result.full_output_path and not result.spill_exempt:
        return (yield from _file_flow(host, result, tool_name, tool_call_id))
    step = prepare(host, result, tool_name, tool_call_id)
    if isinstance(step, ToolResult):
        return step
    if isinstance(step, TextKept):
        return (
            yield from keep_text_flow(host, step.result, spill_args(host, tool_name, tool_call_id))
        )
    store = host.store
    args = spill_args(host, step.tool_name, step.tool_call_id)
    whole_suffix = strict(step.result.suffix or "")
    try:
        saved: SpillMeta | Exception = yield call(
            store.put,
            store.aput,
            _text_chunks(_texts(step.result)),
            suffix=whole_suffix or None,
            media_notes=tuple(step.notes),
            **args,
        )
    except STORE_FAILURES as exc:  # the tool call must not fail because spilling did
        log.warning("spillstore: could not save output of %s: %s", tool_name, exc)
        saved = exc
    others = yield from spill_blobs(host, step.others, args)
    suffix = yield from suffix_flow(host, whole_suffix, args)
    return render(host, dataclasses.replace(step, others=others, suffix=suffix), saved)


def _file_flow(
    host: Host, result: ToolResult, tool_name: str, tool_call_id: str
) -> Flow[ToolResult]:
    """The flow for a result whose output is a file (``full_output_path``)."""
    path = result.full_output_path
    assert path is not None
    suffix, notes, others = _file_parts(host, result)
    store = host.store
    settings = host.settings
    counted: Measure | None = None
    saved: SpillMeta | Exception
    shape: JsonShape | None = None
    ends_with_newline: bool | None = None
    try:
        # What else the model sees (the suffix, blobs) counts when the file's bytes are
        # invalid UTF-8: their decoded text must fit beside it, or they are adopted raw.
        whole = result.suffix or ""
        others_size = (utf8_size(whole) + 1 if whole else 0) + sum(
            blob_cost(p) for p in others if isinstance(p, MediaPart) and is_blob(p, host)
        )
        small = yield blocking(read_if_small, path, host.settings.max_bytes, others_size)
        if small is not None:
            inline = _inline_file(result, small)
            return (yield from result_flow(host, inline, tool_name, tool_call_id))
        meta = yield call(
            store.adopt,
            store.aadopt,
            path,
            suffix=result.suffix or None,  # the store records it as strict UTF-8
            media_notes=tuple(notes),
            **spill_args(host, tool_name, tool_call_id),
        )
        try:
            head_raw, tail_raw, ends_with_newline = yield from adopted_ends(host, path, meta)
        except STORE_FAILURES as exc:
            if isinstance(exc, SpillNotFound):  # collected since: said as not saved
                raise
            # Saved; only reading it back failed: the file is there to preview.
            log.warning("spillstore: could not read back spill %s: %s", meta.spill_id, exc)
            head_raw, tail_raw, _ = yield blocking(
                read_ends, path, settings.head_bytes + SLACK, settings.tail_bytes + SLACK
            )
        saved = meta
        shape = yield from stored_shape(host, meta, head_raw)
    except STORE_FAILURES as exc:
        log.warning("spillstore: could not adopt %s: %s", path, exc)
        saved = exc
        try:  # the file is there: preview it, as a stream to a dead store is previewed
            head_raw, tail_raw, counted = yield blocking(
                read_ends, path, settings.head_bytes + SLACK, settings.tail_bytes + SLACK
            )
        except OSError:
            fallback = _without_file(result, path, exc)
            return (yield from result_flow(host, fallback, tool_name, tool_call_id))
    shaped = None
    if shape is None:
        budget = settings.max_bytes
        room = budget - utf8_size(bounded_suffix(result.suffix or "", budget))
        room -= APPEND_RESERVE_BYTES + blob_room(budget, sum(is_blob(p, host) for p in others))
        shaped = yield from file_shaped(host, path, saved, counted, room)
    args = spill_args(host, tool_name, tool_call_id)
    others = yield from spill_blobs(host, others, args)
    suffix = yield from suffix_flow(host, result.suffix or "", args)
    step = step_from_ends(
        host.settings,
        result=dataclasses.replace(result, full_output_path=None),
        head_raw=head_raw,
        tail_raw=tail_raw,
        counted=counted,
        suffix=suffix,
        others=others,
        notes=notes,
        tool_name=tool_name,
        tool_call_id=tool_call_id,
        json_shape=shape,
        ends_with_newline=ends_with_newline,
        shaped=shaped,
        looks_json=starts_like_json(head_raw, settings.head_bytes + SLACK),
    )
    return render(host, step, saved)


def _file_parts(host: Host, result: ToolResult) -> tuple[str, list[str], list[Part]]:
    """Suffix, notes and non-text parts of a file-backed result (its text is the file)."""
    others: list[Part] = [p for p in result.content if not isinstance(p, TextPart | EmbeddedText)]
    notes = []
    media = sum(_attached(p, host) for p in result.content)
    if media:
        notes.append(f"Only the text was saved; {media} media part(s) stay attached unchanged.")
    return bounded_suffix(result.suffix or "", host.settings.max_bytes), notes, others


@dataclasses.dataclass(frozen=True, slots=True)
class TextKept:
    """A result over the budget only by its blobs or its suffix: its text stays whole.

    The blobs and a suffix over its cap are saved as spills of their own, each named by
    a notice (:func:`~spillstore._service.sides.keep_text_flow`); no text spill is made,
    so nothing claims the text was too large.
    """

    result: ToolResult


def prepare(
    host: Host, result: ToolResult | str, tool_name: str, tool_call_id: str
) -> ToolResult | TextKept | Prepared:
    """Steps 1-3: pass through, keep the text beside spilled blobs, or measure and plan.

    No I/O.
    """
    if isinstance(result, str):
        result = ToolResult(content=(TextPart(result),))
    if result.spill_exempt:
        return result
    settings = host.settings
    budget = settings.max_bytes
    texts: list[str] = []
    others: list[Part] = []
    notes: list[str] = []
    blobs = 0  # what the blobs weigh in the budget, as carried
    for part in result.content:
        if isinstance(part, TextPart | EmbeddedText):
            texts.append(part.text)
            if isinstance(part, EmbeddedText):
                notes.append(
                    f"Embedded text resource {printable(part.uri, 200)} is part of the text."
                )
        else:
            others.append(part)
            if isinstance(part, MediaPart) and is_blob(part, host):
                blobs += blob_cost(part)
    suffix = result.suffix or ""
    # Characters (and separators) bound the size from below, 4 bytes each from above.
    chars = sum(map(len, texts)) + len(suffix) + max(len(texts) + bool(suffix) - 1, 0)
    if chars * 4 + blobs <= budget or (
        chars + blobs <= budget and _model_text_size(texts, suffix) + blobs <= budget
    ):
        fitting = result if not suffix else _inline(result, suffix)
        return fitting if all(map(str.isascii, texts)) else _strict(fitting)
    suffix = bounded_suffix(suffix, budget)
    if _model_text_size(texts, suffix) + blob_room(budget, blobs) <= budget:
        return TextKept(result)  # only the blobs or the suffix are over: the text stays
    texts = texts or [""]  # text parts that are all empty
    shaped = None
    shape = None
    # A shape is shown only for an output saved whole, as a stream or a file gets one:
    # an output the retention cap will cut is not parsed.
    if chars <= JSON_SHAPE_MAX_CHARS and _stored_whole(texts, settings):
        shape = shape_of(texts, budget)
    if settings.max_line_bytes is not None:  # append mode, if the spill is not queryable
        room = budget - utf8_size(suffix) - APPEND_RESERVE_BYTES - blob_room(budget, blobs)
        shaped = shape_lines(texts, max_line_bytes=settings.max_line_bytes, budget=room)
    media = [p for p in result.content if _attached(p, host)]
    if media:
        notes.append(
            f"Only the text was saved; {len(media)} media part(s) stay attached unchanged."
        )
    head_bytes, tail_bytes = settings.head_bytes, settings.tail_bytes

    def plan(head_room: int, tail_room: int, measured: Measure) -> Preview:
        return plan_preview(
            texts,
            total_bytes=measured.total_bytes,
            newlines=measured.newlines,
            head_bytes=min(head_bytes, head_room),
            tail_bytes=min(tail_bytes, tail_room),
        )

    def measure() -> Measure:
        sha, total = hash_and_size(_text_chunks(texts))
        return Measure(sha, total, count_newlines(texts))

    return Prepared(
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
        json_shape=shape,
        looks_json=starts_like_json(_output_start(texts, JSON_PROBE_BYTES), head_bytes + SLACK),
    )


def _output_start(texts: Sequence[str], max_chars: int) -> str:
    """The first ``max_chars`` (at least as many bytes) of the texts joined, as a stream
    of the same output starts."""
    taken: list[str] = []
    size = 0
    for text in texts:
        taken.append(text)
        size += len(text) + len(PART_SEPARATOR)
        if size >= max_chars:
            break
    return PART_SEPARATOR.join(taken)[:max_chars]


def _stored_whole(texts: Sequence[str], settings: Settings) -> bool:
    """Whether the retention cap keeps every byte of ``texts`` joined."""
    cap = settings.retention_bytes
    return cap is None or joined_text_size(texts) <= cap


def _strict(result: ToolResult) -> ToolResult:
    """A result that fits, its texts as strict UTF-8 (design 0b: the model's text in every
    mode); the same object when they already are."""
    content = strict_parts(result.content)
    return (
        result if content is result.content else dataclasses.replace(result, content=tuple(content))
    )


def _inline(result: ToolResult, suffix: str) -> ToolResult:
    """A result that fits, blobs included, with its suffix folded into its text."""
    content = (*result.content, TextPart(strict(suffix)))
    return dataclasses.replace(result, content=content, suffix=None)


def _attached(part: Part, host: Host) -> bool:
    """Media that stays attached to a cut result (a blob is saved as a spill instead)."""
    return isinstance(part, MediaPart | ResourceLink) and not is_blob(part, host)


def _text_chunks(texts: Sequence[str]) -> Iterator[str]:
    """The joined texts as chunks, never one joined copy.

    They stay ``str``: the store encodes them in bounded pieces itself, and knows that
    text from a ``str`` is valid UTF-8, so it skips the validity check bytes need.
    """
    for index, text in enumerate(texts):
        if index:
            yield PART_SEPARATOR
        yield text


def _model_text_size(texts: Sequence[str], suffix: str) -> int:
    """Size of the text the model sees when a result passes: its texts, then the suffix."""
    return joined_text_size([*texts, suffix] if suffix else texts)


def _texts(result: ToolResult) -> list[str]:
    return [p.text for p in result.content if isinstance(p, TextPart | EmbeddedText)]


def _ends_with_newline(texts: Sequence[str]) -> bool:
    """Whether the texts joined by the part separator end with a newline."""
    for index in range(len(texts) - 1, -1, -1):
        if texts[index]:
            return texts[index].endswith("\n")
        if index:  # an empty part after another: the separator before it ends the output
            return PART_SEPARATOR.endswith("\n")
    return False


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
