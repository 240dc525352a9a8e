"""Hypothesis strategies shared by the whole suite.

Text here is deliberately hostile: lone surrogates (which have no UTF-8 encoding),
4-byte characters, CRLF line ends, combining marks and NUL are all opted in, and are
drawn often enough to sit at the edges of every cut.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

from hypothesis import strategies as st

from spillstore._content import MediaPart, Part, TextPart

HOSTILE_PIECES = (
    "\ud800",  # lone high surrogate
    "\udfff",  # lone low surrogate
    "\ud83d\ude00",  # a surrogate *pair* in a str: two lone surrogates to Python
    "\U0001f600",  # 4-byte character
    "\U0010ffff",  # the highest code point
    "\r\n",
    "\n",
    "e\u0301",  # combining acute accent
    "\u00e9",  # 2-byte character
    "\u20ac",  # 3-byte character
    "\x00",
    "\ufffd",
)

any_char = st.characters(codec=None, exclude_categories=())
"""Any code point, surrogates included."""

hostile_text = st.lists(
    st.one_of(st.sampled_from(HOSTILE_PIECES), any_char, st.text(max_size=8)),
    max_size=64,
).map("".join)
"""Short text built from hostile pieces, random code points and plain text."""

valid_utf8_text = hostile_text.map(
    lambda s: s.encode("utf-8", "replace").decode("utf-8", "replace")
)
"""Hostile text with every lone surrogate replaced: always encodes strictly."""

raw_bytes = st.one_of(
    st.binary(max_size=256),
    hostile_text.map(lambda s: s.encode("utf-8", "surrogatepass")),
    valid_utf8_text.map(lambda s: s.encode("utf-8")),
)
"""Bytes that are sometimes valid UTF-8 and sometimes not."""

media_parts = st.builds(
    MediaPart,
    kind=st.sampled_from(["image", "audio", "blob"]),
    mime_type=st.sampled_from(["image/png", "audio/wav", "application/octet-stream"]),
    data=st.binary(max_size=16),
)

parts: st.SearchStrategy[list[Part]] = st.lists(
    st.one_of(hostile_text.map(TextPart), media_parts), max_size=8
)
"""Content lists mixing text and media parts."""

SPILL_PIECES = (
    *(b"\n", b"a", b"line of text\n", b"\r\n", "\u00e9".encode(), "\u20ac".encode()),
    *("\U0001f600".encode(), b"\xff", b"\x80", b"\xf0\x9f", b""),
)

spill_outputs = st.one_of(
    raw_bytes,
    st.lists(st.sampled_from(SPILL_PIECES), max_size=400).map(b"".join),
)
"""Tool outputs as bytes: many lines, multi-byte characters, invalid and cut sequences."""


@st.composite
def retention_limits(draw: st.DrawFn) -> tuple[int | None, int]:
    """A retention cap (None: keep everything) and a tail that fits under it."""
    cap = draw(st.one_of(st.none(), st.integers(0, 300)))
    tail = 0 if cap is None else draw(st.integers(0, cap))
    return cap, tail


def chunks(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    """``data`` split at the drawn ``cuts`` (clamped, deduplicated): how a stream arrives."""
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    for a, b in itertools.pairwise(points):
        yield data[a:b]


# --------------------------------------------------------------------------- JSON text

_json_space = st.sampled_from(["", " ", "\n", "\t", "\r\n  "])
"""JSON whitespace, as documents put it between tokens."""

json_numbers = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53).map(str),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300).map(repr),
    st.sampled_from(["-0", "0.0", "1e2", "1E+2", "-1.5e-3", "0.000123", "12.50", "1e-7", "-0.0"]),
)
"""Numbers in every form JSON allows (integers exact in a double, so jq keeps them)."""

json_strings = st.tuples(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
    | st.sampled_from(["\U0001f600", "\u00e9", "e\u0301", "\x00", '"', "\\", "\u2028"]),
    st.booleans(),
).map(lambda pair: json.dumps(pair[0], ensure_ascii=pair[1]))
"""JSON strings, raw UTF-8 or escaped (4-byte characters as surrogate-pair escapes)."""


@st.composite
def _json_array(draw: st.DrawFn, items: st.SearchStrategy[str]) -> str:
    values = draw(st.lists(items, max_size=4))
    return "[" + ",".join(draw(_json_space) + v + draw(_json_space) for v in values) + "]"


@st.composite
def _json_object(draw: st.DrawFn, items: st.SearchStrategy[str]) -> str:
    members = draw(st.lists(st.tuples(json_strings, items), max_size=4))
    parts = [
        f"{draw(_json_space)}{k}{draw(_json_space)}:{draw(_json_space)}{v}" for k, v in members
    ]
    return "{" + ",".join(parts) + draw(_json_space) + "}"


json_documents = st.tuples(
    _json_space,
    st.recursive(
        json_numbers | json_strings | st.sampled_from(["true", "false", "null"]),
        lambda items: _json_array(items) | _json_object(items),
        max_leaves=24,
    ),
    _json_space,
).map("".join)
"""JSON documents as text: nested, unicode, numbers in every form, random whitespace
(repeated keys happen too: the last one wins, in jq and in Python)."""
