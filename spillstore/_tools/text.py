"""What every tool page shares: the tools' settings, text that fits, and the result.

A page (Read, Grep or List) is rendered for one :class:`~spillstore.SpillTools`; it sees
that object through :class:`ToolsView` (the store, the session, the names the model
calls the tools by, and the byte caps), so the page modules never import the class
that dispatches to them. Every size here is UTF-8 bytes; the text measured is decoded
or rendered text, which never holds a lone surrogate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from spillstore._content import TextPart, ToolResult
from spillstore._core.utf8 import head_cut, utf8_size
from spillstore._stores.base import Store

__all__ = ["ToolNames", "ToolsView", "bounded", "fit", "quote", "result"]


@dataclass(frozen=True, slots=True)
class ToolNames:
    """The names the model calls the three tools by (the hints repeat them)."""

    read: str
    grep: str
    list: str


class ToolsView(Protocol):
    """What a page knows of the tools it is rendered for (a :class:`SpillTools`)."""

    @property
    def store(self) -> Store:
        """The spill store read from."""

    @property
    def session(self) -> str:
        """The session Grep and List cover."""

    @property
    def names(self) -> ToolNames:
        """The tool names hints use."""

    @property
    def cross_session(self) -> bool:
        """Whether other sessions' spills may be read and listed."""

    @property
    def max_page_bytes(self) -> int:
        """The most bytes of any result."""

    @property
    def max_line_bytes(self) -> int:
        """Read cuts longer lines."""

    @property
    def max_column_bytes(self) -> int:
        """Grep shows at most this many bytes of a line."""


def quote(value: str, limit: int = 120) -> str:
    """A short, printable, double-quoted rendering of text the model (or a tool) gave."""
    shown = value if len(value) <= limit else value[:limit] + "..."
    return json.dumps(shown, ensure_ascii=True)


def fit(raw: bytes, max_size: int) -> tuple[int, str, bool]:
    """Cut ``raw`` so its shown text (invalid bytes as U+FFFD) is at most ``max_size`` bytes.

    Returns the cut, the text, and whether the shown bytes held invalid UTF-8.
    """
    cut = head_cut(raw, max_size)
    piece = raw[:cut]
    try:
        return cut, piece.decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    text = piece.decode("utf-8", "replace")
    if utf8_size(text) <= max_size:
        return cut, text, True
    low, high = 0, cut  # invariant: raw[:low] fits, raw[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if utf8_size(raw[:middle].decode("utf-8", "replace")) <= max_size:
            low = middle
        else:
            high = middle
    low = head_cut(raw, low)
    return low, raw[:low].decode("utf-8", "replace"), True


def bounded(text: str, max_bytes: int) -> str:
    """Cut a (short, model-facing) message to ``max_bytes`` as a last line of defence."""
    if utf8_size(text) <= max_bytes:
        return text
    raw = text.encode("utf-8")
    cut = head_cut(raw, max_bytes - 4)
    return raw[:cut].decode("utf-8", "replace") + " ..."


def result(text: str, *, is_error: bool = False) -> ToolResult:
    """A spill-exempt tool result holding ``text`` (the service passes it through)."""
    return ToolResult(content=(TextPart(text),), is_error=is_error, spill_exempt=True)
