"""What a column of JSON values holds, gathered a batch at a time, for the shape. Pure.

A :class:`Column` is what :func:`~spillstore._core.json_shape.shape_of_values` shows of
a column of values (an array's items, one key's values in objects): which kinds it
holds, the first example of each scalar kind, the length range and items of its arrays,
the keys of its objects (first seen first; a key some objects lack is optional) and the
column of each shown key. Values are added a batch at a time (:meth:`Column.add`), and
the text is the same whether a column was added whole or in batches, so a large listing
is summarized a chunk at a time (:mod:`~spillstore._core.json_lazy`) without holding
its parsed items.

Each batch is taken apart by kind and by key with C-level maps (a listing's objects all
have the same keys: one ``itemgetter`` map per key); Python loops run per key and per
kind, not per value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from spillstore._core.utf8 import head, utf8_size

__all__ = ["EXAMPLE_BYTES", "MAX_DEPTH", "MAX_KEYS", "Column"]

MAX_DEPTH = 4
"""Containers nested deeper than this are shown by their size only."""

MAX_KEYS = 24
"""Keys shown per object before the rest are counted."""

EXAMPLE_BYTES = 24
"""The most bytes of an example value."""

_KINDS = ("null", "bool", "int", "float", "str", "array", "object")

_KIND_OF_TYPE: dict[type, str] = {
    type(None): "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "str",
    list: "array",
    dict: "object",
}


def _example(value: object) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    if utf8_size(shown) > EXAMPLE_BYTES:
        shown = head(shown, EXAMPLE_BYTES - 3) + "..."
    return shown


def _key(name: str) -> str:
    return name if name.isidentifier() else json.dumps(name, ensure_ascii=False)


class Column:
    """A column of values at ``depth`` (0: the root), added a batch at a time."""

    __slots__ = ("arrays", "depth", "examples", "nulls", "objects")

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.nulls = False
        self.examples: dict[str, Any] = {}  # scalar kind -> its first value
        self.arrays: Arrays | None = None
        self.objects: Objects | None = None

    def add(self, values: Sequence[Any]) -> None:
        """Add the next ``values`` of the column (in order)."""
        types = set(map(type, values))
        if len(types) == 1:
            groups: dict[str, Sequence[Any]] = {_KIND_OF_TYPE[types.pop()]: values}
        else:
            lists: dict[str, list[Any]] = {}
            for value in values:
                lists.setdefault(_KIND_OF_TYPE[type(value)], []).append(value)
            groups = dict(lists)
        for kind, group in groups.items():
            if kind == "array":
                if self.arrays is None:
                    self.arrays = Arrays(self.depth)
                self.arrays.add(group)
            elif kind == "object":
                if self.objects is None:
                    self.objects = Objects(self.depth)
                self.objects.add(group)
            elif kind == "null":
                self.nulls = True
            elif kind not in self.examples:
                self.examples[kind] = group[0]

    def render(self) -> str:
        """``int (0) | null``, ``array[2] of str ("a")``, ``{id: int (0), ...}``."""
        parts = []
        for kind in _KINDS:
            if kind == "array":
                if self.arrays is not None:
                    parts.append(self.arrays.render())
            elif kind == "object":
                if self.objects is not None:
                    parts.append(self.objects.render())
            elif kind == "null":
                if self.nulls:
                    parts.append("null")
            elif kind in self.examples:
                parts.append(f"{kind} ({_example(self.examples[kind])})")
        return " | ".join(parts) if parts else "nothing"


class Arrays:
    """The arrays of a column: their length range and (above :data:`MAX_DEPTH`) the
    column of all their items."""

    __slots__ = ("depth", "high", "items", "low")

    def __init__(self, depth: int, low: int | None = None, high: int = 0) -> None:
        self.depth = depth
        self.low = low
        self.high = high
        self.items = Column(depth + 1) if depth < MAX_DEPTH else None

    def add(self, arrays: Sequence[list[Any]]) -> None:
        lengths = list(map(len, arrays))
        low, high = min(lengths), max(lengths)
        self.low = low if self.low is None else min(self.low, low)
        self.high = max(self.high, high)
        if self.items is not None and high:
            self.items.add(list(chain.from_iterable(arrays)))

    def render(self) -> str:
        low, high = self.low or 0, self.high
        size = f"{low}" if low == high else f"{low}..{high}"
        if high == 0:
            return "array[0]"
        if self.items is None:
            return f"array[{size}]"
        inner = self.items.render()
        return f"array[{size}] of ({inner})" if " | " in inner else f"array[{size}] of {inner}"


class Objects:
    """The objects of a column: every key (first seen first), how many objects hold
    each of the first :data:`MAX_KEYS`, and their columns."""

    __slots__ = ("columns", "count", "depth", "keys", "present")

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.count = 0
        self.keys: dict[str, None] = {}
        self.present: dict[str, int] = {}
        self.columns: dict[str, Column] = {}

    def add(self, objects: Sequence[dict[str, Any]]) -> None:
        self.count += len(objects)
        first = list(objects[0])
        gathered = None
        if len(first) <= MAX_KEYS and len(set(map(len, objects))) == 1:
            try:  # the same keys in every object (a listing): a C map per key
                gathered = [list(map(itemgetter(key), objects)) for key in first]
            except KeyError:
                gathered = None
        if gathered is not None:
            self.keys.update(dict.fromkeys(first))
        else:
            self.keys.update(dict.fromkeys(chain.from_iterable(objects)))
        if self.depth >= MAX_DEPTH:
            return
        by_key = None if gathered is None else dict(zip(first, gathered, strict=True))
        for key in list(self.keys)[:MAX_KEYS]:
            if by_key is not None:
                column = by_key.get(key, [])  # every object of the batch has ``first``
            else:
                column = [obj[key] for obj in objects if key in obj]
            if not column:
                continue
            self.present[key] = self.present.get(key, 0) + len(column)
            found = self.columns.get(key)
            if found is None:
                found = self.columns[key] = Column(self.depth + 1)
            found.add(column)

    def members(self) -> list[str]:
        """``key: shape`` for each shown key (``key?`` when some objects lack it), then
        how many keys are not shown."""
        shown = []
        for key in list(self.keys)[:MAX_KEYS]:
            optional = "?" if self.present.get(key, 0) < self.count else ""
            column = self.columns.get(key) or Column(self.depth + 1)
            shown.append(f"{_key(key)}{optional}: {column.render()}")
        if len(self.keys) > MAX_KEYS:
            shown.append(f"... {len(self.keys) - MAX_KEYS} more keys")
        return shown

    def render(self) -> str:
        if not self.keys:
            return "{}"
        if self.depth >= MAX_DEPTH:
            return f"{{{len(self.keys)} keys}}"
        return "{" + ", ".join(self.members()) + "}"
