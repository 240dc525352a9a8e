"""The pointer: what the model reads instead of an oversized output. Pure: no I/O.

The planning here takes the output's text (as parts, never joined into a second copy),
its exact size and line count, and the preview budgets, and decides the head and tail
previews and the exact elided byte and line ranges. The rendering turns that plan and
what the store said into the model-facing text. Nothing here reads a clock or an id
source, so the same output and config always render to the same bytes.

Line numbers are 1-based; line ``k`` starts after the ``(k-1)``-th newline. A byte
range ``[a, b)`` covers lines ``line_of(a)`` to ``line_of(b - 1)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from spillstore._core.cap import PART_SEPARATOR, affix_of_parts
from spillstore._core.ranges import format_lines, format_ranges, gaps
from spillstore._core.utf8 import encode, head, tail

__all__ = [
    "Preview",
    "SaveState",
    "path_line",
    "plan_preview",
    "plan_preview_bytes",
    "printable",
    "quote_name",
    "render_pointer",
]

SaveState = Literal["full", "partial", "none"]
"""How much of the output the store kept: all of it, the stated ranges, or nothing."""

MAX_NAME_BYTES = 64
"""The most bytes of a tool name or call id quoted in the pointer."""

DEFAULT_READ_LIMIT = 200
"""Lines per Read page unless the model asks for another ``limit`` (and so the lines the
ready-to-call Read hint asks for)."""

DEFAULT_BYTE_PAGE = 4096
"""Bytes per Read page in byte mode unless the model asks for another ``max_bytes`` (and
so the bytes a byte-mode hint asks for)."""


def quote_name(name: str) -> str:
    """A tool name or call id made safe to quote: at most 64 bytes, printable, non-empty."""
    return printable(name, MAX_NAME_BYTES) or "?"


def printable(text: str, max_bytes: int) -> str:
    """``text`` cut to ``max_bytes``, each character that is not printable (a newline, NUL,
    an escape) shown as ``?``: what a tool or server names cannot add lines to a notice."""
    return "".join(ch if ch.isprintable() else "?" for ch in head(text, max_bytes))


def path_line(path: str) -> str:
    """The line naming a spill's file: the path alone after the label, nothing glued to it.

    A path ending a sentence gets the sentence's period copied into it by agents that
    copy the path, so the path ends its own line instead.
    """
    return f"File: {path}"


def count_newlines(texts: Sequence[str]) -> int:
    """Newlines in ``texts`` joined by the part separator, without joining them."""
    return sum(text.count("\n") for text in texts) + PART_SEPARATOR.count("\n") * max(
        len(texts) - 1, 0
    )


def line_count(total_bytes: int, newlines: int, ends_with_newline: bool) -> int:
    """Lines in an output: its newlines, plus one for a last line without a newline."""
    if total_bytes == 0:
        return 0
    return newlines + (0 if ends_with_newline else 1)


@dataclass(frozen=True, slots=True)
class Preview:
    """The head and tail shown to the model, and exactly what lies between them.

    Byte ranges are half-open ``[start, end)`` in the original output; line ranges are
    inclusive 1-based ``(first, last)``, ``None`` when the range is empty.
    """

    head_text: str
    tail_text: str
    total_bytes: int
    total_lines: int
    head_end: int
    tail_start: int
    head_lines: tuple[int, int] | None
    tail_lines: tuple[int, int] | None
    elided_lines: tuple[int, int] | None
    head_ends_line: bool

    @property
    def elided(self) -> tuple[int, int]:
        """The byte range not shown, ``[head_end, tail_start)``."""
        return (self.head_end, self.tail_start)


def plan_preview(
    texts: Sequence[str],
    *,
    total_bytes: int,
    newlines: int,
    head_bytes: int,
    tail_bytes: int,
) -> Preview:
    """Choose the head and tail previews of an output held as text parts.

    Costs O(``head_bytes + tail_bytes``): only the two ends of the parts are looked at.

    Args:
        texts: the output's text parts, joined by the part separator.
        total_bytes: the exact UTF-8 size of the joined output.
        newlines: the number of newlines in the joined output.
        head_bytes, tail_bytes: the preview budgets.
    """
    head_budget = min(head_bytes, total_bytes)
    tail_budget = min(tail_bytes, total_bytes - head_budget)
    head_raw = encode(affix_of_parts(texts, head_budget, from_end=False))
    # A few bytes more of tail tell whether the tail starts a line and how the output ends.
    tail_raw = encode(affix_of_parts(texts, tail_budget + 4, from_end=True))
    return plan_preview_bytes(
        head_raw,
        tail_raw,
        total_bytes=total_bytes,
        newlines=newlines,
        head_bytes=head_budget,
        tail_bytes=tail_budget,
    )


def plan_preview_bytes(
    head_raw: bytes,
    tail_raw: bytes,
    *,
    total_bytes: int,
    newlines: int,
    head_bytes: int,
    tail_bytes: int,
    ends_with_newline: bool | None = None,
) -> Preview:
    """Choose the previews from the raw first and last bytes of an output.

    ``head_raw`` must hold the output's first ``min(head_bytes, total)`` bytes or more,
    ``tail_raw`` its last ``tail_bytes`` bytes or more (a few extra bytes let the cut
    land on a character and line boundary). The head is cut back to its last newline
    and the tail forward past its first one when that keeps at least half of each, so
    previews show whole lines. Head and tail never overlap. Invalid UTF-8 is shown as
    U+FFFD; the ranges count the original bytes.
    """
    head_budget = min(head_bytes, total_bytes)
    tail_budget = min(tail_bytes, total_bytes - head_budget)
    first = head(head_raw, head_budget)
    cut = first.rfind(b"\n")
    if cut >= 0 and cut + 1 >= len(first) // 2:
        first = first[: cut + 1]
    last = tail(tail_raw, tail_budget) if tail_budget else b""
    if last and len(last) == len(tail_raw) and total_bytes - len(last) > len(first):
        # Nothing before the tail was given (a store kept only this much of the end):
        # show a character less, so the byte that ends the hidden lines is known.
        last = tail(tail_raw, len(tail_raw) - 1)
    cut = last.find(b"\n")
    if 0 <= cut < len(last) - 1 and cut + 1 <= len(last) // 2:
        last = last[cut + 1 :]
    head_end = len(first)
    tail_start = total_bytes - len(last)
    split = len(tail_raw) - len(last)
    before_tail = tail_raw[split - 1 : split] if split else b""
    if ends_with_newline is None:  # else known to the caller (no tail bytes were kept)
        ends_with_newline = (tail_raw or first).endswith(b"\n")
    total_lines = line_count(total_bytes, newlines, ends_with_newline)
    head_newlines = first.count(b"\n")
    newlines_before_tail = newlines - last.count(b"\n")
    head_lines = (1, head_newlines + (0 if first.endswith(b"\n") else 1)) if first else None
    tail_lines = (newlines_before_tail + 1, total_lines) if last else None
    elided_lines = None
    if tail_start > head_end:
        first_hidden = head_newlines + 1
        # The last hidden byte is at tail_start - 1; a newline there ends its line.
        last_hidden = newlines_before_tail - (before_tail == b"\n") + 1
        elided_lines = (first_hidden, max(first_hidden, last_hidden))
    return Preview(
        head_text=first.decode("utf-8", "replace"),
        tail_text=last.decode("utf-8", "replace"),
        total_bytes=total_bytes,
        total_lines=total_lines,
        head_end=head_end,
        tail_start=tail_start,
        head_lines=head_lines,
        tail_lines=tail_lines,
        elided_lines=elided_lines,
        head_ends_line=first.endswith(b"\n") or not first,
    )


@dataclass(frozen=True, slots=True)
class Stored:
    """What the store said about a spill, as far as the pointer needs it."""

    state: SaveState
    spill_id: str | None = None
    path: str | None = None
    stored_ranges: tuple[tuple[int, int], ...] = ()
    reason: str | None = None


def render_pointer(
    preview: Preview,
    stored: Stored,
    *,
    tool_name: str,
    tool_call_id: str,
    sha256: str,
    invalid_utf8: bool,
    notes: Sequence[str] = (),
    read_tool: str = "read_spill",
    grep_tool: str = "grep_spill",
) -> str:
    """The model-facing text of a replaced output: the notice first, then the previews.

    Three wordings, by ``stored.state``: saved in full, saved in part (naming exactly
    the stored ranges and what was not kept), and not saved (naming the reason).
    """
    total, lines = preview.total_bytes, preview.total_lines
    start, end = preview.elided
    out = [
        f"[spillstore] The output of tool {quote_name(tool_name)}"
        f" (call {quote_name(tool_call_id)}) is too large for the context:"
        f" {total} bytes, {lines} lines, sha256 {sha256}.",
        f"Not shown: bytes [{start}, {end}), {format_lines(preview.elided_lines)}.",
    ]
    where = f"spill {stored.spill_id}"
    if stored.state == "full":
        out.append(f"Saved in full as {where}.")
    elif stored.state == "partial":
        kept = sum(e - s for s, e in stored.stored_ranges)
        out.append(
            f"Saved in part as {where}: the retention cap"
            f" kept {kept} of {total} bytes, the ranges {format_ranges(stored.stored_ranges)};"
            f" bytes {format_ranges(gaps(stored.stored_ranges, total))} were not kept anywhere."
        )
    else:
        out.append(
            f"NOT saved ({stored.reason}): only the preview below exists. To see more,"
            " call the tool again with narrower arguments."
        )
    if stored.state != "none" and stored.path:
        out.append(path_line(stored.path))
    if invalid_utf8:
        out.append(
            "The output is not valid UTF-8: invalid bytes show as U+FFFD here and are"
            " stored as they were."
        )
    out.extend(notes)
    if stored.state != "none" and preview.elided_lines is not None:
        first = preview.elided_lines[0]
        spill = stored.spill_id
        if preview.head_ends_line:
            read = f'{read_tool}(spill="{spill}", offset={first}, limit={DEFAULT_READ_LIMIT})'
        else:
            read = (
                f'{read_tool}(spill="{spill}", byte_offset={start}, max_bytes={DEFAULT_BYTE_PAGE})'
            )
        scope = "the whole output" if stored.state == "full" else "every byte that was kept"
        out.append(
            f"Next: {read} reads the first hidden part;"
            f' {grep_tool}(pattern="...", spill="{spill}") searches {scope}.'
        )
    out.append(f"--- head: bytes [0, {preview.head_end}), {format_lines(preview.head_lines)} ---")
    out.append(preview.head_text.removesuffix("\n"))
    if preview.tail_text:
        tail_lines = format_lines(preview.tail_lines)
        out.append(f"--- tail: bytes [{preview.tail_start}, {total}), {tail_lines} ---")
        out.append(preview.tail_text.removesuffix("\n"))
    out.append("--- end of preview ---")
    return "\n".join(out)
