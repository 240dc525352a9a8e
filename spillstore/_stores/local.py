"""The local directory store: atomic, private, indexed spills on the local disk.

Layout (every directory 0700, every file 0600)::

    <root>/                      argument, else $SPILLSTORE_DIR, else the user cache dir
      .gc.lock                   flock'ed by the one cleaner running
      <session>/
        <spill_id>.out           the stored bytes (head, then retained tail)
        <spill_id>.idx           the sparse line index (binary, see LineIndex.to_bytes)
        <spill_id>.json          the metadata sidecar; its presence makes a spill visible
        <spill_id>.gone          tombstone of a removed spill (reason and time)
        .tmp-<16 hex>.<ext>      a file being written

A spill is written atomically, sidecar last (:mod:`~spillstore._stores.local_sink`): a
reader that finds no sidecar sees no spill, and a data file without a sidecar is a
crashed writer's leftover that ``gc`` removes after the grace period. Writers hold an
``flock`` on their temp file until they finish, so ``gc`` never removes the files of a
writer that is still alive, even a slow one.

Files are opened without following links, relative to checked session directories
(:mod:`~spillstore._stores.local_files`), and must be regular files. A data file must
have one link (a second link could point at a file that is not ours), unless the spill
was adopted without a copy: then its ``(st_dev, st_ino, st_size, st_mtime_ns)`` must
still match the sidecar, so a tool that changes its log after handing it over is
detected.
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
import time
from collections.abc import Callable, Iterable, Iterator
from typing import ClassVar

import platformdirs

from spillstore._core.gc_plan import GcEntry
from spillstore._core.ids import is_session, is_spill_id
from spillstore._core.index import DEFAULT_RETAINED_TAIL_BYTES
from spillstore._errors import PathOutsideStore, SpillstoreError, StoreError
from spillstore._stores.backend import DataReader
from spillstore._stores.base import Store
from spillstore._stores.errors import expired_error, map_os_errors, not_found_error
from spillstore._stores.local_check import CheckReport, audit
from spillstore._stores.local_files import (
    CREATE_FLAGS,
    READ_FLAGS,
    LocalReader,
    LocalRoot,
    check_dir,
    make_dirs,
    read_all,
    temp_name,
    unlink_quiet,
    write_all,
)
from spillstore._stores.local_gc import (
    in_use,
    is_orphan_name,
    open_lock_file,
    remove_orphan,
    remove_session_dir,
)
from spillstore._stores.local_marks import STORE_FORMAT, mark_root, refuse_special_root
from spillstore._stores.local_sink import LocalSink
from spillstore._stores.meta import MAX_INDEX_BYTES, SpillMeta, tombstone_record
from spillstore._stores.writer import Sink
from spillstore._twins import method_twin

__all__ = ["ENV_DIR", "LOCAL_RETENTION_BYTES", "TOMBSTONE_TTL_SECONDS", "LocalStore"]

logger = logging.getLogger("spillstore")

ENV_DIR = "SPILLSTORE_DIR"
"""The environment variable that sets the root when no argument is given."""

LOCAL_RETENTION_BYTES = 256 * 1024 * 1024
"""The local store's default retention cap. Spills stream to disk with flat memory, so
the cap only bounds disk use; 10 MiB (the in-memory default) cut the middle of every
15 MB log."""

TOMBSTONE_TTL_SECONDS = 7 * 24 * 3600.0
"""How long a removed spill's id is remembered (``gc`` prunes older tombstones)."""

SMALL_DATA_BYTES = 256 * 1024
"""A scan over many spills reads a data file up to this size whole instead of mapping
it: for a 17 KB spill, one read costs about half an ``mmap`` and its unmapping."""


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

    _FORMAT: ClassVar[int] = STORE_FORMAT
    """The on-disk format this class keeps (see :mod:`~spillstore._stores.local_marks`)."""

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
            mark_root(self._root, force=force_root, fmt=self._FORMAT)
        self._tombstone_ttl = tombstone_ttl

    @property
    def root(self) -> str:
        """The absolute store root (symlinks in its parents resolved)."""
        return self._root.real_path

    def __repr__(self) -> str:
        return f"LocalStore({self._root.real_path!r})"

    # ----------------------------------------------------------------- primitives

    def _create(self, session: str) -> Sink:
        return LocalSink(self._root, session)

    def _stat(self, spill_id: str) -> SpillMeta:
        with map_os_errors(f"cannot read spill {spill_id}"):
            session = self._root.session_of(spill_id)
            if session is not None:
                with self._root.session_dir(session) as dir_fd:
                    if dir_fd >= 0:
                        meta = self._root.load_meta(dir_fd, session, spill_id)
                        if meta is not None:
                            return meta
                        tombstone = self._root.tombstone(dir_fd, spill_id)
                        if tombstone is not None:
                            raise expired_error(spill_id, *tombstone)
                # It was here (we saw it), and now it is not.
                raise expired_error(spill_id, None, None)
        raise not_found_error(spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        metas: builtins.list[SpillMeta] = []
        with map_os_errors("cannot list spills"):
            for name, dir_fd, entries in self._root.scan(session):
                ids = [
                    entry.name[:-5]
                    for entry in entries
                    if entry.name.endswith(".json") and is_spill_id(entry.name[:-5])
                ]
                for spill_id in ids:
                    try:
                        meta = self._root.load_meta(dir_fd, name, spill_id)
                    except StoreError as exc:  # one bad entry never hides the others
                        logger.warning(
                            "skipping spill %s (spillstore check lists it): %s",
                            spill_id,
                            exc.strerror or exc,
                        )
                        continue
                    if meta is not None:
                        self._root.remember_session(spill_id, name)
                        metas.append(meta)
        return metas

    def _open(self, meta: SpillMeta) -> DataReader:
        with map_os_errors(f"cannot open spill {meta.spill_id}"):
            fd = self._root.open_spill_file(meta, "out")
            try:
                _check_data(fd, meta)
            except BaseException:
                os.close(fd)
                raise
        return LocalReader(fd, meta.stored_bytes)

    def _scan_data(
        self, metas: Iterable[SpillMeta]
    ) -> Iterator[tuple[SpillMeta, bytes | memoryview | SpillstoreError]]:
        for session, group in itertools.groupby(metas, key=operator.attrgetter("session")):
            with contextlib.ExitStack() as held:
                try:  # one open of the session directory for all its spills
                    dir_fd = held.enter_context(self._root.session_dir(session))
                except (OSError, SpillstoreError):
                    dir_fd = -1
                for meta in group:
                    data = _read_small(dir_fd, meta) if dir_fd >= 0 else None
                    if data is not None:
                        yield meta, data
                    else:  # a big file (mapped), or a failure worded as a read words it
                        yield from super()._scan_data((meta,))

    def _read_index(self, meta: SpillMeta) -> bytes:
        spill_id = meta.spill_id
        with map_os_errors(f"cannot read the index of spill {spill_id}"):
            fd = self._root.open_spill_file(meta, "idx")
            try:
                return read_all(fd, MAX_INDEX_BYTES, f"the index of spill {spill_id}")
            finally:
                os.close(fd)

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        return self._remove_names(meta.session, meta.spill_id, reason=reason, now=now)

    def _remove_names(self, session: str, spill_id: str, *, reason: str, now: float) -> bool:
        """Tombstone a spill, then unlink its names (sidecar first); whether it was there."""
        with (
            map_os_errors(f"cannot remove spill {spill_id}"),
            self._root.session_dir(session) as dir_fd,
        ):
            if dir_fd < 0:
                return False
            try:  # a new file renamed over the name: never written through a link
                temp = temp_name("gone")
                fd = os.open(temp, CREATE_FLAGS, 0o600, dir_fd=dir_fd)
                try:
                    write_all(fd, tombstone_record(reason, now))
                    os.replace(temp, f"{spill_id}.gone", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                finally:
                    os.close(fd)
                    unlink_quiet(temp, dir_fd)
            except OSError as exc:  # removing must work even on a full disk
                logger.warning("no tombstone for spill %s: %s", spill_id, exc)
            removed = unlink_quiet(f"{spill_id}.json", dir_fd)
            unlink_quiet(f"{spill_id}.out", dir_fd)
            unlink_quiet(f"{spill_id}.idx", dir_fd)
        return removed

    def check(self, *, fix: bool = False) -> CheckReport:
        """List orphans, torn spills, bad entries and loose permissions; repair with ``fix``.

        See :mod:`~spillstore._stores.local_check` for what is found and how it is
        repaired. Names spillstore does not make are reported and never touched.
        """
        with self._cleaner_lock():
            now = self._clock()

            def remove(session: str, spill_id: str) -> None:
                self._remove_names(session, spill_id, reason="check", now=now)

            with map_os_errors("cannot check the store"):
                return audit(
                    self._root,
                    fix=fix,
                    remove_spill=remove,
                    recorded=self._recorded,
                    published=self._published,
                )

    acheck = method_twin(check)

    # ----------------------------------------------------------------- hooks

    @contextlib.contextmanager
    def _cleaner_lock(self) -> Iterator[None]:
        with super()._cleaner_lock(), map_os_errors("cannot take the cleaner lock"):
            root_fd = self._root.open()
            try:
                fd = open_lock_file(root_fd, ".gc.lock")
            finally:
                os.close(root_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], bool]]]:
        found: builtins.list[tuple[GcEntry, Callable[[], bool]]] = []
        with map_os_errors("cannot scan for leftovers"):
            for name, dir_fd, listed in self._root.scan(session):
                entries = [e for e in listed if e.is_file(follow_symlinks=False)]
                names = {e.name for e in entries}
                names |= {f"{spill_id}.json" for spill_id in self._recorded(name)}
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
        """Whether the spill ``spill_id`` of the session ``dir_fd`` is visible (read fresh)."""

        def published(spill_id: str) -> bool:
            try:
                os.stat(f"{spill_id}.json", dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            return True

        return published

    def _recorded(self, session: str) -> set[str]:
        """The ids of ``session`` whose record is not a file of the session (catalog)."""
        return set()

    def _after_gc(self, *, now: float) -> None:
        with map_os_errors("cannot prune tombstones"):
            for name, dir_fd, entries in self._root.scan(None):
                for entry in entries:
                    if not (
                        entry.name.endswith(".gone")
                        and is_spill_id(entry.name[:-5])
                        and entry.is_file(follow_symlinks=False)
                    ):
                        continue
                    try:
                        age = now - entry.stat(follow_symlinks=False).st_mtime
                    except FileNotFoundError:
                        continue
                    if age > self._tombstone_ttl:
                        unlink_quiet(entry.name, dir_fd)
                root_fd = self._root.open()
                try:
                    # Only a marked, empty directory goes; a writer that loses the race
                    # retries.
                    st = os.fstat(dir_fd)
                    if now - st.st_mtime > self._tombstone_ttl:
                        remove_session_dir(self._root, name, root_fd)
                finally:
                    os.close(root_fd)

    def _spill_id_of_path(self, path: str) -> str:
        real = os.path.realpath(path)
        relative = os.path.relpath(real, self._root.real_path)
        parts = relative.split(os.sep)
        outside = PathOutsideStore(
            f"{path} is not a spill file of the store at {self._root.real_path}", path=path
        )
        if len(parts) != 2 or relative.startswith(os.pardir) or os.path.isabs(relative):
            raise outside
        session, name = parts
        if not is_session(session) or not name.endswith(".out") or not is_spill_id(name[:-4]):
            raise outside
        spill_id = name[:-4]
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise PathOutsideStore(f"{path} is not a regular file", path=path)
        meta = self._stat(spill_id)
        if meta.session != session:
            raise outside
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


def _read_small(dir_fd: int, meta: SpillMeta) -> bytes | None:
    """A spill's data file up to :data:`SMALL_DATA_BYTES`, read whole from its session
    directory held open; None for a bigger file and on any failure."""
    size = meta.stored_bytes
    if size > SMALL_DATA_BYTES:
        return None
    try:
        fd = os.open(f"{meta.spill_id}.out", READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        _check_data(fd, meta)
        data = os.pread(fd, size, 0)
    except OSError:  # StoreError too: _check_data refused it
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def _check_data(fd: int, meta: SpillMeta) -> None:
    """Refuse a data file that is not the one the sidecar describes."""
    st = os.fstat(fd)
    where = f"the data file of spill {meta.spill_id}"
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(errno.EINVAL, f"{where} is not a regular file")
    if meta.adopted_inode is not None:
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != meta.adopted_inode:
            raise StoreError(
                errno.ESTALE,
                f"{where} was adopted from a tool's file that has changed since; "
                "refusing to serve different content",
            )
    elif st.st_nlink > 1:
        raise StoreError(
            errno.EPERM,
            f"{where} has {st.st_nlink} hard links; refusing it (it may be a link to a "
            "file that is not spillstore's)",
        )
    if st.st_size != meta.stored_bytes:
        raise StoreError(
            errno.EIO,
            f"{where} holds {st.st_size} bytes, its sidecar says {meta.stored_bytes}",
        )
