"""Where the members of a JSON container written compactly (as orjson writes it) lie,
from the lengths of their compact forms, without scanning the text. Pure: no I/O.

:class:`~spillstore._core.json_doc.JsonDoc` uses these offsets once it has checked that
the whole document is written exactly as orjson writes its value.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import orjson

__all__ = ["ArraySpans", "compact_spans"]

_ONE_MORE = (1).__add__


def compact_spans(value: Any, start: int, end: int) -> Any:
    """Where the members of ``value``, written compactly at ``[start, end)``, start.

    An array: an :class:`ArraySpans`. An object: each key's ``(start, end)``; the
    last member's length is the container's end, so it is never written out.
    """
    dumps = orjson.dumps
    if isinstance(value, list):
        return ArraySpans(value, start)
    spans: dict[str, tuple[int, int]] = {}
    if not isinstance(value, dict) or not value:
        return spans
    pos = start + 1
    last = len(value) - 1
    for at, (key, member) in enumerate(value.items()):
        pos += len(dumps(key)) + 1
        member_end = end - 1 if at == last else pos + len(dumps(member))
        spans[key] = (pos, member_end)
        pos = member_end + 1
    return spans


_BLOCK = 64
"""Items of a compactly written array measured by one orjson dump."""


class ArraySpans:
    """Where the items of a compactly written array start: each block of :data:`_BLOCK`
    items is measured by one dump (``[a,b]``: its items, its commas and two brackets),
    and a block's items one by one when a range in it is first asked for."""

    __slots__ = ("blocks", "items", "value")

    def __init__(self, value: list[Any], start: int) -> None:
        dumps = orjson.dumps
        sizes = (len(dumps(value[at : at + _BLOCK])) - 1 for at in range(0, len(value), _BLOCK))
        self.value = value
        self.blocks = [*accumulate(sizes, initial=start + 1)]  # the last: one past the `]`
        self.items: dict[int, list[int]] = {}

    def __getitem__(self, index: int) -> tuple[int, int]:
        """Item ``index``'s ``[start, end)``."""
        block, at = divmod(index, _BLOCK)
        offsets = self.items.get(block)
        if offsets is None:
            items = self.value[block * _BLOCK : block * _BLOCK + _BLOCK - 1]
            lengths = map(_ONE_MORE, map(len, map(orjson.dumps, items)))
            offsets = [*accumulate(lengths, initial=self.blocks[block]), self.blocks[block + 1]]
            self.items[block] = offsets
        return offsets[at], offsets[at + 1] - 1
