"""The local directory store: atomic, private, indexed spills on the local disk.

Layout (every directory 0700, every file 0600)::

    <root>/                      argument, else $SPILLSTORE_DIR, else the user cache dir
      .spillstore                the marker, format 2 (local_marks)
      catalog.sqlite3[-wal|-shm] metadata, line indexes, tombstones (local_catalog)
      .gc.lock                   flock'ed by the one cleaner running
      <session>/
        .session                 the session directory is the store's
        <spill_id>.out           the stored bytes (head, then retained tail): the only
                                 file of a spill (hard-linked when the bytes are shared)
        .tmp-<16 hex>.out        a data file being written

Commit order (:mod:`~spillstore._stores.local_sink`): the data file is written, fsynced
and linked to its name, the directory fsynced, then the catalog row commits: that commit
is the commit point, and a data file without a row is a crashed writer's leftover that
``gc`` removes after the grace period (never while its writer holds its lock). ``gc``
deletes the row (leaving a tombstone, in the same transaction), then the file (on a full
disk, where the row cannot go first, the file goes first: see
:mod:`~spillstore._stores.local_gc`).

Files are opened without following links, relative to checked session directories
(:mod:`~spillstore._stores.local_files`), and must be regular files. A data file must be
the file its row recorded (``(st_dev, st_ino)``): a name swapped for a link to another
file is refused. An adopted spill's ``(st_dev, st_ino, st_size, st_mtime_ns)`` must
still match too, so a tool that changes its log after handing it over is detected.
Reads keep a few data files open: a repeated read costs a ``PRAGMA data_version`` (the
row is still current), an ``fstat`` (the file still has a name) and a ``dup``.

A root of the files layout (0.1: a sidecar and an index file per spill) is migrated into
the catalog when it is opened (:mod:`~spillstore._stores.local_migrate`).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import itertools
import logging
import operator
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar, Final

import platformdirs

from spillstore._core.gc_plan import GcEntry
from spillstore._core.index import DEFAULT_RETAINED_TAIL_BYTES
from spillstore._errors import SpillExpired, SpillstoreError, StoreError
from spillstore._stores.backend import DataReader
from spillstore._stores.base import Store
from spillstore._stores.errors import expired_error, map_os_errors, not_found_error
from spillstore._stores.local_catalog import Catalog
from spillstore._stores.local_check import CheckReport, Problem, audit, torn_rows
from spillstore._stores.local_db import is_damaged
from spillstore._stores.local_files import (
    LocalReader,
    LocalRoot,
    check_dir,
    make_dirs,
    unlink_quiet,
    warn_skipped,
)
from spillstore._stores.local_gc import (
    RowsLeft,
    finish_rows_left,
    in_use,
    is_orphan_name,
    on_full_disk,
    open_cleaner_lock,
    remove_orphan,
    remove_session_dir,
)
from spillstore._stores.local_marks import (
    STORE_FORMAT,
    mark_root,
    refuse_special_root,
)
from spillstore._stores.local_migrate import migrate_root
from spillstore._stores.local_rebuild import check_catalog, may_open_damaged
from spillstore._stores.local_scan import check_data, read_small
from spillstore._stores.local_sink import LocalSink
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink
from spillstore._twins import method_twin

__all__ = [
    "ENV_DIR",
    "LOCAL_RETENTION_BYTES",
    "READERS_KEPT",
    "TOMBSTONE_TTL_SECONDS",
    "LocalStore",
]

logger = logging.getLogger("spillstore")

ENV_DIR = "SPILLSTORE_DIR"
"""The environment variable that sets the root when no argument is given."""

LOCAL_RETENTION_BYTES = 256 * 1024 * 1024
"""The local store's default retention cap. Spills stream to disk with flat memory, so
the cap only bounds disk use; 10 MiB (the in-memory default) cut the middle of every
15 MB log."""

TOMBSTONE_TTL_SECONDS = 7 * 24 * 3600.0
"""How long a removed spill's id is remembered (``gc`` prunes older tombstones)."""

_STALE_LISTING: Final = (
    "its listing (what a list reads) disagrees with its columns; rewritten from them by --fix"
)

READERS_KEPT: Final = 16
"""Data files a store keeps open for repeated reads (the most recently opened)."""


class LocalStore(Store):
    """Spills in a local directory: atomic, private (0700/0600), indexed, collectable.

    Args:
        root: the store root. Default: ``$SPILLSTORE_DIR`` (``~`` expanded), else platformdirs'
            ``user_cache_dir("spillstore")``. Missing directories are created one level
            at a time, mode 0700.
        clock: epoch seconds, for ``created_at`` and ``gc``.
        retention_bytes: default retention cap (None: keep everything). Default 256 MiB
            (:data:`LOCAL_RETENTION_BYTES`): local spills stream to disk with flat memory.
        retained_tail_bytes: default tail kept past the cap.
        tombstone_ttl: seconds a removed spill's id is remembered as expired.
        force_root: use a root that is ``/``, the home directory, or a non-empty
            directory that is not a store (it is then marked as one).

    Raises:
        UnsafeStoreRoot: the root is a symlink, owned by another user, or writable by
            group or others (spillstore never chmods it); or it is ``/``, the home
            directory, or a non-empty directory without the store's marker (see
            :mod:`~spillstore._stores.local_marks`) and ``force_root`` is false.
        StoreError: the root cannot be created.
    """

    _LISTED_IN_ORDER: ClassVar[bool] = True

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        retention_bytes: int | None = LOCAL_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
        tombstone_ttl: float = TOMBSTONE_TTL_SECONDS,
        force_root: bool = False,
    ) -> None:
        super().__init__(
            clock=clock, retention_bytes=retention_bytes, retained_tail_bytes=retained_tail_bytes
        )
        if root is None:
            from_env = os.environ.get(ENV_DIR)  # a shell did not expand a quoted '~/x'
            root = os.path.expanduser(from_env) if from_env else None
            root = root or platformdirs.user_cache_dir("spillstore")
        path = os.path.abspath(os.fspath(root))
        if not force_root:
            refuse_special_root(path)
        with map_os_errors(f"cannot create the store root {path}"):
            make_dirs(path)
            check_dir(os.lstat(path), path, "store root")
            self._root = LocalRoot(path)
            found = mark_root(self._root, force=force_root)
            self._catalog = Catalog(self._root)
        self._tombstone_ttl = tombstone_ttl
        self._readers: dict[str, int] = {}
        self._readers_pid = os.getpid()
        self._readers_lock = threading.Lock()
        self._skipped: set[str] | None = None  # sessions gc or clean already reported
        self._rows_left: RowsLeft | None = None  # see local_gc.on_full_disk
        try:
            upgrade = found == STORE_FORMAT or self._catalog.has_table("spills")
        except StoreError as exc:  # check opens it (local_rebuild.repairing) to repair it
            if not is_damaged(exc) or not may_open_damaged():
                raise
            upgrade = False
        if upgrade:
            self._migrate()

    def _migrate(self) -> None:
        """Move a root of the files layout (or an older catalog) into the catalog."""
        with self._cleaner_lock():
            migrate_root(self._root, self._catalog)

    @property
    def root(self) -> str:
        """The absolute store root (symlinks in its parents resolved)."""
        return self._root.real_path

    def __repr__(self) -> str:
        return f"LocalStore({self._root.real_path!r})"

    # ----------------------------------------------------------------- primitives

    def _create(self, session: str) -> Sink:
        return LocalSink(self._root, session, self._catalog)

    def _expired(self, spill_id: str) -> SpillExpired:
        return expired_error(spill_id, *(self._catalog.tombstone(spill_id) or (None, None)))

    def _skip(self, name: str, exc: StoreError) -> None:
        """Report a bad session directory: once per gc or clean, which look at it twice."""
        skipped = self._skipped
        if skipped is not None:
            if name in skipped:
                return
            skipped.add(name)
        warn_skipped(name, exc)

    def _stat(self, spill_id: str) -> SpillMeta:
        meta = self._catalog.get(spill_id)
        if meta is not None:
            return meta
        if self._catalog.tombstone(spill_id) is not None:
            raise self._expired(spill_id)
        raise not_found_error(spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        metas = self._catalog.list(session)
        sessions = [session] if session is not None else sorted({m.session for m in metas})
        bad = set()
        for name in sessions:  # one check per session directory, not per spill
            try:
                with map_os_errors(f"cannot list session {name}"), self._root.session_dir(name):
                    pass
            except StoreError as exc:
                if session is not None:
                    raise
                self._skip(name, exc)
                bad.add(name)
        return [m for m in metas if m.session not in bad] if bad else metas

    def _open(self, meta: SpillMeta) -> DataReader:
        with map_os_errors(f"cannot open spill {meta.spill_id}"):
            fd = self._cached_reader(meta)
            if fd < 0:
                entry = self._catalog.entry(meta.spill_id)
                opened = None if entry is None else self._root.open_data(meta)
                if entry is None or opened is None:
                    raise self._expired(meta.spill_id)
                fd = opened
                try:
                    check_data(os.fstat(fd), meta, entry[1])
                    self._keep_reader(meta.spill_id, fd)
                except BaseException:
                    os.close(fd)
                    raise
        return LocalReader(fd, meta.stored_bytes)

    def _scan_data(
        self, metas: Iterable[SpillMeta]
    ) -> Iterator[tuple[SpillMeta, bytes | memoryview | SpillstoreError]]:
        for session, group in itertools.groupby(metas, key=operator.attrgetter("session")):
            with contextlib.ExitStack() as held:
                try:  # one query and one open of the directory for all the session's spills
                    identities = self._catalog.identities(session)
                    dir_fd = held.enter_context(self._root.session_dir(session))
                except (OSError, SpillstoreError):
                    identities, dir_fd = {}, -1
                for meta in group:
                    identity = identities.get(meta.spill_id)
                    data = None
                    if dir_fd >= 0 and identity is not None:
                        data = read_small(dir_fd, meta, identity)
                    if data is not None:
                        yield meta, data
                    else:  # a big file (mapped), or a failure worded as a read words it
                        yield from super()._scan_data((meta,))

    def _cached_reader(self, meta: SpillMeta) -> int:
        """A new descriptor of the data file kept open for ``meta``, or -1 (none, or
        it lost its name or changed: it is then opened and checked again)."""
        with self._readers_lock:
            if self._readers_pid != os.getpid():  # a forked child: its own descriptors
                self._readers, self._readers_pid = {}, os.getpid()
            fd = self._readers.get(meta.spill_id, -1)
            if fd < 0:
                return -1
            st = os.fstat(fd)
            adopted = meta.adopted_inode
            if (
                st.st_nlink > 0
                and st.st_size == meta.stored_bytes
                and (
                    adopted is None or (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == adopted
                )
            ):
                return os.dup(fd)
            del self._readers[meta.spill_id]
            os.close(fd)
            return -1

    def _keep_reader(self, spill_id: str, fd: int) -> None:
        with self._readers_lock:
            old = self._readers.pop(spill_id, -1)
            if old >= 0:
                os.close(old)
            self._readers[spill_id] = os.dup(fd)
            if len(self._readers) > READERS_KEPT:
                os.close(self._readers.pop(next(iter(self._readers))))

    def _forget_reader(self, spill_id: str) -> None:
        with self._readers_lock:
            fd = self._readers.pop(spill_id, -1)
            if fd >= 0 and self._readers_pid == os.getpid():
                os.close(fd)

    def _read_index(self, meta: SpillMeta) -> bytes:
        raw = self._catalog.index(meta.spill_id)
        if raw is None:
            raise self._expired(meta.spill_id)
        return raw

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        return self._remove_names(meta.session, meta.spill_id, reason=reason, now=now)

    def _remove_names(self, session: str, spill_id: str, *, reason: str, now: float) -> bool:
        """Delete a spill's row (leaving its tombstone), then unlink its data file's name;
        return whether the row was there. On a full disk the name goes first, to make
        room for the row's removal (:func:`~spillstore._stores.local_gc.on_full_disk`)."""
        try:
            removed = self._catalog.remove(spill_id, session, reason=reason, now=now)
        except StoreError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            self._unlink_data(session, spill_id)
            removed = on_full_disk(
                lambda: self._catalog.remove(spill_id, session, reason=reason, now=now),
                spill_id,
                self._rows_left,
            )
        self._unlink_data(session, spill_id)
        return removed

    def _unlink_data(self, session: str, spill_id: str) -> None:
        self._forget_reader(spill_id)
        with (
            map_os_errors(f"cannot remove spill {spill_id}"),
            self._root.session_dir(session) as dir_fd,
        ):
            if dir_fd >= 0:
                unlink_quiet(f"{spill_id}.out", dir_fd)

    def check(self, *, fix: bool = False) -> CheckReport:
        """List orphans, torn spills, bad entries and loose permissions; repair with ``fix``.

        See :mod:`~spillstore._stores.local_check` for what is found and how it is
        repaired. Names spillstore does not make are reported and never touched.
        """
        with self._cleaner_lock():
            now = self._clock()
            damaged = check_catalog(self._root, self._catalog, fix=fix, now=now)
            if any(not p.fixed for p in damaged):  # nothing else can be judged without it
                return CheckReport(problems=tuple(damaged), fix=fix)

            def remove(session: str, spill_id: str) -> bool:
                left = self._rows_left
                before = len(left) if left is not None else 0
                self._remove_names(session, spill_id, reason="check", now=now)
                return left is None or len(left) == before

            with map_os_errors("cannot check the store"):
                report = audit(
                    self._root,
                    fix=fix,
                    remove_spill=remove,
                    recorded=self._catalog.ids,
                    published=self._published,
                )
                stale = [  # first: the rest of the check reads the listings
                    Problem("torn", f"{session}/{spill_id}", _STALE_LISTING, fix)
                    for session, spill_id in self._catalog.stale_listings(fix=fix)
                ]
                torn = torn_rows(self._root, self._catalog.list(None), fix=fix, remove_spill=remove)
            return CheckReport(problems=(*damaged, *report.problems, *torn, *stale), fix=fix)

    acheck = method_twin(check)

    # ----------------------------------------------------------------- hooks

    @contextlib.contextmanager
    def _cleaner_lock(self) -> Iterator[None]:
        with super()._cleaner_lock(), map_os_errors("cannot take the cleaner lock"):
            fd = open_cleaner_lock(self._root)
            try:
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                self._skipped, self._rows_left = set(), []
                yield
                finish_rows_left(self._rows_left)
            finally:
                self._skipped = self._rows_left = None
                if fd >= 0:
                    os.close(fd)

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], bool]]]:
        found: builtins.list[tuple[GcEntry, Callable[[], bool]]] = []
        with map_os_errors("cannot scan for leftovers"):
            for name, dir_fd, listed in self._root.scan(session, skipped=self._skip):
                entries = [e for e in listed if e.is_file(follow_symlinks=False)]
                names = {e.name for e in listed}  # a bad sidecar keeps its files for check
                names |= {f"{spill_id}.json" for spill_id in self._catalog.ids(name)}
                for entry in entries:
                    if not is_orphan_name(entry.name, names):
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # its writer just finished
                        continue
                    if now - st.st_mtime < grace or in_use(entry.name, dir_fd):
                        continue
                    found.append(
                        (
                            GcEntry(
                                spill_id=None,
                                session=name,
                                name=entry.name,
                                bytes=st.st_size,
                                reason="orphan_temp",
                                created_at=st.st_mtime,
                            ),
                            self._unlinker(name, entry.name),
                        )
                    )
        return found

    def _unlinker(self, session: str, name: str) -> Callable[[], bool]:
        def remove() -> bool:  # decided again, under the file's lock (see local_gc)
            with self._root.session_dir(session) as dir_fd:
                return dir_fd >= 0 and remove_orphan(name, dir_fd, self._published(dir_fd))

        return remove

    def _published(self, dir_fd: int) -> Callable[[str], bool]:
        """Whether the spill ``spill_id`` is visible (its row, read fresh)."""
        return self._catalog.has

    def _data_keys(self) -> dict[str, str]:
        return self._catalog.shared()

    def _after_gc(self, *, now: float) -> None:
        try:
            self._catalog.prune_tombstones(now - self._tombstone_ttl)
        except StoreError as exc:  # a full disk: they are pruned by a later gc
            if exc.errno != errno.ENOSPC:
                raise
        with map_os_errors("cannot remove old session directories"):
            for name, dir_fd, _ in self._root.scan(None, skipped=self._skip):
                root_fd = self._root.open()
                try:
                    # Only a marked, empty directory goes; a writer that loses the race
                    # retries.
                    if now - os.fstat(dir_fd).st_mtime > self._tombstone_ttl:
                        remove_session_dir(self._root, name, root_fd)
                finally:
                    os.close(root_fd)

    def _spill_id_of_path(self, path: str) -> str:
        session, spill_id = self._root.spill_of_path(path)
        if self._stat(spill_id).session != session:
            raise self._root.outside(path)
        return spill_id

    def _adopt_in_place(
        self, path: str, *, session: str, retention_bytes: int | None
    ) -> tuple[Sink, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or (retention_bytes is not None and st.st_size > retention_bytes)
        ):
            return None
        sink = self._create(session)
        assert isinstance(sink, LocalSink)
        if not sink.adopt(path, st):
            sink.discard()
            return None
        return sink, sink.fd
