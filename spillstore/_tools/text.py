"""The pieces the spill tools share: their settings, text within a cap, error wording, results.

A page (Read, Grep or List) is rendered for one :class:`~spillstore.SpillTools`; it sees
that object through :class:`ToolsView` (the store, the session, the names the model
calls the tools by, and the byte caps), so the page modules never import the class
that dispatches to them. Every size here is UTF-8 bytes; the text measured is decoded
or rendered text, which never holds a lone surrogate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Protocol

from pydantic import ValidationError

from spillstore._content import TextPart, ToolResult
from spillstore._core.utf8 import head_cut, utf8_size
from spillstore._errors import (
    InvalidSpillId,
    PathOutsideStore,
    RangeNotStored,
    SpillExpired,
    SpillNotFound,
    SpillstoreError,
    StoreError,
)
from spillstore._stores.base import Store

__all__ = [
    "ToolNames",
    "ToolsView",
    "bounded",
    "describe_validation",
    "explain",
    "fit",
    "quote",
    "result",
]


@dataclass(frozen=True, slots=True)
class ToolNames:
    """The names the model calls the spill tools by (the hints repeat them)."""

    read: str
    grep: str
    list: str
    query: str = "query_spill"

    def __iter__(self) -> Iterator[str]:
        """Every tool name."""
        return (getattr(self, field.name) for field in fields(self))


class ToolsView(Protocol):
    """What a page knows of the tools it is rendered for (a :class:`SpillTools`).

    Attributes:
        store: the spill store read from.
        session: the session Grep and List cover.
        names: the tool names that hints use.
        cross_session: whether other sessions' spills may be read and listed.
        max_page_bytes: the most bytes of any result.
        max_line_bytes: Read cuts longer lines.
        max_column_bytes: Grep shows at most this many bytes of a line.
    """

    store: Store
    session: str
    names: ToolNames
    cross_session: bool
    max_page_bytes: int
    max_line_bytes: int
    max_column_bytes: int


def quote(value: str, limit: int = 120) -> str:
    """A short, printable, double-quoted rendering of text the model (or a tool) gave."""
    shown = value if len(value) <= limit else value[:limit] + "..."
    return json.dumps(shown, ensure_ascii=True)


def fit(raw: bytes, max_size: int) -> tuple[int, str, bool]:
    """Cut ``raw`` so its shown text (invalid bytes as U+FFFD) is at most ``max_size`` bytes.

    Returns the cut, the text, and whether the shown bytes hold invalid UTF-8. A
    non-empty ``raw`` always gives at least one byte when ``max_size`` can hold a U+FFFD
    (3 bytes): stray continuation bytes can make every cut look mid-character, and a page
    that shows nothing would point at itself as the next call.
    """
    cut = head_cut(raw, max_size)
    try:
        return cut, raw[:cut].decode("utf-8"), False
    except UnicodeDecodeError:
        pass
    if utf8_size(raw[:cut].decode("utf-8", "replace")) > max_size:
        low, high = 0, cut  # invariant: raw[:low] fits, raw[:high] does not
        while high - low > 1:
            middle = (low + high) // 2
            if utf8_size(raw[:middle].decode("utf-8", "replace")) <= max_size:
                low = middle
            else:
                high = middle
        cut = head_cut(raw, low)
    if cut == 0 and raw and max_size >= 3:
        cut = 1
    shown = raw[:cut]
    try:
        return cut, shown.decode("utf-8"), False
    except UnicodeDecodeError:
        return cut, shown.decode("utf-8", "replace"), True


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


def explain(exc: SpillstoreError, names: ToolNames) -> str:
    """What the model reads for a store error: what happened, and what to call next."""
    if isinstance(exc, SpillExpired):
        return f"{str(exc)[:300]}; rerun the tool to get its output again"
    if isinstance(exc, SpillNotFound):
        return f"no spill {exc.spill_id[:80]}; call {names.list} to see the spills"
    if isinstance(exc, InvalidSpillId):
        return (
            f"{quote(exc.spill_id, 100)} is not a spill id or a spill path; call "
            f"{names.list} to see the spills"
        )
    if isinstance(exc, PathOutsideStore):
        return (
            f"refused: {quote(exc.path, 100)} is not a spill of this store (only "
            f"spill ids, or paths of spill files inside the store, can be read); call "
            f"{names.list} to see the spills"
        )
    if isinstance(exc, RangeNotStored):
        return f"{str(exc)[:300]}"
    if isinstance(exc, StoreError):
        return f"the spill store cannot be read: {str(exc)[:300]}"
    return f"invalid request: {str(exc)[:300]}"


def describe_validation(name: str, exc: ValidationError) -> str:
    """What the model reads for arguments that failed validation: the first three problems."""
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        message = str(error["msg"]).removeprefix("Value error, ")
        given = error.get("input")
        shown = ""
        if error["type"] != "missing" and not isinstance(given, dict):
            text = repr(given)
            shown = f" (got {text[:40]}{'...' if len(text) > 40 else ''})"
        problems.append(f"{where}: {message}{shown}")
    more = len(exc.errors()) - len(problems)
    tail = f"; and {more} more" if more > 0 else ""
    return f"invalid arguments for {name}: " + "; ".join(problems) + tail
