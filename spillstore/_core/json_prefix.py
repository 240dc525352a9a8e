"""Whether the first bytes of an output read as the start of a JSON document. Pure.

An output the retention cap cut cannot be parsed, so it gets no shape; the pointer says
why only when its kept head really starts like a JSON container (or containers one after
another), not whenever its first byte could start JSON: a numbered log (``00001 ok``) or
a bracketed one (``[INFO] ...``) is not. Every path (a whole text, a stream, a file)
looks at the same :data:`JSON_PROBE_BYTES` of the output, so they agree.
"""

from __future__ import annotations

import json
import re

from spillstore._core.json_input import bom_size
from spillstore._core.utf8 import head

__all__ = ["JSON_PROBE_BYTES", "is_json_prefix", "starts_like_json"]

JSON_PROBE_BYTES = 1024
"""The most bytes of an output's start that :func:`starts_like_json` reads."""

_CUT_SHORT = re.compile(r"(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?|[-+.eE0-9]*)")
"""What a parse may fail on at the end of the probe: a literal or a number cut short."""

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def starts_like_json(start: str | bytes, kept_bytes: int) -> bool:
    """Whether an output starting with ``start`` starts like JSON, judged on the first
    :data:`JSON_PROBE_BYTES` of it, or the ``kept_bytes`` every path keeps of an output's
    head when fewer (a stream keeps only its head preview and a little slack).
    """
    probe = min(JSON_PROBE_BYTES, kept_bytes)
    if isinstance(start, bytes):
        return is_json_prefix(head(start, probe).decode("utf-8", "replace"))
    return is_json_prefix(head(start, probe))


def is_json_prefix(text: str) -> bool:
    """Whether ``text`` is a prefix of JSON containers.

    True when, after a byte order mark and whitespace, each value is an object or an
    array that parses to its end or up to where ``text`` ends (inside a string, a
    literal or a number). False for anything else, an empty text included.
    """
    size = len(text)
    position = _skip(text, bom_size(text))
    if position >= size:
        return False
    while position < size:
        if text[position] not in "{[":
            return False
        try:
            _, position = _DECODER.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            return _cut_short(text, exc)
        position = _skip(text, position)
    return True


def _cut_short(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the parse failed only because ``text`` ends: inside a string (or one of
    its escapes), or in a literal or a number."""
    if exc.msg.startswith("Unterminated string"):
        return True
    if exc.msg.startswith("Invalid \\uXXXX escape"):
        return exc.pos >= len(text) - 6
    return _CUT_SHORT.fullmatch(text, exc.pos) is not None


def _skip(text: str, position: int) -> int:
    while position < len(text) and text[position] in _WHITESPACE:
        position += 1
    return position
