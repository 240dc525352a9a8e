"""Capping with a receipt, and head/tail capping of a content list. Pure: no I/O.

Two building blocks the service and the integrations stand on:

* :func:`cap_result` cuts one text value to a byte cap and says what it cut
  (``truncated``, ``omitted_bytes``, ``sha256`` of the whole original).
* :func:`cap_content` keeps the head and the tail of a tool result's text parts, joined
  by an elision marker that counts toward the cap, and leaves media parts alone.

Both return the very same object when nothing needs cutting, so the common case costs a
length check and nothing else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, overload

from spillstore._content import EmbeddedText, Part, TextPart, ToolResult
from spillstore._core.checks import check_int
from spillstore._core.utf8 import encode, hash_and_size, head, strict, tail, utf8_size
from spillstore._errors import ConfigError

__all__ = [
    "DEFAULT_HEAD_RATIO",
    "MIN_CAP_BYTES",
    "PART_SEPARATOR",
    "affix_of_parts",
    "cap_content",
    "cap_result",
    "elide_middle",
    "elision_marker",
    "joined_text_size",
    "strict_parts",
]

PART_SEPARATOR = "\n"
"""What joins a result's text parts into the one output text that is measured and cut."""

DEFAULT_HEAD_RATIO = 0.8
"""Share of the text budget given to the head when head and tail are both kept."""

MAX_TOOL_NAME_BYTES = 64
"""The most bytes of a tool name quoted in a marker, so the marker's size is bounded."""

MIN_CAP_BYTES = 512
"""The smallest cap :func:`cap_content` accepts: the longest possible marker plus room
for some text. Smaller caps are rejected rather than exceeded."""

_Value = TypeVar("_Value")
_Text = TypeVar("_Text", str, bytes)


def _fits(text: str, max_bytes: int) -> bool:
    """Whether ``text`` fits in ``max_bytes`` UTF-8 bytes, looking at no more than needed."""
    length = len(text)
    if length * 4 <= max_bytes:
        return True
    if length > max_bytes:
        return False
    return text.isascii() or len(encode(text)) <= max_bytes


# --- cap_result --------------------------------------------------------------------


@overload
def cap_result(value: str, max_bytes: int) -> str | dict[str, Any]: ...
@overload
def cap_result(value: _Value, max_bytes: int) -> _Value | dict[str, Any]: ...
def cap_result(value: object, max_bytes: int) -> object:
    """Cap a text result to ``max_bytes`` UTF-8 bytes, with a receipt for what was cut.

    Args:
        value: a ``str``, or a mapping whose ``"text"`` is a ``str``. Anything else
            (bytes, lists, numbers, None, mappings without ``str`` text) is returned
            untouched.
        max_bytes: the cap, a positive ``int``.

    Returns:
        ``value`` itself when it fits (when its text holds a lone surrogate: the
        text, or a ``dict`` of the mapping, with U+FFFD for each). Otherwise a new
        ``dict``: the mapping's other keys, then ``text`` (the longest prefix that fits,
        never splitting a character), ``truncated=True``, ``omitted_bytes`` (bytes of
        the original not in ``text``) and ``sha256`` (hex digest of the whole
        original's UTF-8). The receipt keys win over keys of the same name. Capping a
        capped value returns it unchanged.

    Raises:
        ConfigError: ``max_bytes`` is not a positive ``int``.
    """
    check_int("max_bytes", max_bytes, minimum=1)
    text: object = value.get("text") if isinstance(value, Mapping) else value
    if not isinstance(text, str):
        return value
    if _fits(text, max_bytes):
        kept = strict(text)  # design 0b: the text comes back strict UTF-8
        if kept is text:
            return value
        return {**value, "text": kept} if isinstance(value, Mapping) else kept
    prefix = head(text, max_bytes)
    digest, total = hash_and_size(text)
    receipt = {
        "text": prefix,
        "truncated": True,
        "omitted_bytes": total - utf8_size(prefix),
        "sha256": digest,
    }
    if isinstance(value, Mapping):
        return {**value, **receipt}
    return receipt


# --- cap_content -------------------------------------------------------------------


def joined_text_size(texts: Sequence[str]) -> int:
    """UTF-8 size of ``texts`` joined with :data:`PART_SEPARATOR`, without joining them."""
    if not texts:
        return 0
    return sum(map(utf8_size, texts)) + len(PART_SEPARATOR) * (len(texts) - 1)


def _quoted_tool_name(tool_name: str) -> str:
    name = head(tool_name, MAX_TOOL_NAME_BYTES)
    return "".join(ch if ch.isprintable() else "?" for ch in name) or "?"


def elision_marker(*, tool_name: str, total_bytes: int, max_bytes: int, elided_bytes: int) -> str:
    """The notice that stands where the middle of an output was cut.

    It names the tool, the original size, the cap and the elided size, and tells the
    model how to get at what was cut.
    """
    return (
        f"\n\n[... {elided_bytes} bytes elided from the middle: {_quoted_tool_name(tool_name)}"
        f" returned {total_bytes} bytes, over the {max_bytes}-byte cap. Re-call it with"
        " narrower arguments (a filter, a smaller range) or page through the output. ...]\n\n"
    )


def _separator(sample: _Text) -> _Text:
    return PART_SEPARATOR if isinstance(sample, str) else PART_SEPARATOR.encode()


def affix_of_parts(texts: Sequence[_Text], max_bytes: int, *, from_end: bool) -> _Text:
    """The longest head (or tail) of ``texts`` joined by the separator within ``max_bytes``."""
    sep = _separator(texts[0])
    cut = tail if from_end else head
    pieces: list[_Text] = []
    room = max_bytes
    for index, text in enumerate(reversed(texts) if from_end else texts):
        if index:
            if room < len(sep):
                break
            pieces.append(sep)
            room -= len(sep)
        piece = cut(text, room)
        pieces.append(piece)
        if len(piece) < len(text):
            break
        room -= utf8_size(piece)
    if from_end:
        pieces.reverse()
    return sep[:0].join(pieces)


def _elide(
    texts: Sequence[_Text], total: int, max_bytes: int, tool_name: str, head_ratio: float
) -> _Text:
    """Head, marker and tail of ``texts`` (``total`` bytes joined), within ``max_bytes``."""
    widest = elision_marker(
        tool_name=tool_name, total_bytes=total, max_bytes=max_bytes, elided_bytes=total
    )
    room = max_bytes - utf8_size(widest)
    head_room = int(room * head_ratio)
    head_text = affix_of_parts(texts, head_room, from_end=False)
    tail_text = affix_of_parts(texts, room - head_room, from_end=True)
    elided = total - utf8_size(head_text) - utf8_size(tail_text)
    marker = elision_marker(
        tool_name=tool_name, total_bytes=total, max_bytes=max_bytes, elided_bytes=elided
    )
    if isinstance(head_text, bytes):
        return head_text + encode(marker) + tail_text
    return head_text + marker + tail_text


def _check_ratio(head_ratio: float) -> None:
    if not isinstance(head_ratio, int | float) or isinstance(head_ratio, bool):
        raise ConfigError(f"head_ratio must be a number between 0 and 1, got {head_ratio!r}")
    if not 0.0 < head_ratio < 1.0:
        raise ConfigError(f"head_ratio must be strictly between 0 and 1, got {head_ratio!r}")


def elide_middle(
    text: _Text, max_bytes: int, *, tool_name: str, head_ratio: float = DEFAULT_HEAD_RATIO
) -> _Text:
    """Keep the head and tail of one ``str`` or ``bytes`` within ``max_bytes``, marker included.

    The single-value form of :func:`cap_content`: ``text`` itself when it fits (a
    ``str`` with lone surrogates made strict UTF-8, each one U+FFFD), else head +
    :func:`elision_marker` + tail. Costs O(``max_bytes``) for ``bytes`` and ASCII
    ``str``; other strings take one chunked pass to learn their exact size.

    Raises:
        ConfigError: the cap is too small for the marker, or ``head_ratio`` is invalid.
    """
    check_int("max_bytes", max_bytes, minimum=MIN_CAP_BYTES)
    _check_ratio(head_ratio)
    if isinstance(text, str) and _fits(text, max_bytes):
        return strict(text)
    total = utf8_size(text)
    if total <= max_bytes:
        return strict(text) if isinstance(text, str) else text
    return _elide([text], total, max_bytes, tool_name, head_ratio)


def strict_parts(parts: Sequence[Part]) -> Sequence[Part]:
    """``parts`` with their texts as strict UTF-8 (each lone surrogate U+FFFD), the model's
    text in every mode (design 0b); ``parts`` itself when every text already is."""
    out = list(parts)
    changed = False
    for i, part in enumerate(out):
        if isinstance(part, TextPart | EmbeddedText):
            text = strict(part.text)
            if text is not part.text:
                out[i] = dataclasses.replace(part, text=text)
                changed = True
    return out if changed else parts


def _capped_parts(
    parts: Sequence[Part], max_bytes: int, tool_name: str, head_ratio: float
) -> Sequence[Part]:
    texts = [part.text for part in parts if isinstance(part, TextPart)]
    # Cheap bound first: no character is wider than 4 bytes.
    upper = sum(map(len, texts)) * 4 + len(PART_SEPARATOR) * max(len(texts) - 1, 0)
    total = upper if upper <= max_bytes else joined_text_size(texts)
    if total <= max_bytes:  # fits: the same parts, unless a text is not strict UTF-8
        return parts if all(map(str.isascii, texts)) else strict_parts(parts)
    capped: TextPart | None = TextPart(_elide(texts, total, max_bytes, tool_name, head_ratio))
    out: list[Part] = []
    for part in parts:
        if not isinstance(part, TextPart):
            out.append(part)
        elif capped is not None:
            out.append(capped)
            capped = None
    return out


_Content = TypeVar("_Content", ToolResult, Sequence[Part])


def cap_content(
    content: _Content,
    max_bytes: int,
    *,
    tool_name: str,
    head_ratio: float = DEFAULT_HEAD_RATIO,
) -> _Content:
    """Keep the head and tail of a result's text within ``max_bytes``, marker included.

    The text parts are measured as one text joined by :data:`PART_SEPARATOR`. When it
    exceeds the cap, they are replaced by a single text part, at the place of the first
    one, holding the head (``head_ratio`` of the room), an elision marker and the tail.
    Media parts, resource links and embedded resources stay, in their relative order;
    ``is_error`` and metadata of a :class:`ToolResult` are kept.

    Args:
        content: a :class:`ToolResult` or a sequence of parts.
        max_bytes: the cap in UTF-8 bytes, at least :data:`MIN_CAP_BYTES`.
        tool_name: named in the marker (at most 64 bytes of it).
        head_ratio: share of the room for the head, strictly between 0 and 1.

    Returns:
        ``content`` itself when its text fits; otherwise a new list or result.

    Raises:
        ConfigError: the cap is too small for the marker, or ``head_ratio`` is invalid.
    """
    check_int("max_bytes", max_bytes, minimum=MIN_CAP_BYTES)
    _check_ratio(head_ratio)
    if isinstance(content, ToolResult):
        parts = _capped_parts(content.content, max_bytes, tool_name, head_ratio)
        if parts is content.content:
            return content
        return dataclasses.replace(content, content=parts)
    return _capped_parts(content, max_bytes, tool_name, head_ratio)
