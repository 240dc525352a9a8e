"""Per-line shaping: cut lines longer than ``max_line_bytes``, cosmetically. Pure.

Shaping is tried before replacing an output with a preview: an output that is large only
because of a few enormous lines (minified JSON, a base64 blob) often fits once those
lines are cut, and then the model sees every line. Each cut line ends with a marker that
says how many bytes were cut and the byte offset to read on from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spillstore._core.cap import PART_SEPARATOR
from spillstore._core.utf8 import head, head_cut, utf8_size

__all__ = ["LineShaper", "Shaped", "shape_lines"]


@dataclass(frozen=True, slots=True)
class Shaped:
    """An output with its long lines cut.

    Attributes:
        text: the shaped output.
        cut_count: how many lines were cut.
        first_cut: ``(line, byte offset where the cut part starts)`` of the first cut line.
    """

    text: str
    cut_count: int
    first_cut: tuple[int, int]


def _marker(kept: int, line_bytes: int, resume_at: int) -> str:
    return f" [... line cut: {line_bytes - kept} more bytes from byte {resume_at}]"


def _short_lines_overflow(text: str, max_line_bytes: int, budget: int) -> bool:
    """Whether the start of ``text`` alone proves that shaping cannot fit ``budget``.

    Whole short lines are kept as they are, at least one byte a character. So if the
    whole lines within the first ``2 * budget`` characters are all short and hold more
    than ``budget`` characters, the shaped text exceeds ``budget``. One C-speed split
    decides it, where the line loop would take a Python step per line to get there.
    """
    window = text[: 2 * budget]
    lines = window.split("\n")
    if len(lines) < 2:
        return False
    whole = len(window) - len(lines[-1])
    if whole <= budget:
        return False
    widest = max(map(len, lines[:-1])) * (1 if window.isascii() else 4)
    return widest <= max_line_bytes


def shape_lines(texts: Sequence[str], *, max_line_bytes: int, budget: int) -> Shaped | None:
    """Cut every line longer than ``max_line_bytes``; ``None`` if the result exceeds ``budget``.

    Stops as soon as the shaped text is known to exceed ``budget``, so the cost is
    bounded by the budget plus a C-speed newline search, not by the output's size.
    Returns ``None`` too when no line needed cutting (shaping cannot help then).
    """
    if texts and _short_lines_overflow(texts[0], max_line_bytes, budget):
        return None
    pieces: list[str] = []
    size = 0
    offset = 0  # byte offset of the current line in the joined output
    line_no = 1
    cut_count = 0
    first_cut = (0, 0)
    for index, text in enumerate(texts):
        if index:
            pieces.append(PART_SEPARATOR)
            size += len(PART_SEPARATOR)
            offset += len(PART_SEPARATOR)
            line_no += PART_SEPARATOR.count("\n")
        ascii_text = text.isascii()
        position = 0
        while position < len(text):
            newline = text.find("\n", position)
            end = len(text) if newline < 0 else newline + 1
            chars = end - position
            if chars * 4 <= max_line_bytes + 4:
                line_bytes = chars if ascii_text else utf8_size(text[position:end])
                if line_bytes <= max_line_bytes + (newline >= 0):
                    pieces.append(text[position:end])
                    size += line_bytes
                    offset += line_bytes
                    position = end
                    line_no += newline >= 0  # a line is numbered by the newlines before it
                    if size > budget:
                        return None
                    continue
            body_end = end - (newline >= 0)
            body = text[position:body_end]
            body_bytes = len(body) if ascii_text else utf8_size(body)
            if body_bytes <= max_line_bytes:
                kept_text = body
            else:
                kept_text = head(body, max_line_bytes)
                kept = utf8_size(kept_text)
                if not cut_count:
                    first_cut = (line_no, offset + kept)
                cut_count += 1
                kept_text += _marker(kept, body_bytes, offset + kept)
            piece = kept_text + ("\n" if newline >= 0 else "")
            pieces.append(piece)
            size += utf8_size(piece)
            offset += body_bytes + (newline >= 0)
            position = end
            line_no += newline >= 0
            if size > budget:
                return None
    if not cut_count or size > budget:
        return None
    return Shaped(text="".join(pieces), cut_count=cut_count, first_cut=first_cut)


class LineShaper:
    """:func:`shape_lines` of one output that arrives as bytes, piece by piece.

    A stream is shaped as the whole output would be, in bounded memory: the shaped text
    is kept only while it is within ``budget`` (past it the shaper gives up, and each
    later piece costs one check), and of a line only its first ``max_line_bytes`` (plus
    a character's continuation) are kept while the rest is counted. So a stream whose
    long lines alone overflow gets the same append mode as the whole output.

    Args:
        max_line_bytes: the line cap (``Settings.max_line_bytes``).
        budget: the most shaped bytes kept; :meth:`finish` checks the real room.
    """

    def __init__(self, *, max_line_bytes: int, budget: int) -> None:
        self.max_line_bytes = max_line_bytes
        self.budget = budget
        self.over = False
        self._pieces: list[bytes] = []
        self._size = 0
        self._line = bytearray()  # the kept start of the current line
        self._line_bytes = 0  # the current line's bytes so far, its newline not counted
        self._offset = 0  # where the current line starts in the output
        self._line_no = 1
        self._cut_count = 0
        self._first_cut = (0, 0)

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the output."""
        if self.over:
            return
        keep = self.max_line_bytes + 4
        position = 0
        while position < len(data):
            newline = data.find(b"\n", position)
            end = len(data) if newline < 0 else newline
            room = keep - len(self._line)
            if room > 0:
                self._line += data[position : min(end, position + room)]
            self._line_bytes += end - position
            if newline < 0:
                return
            self._close(newline=True)
            if self.over:
                return
            position = newline + 1

    def _close(self, *, newline: bool) -> None:
        body_bytes = self._line_bytes
        line = bytes(self._line)
        ending = b"\n" if newline else b""
        if body_bytes <= self.max_line_bytes:
            piece = line + ending
        else:
            kept = head_cut(line, self.max_line_bytes)
            if not self._cut_count:
                self._first_cut = (self._line_no, self._offset + kept)
            self._cut_count += 1
            piece = line[:kept] + _marker(kept, body_bytes, self._offset + kept).encode() + ending
        self._pieces.append(piece)
        self._size += len(piece)
        self._offset += body_bytes + newline
        self._line_no += newline
        self._line.clear()
        self._line_bytes = 0
        if self._size > self.budget:
            self.over = True
            self._pieces.clear()

    def finish(self, room: int) -> Shaped | None:
        """The shaped output, or ``None`` if it exceeds ``room`` (at most ``budget``),
        no line was cut, or the output is not valid UTF-8."""
        if not self.over and self._line_bytes:
            self._close(newline=False)
        if self.over or not self._cut_count or self._size > room:
            return None
        try:
            text = b"".join(self._pieces).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return Shaped(text=text, cut_count=self._cut_count, first_cut=self._first_cut)
