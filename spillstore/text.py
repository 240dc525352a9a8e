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

from spillstore._core.cap import (
    MIN_CAP_BYTES,
    PART_SEPARATOR,
    cap_content,
    cap_result,
    elide_middle,
    elision_marker,
)
from spillstore._core.utf8 import head, tail, utf8_size

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
