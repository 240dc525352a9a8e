"""``check --fix`` on a damaged catalog: move it aside, and rebuild it from the data files.

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
import os
import stat
from collections.abc import Iterator
from typing import Final

from spillstore._core.ids import is_spill_id
from spillstore._core.index import IndexBuilder
from spillstore._stores.local_catalog import CATALOG_NAME, Catalog, Identity
from spillstore._stores.local_check import Problem
from spillstore._stores.local_files import READ_FLAGS, LocalRoot, exists_at
from spillstore._stores.local_gc import in_use
from spillstore._stores.local_marks import ASIDE_MARK
from spillstore._stores.meta import SpillMeta
from spillstore._stores.tally import Tally

__all__ = [
    "RECOVERED_NOTE",
    "adopt_data_files",
    "check_catalog",
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
    directory, another user's), and a database that is not one or is corrupt. With
    ``fix`` they are set aside; a catalog database set aside is rebuilt from the data
    files (a bad ``-wal`` or ``-shm`` alone is only set aside: it holds no data)."""
    bad = catalog.bad_files()
    later = " (the rest of the store is checked once it is repaired)"
    if bad and not fix:
        return [
            Problem("bad_catalog", name, f"{why}; --fix moves it aside{later}")
            for name, why in bad.items()
        ]
    problems = []
    if bad:
        catalog.close()
        aside = set_aside(root, now, whole=CATALOG_NAME in bad)
        for name, why in bad.items():
            moved = aside + name.removeprefix(CATALOG_NAME)
            problems.append(Problem("bad_catalog", name, f"{why}; moved to {moved}", fixed=True))
        if CATALOG_NAME in bad:
            return [*problems, _rebuilt(root, catalog, "the catalog was set aside")]
    damage = catalog.damage()
    if damage is None:
        return problems
    detail = f"the catalog is damaged ({damage})"
    if not fix:
        detail += f"; --fix moves it aside and rebuilds it from the data files{later}"
        return [Problem("bad_catalog", CATALOG_NAME, detail)]
    catalog.close()
    if catalog.held_elsewhere():  # its SQLite would later delete the new -wal by name
        detail += (
            "; not moved: another process has it open (an MCP server or a spillstore "
            "command): stop it, then run check --fix again"
        )
        return [*problems, Problem("bad_catalog", CATALOG_NAME, detail)]
    return [*problems, _rebuilt(root, catalog, f"{detail}; moved to {set_aside(root, now)}")]


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
