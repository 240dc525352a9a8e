"""Migrating a store root written in the files layout (0.1, format 1) into the catalog.

The files layout kept three files per spill in its session directory: ``<id>.out`` (the
data, kept as it is), ``<id>.idx`` (the line index) and ``<id>.json`` (the sidecar, whose
presence made the spill visible), plus ``<id>.gone`` tombstones. The local store opens
such a root by migrating it in place, under the cleaner lock, once:

1. each session's sidecars, indexes and tombstones are read and checked (a sidecar that
   is a link, corrupt, or whose data file is missing, torn or hard-linked elsewhere is
   left where it is, and ``spillstore check`` reports it);
2. their rows commit in one catalog transaction per session (``INSERT OR IGNORE``: a
   run killed after the commit and run again changes nothing);
3. the ``.json``, ``.idx`` and ``.gone`` files of every id the catalog now knows are
   unlinked, and the directory fsynced;
4. when every session is done, the marker is replaced by format 2.

A kill -9 at any step leaves a readable store: before a session's commit its spills are
still in the files layout and the marker still says format 1 (the next open migrates
again); after it, they are rows, and their leftover files are unlinked by the next open.
Nothing is ever read from both layouts: a store is either format 1 (migrated before any
use) or format 2. The opt-in catalog of 0.2's development (one JSON row per spill in a
``spills`` table) is upgraded the same way, in one transaction.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from typing import Final

from pydantic import ValidationError

from spillstore._core.ids import is_spill_id
from spillstore._errors import StoreError
from spillstore._stores.errors import map_os_errors
from spillstore._stores.local_catalog import Catalog, Identity
from spillstore._stores.local_files import READ_FLAGS, LocalRoot, read_all, unlink_quiet
from spillstore._stores.local_marks import CATALOG_FORMAT, STORE_FORMAT, mark_root, set_format
from spillstore._stores.meta import (
    MAX_INDEX_BYTES,
    MAX_SIDECAR_BYTES,
    TOMBSTONE_MAX_BYTES,
    SpillMeta,
    parse_tombstone,
)

__all__ = ["migrate_files_layout", "migrate_root", "upgrade_json_catalog"]

logger = logging.getLogger("spillstore")

_OLD_FILES: Final = ("json", "idx", "gone")


def _skip(why: str) -> StoreError:
    """A spill of the old layout that cannot be migrated (left for ``check``)."""
    return StoreError(errno.EINVAL, why)


def _read(dir_fd: int, name: str, limit: int) -> bytes:
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        return read_all(fd, limit, name)
    finally:
        os.close(fd)


def _data_identity(dir_fd: int, meta: SpillMeta) -> Identity:
    """The identity of a spill's data file, if it is whole and the spill's own."""
    try:
        st = os.stat(f"{meta.spill_id}.out", dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise _skip("its data file is missing") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size != meta.stored_bytes:
        raise _skip("its data file is not a regular file of the recorded size")
    adopted = meta.adopted_inode
    if adopted is not None and (st.st_dev, st.st_ino) != (adopted[0], adopted[1]):
        raise _skip("its adopted data file was replaced")
    if adopted is None and st.st_nlink > 1:
        raise _skip(f"its data file has {st.st_nlink} hard links")
    return (st.st_dev, st.st_ino)


def _load(dir_fd: int, session: str, spill_id: str) -> tuple[SpillMeta, bytes, Identity]:
    try:
        meta = SpillMeta.model_validate_json(_read(dir_fd, f"{spill_id}.json", MAX_SIDECAR_BYTES))
        index = _read(dir_fd, f"{spill_id}.idx", MAX_INDEX_BYTES)
    except StoreError:
        raise
    except (OSError, ValidationError) as exc:
        raise _skip(f"its sidecar or index cannot be read: {exc}") from None
    if meta.spill_id != spill_id or meta.session != session:
        raise _skip("its sidecar names another spill or session")
    return meta, index, _data_identity(dir_fd, meta)


def _migrate_session(catalog: Catalog, session: str, dir_fd: int, names: list[str]) -> int:
    spills: list[tuple[SpillMeta, bytes, Identity]] = []
    tombstones: list[tuple[str, str, str | None, float | None]] = []
    for name in names:
        stem, _, ext = name.rpartition(".")
        if not is_spill_id(stem):
            continue
        if ext == "json":
            try:
                spills.append(_load(dir_fd, session, stem))
            except StoreError as why:
                logger.warning(
                    "spill %s/%s not migrated (spillstore check lists it): %s", session, stem, why
                )
        elif ext == "gone":
            try:
                record = parse_tombstone(_read(dir_fd, name, TOMBSTONE_MAX_BYTES))
            except OSError:
                record = (None, None)
            tombstones.append((stem, session, *record))
    if spills or tombstones:
        catalog.insert_many(spills, tombstones)
    known = catalog.ids(session) | {t[0] for t in tombstones}
    for name in names:
        stem, _, ext = name.rpartition(".")
        if ext in _OLD_FILES and stem in known:
            unlink_quiet(name, dir_fd)  # a name, never what a link points at
    os.fsync(dir_fd)
    return len(spills)


def migrate_files_layout(root: LocalRoot, catalog: Catalog) -> int:
    """Move every spill of the files layout under ``root`` into ``catalog``; return how
    many were migrated. The caller holds the cleaner lock and then marks the root."""
    migrated = 0
    for session, dir_fd, entries in root.scan(None):
        names = sorted(e.name for e in entries)
        if any(name.rpartition(".")[2] in _OLD_FILES for name in names):
            migrated += _migrate_session(catalog, session, dir_fd, names)
    if migrated:
        logger.info("migrated %s spills of %s into its catalog", migrated, root.path)
    return migrated


def upgrade_json_catalog(root: LocalRoot, catalog: Catalog) -> int:
    """Move the rows of a catalog of 0.2's development (a ``spills`` table of JSON
    records) into the current tables, in one transaction; return how many."""
    if not catalog.has_table("spills"):
        return 0
    spills: list[tuple[SpillMeta, bytes, Identity]] = []
    for raw, index in catalog.execute("SELECT meta, idx FROM spills"):
        try:
            meta = SpillMeta.model_validate_json(raw)
            with root.session_dir(meta.session) as dir_fd:
                if dir_fd < 0:
                    raise _skip("its session directory is gone")
                spills.append((meta, bytes(index), _data_identity(dir_fd, meta)))
        except (ValidationError, OSError) as why:
            logger.warning("a spill of the old catalog not migrated: %s", why)
    tombstones = []
    if catalog.has_table("tombstones"):
        sql = "SELECT spill_id, session, reason, removed_at FROM tombstones"
        tombstones = [(r[0], r[1], r[2], r[3]) for r in catalog.execute(sql)]
    catalog.insert_many(spills, tombstones)
    catalog.execute("DROP TABLE IF EXISTS tombstones")
    catalog.execute("DROP TABLE IF EXISTS spills")
    return len(spills)


def migrate_root(root: LocalRoot, catalog: Catalog) -> None:
    """Migrate the root of the files layout (or an older catalog) into ``catalog``, then
    mark it as the catalog's format. The caller holds the cleaner lock.

    Raises:
        StoreError: it cannot be done; on a full disk (``ENOSPC``) saying so, and that
            nothing was changed (the store is read only once migrated).
    """
    what = f"cannot migrate the store {root.real_path} into its catalog"
    try:
        with map_os_errors(what):
            if mark_root(root, force=True) == STORE_FORMAT:
                migrate_files_layout(root, catalog)
            upgrade_json_catalog(root, catalog)
            set_format(root, CATALOG_FORMAT)
    except StoreError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        raise StoreError(
            errno.ENOSPC,
            f"{what} (it is in the files layout of spillstore 0.1, read only once "
            "migrated): the disk is full; free some space on its filesystem, then run "
            "the command again (nothing was changed)",
        ) from exc
