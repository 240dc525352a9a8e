"""What jq reads as its input beyond one JSON value: a byte order mark at the start,
``NaN`` and ``Infinity``, and values one after another. Pure: no I/O.

The query (:func:`~spillstore._core.json_doc.parse_doc`) and the pointer's shape
(:mod:`~spillstore._core.json_shape`) read a spill as jq does, so that what the shape
promises the query delivers, and what the query returns is what jq would.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "BOM",
    "DECODER",
    "JSON_START_BYTES",
    "START_CHARS",
    "bom_size",
    "jq_constant",
    "stream",
    "stream_values",
]

JSON_START_BYTES = frozenset(b'{["-0123456789tfn')
"""The bytes a JSON value can start with (after whitespace)."""

START_CHARS = frozenset(map(chr, JSON_START_BYTES))
"""The characters a JSON value can start with."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")

BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark: jq skips one at the very start of its input, so we do too."""

_JQ_CONSTANTS: dict[str, Any] = {
    "NaN": None,
    "Infinity": 1.7976931348623157e308,
    "-Infinity": -1.7976931348623157e308,
}
"""What jq reads ``NaN``, ``Infinity`` and ``-Infinity`` as (they are not JSON, but
Python's ``json.dumps`` writes them, and jq reads them: null and the largest doubles)."""


def jq_constant(name: str) -> Any:
    """The value jq gives the non-JSON constant ``name`` (``parse_constant`` of a decoder)."""
    return _JQ_CONSTANTS[name]


def bom_size(text: str | bytes) -> int:
    """The length of a byte order mark at the start of ``text`` (0 when there is none)."""
    if isinstance(text, str):
        return 1 if text.startswith("\ufeff") else 0
    return len(BOM) if text.startswith(BOM) else 0


DECODER = json.JSONDecoder(parse_constant=jq_constant)
"""The decoder of the values: strict JSON, but ``NaN`` and ``Infinity`` read as jq reads
them (:func:`jq_constant`)."""


def _glued(last: str, first: str) -> bool:
    """Whether two values with nothing between them are one token to jq: a number or
    a literal (``true``) ending where another begins (``00``, ``1-1``, ``truefalse``)."""
    return last not in '"]}' and first not in '"[{'


def _skip(text: str, pos: int) -> int:
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]


def stream(text: str, pos: int) -> tuple[list[tuple[int, int, int]], list[Any]] | None:
    """Two or more JSON values one after another from ``pos`` to the end (jq reads its
    input so: ``{}{}``, or pretty-printed values in a row), each with the line it starts
    on and its range in characters; None when the text is not that."""
    roots: list[tuple[int, int, int]] = []
    values: list[Any] = []
    line, counted = 1, 0
    while pos < len(text):
        if text[pos] not in START_CHARS:
            return None
        if roots and pos == roots[-1][2] and _glued(text[pos - 1], text[pos]):
            return None  # jq reads "00" or "1-1" as one token, not two values
        try:
            value, end = DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return None
        line += text.count("\n", counted, pos)
        counted = pos
        roots.append((line, pos, end))
        values.append(value)
        pos = _skip(text, end)
    return (roots, values) if len(roots) > 1 else None


def stream_values(text: str, pos: int) -> list[Any] | None:
    """The values of :func:`stream` (two or more values in a row
    from ``pos`` to the end), or None: what the shape summary and the query agree on."""
    found = stream(text, pos)
    return None if found is None else found[1]
