"""The catalog of a store root: one SQLite database (WAL) of spill metadata, line indexes
and tombstones, beside one plain data file per spill (see :mod:`~spillstore._stores.local`).

``<root>/catalog.sqlite3`` (0600, with SQLite's ``-wal`` and ``-shm`` files) holds::

    spill(spill_id PRIMARY KEY, session, the SpillMeta fields as columns,
          stored_bytes, dev, ino, listing)   one row per visible spill
    spill_index(spill_id PRIMARY KEY, idx)   its serialized line index
    tombstone(spill_id PRIMARY KEY, session, reason, removed_at)

``(dev, ino)`` is the identity of the spill's data file when the row committed: a read
serves only that file (a name swapped for another file is refused), and identical
bytes spilled again are hard-linked to it (:meth:`Catalog.same_content`). A row becomes
a :class:`~spillstore._stores.meta.SpillMeta` without parsing or validation (the row
was validated when it was inserted): ``list`` of 10,000 rows is one query of four
values a row (the ``listing`` packs the rest, :mod:`~spillstore._stores.local_rows`)
and a few microseconds a row. Every connection runs ``journal_mode=WAL`` and ``synchronous=FULL``,
so a committed row survives a power cut. A connection belongs to one thread of one
process (a forked child opens its own). Rows a thread read stay valid while SQLite's
``data_version`` of its connection does not change (no other connection committed) and
the thread removed nothing itself: a repeated ``stat`` costs one pragma, not a query.
Before SQLite opens them, the database files must be this user's regular files with one
link (SQLite follows links; we refuse them first), and the database must start as one.
A full disk or a read-only filesystem gets a connection of its own for each operation,
and every SQLite failure becomes a :class:`~spillstore.StoreError`
(:mod:`~spillstore._stores.local_db`); a damaged catalog is repaired by ``check --fix``
(:mod:`~spillstore._stores.local_rebuild`).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import itertools
import logging
import operator
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final

from spillstore._core.collector import gc_paused
from spillstore._errors import StoreError, UnsafeStoreRoot
from spillstore._stores.local_db import (
    DAMAGED,
    BadFile,
    Held,
    Holders,
    bad_files,
    check_header,
    choose_mode,
    file_stats,
    held_elsewhere,
    is_damaged,
    on_scope_end,
    open_catalog,
    read_only,
    store_errno,
)
from spillstore._stores.local_db import db_errors as _db_errors
from spillstore._stores.local_files import CREATE_FLAGS, LocalRoot
from spillstore._stores.local_rows import (
    RARE_SQL,
    ROW_WIDTH,
    UNLISTED_SQL,
    metas_of,
    rare_of,
    row_meta,
)
from spillstore._stores.local_schema import (
    ALL_WHOLE_SQL,
    INSERT,
    LIST_SQL,
    LIST_UNLISTED_SQL,
    SCHEMA_VERSION,
    SELECT,
    Identity,
    has_listing,
    is_provisional,
    make_schema,
    relist,
    row_values,
)
from spillstore._stores.meta import SpillMeta

__all__ = ["CATALOG_NAME", "SCHEMA_VERSION", "BadFile", "Catalog", "Identity", "Tombstone"]

CATALOG_NAME: Final = "catalog.sqlite3"
logger = logging.getLogger("spillstore")

_NO_TABLES: Final = (
    "the disk is full, and the catalog has no tables yet (they are made when there is room)"
)

ROW_CACHE_SIZE: Final = 4096
"""Rows a thread keeps while its connection's ``data_version`` stays the same."""

Tombstone = tuple[str | None, float | None]
"""A removed spill's ``(reason, removed_at)``."""

_LIST_ORDER: Final = operator.attrgetter("created_at", "spill_id")


def _sessions(conn: sqlite3.Connection) -> Iterator[Any]:
    """The sessions that have rows, in order: one index seek each (``SELECT DISTINCT``
    scans every row: 16 ms for 100,000)."""
    (session,) = conn.execute("SELECT min(session) FROM spill").fetchone()
    while session is not None:
        yield session
        sql = "SELECT min(session) FROM spill WHERE session > ?"
        (session,) = conn.execute(sql, (session,)).fetchone()


class Catalog:
    """The catalog database of one store root (connections per thread and process)."""

    def __init__(self, root: LocalRoot) -> None:
        self._root = root
        self._path = os.path.join(root.path, CATALOG_NAME)
        self._base = root.real_path + os.sep
        self._local = threading.local()  # the files are checked when a connection opens
        self._holders = Holders.of(self._path)

    @property
    def path(self) -> str:
        """The catalog database's path."""
        return self._path

    def bad_files(self) -> dict[str, BadFile]:
        """The catalog's files that are not this user's regular files with one link, by
        name (SQLite follows links: they are refused before it opens them)."""
        root_fd = self._root.open()
        try:
            return bad_files(file_stats(root_fd))
        finally:
            os.close(root_fd)

    def _check_files(self) -> None:
        """Refuse database files that are links, not ours, or not regular, and a catalog
        that is not an SQLite database (before SQLite opens it: it would delete a ``-wal``
        left beside it); create 0600. One open of the root, one ``stat`` a file."""
        root_fd = self._root.open()
        try:
            stats = file_stats(root_fd)
            bad = bad_files(stats)
            if bad:
                name, (why, readable) = next(iter(bad.items()))
                fix = "copies the catalog into a private file" if readable else "moves it aside"
                raise UnsafeStoreRoot(
                    DAMAGED,
                    f"refusing the catalog file {os.path.join(self._root.path, name)} ({why}): "
                    f"'spillstore check --fix' {fix}",
                )
            catalog = stats.get(CATALOG_NAME)
            if catalog is None:
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(CATALOG_NAME, CREATE_FLAGS, 0o600, dir_fd=root_fd))
            elif catalog.st_size:
                check_header(CATALOG_NAME, root_fd)
        finally:
            os.close(root_fd)

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; on a full disk or a read-only filesystem, this
        operation's own (:mod:`~spillstore._stores.local_db`), closed when it ends."""
        local = self._local
        held: Held | None = getattr(local, "held", None)
        if held is not None:
            live = held.conn
            if live is not None and held.pid == os.getpid():
                return live
        fallback: sqlite3.Connection | None = getattr(local, "fallback", None)
        if fallback is not None:
            return fallback
        with _db_errors("cannot open the catalog"):
            found = None
            while found is None:  # until no check --fix began to replace the file meanwhile
                generation = self._holders.wait_for_repair()
                self._check_files()
                conn, mode = self._open()
                found = self._holders.hold(conn, generation)
            if mode != "shared":
                local.fallback, local.fallback_held = conn, found
                local.read_only = read_only(self._path) if mode == "immutable" else None
                if is_provisional(conn):
                    local.read_only = (errno.ENOSPC, _NO_TABLES)
                on_scope_end(self._close_fallback)
            else:
                local.held = found
        local.version = -1
        local.rows = {}
        listed = has_listing(conn)
        local.list_sql = LIST_SQL if listed else LIST_UNLISTED_SQL
        local.unlisted_sql = UNLISTED_SQL if listed else ALL_WHOLE_SQL
        return conn

    def _open(self) -> tuple[sqlite3.Connection, str]:
        """A new connection and its mode (see :func:`~spillstore._stores.local_db.
        choose_mode`; a shared open that finds the disk full is made exclusive)."""
        mode = choose_mode(self._path)
        try:
            conn = open_catalog(self._path, make_schema, mode)
            if mode == "shared" and is_provisional(conn):  # the disk is full: this once
                conn.close()
                raise sqlite3.OperationalError("database or disk is full")
        except sqlite3.Error as exc:
            if mode != "shared" or store_errno(exc) != errno.ENOSPC:
                raise
            mode = "exclusive"
            conn = open_catalog(self._path, make_schema, mode)
        return conn, mode

    def _close_fallback(self) -> None:
        local = self._local
        conn = local.fallback
        local.fallback = local.read_only = local.fallback_held.conn = None  # its lock is ours
        local.rows = {}
        conn.close()

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), committed on success."""
        with _db_errors(what):
            conn = self._conn()
            cannot = getattr(self._local, "read_only", None)
            if cannot is not None:  # an immutable connection: say why it is one
                raise StoreError(cannot[0], f"{what}: {cannot[1]}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:  # SQLite rolls back itself after SQLITE_FULL
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their thread's state goes)."""
        held: Held | None = getattr(self._local, "held", None)
        if held is not None and held.pid == os.getpid():
            held.close()
        self._local.held = None

    def replacing(self) -> contextlib.AbstractContextManager[bool]:
        """Close every connection of this process to the catalog file, other threads'
        too, while ``check --fix`` replaces it (:meth:`~spillstore._stores.local_db.
        Holders.replacing`); the block gets False if one stayed in use."""
        return self._holders.replacing()

    def damage(self) -> str | None:
        """Why the catalog is unusable (not a database, or corrupt: SQLite's
        ``quick_check``), or None when it is sound."""
        try:
            with _db_errors("cannot open the catalog"):
                found = [row[0] for row in self._conn().execute("PRAGMA quick_check")]
        except StoreError as exc:
            if not is_damaged(exc):
                raise
            return str(exc.__cause__ or exc)
        bad = [line for line in found if line != "ok"]
        return "; ".join(bad[:3]) if bad else None

    def held_elsewhere(self) -> bool:
        """Whether another process has the database open (close this thread's first)."""
        return held_elsewhere(self._path)

    def has_table(self, name: str) -> bool:
        """Whether the database holds the table ``name`` (the upgrade looks for old ones)."""
        with _db_errors("cannot read the catalog"):
            sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            return self._conn().execute(sql, (name,)).fetchone() is not None

    def execute(self, sql: str, args: Iterable[object] = ()) -> builtins.list[Any]:
        """Run one statement and return its rows (for the upgrade of old catalogs)."""
        with _db_errors("cannot read the catalog"):
            return self._conn().execute(sql, tuple(args)).fetchall()

    # ----------------------------------------------------------------- reading

    def _meta(self, row: tuple[Any, ...]) -> SpillMeta:
        """One whole row (``SELECT``) as metadata; a bad id or session raises StoreError."""
        meta = row_meta(self._base, row)
        if meta is None:
            raise StoreError(errno.EINVAL, f"the catalog row of spill {row[1]!r} is corrupt")
        return meta

    def _fresh_rows(self) -> dict[str, tuple[SpillMeta, Identity]]:
        """This thread's rows read since no other connection committed."""
        conn = self._conn()
        local = self._local
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != local.version:
            local.version = version
            local.rows = {}
        rows: dict[str, tuple[SpillMeta, Identity]] = local.rows
        return rows

    def entry(self, spill_id: str) -> tuple[SpillMeta, Identity] | None:
        """A spill's metadata and data file identity; None if the catalog has no row."""
        with _db_errors(f"cannot read spill {spill_id}"):
            rows = self._fresh_rows()
            found = rows.get(spill_id)
            if found is not None:
                return found
            row = self._conn().execute(f"{SELECT} WHERE spill_id = ?", (spill_id,)).fetchone()
        if row is None:
            return None
        found = (self._meta(row), (row[ROW_WIDTH], row[ROW_WIDTH + 1]))
        if len(rows) >= ROW_CACHE_SIZE:
            rows.clear()
        rows[spill_id] = found
        return found

    def get(self, spill_id: str) -> SpillMeta | None:
        """A spill's metadata, or None if the catalog has no row for it."""
        found = self.entry(spill_id)
        return None if found is None else found[0]

    def has(self, spill_id: str) -> bool:
        """Whether the catalog has a row for ``spill_id`` (read fresh)."""
        with _db_errors(f"cannot read spill {spill_id}"):
            sql = "SELECT 1 FROM spill WHERE spill_id = ?"
            return self._conn().execute(sql, (spill_id,)).fetchone() is not None

    def identities(self, session: str) -> dict[str, Identity]:
        """``{spill_id: (st_dev, st_ino)}`` of a session's data files, in one query."""
        with _db_errors(f"cannot list session {session}"):
            sql = "SELECT spill_id, dev, ino FROM spill WHERE session = ?"
            return {row[0]: (row[1], row[2]) for row in self._conn().execute(sql, (session,))}

    def ids(self, session: str) -> set[str]:
        """The ids of a session's spills."""
        with _db_errors(f"cannot list session {session}"):
            sql = "SELECT spill_id FROM spill WHERE session = ?"
            return {row[0] for row in self._conn().execute(sql, (session,))}

    def list(self, session: str | None) -> builtins.list[SpillMeta]:
        """The spills of ``session`` (every session when None), oldest first; bad rows
        skipped and reported. A session is one query of the list columns, and a second
        one only for rows that hold more than defaults (:mod:`~spillstore._stores.
        local_rows`); every session is each of them listed in one read transaction."""
        with _db_errors("cannot list spills"), gc_paused():
            conn = self._conn()
            if session is not None:
                return self._session_list(conn, session)
            conn.execute("BEGIN")  # one snapshot of every session
            try:
                runs = [self._session_list(conn, name) for name in _sessions(conn)]
            finally:
                conn.execute("COMMIT")
        if len(runs) == 1:
            return runs[0]
        # each run is in order: the sort merges them
        return sorted(itertools.chain.from_iterable(runs), key=_LIST_ORDER)

    def _session_list(self, conn: sqlite3.Connection, session: str) -> builtins.list[SpillMeta]:
        local = self._local
        rows = conn.execute(local.list_sql, (session,))
        return metas_of(
            self._base,
            session,
            rows,
            lambda: rare_of(conn.execute(RARE_SQL, (session,))),
            lambda: self._whole(conn.execute(local.unlisted_sql, (session,))),
        )

    def _whole(self, rows: Iterable[tuple[Any, ...]]) -> dict[str, SpillMeta]:
        """Whole rows as metadata by id; a corrupt one is left out and logged."""
        metas = {}
        for row in rows:
            meta = row_meta(self._base, row)
            if meta is None:
                logger.warning("skipping a spill (spillstore check lists it): the catalog "
                               "row of spill %r is corrupt", row[1])  # fmt: skip
            else:
                metas[meta.spill_id] = meta
        return metas

    def stale_listings(self, *, fix: bool) -> builtins.list[tuple[str, str]]:
        """``(session, spill_id)`` of the rows whose listing is missing or disagrees with
        their columns (the columns are the truth); ``fix`` rewrites those listings. A
        corrupt row is left to the rest of ``check``."""
        with _db_errors("cannot check the listings"):
            conn = self._conn()
            if not has_listing(conn):
                return []
            stale = relist(conn, self._base, only_missing=False, fix=False)
        if fix and stale:  # read again in the write: nothing is written when none is stale
            with self._write("cannot rewrite the listings") as conn:
                stale = relist(conn, self._base, only_missing=False, fix=True)
        return [(meta.session, meta.spill_id) for meta in stale]

    def shared(self) -> dict[str, str]:
        """``{spill_id: "dev:ino"}`` of the spills whose data file another spill shares."""
        with _db_errors("cannot list spills"):
            sql = (
                "SELECT spill_id, dev, ino FROM spill WHERE (dev, ino) IN "
                "(SELECT dev, ino FROM spill GROUP BY dev, ino HAVING count(*) > 1)"
            )
            rows = self._conn().execute(sql).fetchall()
        return {spill_id: f"{dev}:{ino}" for spill_id, dev, ino in rows}

    def index(self, spill_id: str) -> bytes | None:
        """A spill's serialized line index, or None if it has no row."""
        with _db_errors(f"cannot read the index of spill {spill_id}"):
            sql = "SELECT idx FROM spill_index WHERE spill_id = ?"
            row = self._conn().execute(sql, (spill_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def tombstone(self, spill_id: str) -> Tombstone | None:
        """A removed spill's ``(reason, removed_at)``; None if it has no tombstone."""
        with _db_errors(f"cannot read spill {spill_id}"):
            sql = "SELECT reason, removed_at FROM tombstone WHERE spill_id = ?"
            row = self._conn().execute(sql, (spill_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def session_of(self, spill_id: str) -> str | None:
        """The session of a spill that has a row or a tombstone."""
        with _db_errors(f"cannot read spill {spill_id}"):
            conn = self._conn()
            for table in ("spill", "tombstone"):
                sql = f"SELECT session FROM {table} WHERE spill_id = ?"  # noqa: S608 - fixed names
                row = conn.execute(sql, (spill_id,)).fetchone()
                if row is not None:
                    return str(row[0])
        return None

    def same_content(self, meta: SpillMeta) -> builtins.list[tuple[SpillMeta, Identity]]:
        """Spills (not adopted) whose stored bytes are those of ``meta`` (same hash and
        ranges): a new spill may share their data file."""
        with _db_errors("cannot look up identical spills"):
            sql = f"{SELECT} WHERE sha256 = ? AND stored_bytes = ? AND adopted IS NULL LIMIT 4"
            rows = self._conn().execute(sql, (meta.sha256, meta.stored_bytes)).fetchall()
        found = [(self._meta(row), (row[ROW_WIDTH], row[ROW_WIDTH + 1])) for row in rows]
        return [(m, ident) for m, ident in found if m.stored_ranges == meta.stored_ranges]

    # ----------------------------------------------------------------- writing

    def insert(self, meta: SpillMeta, index: bytes, identity: Identity) -> SpillMeta:
        """Commit a spill's row (the commit point); an identical existing spill wins.

        Raises:
            StoreError: the id is taken by other content, or the commit failed.
        """
        spill_id = meta.spill_id
        with self._write(f"cannot record spill {spill_id}") as conn:
            existing = conn.execute(f"{SELECT} WHERE spill_id = ?", (spill_id,)).fetchone()
            if existing is not None:
                old = self._meta(existing)
                if old.sha256 != meta.sha256:
                    raise StoreError(errno.EEXIST, f"spill id {spill_id} is taken by other content")
                return old
            conn.execute(INSERT, row_values(meta, identity))
            conn.execute("INSERT OR REPLACE INTO spill_index VALUES (?, ?)", (spill_id, index))
            conn.execute("DELETE FROM tombstone WHERE spill_id = ?", (spill_id,))
        return meta

    def insert_many(
        self,
        spills: Iterable[tuple[SpillMeta, bytes, Identity]],
        tombstones: Iterable[tuple[str, str, str | None, float | None]] = (),
    ) -> None:
        """Commit many rows at once, keeping rows that exist (a migration run again)."""
        with self._write("cannot record migrated spills") as conn:
            for meta, index, identity in spills:
                conn.execute(INSERT, row_values(meta, identity))
                sql = "INSERT OR IGNORE INTO spill_index VALUES (?, ?)"
                conn.execute(sql, (meta.spill_id, index))
            for spill_id, session, reason, removed_at in tombstones:
                conn.execute(
                    "INSERT OR IGNORE INTO tombstone SELECT ?, ?, ?, ? WHERE NOT EXISTS "
                    "(SELECT 1 FROM spill WHERE spill_id = ?)",
                    (spill_id, session, reason, removed_at, spill_id),
                )

    def remove(self, spill_id: str, session: str, *, reason: str, now: float) -> bool:
        """Delete a spill's row and leave its tombstone, in one transaction."""
        self._local.rows = {}
        with self._write(f"cannot remove spill {spill_id}") as conn:
            gone = conn.execute("DELETE FROM spill WHERE spill_id = ?", (spill_id,)).rowcount
            conn.execute("DELETE FROM spill_index WHERE spill_id = ?", (spill_id,))
            conn.execute(
                "INSERT OR REPLACE INTO tombstone VALUES (?, ?, ?, ?)",
                (spill_id, session, reason, now),
            )
        self._local.rows = {}
        return gone > 0

    def prune_tombstones(self, before: float) -> None:
        """Forget tombstones older than ``before``."""
        with self._write("cannot prune tombstones") as conn:
            conn.execute("DELETE FROM tombstone WHERE removed_at < ?", (before,))
