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

:func:`parse_doc` also keeps the parsed values (``JsonDoc.values``), for the native
query evaluator, and builds them in the same pass that indexes the top of the document:
the root's members, each parsed by the C decoder; deeper containers are indexed when a
path first walks into them.

A JSON document (not JSON Lines) is parsed by orjson first, straight from the bytes (the
text is decoded only when something asks for it: jq, or a range in a document orjson
would write differently). When the document is written exactly as orjson writes it
(compact, no escapes it would not use: :meth:`JsonDoc.canonical`), a value's range is
computed from the lengths of its siblings' compact forms, without scanning the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from spillstore._core.json_input import (
    DECODER,
    JSON_START_BYTES,
    START_CHARS,
    bom_size,
    stream,
)
from spillstore._core.json_spans import compact_spans

__all__ = [
    "JSON_START_BYTES",
    "ORJSON_BYTES",
    "JsonDoc",
    "JsonKind",
    "NotJson",
    "exact_numbers",
    "looks_like_json",
    "parse_doc",
    "scan_value",
]

JsonKind = Literal["json", "ndjson"]
"""One JSON value (``json``), or one value per non-blank line (``ndjson``)."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_BYTE_WHITESPACE = re.compile(rb"[ \t\n\r]*")
_BYTE_CHECKPOINT = 1 << 16
"""Characters between the byte-offset checkpoints of a non-ASCII document."""

INDEX_LEVELS = 1
"""Levels of containers indexed while the document is parsed (1: the root's members).
Deeper containers are indexed when a path first walks into them (one at a time, each
member parsed whole by the C scanner), so a value parsed in one call shares its
object keys (``{"items": [...]}``: the items' keys are one set of strings)."""


_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = DECODER.scan_once  # type: ignore[attr-defined]
_WHITESPACE_CHARS = frozenset(" \t\n\r")
_WHITESPACE_BYTES = frozenset(b" \t\n\r")

_DIGITS = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
"""Every digit to ``0``, every other byte to a space (:func:`exact_numbers`)."""

ORJSON_BYTES = 16 * 1024 * 1024
"""The largest document orjson parses whole: its parse reserves about 19 times the
document in address space, and it crashes (rather than failing) when a limit on that
is reached. Larger ones go to the standard decoder (or a chunk at a time:
:mod:`~spillstore._core.json_lazy`)."""

_LONG_INTEGER = b"0" * 19
"""A run of 19 digits: the shortest integer past 64 bits has 20, but a 19-digit one may
be past ``2**63``: orjson turns those into floats, so such a document is parsed again by
the standard decoder."""


def scan_value(text: str, pos: int) -> tuple[Any, int]:
    """The value starting exactly at ``pos`` and its end (the decoder's C scanner).

    Raises:
        ValueError: no JSON value starts at ``pos``.
    """
    try:
        return _SCAN_ONCE(text, pos)
    except StopIteration as stop:
        raise ValueError(f"a JSON value expected (character {stop.value})") from None


def looks_like_json(text: str | bytes) -> bool:
    """Whether ``text`` (the start of an output is enough) may start a JSON value.

    Only the first byte that is not JSON whitespace is looked at.
    """
    text = text[bom_size(text) :]
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
        data: the stored bytes.
        kind: ``"json"`` or ``"ndjson"``.
        roots: each top-level value as ``(line, start, end)``: its 1-based line and
            its range: in bytes for a JSON document (line 1), in characters of the
            text for JSON Lines.
        skipped_lines: JSON Lines only: non-blank lines that hold no JSON object or
            array (text around JSON lines); 0 for strict JSON Lines.
        stream: ``ndjson`` values that are not one per line but one after another
            (``{}{}``, pretty-printed values in a row), as jq reads its input.
        values: the parsed value of each root, in order.
        strict: the values were parsed by orjson, which refuses what jq refuses and
            Python reads (a lone surrogate escape).
        chunks: the :class:`~spillstore._core.json_lazy.LazyDoc` the values were
            parsed from a chunk at a time, if they were: a range in a document not
            written as orjson writes it is then found within one chunk.
    """

    data: bytes
    kind: JsonKind
    roots: list[tuple[int, int, int]]
    skipped_lines: int = 0
    stream: bool = False
    values: list[Any] = field(default_factory=list)
    strict: bool = False
    _text: str | None = None
    _ascii: bool = False
    _checkpoints: list[int] | None = None
    _members: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)
    _items: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    chunks: Any = None
    _canonical: tuple[int, int] | None = None
    _canonical_known: bool = False
    _spans: dict[int, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ascii = self.data.isascii()

    @property
    def total_bytes(self) -> int:
        """The size of the original bytes."""
        return len(self.data)

    @property
    def text(self) -> str:
        """The decoded text (decoded when first asked for, then kept)."""
        if self._text is None:
            self._text = self.data.decode("utf-8")
        return self._text

    def root_text(self, index: int) -> str:
        """The text of the ``index``-th top-level value (a JSON document: all of it)."""
        if self.kind == "json":
            return self.text
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
        if self.kind == "json":
            if self.canonical() is not None:
                return self._locate_canonical(path)
            if self.chunks is not None:
                return self.chunks.locate(root, path)  # type: ignore[no-any-return]
            # Whitespace around the value is ASCII: as many characters as bytes; a byte
            # order mark before it is 3 bytes and 1 character.
            start -= 2 if bom_size(self.data) else 0
            end = len(self.text) - (len(self.data) - end)
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

    def canonical(self) -> tuple[int, int] | None:
        """The root's ``[start, end)`` bytes when the document is written exactly as
        orjson writes its value (compact, the same escapes and numbers), else None.

        Then the range of every value in it follows from the compact forms' lengths.
        """
        if not self._canonical_known:
            self._canonical_known = True
            at = _BYTE_WHITESPACE.match(self.data, bom_size(self.data)).end()  # type: ignore[union-attr]
            try:
                written = orjson.dumps(self.values[0])
            except (orjson.JSONEncodeError, TypeError):  # a lone surrogate, a big integer
                return None
            end = at + len(written)
            tail = _BYTE_WHITESPACE.match(self.data, end).end()  # type: ignore[union-attr]
            if tail == len(self.data) and self.data.startswith(written, at):
                self._canonical = (at, end)
        return self._canonical

    def _locate_canonical(self, path: list[object]) -> tuple[int, int] | None:
        """:meth:`locate` in a canonical document: each container's member offsets
        are the running sum of its members' compact lengths (kept per container)."""
        start, end = self._canonical  # type: ignore[misc]
        value = self.values[0]
        for step in path:
            spans = self._spans.get(start)
            if spans is None:
                spans = self._spans[start] = compact_spans(value, start, end)
            if isinstance(step, str) and isinstance(value, dict):
                found = spans.get(step)
                if found is None:
                    return None
                start, end = found
                value = value[step]
            elif isinstance(step, int) and not isinstance(step, bool) and isinstance(value, list):
                index = step + len(value) if step < 0 else step
                if not 0 <= index < len(value):
                    return None
                start, end = spans[index]
                value = value[index]
            else:
                return None
        return start, end

    def parse_indexed(self, start: int) -> tuple[Any, int]:
        """The value at ``start`` and its end, strictly parsed, with the members of the
        container at ``start`` indexed on the way (:data:`INDEX_LEVELS`).

        Raises:
            ValueError: the text at ``start`` is not one JSON value.
        """
        text = self.text
        if text[start] == "[" and text[_skip(text, start + 1)] not in "{[]":
            return scan_value(text, start)  # scalars: parsed whole in C, indexed when a path asks
        return self._walk(start, INDEX_LEVELS, keep=True)

    def _walk(self, start: int, levels: int, *, keep: bool) -> tuple[Any, int]:
        """Index the container at ``start`` and the containers ``levels - 1`` levels
        below it; with ``keep``, build its value too (else the value is None).

        Each member that is not walked is parsed by the decoder's C scanner in one call.
        """
        text = self.text
        opener = text[start]
        if levels <= 0 or opener not in "{[":
            return scan_value(text, start)
        is_object = opener == "{"
        closer = "}" if is_object else "]"
        walk = levels > 1
        obj: dict[str, Any] = {}
        items: list[Any] = []
        spans: list[tuple[int, int]] = []
        members: dict[str, tuple[int, int]] = {}
        pos = _skip(text, start + 1)
        if text[pos] != closer:
            while True:
                if is_object:
                    if text[pos] != '"':
                        raise ValueError(f"a key must be a string (character {pos})")
                    key, pos = scan_value(text, pos)
                    if text[pos] != ":":
                        pos = _skip(text, pos)
                        if text[pos] != ":":
                            raise ValueError(f"':' expected (character {pos})")
                    pos = _skip(text, pos + 1)
                if walk and text[pos] in "{[":
                    value, end = self._walk(pos, levels - 1, keep=keep)
                else:
                    value, end = scan_value(text, pos)
                if is_object:
                    members[key] = (pos, end)  # a repeated key: the last one wins, as in jq
                    if keep:
                        obj[key] = value
                else:
                    spans.append((pos, end))
                    if keep:
                        items.append(value)
                pos = end
                if text[pos] in _WHITESPACE_CHARS:
                    pos = _skip(text, pos)
                if text[pos] == ",":
                    pos += 1
                    if text[pos] in _WHITESPACE_CHARS:
                        pos = _skip(text, pos)
                elif text[pos] == closer:
                    break
                else:
                    raise ValueError(f"',' expected (character {pos})")
        if is_object:
            self._members[start] = members
        else:
            self._items[start] = spans
        if not keep:
            return None, pos + 1
        return (obj if is_object else items), pos + 1

    def _object_members(self, start: int) -> dict[str, tuple[int, int]]:
        members = self._members.get(start)
        if members is None:
            self._walk(start, 1, keep=False)
            members = self._members[start]
        return members

    def _array_items(self, start: int) -> list[tuple[int, int]]:
        items = self._items.get(start)
        if items is None:
            self._walk(start, 1, keep=False)
            items = self._items[start]
        return items


def exact_numbers(data: bytes) -> bool:
    """Whether orjson reads every number of ``data`` as the standard decoder does: no
    run of 19 digits (an integer past 64 bits becomes a float in orjson)."""
    return _LONG_INTEGER not in data.translate(_DIGITS)


def _fast_parse(data: bytes) -> JsonDoc | None:
    """``data`` as one JSON value parsed by orjson, or None (not one JSON value for
    orjson, or a long integer: the standard decoder then decides)."""
    bom = bom_size(data)
    try:
        value = orjson.loads(memoryview(data)[bom:] if bom else data)
    except orjson.JSONDecodeError:
        return None
    if not exact_numbers(data):
        return None
    at = _BYTE_WHITESPACE.match(data, bom).end()  # type: ignore[union-attr]
    end = len(data)
    while end > at and data[end - 1] in _WHITESPACE_BYTES:
        end -= 1
    return JsonDoc(data, "json", [(1, at, end)], values=[value], strict=True)


def _skip(text: str, pos: int) -> int:
    """The index of the first non-whitespace character at or after ``pos``."""
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]


def parse_doc(data: bytes) -> JsonDoc | NotJson:
    """Decide whether ``data`` is JSON or JSON Lines, and index its top-level values.

    Costs one parse: orjson's of the bytes for one JSON value, else the standard
    decoder's of the text (indexing the root's members, or each line); a line whose
    first significant character cannot start JSON is skipped unparsed.
    """
    at = _BYTE_WHITESPACE.match(data, bom_size(data)).end()  # type: ignore[union-attr]
    if at == len(data):
        return NotJson("it is empty")
    if data[at] in JSON_START_BYTES and len(data) <= ORJSON_BYTES:
        fast = _fast_parse(data)
        if fast is not None:
            return fast
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return NotJson(f"it is not valid UTF-8 (byte {exc.start})")
    start = _skip(text, bom_size(text))
    if data[at] in JSON_START_BYTES:
        doc = JsonDoc(data, "json", [], _text=text)
        try:
            value, end = doc.parse_indexed(start)
        except (ValueError, IndexError, RecursionError):
            end = -1
        if end >= 0 and _skip(text, end) == len(text):
            doc.roots.append((1, at, len(data) - (len(text) - end)))
            doc.values.append(value)
            return doc
        del doc
    roots: list[tuple[int, int, int]] = []
    values: list[Any] = []
    first_failure: str | None = None
    skipped = 0
    line, line_start = 1, 0
    while line_start < len(text):
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = len(text)
        pos = _skip(text, line_start or bom_size(text))
        if pos < line_end:
            failure = _line_failure(text, pos, line_end)
            if isinstance(failure, tuple):
                roots.append((line, pos, failure[1]))
                values.append(failure[0])
            else:
                first_failure = first_failure or f"line {line} {failure}"
                skipped += 1
        line, line_start = line + 1, line_end + 1
    if skipped:
        found = stream(text, start)
        if found is not None:  # values one after another ({}{}, or each over lines)
            return JsonDoc(data, "ndjson", found[0], values=found[1], stream=True, _text=text)
        # Text with JSON lines in it (a log, or a result whose structured content was
        # appended as its last line): the lines holding an object or an array are queried.
        kept = [at for at, root in enumerate(roots) if text[root[1]] in "{["]
        if not kept:
            return NotJson(first_failure or "no line holds JSON")
        roots = [roots[at] for at in kept]
        values = [values[at] for at in kept]
    return JsonDoc(data, "ndjson", roots, skipped_lines=skipped, values=values, _text=text)


def _line_failure(text: str, pos: int, line_end: int) -> tuple[Any, int] | str:
    """The one JSON value on the line at ``pos`` and its end, or why there is none."""
    if text[pos] not in START_CHARS:
        return f"starts with {text[pos]!r}"
    try:
        value, end = DECODER.raw_decode(text, pos)
    except ValueError as exc:
        return f"is not JSON: {_where(text, exc, pos)}"
    if end > line_end or _skip(text, end) < line_end:
        return "holds more than one JSON value, or a value that goes on past the line"
    return value, end


def _where(text: str, exc: ValueError, start: int) -> str:
    if isinstance(exc, json.JSONDecodeError):
        at = len(text[: exc.pos].encode("utf-8", "surrogatepass"))
        return f"{exc.msg} at byte {at}"
    return str(exc)[:200]
