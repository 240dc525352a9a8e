"""Catalog rows as :class:`~spillstore._stores.meta.SpillMeta`, fast enough to list 100,000.

A row is read in two parts. The *list columns* hold what nearly every spill needs (id,
session, tool, call id, sizes, the head range's end, hash, time) and one *flag* column:
NULL when the rest of the row holds only defaults (the head starts at 0, no tail, no
suffix, no media notes, valid UTF-8, not adopted). Only rows whose flag is set are read a
second time for their *rare columns* (:data:`RARE_SQL`), so a list of 10,000 ordinary
spills converts 10 values a row instead of 16 (SQLite hands each value to Python for
about 0.1 us).

Rows become metadata without pydantic validation: they were validated when inserted.
Ids and sessions name files, so they are checked again, all ids of a list in one regex
match; a row that fails is skipped and logged (``spillstore check`` lists it). The
objects are made the way pydantic's ``model_construct`` makes them (the instance
``__dict__`` and pydantic's three slots), through the slot descriptors themselves.
The cyclic garbage collector is paused while a list's rows and objects are made
(:func:`gc_paused`): 100,000 new objects would otherwise trigger full collections of the
whole heap, which cost more than making them.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, NoReturn

from pydantic import BaseModel

from spillstore._core.ids import SPILL_ID_PATTERN, is_session, is_spill_id
from spillstore._stores.meta import META_FORMAT_VERSION, SpillMeta

__all__ = [
    "LIST_COLUMNS",
    "RARE_SQL",
    "ROW_COLUMNS",
    "ROW_WIDTH",
    "AllFieldsSet",
    "gc_paused",
    "metas_of",
    "rare_of",
    "row_meta",
]

_RARE_FLAG: Final = (
    "coalesce(nullif(head_start, 0), tail_end, suffix, media_notes, nullif(invalid_utf8, 0), "
    "adopted)"
)
LIST_COLUMNS: Final = (
    "spill_id, session, tool_name, tool_call_id, total_bytes, total_lines, head_end, sha256, "
    f"created_at, {_RARE_FLAG}"
)
"""The columns a list reads for every row; the last is NULL for an ordinary row."""

_RARE_COLUMNS: Final = (
    "spill_id, head_start, tail_start, tail_end, suffix, media_notes, invalid_utf8, adopted"
)
RARE_SQL: Final = f"SELECT {_RARE_COLUMNS} FROM spill WHERE {_RARE_FLAG} IS NOT NULL"  # noqa: S608
"""The rare columns of the rows whose flag is set (add ``AND session = ?`` for one)."""

ROW_COLUMNS: Final = f"{LIST_COLUMNS}, {_RARE_COLUMNS}"
"""A whole row: the list columns, then the rare ones (:func:`row_meta` reads both)."""
ROW_WIDTH: Final = 18
"""How many values :data:`ROW_COLUMNS` selects (columns after them start here)."""

_IDS_RE: Final = re.compile(rf"(?:{SPILL_ID_PATTERN}\n)*{SPILL_ID_PATTERN}|")


class AllFieldsSet(set[str]):
    """The ``model_fields_set`` of listed metadata: every field, one object shared by
    all of them, so it refuses changes. pydantic needs a :class:`set` (``model_dump(
    exclude_unset=True)``); a copy (``model_copy(update=...)`` makes one) is a plain set.
    """

    __slots__ = ()

    def _read_only(self, *args: object) -> NoReturn:
        raise TypeError("the fields set of listed metadata is shared and read-only")

    add = discard = remove = pop = clear = update = _read_only
    difference_update = intersection_update = symmetric_difference_update = _read_only
    __ior__ = __iand__ = __isub__ = __ixor__ = _read_only

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: object) -> set[str]:
        return set(self)


_FIELDS_SET: Final = AllFieldsSet(SpillMeta.model_fields)
_new = SpillMeta.__new__
# The setters of the instance __dict__ and of pydantic's slots, as model_construct sets
# them (object.__setattr__ would look each name up again: about twice as slow).
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__

logger = logging.getLogger("spillstore")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if it runs) while many objects are made.

    The objects made meanwhile are freed by reference counting as usual; the collector
    resumes afterwards (a thread that disables it meanwhile sees it enabled again).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _rare_fields(head_end: int | None, rare: Sequence[Any]) -> dict[str, Any]:
    """The fields a flagged row sets from its rare columns (without the id)."""
    head_start, tail_start, tail_end, suffix, notes, invalid, adopted = rare
    if head_end is None:
        ranges: tuple[tuple[int, int], ...] = ()
    elif tail_end is None:
        ranges = ((head_start, head_end),)
    else:
        ranges = ((head_start, head_end), (tail_start, tail_end))
    return {
        "stored_ranges": ranges,
        "suffix": suffix,
        "media_notes": tuple(json.loads(notes)) if notes else (),
        "invalid_utf8": invalid == 1,
        "adopted_inode": tuple(json.loads(adopted)) if adopted else None,
    }


def _made(fields: dict[str, Any]) -> SpillMeta:
    """Metadata of its fields, the way :func:`metas_of` makes it (for the flagged rows)."""
    meta = _new(SpillMeta)
    _set_dict(meta, fields)
    _set_fields_set(meta, _FIELDS_SET)
    _set_extra(meta, None)
    _set_private(meta, None)
    return meta


def _well_formed(ids: list[str], sessions: set[str]) -> bool:
    """Whether every id and session is well formed (ids in one regex match)."""
    return bool(_IDS_RE.fullmatch("\n".join(ids))) and all(map(is_session, sessions))


def _kept(metas: list[Any]) -> list[SpillMeta]:
    """``metas`` without the rows removed meanwhile (None) and those whose id or session
    is not well formed (each logged)."""
    kept = []
    for meta in metas:
        if meta is None:
            continue
        if is_spill_id(meta.spill_id) and is_session(meta.session):
            kept.append(meta)
        else:
            logger.warning("skipping a spill (spillstore check lists it): the catalog row "
                           "of spill %r is corrupt", meta.spill_id)  # fmt: skip
    return kept


def metas_of(
    base: str, rows: Iterable[Any], rare: Callable[[], Mapping[str, Sequence[Any]]]
) -> list[SpillMeta]:
    """Rows of :data:`LIST_COLUMNS` as metadata, in their order (taken one at a time, so
    a cursor's rows are made into objects while they are in the CPU's cache).

    Args:
        base: the store root with a trailing separator (data files are
            ``<base><session>/<id>.out``).
        rows: the rows.
        rare: called once if a row is flagged: the rare columns (after the id) of the
            flagged rows, by id. A flagged row missing there was removed between the
            two queries and is left out.

    A row whose id or session is not well formed is left out and logged.
    """
    version, sep, fields_set, new = META_FORMAT_VERSION, os.sep, _FIELDS_SET, _new
    set_dict, set_fields_set, set_extra, set_private = (
        _set_dict, _set_fields_set, _set_extra, _set_private
    )  # fmt: skip
    metas: list[Any] = []
    append = metas.append
    ids: list[str] = []
    add_id = ids.append
    sessions: set[str] = set()
    add_session = sessions.add
    flagged: list[tuple[int, dict[str, Any], int | None]] = []
    for sid, session, tool, call, total, lines, head_end, sha, created, flag in rows:
        add_id(sid)
        add_session(session)
        fields = {
            "spill_id": sid, "session": session, "tool_name": tool, "tool_call_id": call,
            "total_bytes": total, "total_lines": lines,
            "stored_ranges": () if head_end is None else ((0, head_end),),
            "sha256": sha, "created_at": created, "suffix": None, "media_notes": (),
            "invalid_utf8": False, "path": base + session + sep + sid + ".out",
            "adopted_inode": None, "format_version": version,
        }  # fmt: skip
        if flag is not None:
            flagged.append((len(metas), fields, head_end))
            append(None)
            continue
        meta = new(SpillMeta)
        set_dict(meta, fields)
        set_fields_set(meta, fields_set)
        set_extra(meta, None)
        set_private(meta, None)
        append(meta)
    removed = False
    if flagged:
        more = rare()
        for position, fields, head_end in flagged:
            found = more.get(fields["spill_id"])
            if found is None:
                removed = True
            else:
                fields.update(_rare_fields(head_end, found))
                metas[position] = _made(fields)
    if removed or not _well_formed(ids, sessions):
        return _kept(metas)
    return metas


def row_meta(base: str, row: Sequence[Any]) -> SpillMeta | None:
    """One whole row (:data:`ROW_COLUMNS`) as metadata; None if its id or session is bad."""
    found = metas_of(base, [row[:10]], lambda: {row[0]: row[11:ROW_WIDTH]})
    return found[0] if found else None


def rare_of(rows: Iterable[Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """``{id: rare columns after the id}`` from rows of :data:`RARE_SQL`."""
    return {row[0]: row[1:] for row in rows}
