"""The catalog of a store root: one SQLite database (WAL) of spill metadata, line indexes
and tombstones, beside plain data files (see :mod:`~spillstore._stores.catalog_store`).

``<root>/catalog.sqlite3`` (0600, with SQLite's ``-wal`` and ``-shm`` files) holds::

    spills(spill_id PRIMARY KEY, session, created_at, stored_bytes, meta, idx)
    tombstones(spill_id PRIMARY KEY, session, reason, removed_at)

``meta`` is the :class:`~spillstore._stores.meta.SpillMeta` JSON (parsed once per row
per process: the parsed form is kept while the row's bytes stay the same), ``idx`` the
serialized line index. Every connection runs ``journal_mode=WAL`` and ``synchronous=FULL``, so a
committed row survives a power cut. A connection belongs to one thread of one process
(a forked child opens its own). Before SQLite opens them, the database files must be
this user's regular files with one link (SQLite follows links; we refuse them first).
Every SQLite failure becomes a :class:`~spillstore.StoreError` (``ENOSPC`` for a full
disk, ``EIO`` otherwise).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from typing import Final

from pydantic import ValidationError

from spillstore._core.cache import BoundedCache
from spillstore._errors import StoreError, UnsafeStoreRoot
from spillstore._stores.local_files import CREATE_FLAGS, LocalRoot
from spillstore._stores.local_marks import CATALOG_FILES
from spillstore._stores.meta import SpillMeta

__all__ = ["CATALOG_NAME", "Catalog"]

logger = logging.getLogger("spillstore")

CATALOG_NAME: Final = "catalog.sqlite3"
META_CACHE_SIZE: Final = 1 << 17
"""Rows whose parsed metadata is remembered, with the row's bytes (a changed row is
parsed again)."""

BUSY_TIMEOUT_SECONDS: Final = 60.0
"""How long a writer waits for another process's transaction (they last milliseconds)."""

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS spills (spill_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
    "created_at REAL NOT NULL, stored_bytes INTEGER NOT NULL, meta BLOB NOT NULL, "
    "idx BLOB NOT NULL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS spills_by_session ON spills (session, created_at)",
    "CREATE TABLE IF NOT EXISTS tombstones (spill_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
    "reason TEXT, removed_at REAL) WITHOUT ROWID",
)


@contextlib.contextmanager
def _db_errors(what: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        full = "full" in str(exc).lower()
        raise StoreError(errno.ENOSPC if full else errno.EIO, f"{what}: {exc}") from exc


class Catalog:
    """The catalog database of one store root (connections per thread and process)."""

    def __init__(self, root: LocalRoot) -> None:
        self._root = root
        self._path = os.path.join(root.path, CATALOG_NAME)
        self._local = threading.local()
        self._metas: BoundedCache[str, tuple[bytes, SpillMeta]] = BoundedCache(META_CACHE_SIZE)
        self._check_files(create=True)

    def _check_files(self, *, create: bool) -> None:
        """Refuse database files that are links, not ours, or not regular; create 0600."""
        root_fd = self._root.open()
        try:
            for name in sorted(CATALOG_FILES):
                try:
                    st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
                    raise UnsafeStoreRoot(
                        errno.EPERM,
                        f"refusing the catalog file {os.path.join(self._root.path, name)}: "
                        "it is a link, not a regular file, or not this user's "
                        "(spillstore check --fix removes it)",
                    )
            if create:
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(CATALOG_NAME, CREATE_FLAGS, 0o600, dir_fd=root_fd))
        finally:
            os.close(root_fd)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        self._check_files(create=True)
        with _db_errors("cannot open the catalog"):
            conn = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            for statement in _SCHEMA:
                conn.execute(statement)
        self._local.conn = conn
        self._local.pid = os.getpid()
        return conn

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``), committed on success."""
        conn = self._conn()
        with _db_errors(what):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (others close when their thread's state goes)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    # ----------------------------------------------------------------- reading

    def _meta(self, raw: bytes, spill_id: str, session: str | None = None) -> SpillMeta:
        """The metadata of a row; a row read before (the same bytes) is not parsed again."""
        cached = self._metas.get(spill_id)
        if cached is not None and cached[0] == raw and session in (None, cached[1].session):
            return cached[1]
        meta = self._parse(raw, spill_id, session)
        self._metas.put(spill_id, (raw, meta))
        return meta

    def _parse(self, raw: bytes, spill_id: str, session: str | None) -> SpillMeta:
        try:
            meta = SpillMeta.model_validate_json(raw)
        except ValidationError as exc:
            what = f"the catalog row of spill {spill_id} is corrupt"
            raise StoreError(errno.EINVAL, what) from exc
        if meta.spill_id != spill_id or (session is not None and meta.session != session):
            raise StoreError(errno.EINVAL, f"the catalog row of spill {spill_id} names another")
        path = self._root.data_path(meta)
        return meta if meta.path == path else meta.model_copy(update={"path": path})

    def get(self, spill_id: str) -> SpillMeta | None:
        """A spill's metadata, or None if the catalog has no row for it."""
        with _db_errors(f"cannot read spill {spill_id}"):
            row = (
                self._conn()
                .execute("SELECT session, meta FROM spills WHERE spill_id = ?", (spill_id,))
                .fetchone()
            )
        return None if row is None else self._meta(row[1], spill_id, row[0])

    def has(self, spill_id: str) -> bool:
        """Whether the catalog has a row for ``spill_id`` (read fresh)."""
        with _db_errors(f"cannot read spill {spill_id}"):
            sql = "SELECT 1 FROM spills WHERE spill_id = ?"
            return self._conn().execute(sql, (spill_id,)).fetchone() is not None

    def ids(self, session: str) -> set[str]:
        """The ids of a session's spills."""
        with _db_errors(f"cannot list session {session}"):
            sql = "SELECT spill_id FROM spills WHERE session = ?"
            return {row[0] for row in self._conn().execute(sql, (session,))}

    def list(self, session: str | None) -> builtins.list[SpillMeta]:
        """The spills of ``session`` (every session when None); bad rows skipped, reported."""
        with _db_errors("cannot list spills"):
            if session is None:
                rows = self._conn().execute("SELECT spill_id, session, meta FROM spills").fetchall()
            else:
                sql = "SELECT spill_id, session, meta FROM spills WHERE session = ?"
                rows = self._conn().execute(sql, (session,)).fetchall()
        metas = []
        for spill_id, row_session, raw in rows:
            try:
                metas.append(self._meta(raw, spill_id, row_session))
            except StoreError as exc:
                logger.warning("skipping spill %s (spillstore check lists it): %s", spill_id, exc)
        return metas

    def index(self, spill_id: str) -> bytes | None:
        """A spill's serialized line index, or None if it has no row."""
        with _db_errors(f"cannot read the index of spill {spill_id}"):
            sql = "SELECT idx FROM spills WHERE spill_id = ?"
            row = self._conn().execute(sql, (spill_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def tombstone(self, spill_id: str) -> tuple[str | None, float | None] | None:
        """A removed spill's ``(reason, removed_at)``; None if it has no tombstone."""
        with _db_errors(f"cannot read spill {spill_id}"):
            sql = "SELECT reason, removed_at FROM tombstones WHERE spill_id = ?"
            row = self._conn().execute(sql, (spill_id,)).fetchone()
        return None if row is None else (row[0], row[1])

    def session_of(self, spill_id: str) -> str | None:
        """The session of a spill that has a row or a tombstone."""
        with _db_errors(f"cannot read spill {spill_id}"):
            conn = self._conn()
            for table in ("spills", "tombstones"):
                sql = f"SELECT session FROM {table} WHERE spill_id = ?"  # noqa: S608 - fixed names
                row = conn.execute(sql, (spill_id,)).fetchone()
                if row is not None:
                    return str(row[0])
        return None

    # ----------------------------------------------------------------- writing

    def insert(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        """Commit a spill's row (the commit point); an identical existing spill wins.

        Raises:
            StoreError: the id is taken by other content, or the commit failed.
        """
        spill_id = meta.spill_id
        row = (spill_id, meta.session, meta.created_at, meta.stored_bytes)
        with self._write(f"cannot record spill {spill_id}") as conn:
            existing = conn.execute(
                "SELECT session, meta FROM spills WHERE spill_id = ?", (spill_id,)
            ).fetchone()
            if existing is not None:
                old = self._meta(existing[1], spill_id, existing[0])
                if old.sha256 != meta.sha256:
                    raise StoreError(errno.EEXIST, f"spill id {spill_id} is taken by other content")
                return old
            conn.execute(
                "INSERT INTO spills VALUES (?, ?, ?, ?, ?, ?)",
                (*row, meta.model_dump_json().encode(), index),
            )
            conn.execute("DELETE FROM tombstones WHERE spill_id = ?", (spill_id,))
        return meta

    def remove(self, spill_id: str, session: str, *, reason: str, now: float) -> bool:
        """Delete a spill's row and leave its tombstone, in one transaction."""
        with self._write(f"cannot remove spill {spill_id}") as conn:
            gone = conn.execute("DELETE FROM spills WHERE spill_id = ?", (spill_id,)).rowcount
            conn.execute(
                "INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?, ?)",
                (spill_id, session, reason, now),
            )
        return gone > 0

    def prune_tombstones(self, before: float) -> None:
        """Forget tombstones older than ``before``."""
        with self._write("cannot prune tombstones") as conn:
            conn.execute("DELETE FROM tombstones WHERE removed_at < ?", (before,))
