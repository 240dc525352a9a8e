"""Catalog rows as :class:`~spillstore._stores.meta.SpillMeta`, fast enough to list 100,000.

Rows are listed a session at a time. Every row carries a *listing*: the fields nearly
every spill needs, packed at insert (:data:`LISTING`: sizes, the head range's end, the
time, the hash as 32 bytes, and a *flag* set when the row holds more than defaults: the
head does not start at 0, a tail, a suffix, media notes, invalid UTF-8, an adopted
file). A list reads four values a row (id, tool, call id, listing) and unpacks the
listing in one C call: SQLite hands each value to Python for about 0.1 us, with a lock
taken and released around each, so four values cost less than nine (RESULTS.md, issue
14, session 8). Only flagged rows are read a second time, for their *rare columns*
(:data:`RARE_SQL`). A row without a listing (written by a version before it, or whose
listing is not one) is read whole (:data:`UNLISTED_SQL`). The columns stay the source
of truth for every query (``gc`` by age or size, the same-content lookup); rows are
never updated, so the listing written with them stays true.

Rows become metadata without pydantic validation: they were validated when inserted.
Ids and sessions name files, so they are checked again, all ids of a list in one regex
match; a row that fails is skipped and logged (``spillstore check`` lists it). The
objects are made the way pydantic's ``model_construct`` makes them (the instance
``__dict__`` and pydantic's three slots), through the slot descriptors themselves.
The cyclic garbage collector is paused while a list's rows and objects are made
(:func:`~spillstore._core.collector.gc_paused`, in the catalog's list): 100,000 new
objects would otherwise trigger full collections of the whole heap, which cost more
than making them.
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NoReturn

from pydantic import BaseModel

from spillstore._core.ids import SPILL_ID_PATTERN, is_session, is_spill_id
from spillstore._stores.meta import META_FORMAT_VERSION, SpillMeta

__all__ = [
    "LISTING",
    "LIST_COLUMNS",
    "RARE_SQL",
    "ROW_COLUMNS",
    "ROW_WIDTH",
    "UNLISTED_SQL",
    "AllFieldsSet",
    "listing_of",
    "metas_of",
    "rare_of",
    "row_meta",
]

LISTING: Final = struct.Struct("<qqqd32sB")
"""A row's listing: total bytes, total lines, the head range's end (-1: nothing stored),
the time, the SHA-256 digest, and the flag (1: read the rare columns too)."""

LIST_COLUMNS: Final = "spill_id, tool_name, tool_call_id, listing"
"""The columns a list of one session reads for every row (the session is the one
asked for, not read again)."""

_RARE_COLUMNS: Final = (
    "spill_id, head_start, tail_start, tail_end, suffix, media_notes, invalid_utf8, adopted"
)
RARE_SQL: Final = (
    f"SELECT {_RARE_COLUMNS} FROM spill WHERE session = ? AND "  # noqa: S608 - fixed names
    f"substr(listing, {LISTING.size}, 1) = x'01'"
)
"""The rare columns of a session's rows whose listing is flagged (its last byte; one
definition of "more than defaults": :func:`listing_of`)."""

ROW_COLUMNS: Final = (
    "session, spill_id, tool_name, tool_call_id, total_bytes, total_lines, head_end, sha256, "
    f"created_at, {_RARE_COLUMNS}"
)
"""A whole row: its session, the values of its listing as columns, then the rare ones
(:func:`row_meta`)."""
ROW_WIDTH: Final = 17
"""How many values :data:`ROW_COLUMNS` selects (columns after them start here)."""

UNLISTED_SQL: Final = (
    f"SELECT {ROW_COLUMNS} FROM spill WHERE session = ? AND "  # noqa: S608 - fixed names
    f"(listing IS NULL OR length(listing) != {LISTING.size})"
)
"""The whole rows of a session that have no listing."""

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


class _Fields:
    """A listed spill's fields, set as attributes in the model's order: the instance's
    ``__dict__`` becomes the metadata's. Dicts made this way share one key table
    (CPython's split dicts): 192 bytes a row where a dict display of the 15 fields takes
    464, and a list of 100,000 rows is memory-bound. Any other dict works the same, only
    larger (a key added later, like ``stored_bytes``'s cache, makes the dict combined).
    """

    # Declared only (no class attributes): SpillMeta's fields, in its order.
    spill_id: str
    session: str
    tool_name: str
    tool_call_id: str
    total_bytes: int
    total_lines: int
    stored_ranges: tuple[tuple[int, int], ...]
    sha256: str
    created_at: float
    suffix: str | None
    media_notes: tuple[str, ...]
    invalid_utf8: bool
    path: str
    adopted_inode: tuple[int, int, int, int] | None
    format_version: int


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


def _well_formed(ids: list[str], session: str) -> bool:
    """Whether the session and every id are well formed (the ids in one regex match; an
    id holding the separator would pass as two, so the separators are counted too)."""
    try:
        joined = "\n".join(ids)
    except TypeError:  # a value that is not text
        return False
    return (
        is_session(session)
        and joined.count("\n") == max(len(ids) - 1, 0)
        and _IDS_RE.fullmatch(joined) is not None
    )


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


def listing_of(meta: SpillMeta) -> bytes:
    """The listing of ``meta``'s row (:data:`LISTING`)."""
    ranges = meta.stored_ranges
    ordinary = (
        len(ranges) < 2
        and (not ranges or ranges[0][0] == 0)
        and meta.suffix is None
        and not meta.media_notes
        and not meta.invalid_utf8
        and meta.adopted_inode is None
    )
    head_end = ranges[0][1] if ranges else -1
    digest = bytes.fromhex(meta.sha256)
    return LISTING.pack(
        meta.total_bytes, meta.total_lines, head_end, meta.created_at, digest, not ordinary
    )


def metas_of(
    base: str,
    session: str,
    rows: Iterable[Any],
    rare: Callable[[], Mapping[str, Sequence[Any]]],
    unlisted: Callable[[], Mapping[str, SpillMeta]] = dict,
) -> list[SpillMeta]:
    """Rows of :data:`LIST_COLUMNS` of one session as metadata, in their order (taken one
    at a time, so a cursor's rows are made into objects while they are in the CPU's cache).

    Args:
        base: the store root with a trailing separator (data files are
            ``<base><session>/<id>.out``).
        session: the session of every row.
        rows: the rows.
        rare: called once if a row is flagged: the rare columns (after the id) of the
            flagged rows, by id.
        unlisted: called once if a row has no listing: those rows as metadata, by id.

    A row missing from what ``rare`` or ``unlisted`` return was removed between the
    queries and is left out. A row whose id or session is not well formed is left out
    and logged.
    """
    version, fields_set, new, fields_of = META_FORMAT_VERSION, _FIELDS_SET, _new, _Fields
    set_dict, set_fields_set, set_extra, set_private = (
        _set_dict, _set_fields_set, _set_extra, _set_private
    )  # fmt: skip
    unpack = LISTING.unpack
    prefix = f"{base}{session}{os.sep}"
    metas: list[Any] = []
    append = metas.append
    ids: list[str] = []
    add_id = ids.append
    flagged: list[tuple[int, SpillMeta, int]] = []
    missing: list[tuple[int, str]] = []
    for sid, tool, call, listing in rows:
        add_id(sid)
        try:
            total, lines, head_end, created, digest, flag = unpack(listing)
        except (TypeError, struct.error):  # no listing: read whole below
            missing.append((len(metas), sid))
            append(None)
            continue
        f = fields_of()
        f.spill_id = sid
        f.session = session
        f.tool_name = tool
        f.tool_call_id = call
        f.total_bytes = total
        f.total_lines = lines
        f.stored_ranges = () if head_end < 0 else ((0, head_end),)
        f.sha256 = digest.hex()
        f.created_at = created
        f.suffix = None
        f.media_notes = ()
        f.invalid_utf8 = False
        f.path = f"{prefix}{sid}.out"
        f.adopted_inode = None
        f.format_version = version
        meta = new(SpillMeta)
        set_dict(meta, f.__dict__)
        set_fields_set(meta, fields_set)
        set_extra(meta, None)
        set_private(meta, None)
        if flag:  # its rare fields are set below, in place
            flagged.append((len(metas), meta, head_end))
            append(None)
        else:
            append(meta)
    removed = False
    if flagged:
        more = rare()
        for position, meta, head_end in flagged:
            found = more.get(meta.spill_id)
            if found is None:
                removed = True
            else:
                meta.__dict__.update(_rare_fields(None if head_end < 0 else head_end, found))
                metas[position] = meta
    if missing:
        whole = unlisted()
        for position, sid in missing:
            metas[position] = whole.get(sid)
            removed = removed or metas[position] is None
    if removed or not _well_formed(ids, session):
        return _kept(metas)
    return metas


def row_meta(base: str, row: Sequence[Any]) -> SpillMeta | None:
    """One whole row (:data:`ROW_COLUMNS`) as metadata; None if it is not well formed."""
    session, sid, tool, call, total, lines, head_end, sha, created = row[:9]
    try:
        listing = LISTING.pack(
            total, lines, -1 if head_end is None else head_end, created, bytes.fromhex(sha), 1
        )
    except (TypeError, ValueError, OverflowError, struct.error):
        return None
    found = metas_of(base, session, [(sid, tool, call, listing)], lambda: {sid: row[10:ROW_WIDTH]})
    return found[0] if found else None


def rare_of(rows: Iterable[Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """``{id: rare columns after the id}`` from rows of :data:`RARE_SQL`."""
    return {row[0]: row[1:] for row in rows}
