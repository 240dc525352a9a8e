"""Grep's content mode: matching lines, their context and column windows, in bytes.

A page of matching lines may hold thousands of them, so lines are kept as UTF-8
``bytes`` slices of the searched buffer and decoded once, at the end. A matching line
renders as ``[spill-id:]line:text`` and a context line as ``[spill-id-]line-text``, with
``--`` between groups that do not touch, as grep does. A line over the column cap shows
a window around its match, saying how many bytes were cut on each side and where the
match starts in the original output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from spillstore._core.utf8 import head_cut, is_continuation
from spillstore._tools.scan import Haystack

__all__ = ["ContentWriter"]


@dataclass(slots=True, kw_only=True, eq=False)
class ContentWriter:
    """Renders matching lines (and context) of Grep's content mode within a byte budget.

    Lines are kept as UTF-8 ``bytes`` and decoded once at the end: the plain case (no
    context, line within the column cap) is one ``%``-format of a buffer slice per hit.
    With ``lossy`` every line is decoded with U+FFFD for invalid bytes and re-encoded,
    so the budget counts exactly what the model will see.
    """

    budget: int
    column_bytes: int
    before: int
    after: int
    lossy: bool
    pieces: list[bytes] = field(default_factory=list)
    used: int = 0
    hits: int = 0
    full: bool = False
    printed_any: bool = False
    # per stored range
    hay: Haystack | None = None
    prefix: bytes = b""
    printed_end: int = -1
    after_pos: int = -1
    after_left: int = 0
    after_line: int = 0

    def start(self, hay: Haystack, prefix: bytes) -> Callable[[int, int, int, int], bool]:
        """Begin a stored range; return the function that adds one matching line.

        ``prefix`` (a spill id, or empty for a single spill) starts every line.
        """
        self.hay = hay
        self.prefix = prefix
        self.printed_end = -1
        self.after_pos = -1
        self.after_left = 0
        self.after_line = 0
        return self.add

    def long_line(self, line: int, line_start: int, line_end: int, match_start: int) -> bytes:
        """Render a matching line over the column cap (for the plain fast path)."""
        return self._render(line, line_start, line_end, b":", match_start)

    def text(self, head: str = "", tail: str = "") -> str:
        """``head``, the rendered lines (each ending with a newline), then ``tail``.

        One join and one decode for the whole page: a page of every match may be
        megabytes, and each copy of it costs its page faults.

        Raises:
            UnicodeDecodeError: a line was not valid UTF-8 although not rendered lossily.
        """
        try:
            first, last = head.encode(), tail.encode()
        except UnicodeEncodeError:  # a lone surrogate (from the pattern): joined as text
            return head + self.text() + tail
        return b"".join([first, *self.pieces, last]).decode("utf-8")

    def _shown(self, piece: bytes) -> bytes:
        """``piece`` as the model will see it (invalid bytes as U+FFFD when lossy)."""
        return piece.decode("utf-8", "replace").encode("utf-8") if self.lossy else piece

    def _emit(self, piece: bytes) -> bool:
        piece = self._shown(piece)
        if self.used + len(piece) > self.budget:
            self.full = True
            return False
        self.pieces.append(piece)
        self.used += len(piece)
        return True

    def _render(self, number: int, start: int, end: int, sep: bytes, match: int | None) -> bytes:
        """One line (``sep`` is ``b":"`` for a match, ``b"-"`` for context), newline included.

        A line over the column cap shows a window around the match (or its start), with
        the bytes cut on each side and, for a match, its original byte offset.
        """
        hay = self.hay
        assert hay is not None
        buf = hay.buf
        head = (self.prefix + sep if self.prefix else b"") + b"%d" % number + sep
        size = end - start
        if size <= self.column_bytes:
            return head + buf[start:end] + b"\n"
        anchor = start if match is None else match
        window_start = max(start, anchor - self.column_bytes // 4)
        chunk = buf[window_start : min(end, window_start + self.column_bytes + 4)]
        skip = 0
        while skip < min(3, len(chunk)) and is_continuation(chunk[skip]):
            skip += 1
        chunk = chunk[skip:]
        window_start += skip
        cut = head_cut(chunk, self.column_bytes)
        left = window_start - start
        right = end - (window_start + cut)
        where = "" if match is None else f"; match at byte {match + hay.origin - hay.lo}"
        opening = f"[... {left} bytes] ".encode() if left else b""
        # a line touching bytes the retention cap did not keep: its stored part is all we know
        partial = (start == hay.lo and hay.cut_lo) or (end == hay.hi and hay.cut_hi)
        length = (
            f"at least {size} bytes (it reaches bytes not kept)" if partial else f"{size} bytes"
        )
        closing = f" [... {right} more bytes; line of {length}{where}]\n".encode()
        return head + opening + chunk[:cut] + closing

    def _flush_after(self, limit: int) -> bool:
        """Print owed after-context lines that start before physical ``limit``."""
        hay = self.hay
        assert hay is not None
        while self.after_left > 0 and self.after_pos < limit and self.after_pos < hay.hi:
            end = hay.buf.find(b"\n", self.after_pos, hay.hi)
            if end < 0:
                end = hay.hi
            self.after_line += 1
            if not self._emit(self._render(self.after_line, self.after_pos, end, b"-", None)):
                return False
            self.after_left -= 1
            self.after_pos = end + 1
            self.printed_end = self.after_pos
        return True

    def add(self, line: int, line_start: int, line_end: int, match_start: int) -> bool:
        """Print one matching line with its context; False when the page is full."""
        hay = self.hay
        assert hay is not None
        if not self.before and not self.after:
            if not self._emit(self._render(line, line_start, line_end, b":", match_start)):
                return False
            self.hits += 1
            return True
        if not self._flush_after(line_start):
            return False
        floor = max(hay.lo, self.printed_end)
        starts: list[int] = []
        position = line_start
        for _ in range(self.before):
            if position <= floor:
                break
            newline = hay.buf.rfind(b"\n", hay.lo, position - 1)
            position = newline + 1 if newline >= 0 else hay.lo
            if position < floor:
                break
            starts.append(position)
        starts.reverse()
        context = [
            self._shown(
                self._render(
                    line - (len(starts) - k),
                    start,
                    hay.buf.find(b"\n", start, line_start),
                    b"-",
                    None,
                )
            )
            for k, start in enumerate(starts)
        ]
        match = self._shown(self._render(line, line_start, line_end, b":", match_start))
        # The match always shows: before-context is cut first, farthest line first.
        while True:
            first_start = starts[len(starts) - len(context)] if context else line_start
            joined = self.printed_any and first_start != self.printed_end
            pieces = [b"--\n"] * joined + context + [match]
            if not context or self.used + sum(map(len, pieces)) <= self.budget:
                break
            context.pop(0)
        if self.used + sum(map(len, pieces)) > self.budget:
            self.full = True
            return False
        for piece in pieces:
            self._emit(piece)
        self.hits += 1
        self.printed_any = True
        self.printed_end = line_end + 1
        self.after_pos = line_end + 1
        self.after_left = self.after
        self.after_line = line
        return True

    def end(self, before: int | None = None) -> None:
        """Finish a stored range: print owed after-context (up to ``before``, if given)."""
        if self.hay is not None and self.after_left and not self.full:
            self._flush_after(self.hay.hi if before is None else before)
        self.after_left = 0
