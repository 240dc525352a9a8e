"""``CatalogStore``: the local store with a catalog, one data file per spill.

Layout (every directory 0700, every file 0600)::

    <root>/
      .spillstore               the marker, format 2
      catalog.sqlite3[-wal|-shm] metadata, line indexes, tombstones (local_catalog)
      .gc.lock                  flock'ed by the one cleaner running
      <session>/
        .session                 the session directory is the store's
        <spill_id>.out           the stored bytes: the only file of a spill
        .tmp-<16 hex>.out        a data file being written

Commit order: the data file is written, fsynced and linked to its name, the directory
fsynced (the bytes are durable), then the catalog row commits: that commit is the
commit point. The writer holds its data file's lock until the row is committed, so
``gc`` never takes a data file being published for an orphan. ``gc`` deletes the row
(leaving a tombstone, in the same transaction), then the file. A data file without a
row, older than the grace period and not locked, is an orphan. Everything else (safe
opening, the root's marker, refusals, paging, adoption by hard link) is
:class:`~spillstore._stores.local.LocalStore`'s.

Not yet: a store of format 1 (sidecar files) is not migrated into a catalog (it is
refused with a clear error; ``LocalStore`` reads it), and identical bytes spilled twice
are still stored twice.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable
from typing import Any, ClassVar

from spillstore._errors import SpillExpired
from spillstore._stores.backend import DataReader
from spillstore._stores.errors import expired_error, map_os_errors, not_found_error
from spillstore._stores.local import LocalStore
from spillstore._stores.local_catalog import Catalog
from spillstore._stores.local_check import CheckReport, Problem
from spillstore._stores.local_files import LocalRoot, unlink_quiet
from spillstore._stores.local_marks import CATALOG_FORMAT
from spillstore._stores.local_sink import LocalSink
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink

__all__ = ["CatalogStore"]


class CatalogSink(LocalSink):
    """Writes one spill: the data file as :class:`LocalSink` does, then the catalog row."""

    def __init__(self, root: LocalRoot, session: str, catalog: Catalog) -> None:
        super().__init__(root, session)
        self._catalog = catalog

    def _record(self, stored: SpillMeta, index: bytes) -> SpillMeta:
        os.fsync(self._dir_fd)  # the data file's name is durable before the row commits
        return self._catalog.insert(stored, index)


class CatalogStore(LocalStore):
    """A local store whose metadata, line indexes and tombstones live in one SQLite
    catalog per root; each spill is one plain data file.

    Takes :class:`~spillstore.LocalStore`'s arguments.
    """

    _FORMAT: ClassVar[int] = CATALOG_FORMAT

    def __init__(self, root: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        with map_os_errors(f"cannot open the catalog of {self.root}"):
            self._catalog = Catalog(self._root)

    def __repr__(self) -> str:
        return f"CatalogStore({self._root.real_path!r})"

    def _create(self, session: str) -> Sink:
        return CatalogSink(self._root, session, self._catalog)

    def _expired(self, spill_id: str) -> SpillExpired:
        return expired_error(spill_id, *(self._catalog.tombstone(spill_id) or (None, None)))

    def _stat(self, spill_id: str) -> SpillMeta:
        meta = self._catalog.get(spill_id)
        if meta is not None:
            return meta
        if self._catalog.tombstone(spill_id) is not None:
            raise self._expired(spill_id)
        raise not_found_error(spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        return self._catalog.list(session)

    def _open(self, meta: SpillMeta) -> DataReader:
        try:
            return super()._open(meta)
        except SpillExpired:
            raise self._expired(meta.spill_id) from None

    def _read_index(self, meta: SpillMeta) -> bytes:
        raw = self._catalog.index(meta.spill_id)
        if raw is None:
            raise self._expired(meta.spill_id)
        return raw

    def _remove_names(self, session: str, spill_id: str, *, reason: str, now: float) -> bool:
        removed = self._catalog.remove(spill_id, session, reason=reason, now=now)
        with (
            map_os_errors(f"cannot remove spill {spill_id}"),
            self._root.session_dir(session) as dir_fd,
        ):
            if dir_fd >= 0:
                unlink_quiet(f"{spill_id}.out", dir_fd)
        return removed

    def _published(self, dir_fd: int) -> Callable[[str], bool]:
        return self._catalog.has

    def _recorded(self, session: str) -> set[str]:
        return self._catalog.ids(session)

    def check(self, *, fix: bool = False) -> CheckReport:
        """:meth:`LocalStore.check`, plus catalog rows whose data file is missing or of the
        wrong size (torn; ``fix`` removes them, leaving a tombstone)."""
        report = super().check(fix=fix)
        torn: builtins.list[Problem] = []
        now = self._clock()
        for meta in self._catalog.list(None):
            try:
                size: int | None = os.stat(self._root.data_path(meta)).st_size
            except FileNotFoundError:
                size = None
            if size == meta.stored_bytes:
                continue
            why = (
                "its data file is missing"
                if size is None
                else f"its data file holds {size} bytes, its row says {meta.stored_bytes}"
            )
            if fix:
                self._remove_names(meta.session, meta.spill_id, reason="check", now=now)
            torn.append(Problem("torn", f"{meta.session}/{meta.spill_id}", why, fix))
        return CheckReport(problems=(*report.problems, *torn), fix=fix)

    def _after_gc(self, *, now: float) -> None:
        self._catalog.prune_tombstones(now - self._tombstone_ttl)
        super()._after_gc(now=now)
