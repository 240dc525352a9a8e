"""JSON and JSON Lines documents: detection, and the byte range of a value. Pure: no I/O.

A spill is treated as JSON when its whole text is one JSON value, and as JSON Lines
(NDJSON) when every non-blank line is one; text some of whose lines are JSON objects or
arrays (a log, or a result whose structured content was appended as its last line) is
queried over those lines, the others counted as skipped. The stored bytes are never
changed. :func:`looks_like_json` decides on the first significant byte, so the service
spends nothing on output that cannot be JSON.

:class:`JsonDoc` answers where a value lives: given a path (the keys and indexes jq's
``path(...)`` yields), :meth:`JsonDoc.locate` returns the value's half-open
``[start, end)`` byte range in the original bytes, so a Read of that range shows
exactly the value's text. The members of each container walked through are indexed
once and kept, so later paths into the same container are O(1) per step.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "JSON_START_BYTES",
    "JsonDoc",
    "JsonKind",
    "NotJson",
    "looks_like_json",
    "parse_doc",
]

JsonKind = Literal["json", "ndjson"]
"""One JSON value (``json``), or one value per non-blank line (``ndjson``)."""

JSON_START_BYTES = frozenset(b'{["-0123456789tfn')
"""The bytes a JSON value can start with (after whitespace)."""

_START_CHARS = frozenset(map(chr, JSON_START_BYTES))
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_BYTE_WHITESPACE = re.compile(rb"[ \t\n\r]*")
_BYTE_CHECKPOINT = 1 << 16
"""Characters between the byte-offset checkpoints of a non-ASCII document."""


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
"""A strict decoder: ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON."""


def looks_like_json(text: str | bytes) -> bool:
    """Whether ``text`` (the start of an output is enough) may start a JSON value.

    Only the first byte that is not JSON whitespace is looked at.
    """
    if isinstance(text, str):
        stripped = text.lstrip(" \t\n\r")[:1].encode("utf-8", "replace")
    else:
        stripped = text.lstrip(b" \t\n\r")[:1]
    return bool(stripped) and stripped[0] in JSON_START_BYTES


@dataclass(frozen=True, slots=True)
class NotJson:
    """Why a text is not JSON or JSON Lines (for the model: short and exact)."""

    reason: str


@dataclass(slots=True)
class JsonDoc:
    """A JSON or JSON Lines text, with the byte offsets of the values it holds.

    Attributes:
        text: the decoded text (the stored bytes, decoded as strict UTF-8).
        kind: ``"json"`` or ``"ndjson"``.
        roots: each top-level value as ``(line, start, end)``: its 1-based line (1 for
            a JSON document) and its character range.
        total_bytes: the size of the original bytes.
        skipped_lines: JSON Lines only: non-blank lines that hold no JSON object or
            array (text around JSON lines); 0 for strict JSON Lines.
    """

    text: str
    kind: JsonKind
    roots: list[tuple[int, int, int]]
    total_bytes: int
    skipped_lines: int = 0
    _ascii: bool = False
    _checkpoints: list[int] | None = None
    _members: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    _items: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    _ends: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ascii = self.total_bytes == len(self.text)

    def root_text(self, index: int) -> str:
        """The text of the ``index``-th top-level value."""
        _, start, end = self.roots[index]
        return self.text[start:end]

    def byte_of(self, char_index: int) -> int:
        """The byte offset of the character at ``char_index``."""
        if self._ascii:
            return char_index
        if self._checkpoints is None:
            sizes = [0]
            for start in range(0, len(self.text), _BYTE_CHECKPOINT):
                chunk = self.text[start : start + _BYTE_CHECKPOINT]
                sizes.append(sizes[-1] + len(chunk.encode("utf-8", "surrogatepass")))
            self._checkpoints = sizes
        block = char_index // _BYTE_CHECKPOINT
        rest = self.text[block * _BYTE_CHECKPOINT : char_index]
        return self._checkpoints[block] + len(rest.encode("utf-8", "surrogatepass"))

    def locate(self, root: int, path: list[object]) -> tuple[int, int] | None:
        """The ``[start, end)`` byte range of the value at ``path`` in root ``root``.

        ``path`` holds object keys (``str``) and array indexes (``int``, negative from
        the end), as jq's ``path(...)`` yields them. ``None`` when the path leads to no
        value of the text (a missing key, an index out of range, a slice).
        """
        _, start, end = self.roots[root]
        for step in path:
            opener = self.text[start]
            if isinstance(step, str) and opener == "{":
                found = self._object_members(start).get(step)
            elif isinstance(step, int) and not isinstance(step, bool) and opener == "[":
                items = self._array_items(start)
                index = step + len(items) if step < 0 else step
                found = items[index] if 0 <= index < len(items) else None
            else:
                return None
            if found is None:
                return None
            start, end = found
        return self.byte_of(start), self.byte_of(end)

    def _end_of(self, start: int, *, deep: bool) -> int:
        """The end of the value at ``start``; a container's members are indexed on the way.

        A container is measured by indexing its members (each member parsed once, in
        C, then dropped), so a path into it later costs nothing more; with ``deep``
        the members that are containers are indexed the same way.
        """
        end = self._ends.get(start)
        if end is not None:
            return end
        opener = self.text[start]
        if opener == "{":
            self._object_members(start, deep=deep)
        elif opener == "[":
            self._array_items(start, deep=deep)
        else:
            return _DECODER.raw_decode(self.text, start)[1]
        return self._ends[start]

    def _object_members(self, start: int, *, deep: bool = True) -> dict[str, tuple[int, int]]:
        members = self._members.get(start)
        if members is None:
            # A repeated key: the last one wins, as in jq (and Python's json).
            children = self._children(start, deep=deep)
            members = {str(key): (s, e) for key, s, e in children}
            self._members[start] = members
        return members

    def _array_items(self, start: int, *, deep: bool = True) -> list[tuple[int, int]]:
        items = self._items.get(start)
        if items is None:
            items = [(s, e) for _, s, e in self._children(start, deep=deep)]
            self._items[start] = items
        return items

    def _children(self, start: int, *, deep: bool) -> list[tuple[str | None, int, int]]:
        """The members of the object or array at ``start``: key (None in an array), range."""
        text, decode = self.text, _DECODER.raw_decode
        is_object = text[start] == "{"
        closer = "}" if is_object else "]"
        children: list[tuple[str | None, int, int]] = []
        pos = _skip(text, start + 1)
        if text[pos] != closer:
            while True:
                key = None
                if is_object:
                    key, pos = decode(text, pos)
                    pos = _skip(text, _skip(text, pos) + 1)  # past the ":"
                value_end = self._end_of(pos, deep=False) if deep else decode(text, pos)[1]
                children.append((key, pos, value_end))
                pos = _skip(text, value_end)
                if text[pos] == closer:
                    break
                pos = _skip(text, pos + 1)
        self._ends[start] = pos + 1
        return children


def _skip(text: str, pos: int) -> int:
    """The index of the first non-whitespace character at or after ``pos``."""
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]


def parse_doc(data: bytes) -> JsonDoc | NotJson:
    """Decide whether ``data`` is JSON or JSON Lines, and index its top-level values.

    Costs one parse of the text (the values are dropped as they are parsed); a line
    whose first significant character cannot start JSON is skipped unparsed.
    """
    at = _BYTE_WHITESPACE.match(data).end()  # type: ignore[union-attr]
    if at == len(data):
        return NotJson("it is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NotJson(f"it is not valid UTF-8 (byte {exc.start})")
    start = _skip(text, 0)
    if data[at] in JSON_START_BYTES:
        try:
            _, end = _DECODER.raw_decode(text, start)
        except ValueError:
            end = -1
        if end >= 0 and _skip(text, end) == len(text):
            return JsonDoc(text, "json", [(1, start, end)], len(data))
    roots: list[tuple[int, int, int]] = []
    first_failure: str | None = None
    skipped = 0
    line, line_start = 1, 0
    while line_start < len(text):
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = len(text)
        pos = _skip(text, line_start)
        if pos < line_end:
            failure = _line_failure(text, pos, line_end)
            if isinstance(failure, int):
                roots.append((line, pos, failure))
            else:
                first_failure = first_failure or f"line {line} {failure}"
                skipped += 1
        line, line_start = line + 1, line_end + 1
    if skipped:
        # Text with JSON lines in it (a log, or a result whose structured content was
        # appended as its last line): the lines holding an object or an array are queried.
        roots = [root for root in roots if text[root[1]] in "{["]
        if not roots:
            return NotJson(first_failure or "no line holds JSON")
    return JsonDoc(text, "ndjson", roots, len(data), skipped_lines=skipped)


def _line_failure(text: str, pos: int, line_end: int) -> int | str:
    """The end of the one JSON value on the line at ``pos``, or why there is none."""
    if text[pos] not in _START_CHARS:
        return f"starts with {text[pos]!r}"
    try:
        _, end = _DECODER.raw_decode(text, pos)
    except ValueError as exc:
        return f"is not JSON: {_where(text, exc, pos)}"
    if end > line_end or _skip(text, end) < line_end:
        return "holds more than one JSON value, or a value that goes on past the line"
    return end


def _where(text: str, exc: ValueError, start: int) -> str:
    if isinstance(exc, json.JSONDecodeError):
        at = len(text[: exc.pos].encode("utf-8", "surrogatepass"))
        return f"{exc.msg} at byte {at}"
    return str(exc)[:200]
