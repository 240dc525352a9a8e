"""The catalog's schema and its statements: the tables, the upgrade of older catalogs,
and the SQL the catalog runs (:mod:`~spillstore._stores.local_catalog` holds the
connections' use of them)."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
from typing import Final

from spillstore._stores.local_db import store_errno
from spillstore._stores.local_rows import (
    LIST_COLUMNS,
    ROW_COLUMNS,
    listing_of,
    row_meta,
)
from spillstore._stores.meta import SpillMeta

__all__ = [
    "ALL_WHOLE_SQL",
    "INSERT",
    "LIST_SQL",
    "LIST_UNLISTED_SQL",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SELECT",
    "Identity",
    "has_listing",
    "is_provisional",
    "make_schema",
    "relist",
    "row_values",
    "schema_fault",
]

SCHEMA_VERSION: Final = 4
"""``PRAGMA user_version`` of the schema below (the opt-in catalog of 0.2's development,
one JSON row per spill, was version 0; it is upgraded in place; version 3 had no
``listing`` column: it is added and filled in place, and a catalog that cannot be
written is read without it)."""

Identity = tuple[int, int]
"""``(st_dev, st_ino)`` of a spill's data file."""

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS spill (spill_id TEXT NOT NULL UNIQUE, session TEXT NOT NULL, "
    "tool_name TEXT NOT NULL, tool_call_id TEXT NOT NULL, total_bytes INTEGER NOT NULL, "
    "total_lines INTEGER NOT NULL, head_start INTEGER, head_end INTEGER, "
    "tail_start INTEGER, tail_end INTEGER, sha256 TEXT NOT NULL, created_at REAL NOT NULL, "
    "suffix TEXT, media_notes TEXT, invalid_utf8 INTEGER NOT NULL, adopted TEXT, "
    "stored_bytes INTEGER NOT NULL, dev INTEGER NOT NULL, ino INTEGER NOT NULL, listing BLOB, "
    "PRIMARY KEY (session, created_at, spill_id)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS spill_by_content ON spill (sha256)",
    "CREATE TABLE IF NOT EXISTS spill_index (spill_id TEXT PRIMARY KEY, idx BLOB NOT NULL) "
    "WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS tombstone (spill_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
    "reason TEXT, removed_at REAL) WITHOUT ROWID",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

_COLUMNS: Final = (
    "spill_id, session, tool_name, tool_call_id, total_bytes, total_lines, head_start, "
    "head_end, tail_start, tail_end, sha256, created_at, suffix, media_notes, invalid_utf8, "
    "adopted, stored_bytes, dev, ino, listing"
)
SELECT: Final = f"SELECT {ROW_COLUMNS}, dev, ino FROM spill"  # noqa: S608 - fixed names
_SELECT_LISTED: Final = f"SELECT {ROW_COLUMNS}, dev, ino, listing FROM spill"  # noqa: S608
LIST_SQL: Final = (
    f"SELECT {LIST_COLUMNS} FROM spill WHERE session = ? ORDER BY created_at, spill_id"  # noqa: S608
)
LIST_UNLISTED_SQL: Final = (
    "SELECT spill_id, tool_name, tool_call_id, NULL FROM spill WHERE session = ? "
    "ORDER BY created_at, spill_id"
)
"""The list of a catalog without listings (one of version 3 that could not be upgraded)."""
ALL_WHOLE_SQL: Final = f"SELECT {ROW_COLUMNS} FROM spill WHERE session = ?"  # noqa: S608
INSERT: Final = (
    f"INSERT OR IGNORE INTO spill ({_COLUMNS}) "  # noqa: S608
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def row_values(meta: SpillMeta, identity: Identity) -> tuple[object, ...]:
    ranges = meta.stored_ranges
    head = ranges[0] if ranges else (None, None)
    tail = ranges[1] if len(ranges) > 1 else (None, None)
    return (
        meta.spill_id,
        meta.session,
        meta.tool_name,
        meta.tool_call_id,
        meta.total_bytes,
        meta.total_lines,
        *head,
        *tail,
        meta.sha256,
        meta.created_at,
        meta.suffix,
        json.dumps(meta.media_notes) if meta.media_notes else None,
        int(meta.invalid_utf8),
        json.dumps(meta.adopted_inode) if meta.adopted_inode is not None else None,
        meta.stored_bytes,
        *identity,
        listing_of(meta),
    )


def make_schema(conn: sqlite3.Connection) -> None:
    """Create or upgrade the tables (nothing to do when ``user_version`` is current).

    A catalog of an earlier version that cannot be written now (a read-only or full
    disk, a writer holding the lock past the timeout) is read as it is: rows without a
    listing are read whole. A catalog with no tables yet on a full disk gets them in
    memory for this connection (:func:`is_provisional`): it reads as empty, and the
    catalog refuses to record anything in it.
    """
    if conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:
                conn.execute(statement)
            add_listings(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    except sqlite3.OperationalError as exc:
        if conn.execute("PRAGMA table_info(spill)").fetchall():
            return
        if store_errno(exc) != errno.ENOSPC or conn.execute(_ANY_TABLE).fetchone():
            raise
        conn.execute("PRAGMA temp_store=MEMORY")
        for statement in SCHEMA[:-1]:
            conn.execute(statement.replace(" IF NOT EXISTS ", " IF NOT EXISTS temp."))


_ANY_TABLE: Final = "SELECT 1 FROM main.sqlite_master"


def is_provisional(conn: sqlite3.Connection) -> bool:
    """Whether the catalog's tables are in memory (see :func:`make_schema`)."""
    return (
        conn.execute("SELECT 1 FROM temp.sqlite_master WHERE name = 'spill'").fetchone() is not None
    )


def has_listing(conn: sqlite3.Connection) -> bool:
    return any(row[1] == "listing" for row in conn.execute("PRAGMA table_info(spill)"))


def add_listings(conn: sqlite3.Connection) -> None:
    """Give the rows of a version-3 catalog their listing (in the open transaction);
    the base of data file paths does not matter here (only the listing is kept)."""
    if not has_listing(conn):
        conn.execute("ALTER TABLE spill ADD COLUMN listing BLOB")
    relist(conn, os.sep, only_missing=True, fix=True)


def relist(
    conn: sqlite3.Connection, base: str, *, only_missing: bool, fix: bool
) -> list[SpillMeta]:
    """The rows whose listing is missing (``only_missing``) or disagrees with their
    columns (the columns are the truth), read whole; ``fix`` rewrites their listings in
    the transaction the caller holds. A corrupt row is left as it is (``check`` lists
    it). ``base`` is the directory data file paths are made from."""
    where = " WHERE listing IS NULL" if only_missing else ""
    stale = []
    for row in conn.execute(f"{_SELECT_LISTED}{where}").fetchall():
        meta = row_meta(base, row)
        if meta is not None:
            listing = listing_of(meta)
            if row[-1] != listing:
                stale.append((meta, listing))
    if fix and stale:
        sql = "UPDATE spill SET listing = ? WHERE spill_id = ?"
        conn.executemany(sql, [(listing, meta.spill_id) for meta, listing in stale])
    return [meta for meta, _ in stale]


def schema_fault(conn: sqlite3.Connection) -> str | None:
    """Why a sound database is not a catalog this spillstore reads (None when it is)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        return f"its schema is version {version}, newer than this spillstore's ({SCHEMA_VERSION})"
    sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name IN ('spill', 'spills')"
    return None if conn.execute(sql).fetchone() else "it holds no table of spills"
