"""The shape of a JSON or JSON Lines output, for the pointer. Pure: no I/O.

A model that sees only the first 4 KB of a 7 MB document cannot tell what it holds; a
few lines of shape can: the top-level type and keys, array lengths, and for arrays of
objects the union of their keys, each with its type and one short example::

    JSON object, 2 keys:
      total: int (60000)
      items: array[60000] of {id: int (0), name: str ("user0"), tags: array[2] of str ("a")}

A key missing from some objects is marked ``?``; values of several types show them all
(``int | null``). The text is deterministic (keys in first-seen order) and bounded:
deep structures are cut at :data:`MAX_DEPTH`, wide ones after :data:`MAX_KEYS` keys
(with a count), and the whole summary at the byte budget it is given.

Detection is :func:`~spillstore._core.json_doc.looks_like_json` first (one byte), then a
strict parse of the whole text; the output itself is never changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from spillstore._core.collector import gc_paused
from spillstore._core.json_columns import MAX_DEPTH, MAX_KEYS, Arrays, Column, Objects
from spillstore._core.json_doc import (
    NotJson,
    looks_like_json,
)
from spillstore._core.json_input import bom_size, jq_constant, stream_values
from spillstore._core.json_lazy import CHUNK_BYTES, lazy_doc
from spillstore._core.utf8 import head, utf8_size

__all__ = ["MAX_DEPTH", "MAX_KEYS", "JsonShape", "json_shape", "shape_of_values"]

CHUNKED_CHARS = CHUNK_BYTES
"""From this length on, a listing (an array, or an object whose last member is an
array) is summarized a chunk of its array at a time: its parsed items are never held
all at once (parsed whole, a listing takes five to eight times its size, and the cycle
collector walks every container made so far, again and again, while it is built)."""


@dataclass(frozen=True, slots=True)
class JsonShape:
    """The shape lines of a JSON output, and a jq expression worth trying on it."""

    lines: tuple[str, ...]
    example: str


_fast_loads: Callable[[str], Any] | None
try:
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency; the standard one works
    _fast_loads = None
"""orjson's parser, where installed: a third faster than :func:`json.loads` on a large
listing, and as strict (it refuses ``NaN``, a trailing comma, a lone surrogate escape,
which then go to the standard decoder). One difference: an integer past 64 bits comes
back as a float, so its example in the shape is a float too."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_JQ_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def shape_of_values(values: Sequence[Any], depth: int = 0) -> str:
    """The shape of a column of values (an array's items, a key's values in objects)."""
    column = Column(depth)
    column.add(values)
    return column.render()


def _lines(values: Sequence[Any], title: str) -> list[str]:
    if len(values) == 1 and isinstance(values[0], dict) and values[0]:
        obj = values[0]
        objects = Objects(0)
        objects.add([obj])
        return [f"{title} object, {len(obj)} keys:"] + [f"  {line}" for line in objects.members()]
    return [f"{title} {shape_of_values(values)}"]


def _chunked(text: str, title: str) -> tuple[list[str], str] | None:
    """The lines and example expression of a listing, its array summarized a chunk at
    a time (:func:`~spillstore._core.json_lazy.lazy_doc` proves each chunk by parsing
    it, and hands over its items); None when the text is not of that shape (or holds
    what the chunked parse leaves to the standard decoder: the caller parses it whole)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: not JSON text orjson reads
        return None
    # The array's items are a column under the root array, or under a root member.
    depth = 1 if text.lstrip(" \t\n\r")[:1] == "[" else 2
    items = Column(depth)
    with gc_paused():
        doc = lazy_doc(data, collect=items.add)
    if doc is None:  # pragma: no cover - it was cut once
        return None
    arrays = Arrays(depth - 1, doc.count, doc.count)
    arrays.items = items
    column = Column(depth - 1)
    column.arrays = arrays
    if doc.key is None:
        return [f"{title} {column.render()}"], ".[0]" if doc.count else "length"
    found = doc.head()
    if isinstance(found, NotJson) or not isinstance(found.values[0], dict):
        return None  # pragma: no cover - lazy_doc checked it
    root = found.values[0]
    objects = Objects(0)
    objects.add([root])
    if doc.key in objects.columns:
        objects.columns[doc.key] = column
    lines = [f"{title} object, {len(root)} keys:"] + [f"  {line}" for line in objects.members()]
    root[doc.key] = [None] if doc.count else []  # what the example expression looks at
    return lines, _example_expression(root)


def _fit(lines: Iterable[str], budget: int) -> list[str]:
    """The lines within ``budget`` bytes; a cut line ends in ``...``, cut lines are counted."""
    out: list[str] = []
    lines = list(lines)
    used = 0
    for index, line in enumerate(lines):
        room = budget - used - 40  # keep room for the count of lines left out
        if room <= 0:
            out.append(f"  ... {len(lines) - index} more lines")
            break
        if utf8_size(line) > room:
            line = head(line, room - 4) + " ..."  # noqa: PLW2901 - cut to fit
        out.append(line)
        used += utf8_size(line) + 1
    return out


def json_shape(texts: Sequence[str], budget: int) -> JsonShape | None:
    """The shape of an output held as text parts, in at most ``budget`` bytes; None when
    the output is not one JSON value or JSON Lines. Of several parts, the last one is
    looked at (an MCP result's structured content is appended as its last part).

    Costs nothing for text whose first character cannot start JSON, and little for
    text whose first value is followed by more on its line (a log line starting with a
    number); otherwise one strict parse of the text (``NaN`` and ``Infinity`` are not
    JSON) and one pass over the values; from :data:`CHUNKED_CHARS` on, a listing's
    array is parsed and summarized a chunk at a time.
    """
    if not texts or not looks_like_json(texts[-1][:64]):
        return None
    text = texts[-1][bom_size(texts[-1]) :]  # jq skips a byte order mark; so does the shape
    title = "JSON" if len(texts) == 1 else "Its last part (structured content): JSON"
    if len(text) >= CHUNKED_CHARS and _one_container(text):
        chunked = _chunked(text, title)
        if chunked is not None:
            lines, example = chunked
            return JsonShape(tuple(_fit(_clean(lines), budget)), example)
    if _fast_loads is not None and _one_container(text):
        try:
            whole = _fast_loads(text)
        except ValueError:
            pass  # not one value (JSON Lines, a log): the standard decoder decides below
        else:
            lines = _lines([whole], title)
            return JsonShape(tuple(_fit(_clean(lines), budget)), _example_expression(whole))
    decoder = json.JSONDecoder(parse_constant=jq_constant)
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    try:
        value, end = decoder.raw_decode(text, start)
    except ValueError:
        return None  # not even the first value parses: a log, prose
    after = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    if after == len(text):
        lines = _lines([value], title)
        return JsonShape(tuple(_fit(_clean(lines), budget)), _example_expression(value))
    if len(texts) > 1:
        return None
    if "\n" in text[start:end] or text[end:after].count("\n") == 0:
        # Not JSON Lines; values one after another are a stream to jq, so to the query.
        values = stream_values(text, start)
        if values is None:
            return None
        title = "JSON values one after another"
    else:
        values = _json_lines(decoder, text)
        title = "JSON Lines"
    if values is None or len(values) < 2:
        return None
    lines = [f"{title}, {len(values)} values, each: {shape_of_values(values)}"]
    return JsonShape(tuple(_fit(_clean(lines), budget)), _example_expression(values[0]))


def _one_container(text: str) -> bool:
    """Whether ``text`` opens and closes like one object or array (looked at without a
    copy: a log that starts with a number or a ``[`` is not handed to orjson, whose
    first step is a copy of the whole text)."""
    start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]
    end = len(text) - 1
    while end > start and text[end] in " \t\n\r":
        end -= 1
    return end > start and text[start] + text[end] in ("{}", "[]")


def _json_lines(decoder: json.JSONDecoder, text: str) -> list[Any] | None:
    """The value of each non-blank line, or None at the first line that is not JSON."""
    values = []
    line_start = 0
    while line_start < len(text):
        line_end = text.find("\n", line_start)
        if line_end < 0:
            line_end = len(text)
        line = text[line_start:line_end]
        if line.strip():
            try:
                values.append(decoder.decode(line))
            except ValueError:
                return None
        line_start = line_end + 1
    return values


def _example_expression(value: object) -> str:
    """A jq expression that shows a first item: ``.items[0]``, ``.[0]`` or ``keys``."""
    if isinstance(value, list):
        return ".[0]" if value else "length"
    if isinstance(value, dict):
        for key, member in value.items():
            if isinstance(member, list) and member:
                plain = _JQ_NAME.fullmatch(key)
                step = f".{key}" if plain else f".[{json.dumps(key, ensure_ascii=False)}]"
                return f"{step}[0]"
        return "keys"
    return "."


def _clean(lines: list[str]) -> list[str]:
    """Lines that are strict UTF-8 (a key or value may hold a lone surrogate)."""
    return [line.encode("utf-8", "replace").decode("utf-8") for line in lines]
