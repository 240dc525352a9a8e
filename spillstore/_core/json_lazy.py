"""A large JSON document kept as its bytes: its big array in chunks, parsed on demand. Pure.

Parsed whole, a JSON listing takes five to eight times its size in Python objects. A
large document of the common shapes (an array, or an object whose last member is an
array, as in ``{"total": N, "items": [...]}``) is instead cut into chunks of about
:data:`CHUNK_BYTES` at item boundaries, and only the chunks' offsets are kept: a query of
the form ``.items[] | ...`` parses one chunk at a time (orjson, from the bytes), so the
memory a query takes is the document's bytes plus one chunk's values.

A cut is proved, not guessed: a chunk is its bytes between brackets, and orjson parses
it only when the cut lies between two items of the array (a cut inside a string or a
nested value leaves a string or a bracket open). Candidate cuts are where the text
between the array's first two items (the separator, then the second item's opening and
first key) occurs again, so a uniform listing is cut on the first try.

What is not one of these shapes, or not cut within :data:`ATTEMPTS` tries, or holds a
number orjson would read differently, is not made lazy (None): the caller parses it
whole.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import orjson

from spillstore._core.json_doc import (
    JsonDoc,
    NotJson,
    exact_numbers,
    parse_doc,
    scan_value,
)
from spillstore._core.json_input import bom_size

__all__ = ["CHUNK_BYTES", "Chunk", "Keep", "LazyDoc", "lazy_doc", "parse_chunked"]

CHUNK_BYTES = 1 << 20
"""About how many bytes of the array one chunk holds."""

HEAD_BYTES = 1 << 16
"""The root object's members before the array must fit in this many bytes."""

ATTEMPTS = 16
"""Candidate cuts tried for one chunk before the document is parsed whole instead."""

_WHITESPACE = frozenset(b" \t\n\r")

Keep = tuple[bytes, bool]
"""What an item must hold to matter to a query, for :meth:`LazyDoc.each`: bytes that a
chunk written without escapes (``False``) or as orjson writes it (``True``) holds when
one of its items does."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """Items ``first .. first + count - 1`` of the array, at bytes ``[start, end)``.

    ``objects``: every item is an object; ``plain``: no backslash in the chunk's bytes
    (every string in it is written as its characters); ``canonical``: written exactly
    as orjson writes its items (an integer as its digits, a float as Python's repr).
    """

    start: int
    end: int
    first: int
    count: int
    objects: bool
    plain: bool
    canonical: bool


@dataclass(slots=True)
class LazyDoc:
    """A JSON document whose big array stays as bytes (see the module docstring).

    ``key``: the root member holding the array (None: the root is the array);
    ``array``: the array's ``[start, end)`` bytes; ``roots``, ``kind`` and
    ``skipped_lines`` as :class:`~spillstore._core.json_doc.JsonDoc`'s.
    """

    data: bytes
    key: str | None
    array: tuple[int, int]
    chunks: list[Chunk]
    roots: list[tuple[int, int, int]]
    kind: str = "json"
    skipped_lines: int = 0
    _firsts: list[int] = field(default_factory=list)
    _located: tuple[int, JsonDoc] | None = None

    @property
    def total_bytes(self) -> int:
        """The size of the original bytes."""
        return len(self.data)

    @property
    def count(self) -> int:
        """How many items the array holds."""
        return self.chunks[-1].first + self.chunks[-1].count if self.chunks else 0

    def items(self, chunk: Chunk) -> list[Any]:
        """The parsed items of ``chunk``."""
        return orjson.loads(b"[" + self.data[chunk.start : chunk.end] + b"]")  # type: ignore[no-any-return]

    def each(
        self,
        keep: Keep | None = None,
        parsing: Callable[[int], AbstractContextManager[None]] | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """Every item as ``(index, value)``, a chunk parsed at a time. With ``keep``,
        a chunk of objects that cannot hold the value it names is skipped unparsed;
        with ``parsing``, each chunk is parsed inside ``parsing(its size)`` (the query
        worker's CPU allowance for a parse)."""
        data = self.data
        for chunk in self.chunks:
            if keep is not None and chunk.objects:
                needle, canonical = keep
                if (chunk.canonical if canonical else chunk.plain) and (
                    data.find(needle, chunk.start, chunk.end) < 0
                ):
                    continue
            with nullcontext() if parsing is None else parsing(chunk.end - chunk.start):
                items = self.items(chunk)
            yield from enumerate(items, chunk.first)

    def locate(self, root: int, path: list[object]) -> tuple[int, int] | None:
        """The ``[start, end)`` byte range of the value at ``path`` (as
        :meth:`JsonDoc.locate <spillstore._core.json_doc.JsonDoc.locate>`)."""
        del root  # one root
        steps = list(path)
        if self.key is not None:
            if not steps:
                return self.roots[0][1], self.roots[0][2]
            if steps[0] != self.key:
                head = self.head()
                return None if isinstance(head, NotJson) else head.locate(0, steps)
            steps.pop(0)
        if not steps:
            return self.array
        index = steps[0]
        if not isinstance(index, int) or isinstance(index, bool):
            return None
        index = index + self.count if index < 0 else index
        if not 0 <= index < self.count:
            return None
        if not self._firsts:
            self._firsts = [chunk.first for chunk in self.chunks]
        at = bisect_right(self._firsts, index) - 1
        chunk = self.chunks[at]
        if self._located is None or self._located[0] != at:
            doc = parse_doc(b"[" + self.data[chunk.start : chunk.end] + b"]")
            if isinstance(doc, NotJson):  # pragma: no cover - it parsed when it was cut
                return None
            self._located = (at, doc)
        found = self._located[1].locate(0, [index - chunk.first, *steps[1:]])
        if found is None:
            return None
        return found[0] - 1 + chunk.start, found[1] - 1 + chunk.start

    def head(self) -> JsonDoc | NotJson:
        """The root object before the array, the array written as ``null``: its other
        members sit at the same offsets."""
        return parse_doc(self.data[: self.array[0]] + b"null}")


def _skip(data: bytes, pos: int) -> int:
    while pos < len(data) and data[pos] in _WHITESPACE:
        pos += 1
    return pos


def _window(data: bytes, start: int, size: int) -> str:
    """``data[start:start + size]`` decoded, cut back to a character boundary."""
    end = min(len(data), start + size)
    while end > start and end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[start:end].decode("utf-8")


def _value_end(data: bytes, pos: int, limit: int) -> int | None:
    """Where the JSON value at byte ``pos`` ends, scanning at most ``limit`` bytes."""
    size = 4096
    while True:
        text = _window(data, pos, size)
        try:
            _, end = scan_value(text, 0)
        except (ValueError, IndexError, RecursionError):
            if size >= limit or pos + size >= len(data):
                return None
            size *= 4
            continue
        return pos + len(text[:end].encode("utf-8"))


def parse_chunked(data: bytes) -> JsonDoc | None:
    """``data`` parsed whole, but a chunk at a time, or None (not of a shape kept lazily:
    :func:`~spillstore._core.json_doc.parse_doc` then).

    The values are those ``orjson.loads(data)`` gives; its own parse holds about three
    times the document beside its result while it runs, a chunk's only the chunk's.
    """
    items: list[Any] = []
    doc = lazy_doc(data, collect=items.extend)
    if doc is None:
        return None
    root: Any = items
    strict = True
    if doc.key is not None:
        head = doc.head()
        if isinstance(head, NotJson):  # pragma: no cover - lazy_doc checked it
            return None
        root = head.values[0]
        root[doc.key] = items  # where the last member with that key is, as a parse puts it
        strict = head.strict
    return JsonDoc(data, "json", doc.roots, values=[root], strict=strict, chunks=doc)


def lazy_doc(
    data: bytes, *, collect: Callable[[list[Any]], object] | None = None
) -> LazyDoc | None:
    """``data`` as a :class:`LazyDoc`, or None when it is not of a shape kept lazily
    (or not JSON: the caller parses it whole and says why). With ``collect``, each
    chunk's items are handed to it, in order, as the chunk is parsed."""
    if bom_size(data):  # kept whole: the standard decoder reads past the mark
        return None
    at = _skip(data, 0)
    end = len(data)
    while end > at and data[end - 1] in _WHITESPACE:
        end -= 1
    if end - at < 2:
        return None
    if data[at] == 0x5B:  # [
        key, start, close = None, at, end - 1
    elif data[at] == 0x7B and data[end - 1] == 0x7D:  # {...}
        close = end - 2
        while close > at and data[close] in _WHITESPACE:
            close -= 1
        found = _last_member(data, at, close)
        if found is None:
            return None
        key, start = found
    else:
        return None
    if data[close] != 0x5D:  # ]
        return None
    chunks = _cut(data, start, close, collect)
    if chunks is None:
        return None
    doc = LazyDoc(data, key, (start, close + 1), chunks, [(1, at, end)])
    if key is not None and isinstance(doc.head(), NotJson):
        return None  # the members before the array are not JSON: parsed whole, it says why
    return doc


def _last_member(data: bytes, at: int, close: int) -> tuple[str, int] | None:
    """The key and start of the root object's last member, when it is an array: the
    members before it are scanned, and must end within :data:`HEAD_BYTES`."""
    text = _window(data, at, HEAD_BYTES)
    pos = 1
    while True:
        try:
            while text[pos] in " \t\n\r":
                pos += 1
            key, pos = scan_value(text, pos)
            while text[pos] in " \t\n\r":
                pos += 1
            if text[pos] != ":" or not isinstance(key, str):
                return None
            pos += 1
            while text[pos] in " \t\n\r":
                pos += 1
            value_at = pos
            try:
                _, pos = scan_value(text, pos)
            except (ValueError, IndexError, RecursionError):
                pos = len(text)  # cut by the window: the big array, if it is one
            while pos < len(text) and text[pos] in " \t\n\r":
                pos += 1
            if pos == len(text) or text[pos] == "}":  # the last member
                if text[value_at] != "[":
                    return None
                return key, at + len(text[:value_at].encode("utf-8"))
            if text[pos] != ",":
                return None
            pos += 1
        except (ValueError, IndexError, RecursionError):
            return None


def _cut(
    data: bytes, start: int, close: int, collect: Callable[[list[Any]], object] | None
) -> list[Chunk] | None:
    """The array ``data[start:close + 1]`` cut into chunks, each proved by its parse
    (its items handed to ``collect``, then not checked for ``canonical``)."""
    pos = _skip(data, start + 1)
    if pos == close:
        return []
    needle = separator = None
    first_end = _value_end(data, pos, CHUNK_BYTES)
    if first_end is not None:
        second = _skip(data, _skip(data, first_end) + 1)
        if second < close and data[_skip(data, first_end)] == 0x2C:  # ,
            separator = data[first_end:second]
            opening = second + 1 if data[second] == 0x7B else second  # {
            key_end = _value_end(data, _skip(data, opening), 4096) if opening > second else None
            needle = data[first_end : key_end if key_end is not None else second]
    chunks: list[Chunk] = []
    first = 0
    while pos < close:
        cut = data.find(needle, pos + CHUNK_BYTES, close) if needle else -1
        for _ in range(ATTEMPTS):
            last = cut < 0
            if last:
                cut = close
                while data[cut - 1] in _WHITESPACE:
                    cut -= 1
            chunk = data[pos:cut]
            wrapped = b"[" + chunk + b"]"
            try:
                items = orjson.loads(wrapped)
            except orjson.JSONDecodeError:
                if last:
                    return None
                cut = data.find(needle, cut + 1, close)  # type: ignore[arg-type]
                continue
            break
        else:
            return None
        if not exact_numbers(chunk):
            return None
        objects = all(type(item) is dict for item in items)
        if collect is not None:
            collect(items)
            canonical = False
        else:
            canonical = orjson.dumps(items) == wrapped
        chunks.append(Chunk(pos, cut, first, len(items), objects, b"\\" not in chunk, canonical))
        first += len(items)
        if last:
            break
        pos = cut + len(separator)  # type: ignore[arg-type]
    return chunks
