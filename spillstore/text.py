"""Capping text without spilling: byte-exact UTF-8 cuts and head/tail elision.

The pure functions the service stands on, for hosts that only need a bounded string (no
store, no pointer, no recovery tools). Every size is a count of UTF-8 bytes; no cut
splits a character; lone surrogates count and encode as U+FFFD (3 bytes); a value that
needs no cutting comes back as the very same object.

- :func:`head` / :func:`tail`: the longest prefix / suffix within ``n`` bytes, in O(n).
- :func:`utf8_size`: the UTF-8 size of a ``str`` or ``bytes``.
- :func:`cap_result`: cap a ``str`` (or a mapping's ``text``) with a receipt
  ``{text, truncated, omitted_bytes, sha256}``.
- :func:`cap_content` / :func:`elide_middle`: keep a head and a tail joined by an
  elision marker (:func:`elision_marker`) that counts toward the cap; media parts stay.
- :data:`MIN_CAP_BYTES`: the smallest cap :func:`cap_content` accepts;
  :data:`PART_SEPARATOR`: what joins a result's text parts into one output.

Example::

    from spillstore.text import elide_middle, utf8_size

    short = elide_middle(log, 4_096, tool_name="bash")
    assert utf8_size(short) <= 4_096
"""

from __future__ import annotations

from typing import TypeVar

from spillstore._core import utf8
from spillstore._core.cap import (
    MIN_CAP_BYTES,
    PART_SEPARATOR,
    cap_content,
    cap_result,
    elide_middle,
    elision_marker,
)
from spillstore._core.checks import check_int, shown
from spillstore._errors import ConfigError

_T = TypeVar("_T", str, bytes)

__all__ = [
    "MIN_CAP_BYTES",
    "PART_SEPARATOR",
    "cap_content",
    "cap_result",
    "elide_middle",
    "elision_marker",
    "head",
    "tail",
    "utf8_size",
]


def head(value: _T, max_bytes: int) -> _T:
    """Return the longest prefix of ``value`` that fits in ``max_bytes`` UTF-8 bytes.

    Never splits a code point. A ``str`` result is valid UTF-8 (lone surrogates become
    U+FFFD); a ``bytes`` result is a prefix of the input (invalid UTF-8 in the input is
    kept as it is, and a cut inside it lands at ``max_bytes``). O(``max_bytes``).

    Raises:
        ConfigError: ``value`` is not a ``str`` or ``bytes``, or ``max_bytes`` is not an
            ``int`` >= 0 (a bool, a float, ``None`` and negatives are refused).
    """
    _check(value, max_bytes)
    return utf8.head(value, max_bytes)


def tail(value: _T, max_bytes: int) -> _T:
    """Return the longest suffix of ``value`` that fits in ``max_bytes`` UTF-8 bytes.

    The mirror of :func:`head`, with the same guarantees and errors.
    """
    _check(value, max_bytes)
    return utf8.tail(value, max_bytes)


def utf8_size(value: str | bytes) -> int:
    """Return the size of ``value`` in UTF-8 bytes (a lone surrogate counts 3).

    Raises:
        ConfigError: ``value`` is not a ``str`` or ``bytes``.
    """
    _check(value, 0)
    return utf8.utf8_size(value)


def _check(value: object, max_bytes: object) -> None:
    if not isinstance(value, str | bytes):
        raise ConfigError(f"value must be a str or bytes; got {shown(value)}", field="value")
    check_int("max_bytes", max_bytes)
