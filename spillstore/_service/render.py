"""Rendering: the model-facing result of an oversized output, once the store answered. No I/O.

Steps 3-8 of the service's flow (design.md §2), after persistence: the pointer text in
replace mode (head and tail previews) or append mode (the shaped text, then a short
notice), the suffix after it, and the :class:`~spillstore.SpillInfo` hosts read. The
text never exceeds the budget, pointer and suffix included.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from spillstore._content import Part, SpillInfo, TextPart, ToolResult
from spillstore._core.cap import elide_middle
from spillstore._core.pointer import (
    DEFAULT_BYTE_PAGE,
    Preview,
    Stored,
    line_count,
    path_line,
    quote_name,
    render_pointer,
)
from spillstore._core.ranges import format_ranges
from spillstore._core.utf8 import encode, utf8_size
from spillstore._service.flow import Host, Measure, Prepared

if TYPE_CHECKING:
    from spillstore._stores.meta import SpillMeta

__all__ = ["notices_size", "render"]


def render(host: Host, step: Prepared, saved: SpillMeta | Exception) -> ToolResult:
    """The result the model sees for ``step``, saved as ``saved`` (or not: the error)."""
    if isinstance(saved, Exception):
        assert step.measure is not None, "an adopted output is always measured by the store"
        measured = step.measure()
        stored = Stored(state="none", reason=f"{type(saved).__name__}: {saved}"[:300])
        invalid = measured.invalid_utf8
    else:
        last_line_open = saved.total_bytes > 0 and not step.ends_with_newline
        measured = Measure(saved.sha256, saved.total_bytes, saved.total_lines - last_line_open)
        state: Literal["full", "partial"] = "full" if saved.complete else "partial"
        stored = Stored(
            state=state,
            spill_id=saved.spill_id,
            path=saved.path,
            stored_ranges=tuple(saved.stored_ranges),
        )
        invalid = saved.invalid_utf8
    budget = host.settings.max_bytes - notices_size(step.others)
    # A shape guides a query of the spill: it wins over append mode only for an output
    # saved in full (design: the same output reads the same on every path, and a stream
    # can shape only what it saved whole).
    if step.shaped is not None and not (step.json_shape is not None and stored.state == "full"):
        text, info = _append_mode(host, step, stored, measured, invalid)
    else:
        text, info = _replace_mode(host, step, stored, measured, invalid)
    if step.suffix:
        text = f"{text}\n{step.suffix}"
    # Strict UTF-8 in every mode: lone surrogates (from a str output or suffix) become
    # U+FFFD, as the previews' decoding makes them; the size does not change.
    text = encode(text).decode("utf-8")
    if utf8_size(text) > budget:  # a pathological path or name: never exceed the budget
        text = elide_middle(text, budget, tool_name=step.tool_name)
    content: list[Part] = [TextPart(text), *step.others]
    return dataclasses.replace(step.result, content=tuple(content), suffix=None, spill=info)


def _replace_mode(
    host: Host, step: Prepared, stored: Stored, measured: Measure, invalid: bool
) -> tuple[str, SpillInfo]:
    settings = host.settings
    budget = settings.max_bytes - notices_size(step.others) - utf8_size(step.suffix) - 1
    head_bytes, tail_bytes = settings.head_bytes, settings.tail_bytes
    notes = [*step.notes, *_json_notes(host, step, stored)]
    # The shape takes the place of as much of the head preview, within the same budget.
    head_bytes = max(
        head_bytes // 2, head_bytes - sum(utf8_size(n) + 1 for n in notes[len(step.notes) :])
    )
    while True:
        preview = step.plan(head_bytes, tail_bytes, measured)
        text = render_pointer(
            preview,
            stored,
            tool_name=step.tool_name,
            tool_call_id=step.tool_call_id,
            sha256=measured.sha256,
            invalid_utf8=invalid,
            notes=notes,
            read_tool=host.read_tool,
            grep_tool=host.grep_tool,
        )
        over = utf8_size(text) - budget
        if over <= 0 or head_bytes + tail_bytes == 0:
            break
        # Shrink the previews, each by its share, by what is over, in raw
        # bytes: an invalid byte shows as a 3-byte U+FFFD, so cutting as many raw bytes
        # as the text is over would overshoot (to no preview at all).
        over = _raw_over(preview, over)
        cut_tail = min(tail_bytes, over * tail_bytes // (head_bytes + tail_bytes) + 1)
        tail_bytes -= cut_tail
        head_bytes = max(0, head_bytes - (over - cut_tail))
    return text, _info("replace", preview, stored, measured.sha256, invalid)


def _raw_over(preview: Preview, over: int) -> int:
    """``over`` bytes of shown text as bytes of the output: the previews' shown size
    per output byte (1 for valid UTF-8, up to 3 for invalid bytes) divides it."""
    raw = preview.head_end + preview.total_bytes - preview.tail_start
    shown = utf8_size(preview.head_text) + utf8_size(preview.tail_text)
    if raw <= 0 or shown <= raw:
        return over
    return -(-over * raw // shown)  # rounded up, so the loop still ends


def _json_notes(host: Host, step: Prepared, stored: Stored) -> list[str]:
    """The shape of a JSON output saved in full and how to query it, or why a JSON
    output saved in part has no shape (a cut document does not parse)."""
    shape = step.json_shape
    if stored.state == "full" and shape is not None:
        expression = json.dumps(shape.example, ensure_ascii=False)
        hint = (
            f'Query it with jq: {host.query_tool}(spill="{stored.spill_id}",'
            f" expression={expression}) returns values with their exact byte ranges."
        )
        return [*shape.lines, hint]
    if stored.state == "partial" and step.looks_json:
        return [
            f"It starts like JSON, but the retention cap saved it in part, so it has no"
            f" shape and {host.query_tool} cannot parse it; search it with {host.grep_tool}."
        ]
    return []


def _append_mode(
    host: Host, step: Prepared, stored: Stored, measured: Measure, invalid: bool
) -> tuple[str, SpillInfo]:
    shaped = step.shaped
    assert shaped is not None
    total_lines = line_count(measured.total_bytes, measured.newlines, step.ends_with_newline)
    line, offset = shaped.first_cut
    spill = f"spill {stored.spill_id}"
    where = {
        "full": f"saved in full as {spill}",
        "partial": (
            f"saved in part as {spill} (the retention cap"
            f" kept only bytes {format_ranges(stored.stored_ranges)})"
        ),
        "none": f"NOT saved ({stored.reason})",
    }[stored.state]
    note = (
        f"[spillstore] {shaped.cut_count} line(s) of {quote_name(step.tool_name)}"
        f" (call {quote_name(step.tool_call_id)}) were longer than"
        f" {host.settings.max_line_bytes} bytes and were cut above. The whole output"
        f" ({measured.total_bytes} bytes, {total_lines} lines, sha256 {measured.sha256})"
        f" is {where}."
    )
    if stored.state != "none":
        note += (
            f' Next: {host.read_tool}(spill="{stored.spill_id}", byte_offset={offset},'
            f" max_bytes={DEFAULT_BYTE_PAGE}) reads on from the first cut (line {line})."
        )
    for json_note in _json_notes(host, step, stored):  # saved in part: why no shape
        note += f"\n{json_note}"
    if stored.state != "none" and stored.path:
        note += f"\n{path_line(stored.path)}"
    # Compared as the model will read them: a lone surrogate is U+FFFD in both.
    text = _dedupe_suffix(encode(shaped.text).decode("utf-8"), step.suffix)
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


def notices_size(parts: Sequence[Part]) -> int:
    """The model text of the parts besides the pointer (blob notices), separators counted."""
    return sum(utf8_size(part.text) + 1 for part in parts if isinstance(part, TextPart))


def _dedupe_suffix(text: str, suffix: str) -> str:
    """Append mode: drop a copy of the suffix already at the end of the text."""
    if suffix and text.rstrip("\n").endswith(suffix.rstrip("\n")):
        return text.rstrip("\n")[: -len(suffix.rstrip("\n"))].rstrip("\n")
    return text


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
