"""``check --fix`` on an unsafe or damaged catalog: copy it, or move it aside and rebuild it
from the data files.

A catalog that is a sound database of ours but an unsafe file (a second hard link,
another user's file) is copied into a fresh private file with SQLite's backup API (the
rows of its ``-wal`` included) and renamed over it (:func:`copy_catalog`): every row
stays, tool names, call ids, times and tombstones with it. Only a catalog that cannot be
read is rebuilt, as follows. Either way every connection of this process to the old file
is closed first (:meth:`~spillstore._stores.local_db.Holders.replacing`), and a file
another process has open is left in place.

A catalog that is not a database (or that SQLite finds corrupt) stops every command,
which then names ``spillstore check --fix``. The fix never deletes it:
:func:`set_aside` renames ``catalog.sqlite3`` (and its ``-wal``/``-shm``, which must not
meet a new database) to ``catalog.sqlite3~damaged-<UTC time>[-wal|-shm]`` in the root,
where ``check`` keeps reporting it until the user removes it.

:func:`adopt_data_files` then records every data file ``<session>/<spill_id>.out`` that
is this user's regular file and no live writer holds, so the ids the model was given keep
reading. What is recomputed from the bytes is exact: the size, the lines and the line
index, the sha256, whether it is UTF-8. What was only in the lost row is not: the tool
name becomes the id's stem, the call id ``"recovered"``, the creation time the file's
modification time, and a note says so. A spill the retention cap had cut is recorded as
what its file holds, its head and tail joined, as if that were the whole output (the cut
is not recorded anywhere else). Each recovered row also records the file's identity,
size and modification time, as an adopted spill does, so a file changed later is refused
rather than served. Tombstones are lost: a removed spill's id reads as "not found".
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import errno
import os
import sqlite3
import stat
import urllib.parse
from collections.abc import Iterator
from typing import Final

from spillstore._core.ids import is_spill_id
from spillstore._core.index import IndexBuilder
from spillstore._errors import StoreError
from spillstore._stores.errors import map_os_errors
from spillstore._stores.local_catalog import CATALOG_NAME, BadFile, Catalog, Identity
from spillstore._stores.local_check import Problem
from spillstore._stores.local_db import (
    BUSY_TIMEOUT_SECONDS,
    DAMAGED,
    check_header,
    db_errors,
    is_damaged,
    store_errno,
)
from spillstore._stores.local_files import (
    CREATE_FLAGS,
    DIR_FLAGS,
    READ_FLAGS,
    LocalRoot,
    exists_at,
    temp_name,
    unlink_quiet,
)
from spillstore._stores.local_gc import in_use
from spillstore._stores.local_marks import ASIDE_MARK
from spillstore._stores.local_schema import schema_fault
from spillstore._stores.meta import SpillMeta
from spillstore._stores.tally import Tally

__all__ = [
    "RECOVERED_NOTE",
    "adopt_data_files",
    "check_catalog",
    "copy_catalog",
    "database_fault",
    "may_open_damaged",
    "repairing",
    "set_aside",
]

_REPAIRING: contextvars.ContextVar[bool] = contextvars.ContextVar("repairing", default=False)


@contextlib.contextmanager
def repairing() -> Iterator[None]:
    """Let :class:`~spillstore.LocalStore` open a root whose catalog is damaged (for
    ``check``); elsewhere opening one fails, naming ``spillstore check --fix``."""
    token = _REPAIRING.set(True)
    try:
        yield
    finally:
        _REPAIRING.reset(token)


def may_open_damaged() -> bool:
    """Whether a store is being opened within :func:`repairing`."""
    return _REPAIRING.get()


RECOVERED_NOTE: Final = (
    "recovered by 'spillstore check --fix' from its data file after the catalog was "
    "damaged: the tool name is the id's stem, the call id and time are not the original "
    "ones, and an output the retention cap had cut reads as its head and tail joined"
)

_PIECE: Final = 1 << 20

_SUFFIXES: Final = ("-wal", "-shm", "")
"""The catalog's files, the database last: a new one never meets an old WAL."""


def check_catalog(root: LocalRoot, catalog: Catalog, *, fix: bool, now: float) -> list[Problem]:
    """The catalog's problems: files that are not private regular files (a link, a
    directory, another user's), and a database that is not one or is corrupt.

    With ``fix``: a ``-wal`` or ``-shm`` that cannot be read (a symlink, a directory) is
    set aside (it holds no rows the database has not); a database file that can be read
    (a second hard link, another user's) and is a sound catalog is copied into a fresh
    private file, keeping every row (:func:`copy_catalog`); a database that cannot be
    read, or is damaged, is set aside and rebuilt from the data files.
    """
    bad = catalog.bad_files()
    damage = None
    if bad and not fix:
        return _planned(catalog, bad)
    if not bad:
        damage = catalog.damage()
        if damage is None:
            return []
        if not fix:
            detail = f"the catalog is damaged ({damage}); --fix {_REBUILDS}{_LATER}"
            return [Problem("bad_catalog", CATALOG_NAME, detail)]
    with catalog.replacing() as idle:  # no connection of this process stays on the old file
        if not idle:
            return [_held(damage or "; ".join(f.why for f in bad.values()), _BUSY_THREAD)]
        return _repair(root, catalog, bad, now)


def _repair(
    root: LocalRoot, catalog: Catalog, bad: dict[str, BadFile], now: float
) -> list[Problem]:
    """``check_catalog``'s repair, with every connection of this process closed."""
    problems: list[Problem] = []
    unreadable = {name for name, found in bad.items() if not found.readable}
    if unreadable:  # never opened: SQLite would follow the link
        aside = set_aside(root, now, whole=CATALOG_NAME in unreadable)
        for name in sorted(unreadable):
            moved = aside + name.removeprefix(CATALOG_NAME)
            why = bad.pop(name).why
            problems.append(Problem("bad_catalog", name, f"{why}; moved to {moved}", True))
        if CATALOG_NAME in unreadable:
            return [*problems, _rebuilt(root, catalog, "the catalog was set aside")]
    if bad:  # readable files only: the rows are copied, unless it is damaged
        whys = "; ".join(f"{name} {found.why}" for name, found in sorted(bad.items()))
        if catalog.held_elsewhere():
            return [*problems, _held(whys)]
        fault = copy_catalog(root)
        if fault is None:
            detail = f"{whys}; copied into a private file, keeping every row"
            return [*problems, Problem("bad_catalog", CATALOG_NAME, detail, fixed=True)]
        detail = f"{whys}; the catalog is damaged ({fault}); moved to {set_aside(root, now)}"
        return [*problems, _rebuilt(root, catalog, detail)]
    damage = catalog.damage()
    if damage is None:
        return problems
    detail = f"the catalog is damaged ({damage})"
    catalog.close()
    if catalog.held_elsewhere():  # its SQLite would later delete the new -wal by name
        return [*problems, _held(detail)]
    return [*problems, _rebuilt(root, catalog, f"{detail}; moved to {set_aside(root, now)}")]


_LATER: Final = " (the rest of the store is checked once it is repaired)"
_REBUILDS: Final = "moves it aside and rebuilds it from the data files"


_BUSY_PROCESS: Final = (
    "another process has it open (an MCP server or a spillstore command): stop it, then "
    "run check --fix again"
)
_BUSY_THREAD: Final = (
    "another thread of this process stayed in a catalog operation: run check --fix again "
    "when the store is idle"
)


def _held(detail: str, why: str = _BUSY_PROCESS) -> Problem:
    return Problem("bad_catalog", CATALOG_NAME, f"{detail}; not repaired: {why}")


def _planned(catalog: Catalog, bad: dict[str, BadFile]) -> list[Problem]:
    """What ``check --fix`` will do with the bad catalog files ``bad`` (nothing is
    changed; the database is read only when no file beside it is a link)."""
    copies = "copies {} into a private file, keeping every row"
    maybe = f"{copies} if it reads as a sound catalog then (else rebuilds it from the data files)"
    fault: str | None = None
    if not bad.get(CATALOG_NAME, BadFile("", readable=True)).readable:
        fault = ""  # never opened: rebuilt
    elif any(not found.readable for found in bad.values()):
        plan = maybe
    else:
        try:
            fault = database_fault(catalog.path)
            plan = copies
        except (OSError, sqlite3.Error):  # cannot tell now (a full disk: no -shm)
            plan = maybe
    problems = []
    for name, found in sorted(bad.items()):
        if fault is not None:
            own = name == CATALOG_NAME or not found.readable
            what = "moves it aside" if own else "moves it aside with the catalog"
            what += " and rebuilds the catalog from the data files" + (fault and f" ({fault})")
        elif name == CATALOG_NAME:
            what = plan.format("it")
        elif not found.readable:
            what = "moves it aside"
        else:
            what = plan.format("the catalog, the rows of this file with it,")
        problems.append(Problem("bad_catalog", name, f"{found.why}; --fix {what}{_LATER}"))
    return problems


def _sound(conn: sqlite3.Connection) -> str | None:
    """Why the open database cannot serve as the catalog (None when it can)."""
    found = [row[0] for row in conn.execute("PRAGMA quick_check")]
    bad = [line for line in found if line != "ok"]
    return "; ".join(bad[:3]) if bad else schema_fault(conn)


def database_fault(path: str) -> str | None:
    """Why the catalog database at ``path`` cannot be copied: it is not a database, is
    corrupt or is not a catalog; None when it is a sound catalog (read only).

    Raises:
        OSError, sqlite3.Error: it cannot be read now.
    """
    dir_fd = os.open(os.path.dirname(path), DIR_FLAGS)
    try:
        check_header(os.path.basename(path), dir_fd)
        conn = sqlite3.connect(f"file:{urllib.parse.quote(path)}?mode=ro", uri=True)
        try:
            return _sound(conn)
        finally:
            conn.close()
    except StoreError as exc:
        if not is_damaged(exc):
            raise
        return str(exc.__cause__ or exc)
    except sqlite3.Error as exc:
        if store_errno(exc) != DAMAGED:
            raise
        return str(exc)
    finally:
        os.close(dir_fd)


def copy_catalog(root: LocalRoot) -> str | None:
    """Copy the catalog into a fresh private file (SQLite's backup API: the rows of its
    ``-wal`` included), then rename it over the catalog; return why it could not be
    copied if it is damaged (nothing changed then).

    The source is read with the wal-index in memory (no ``-shm`` is used, as on a full
    disk); closing it folds its ``-wal`` into the old file and deletes that name, and
    the old ``-shm`` name is unlinked, before the copy takes the catalog's name: the
    copy never meets the old file's companions. The other names of the old file keep it.

    Raises:
        StoreError: the copy cannot be made (a full disk: nothing changed).
    """
    path = os.path.join(root.path, CATALOG_NAME)
    root_fd = root.open()
    temp = temp_name("db")
    try:
        try:
            check_header(CATALOG_NAME, root_fd)
        except StoreError as exc:
            return str(exc.__cause__ or exc)
        with map_os_errors("cannot copy the catalog"):
            os.close(os.open(temp, CREATE_FLAGS, 0o600, dir_fd=root_fd))
        try:
            with db_errors("cannot copy the catalog"):
                fault = _copy(path, os.path.join(root.path, temp))
        except StoreError as exc:
            if not is_damaged(exc):
                raise
            fault = str(exc.__cause__ or exc)
        if fault is not None:
            return fault
        with map_os_errors("cannot copy the catalog"):
            fd = os.open(temp, READ_FLAGS, dir_fd=root_fd)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if exists_at(f"{CATALOG_NAME}-wal", root_fd):
                raise StoreError(errno.EBUSY, "cannot copy the catalog: its -wal is still in use")
            unlink_quiet(f"{CATALOG_NAME}-shm", root_fd)
            os.replace(temp, CATALOG_NAME, src_dir_fd=root_fd, dst_dir_fd=root_fd)
            os.fsync(root_fd)
        return None
    finally:
        unlink_quiet(temp, root_fd)
        os.close(root_fd)


def _copy(source: str, target: str) -> str | None:
    src = sqlite3.connect(source, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        src.execute("PRAGMA locking_mode=EXCLUSIVE")  # before the first read: no -shm
        fault = _sound(src)
        if fault is None:
            dst = sqlite3.connect(target, isolation_level=None)
            try:
                dst.execute("PRAGMA journal_mode=MEMORY")  # no journal file beside it
                src.backup(dst)
            finally:
                dst.close()
        return fault
    finally:
        src.close()  # folds the -wal into the old file and deletes its name


def _rebuilt(root: LocalRoot, catalog: Catalog, detail: str) -> Problem:
    recovered = adopt_data_files(root, catalog)
    detail += (
        f"; a new catalog records the {len(recovered)} spill(s) whose data files were found "
        "(their tool, call id and time are not the original ones; removed spills' ids now "
        "read as not found)"
    )
    return Problem("bad_catalog", CATALOG_NAME, detail, fixed=True)


def set_aside(root: LocalRoot, now: float, *, whole: bool = True) -> str:
    """Rename the catalog and its companions aside (only the ``-wal`` and ``-shm`` unless
    ``whole``); return the catalog's new name."""
    stamp = datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    root_fd = root.open()
    try:
        aside = f"{ASIDE_MARK}{stamp}"
        n = 1
        while any(exists_at(aside + suffix, root_fd) for suffix in _SUFFIXES):
            n += 1
            aside = f"{ASIDE_MARK}{stamp}-{n}"
        for suffix in _SUFFIXES if whole else _SUFFIXES[:2]:
            if exists_at(CATALOG_NAME + suffix, root_fd):
                old, new = CATALOG_NAME + suffix, aside + suffix
                os.replace(old, new, src_dir_fd=root_fd, dst_dir_fd=root_fd)
        os.fsync(root_fd)
    finally:
        os.close(root_fd)
    return aside


def adopt_data_files(root: LocalRoot, catalog: Catalog) -> list[str]:
    """Record the data files that have no row (see the module docstring); return the
    ``session/spill_id`` of each spill recovered."""
    recovered: list[str] = []
    for session, dir_fd, entries in root.scan(None):
        known = catalog.ids(session)
        rows = []
        for entry in entries:
            stem, dot, ext = entry.name.rpartition(".")
            if not (dot and ext == "out" and is_spill_id(stem)) or stem in known:
                continue
            found = _measure(session, stem, dir_fd)
            if found is not None:
                rows.append(found)
                recovered.append(f"{session}/{stem}")
        catalog.insert_many(rows)
    return recovered


def _measure(session: str, spill_id: str, dir_fd: int) -> tuple[SpillMeta, bytes, Identity] | None:
    """A row for the data file ``<spill_id>.out``, or None if it is not one to adopt."""
    name = f"{spill_id}.out"
    if in_use(name, dir_fd):
        return None  # a live writer's: it records it itself
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        builder = IndexBuilder(retention_bytes=None)
        tally = Tally()
        for piece in _pieces(fd):
            builder.feed(piece)
            tally.feed(piece)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        return None  # changing while read: not a spill the store wrote
    cut = builder.finish()
    meta = SpillMeta(
        spill_id=spill_id,
        session=session,
        tool_name=spill_id.rpartition("-")[0],
        tool_call_id="recovered",
        total_bytes=cut.total_bytes,
        total_lines=cut.total_lines,
        stored_ranges=cut.stored_ranges,
        sha256=tally.sha256,
        created_at=st.st_mtime,
        media_notes=(RECOVERED_NOTE,),
        invalid_utf8=tally.invalid_utf8,
        adopted_inode=(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns),
    )
    return meta, cut.index.to_bytes(), (st.st_dev, st.st_ino)


def _pieces(fd: int) -> Iterator[bytes]:
    while piece := os.read(fd, _PIECE):
        yield piece
