"""Writing a local spill atomically: a locked temp data file, fsync, a hard link, the row.

The data goes to a temp file in the session directory (``O_CREAT|O_EXCL|O_NOFOLLOW``,
0600, ``flock``'ed as soon as it exists), is written and fsynced, then *hard-linked* to
``<id>.out`` and the temp unlinked; the directory is fsynced (the bytes and their name
are durable) and then the catalog row commits (:mod:`~spillstore._stores.local_catalog`,
``synchronous=FULL``): that commit is the commit point. The writer holds the data file's
lock until the row is committed, so ``gc`` never takes a file being published for an
orphan (the protocol is in :mod:`~spillstore._stores.local_gc`). Any
``write``/``fsync``/``link`` failure (ENOSPC, EIO, EACCES, ...) removes everything of
that spill and raises one :class:`~spillstore.StoreError`.

Identical bytes are stored once: when a spill (not adopted) with the same hash and
stored ranges already has a data file, that file is hard-linked as ``<id>.out`` instead
(its identity checked, and locked until the row commits), and the temp file goes. Ids
and rows stay per call; removing one spill unlinks only its own name. An id that exists
already (ids derive from content) returns the existing spill: nothing is overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from typing import Final

from spillstore._errors import StoreError
from spillstore._stores.errors import map_os_errors
from spillstore._stores.local_catalog import Catalog, Identity
from spillstore._stores.local_files import (
    CREATE_FLAGS,
    READ_FLAGS,
    LocalRoot,
    temp_name,
    unlink_quiet,
    write_all,
)
from spillstore._stores.local_gc import lock_new
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink

__all__ = ["WRITEBACK_BYTES", "LocalSink"]

logger = logging.getLogger("spillstore")

WRITEBACK_BYTES: Final = 8 << 20
"""Large spills ask the kernel to start writeback every this many bytes, so the final
fsync has little left to wait for."""


class LocalSink(Sink):
    """Writes one spill: a locked temp data file, then index, then sidecar, via links."""

    def __init__(self, root: LocalRoot, session: str, catalog: Catalog) -> None:
        self._root = root
        self._session = session
        self._catalog = catalog
        self._shared_fd = -1
        self._dir_fd = -1
        self._fd = -1
        self._data_temp = ""
        self._temps: list[str] = []
        self._created: list[str] = []
        self._written = 0
        self._advised = 0
        self._identity: tuple[int, int, int, int] | None = None

    # The temp file is created on first use, so writer() does no I/O in an event loop.
    def _ensure_open(self) -> None:
        if self._fd >= 0:
            return
        with map_os_errors(f"cannot start a spill in session {self._session}"):
            for attempt in range(5):
                self._dir_fd = self._root.open_session(self._session, create=True)
                name = temp_name("out")
                try:
                    self._fd = os.open(name, CREATE_FLAGS, 0o600, dir_fd=self._dir_fd)
                except FileNotFoundError:
                    # gc removed the (empty, old) session directory under us: redo it.
                    os.close(self._dir_fd)
                    self._dir_fd = -1
                    if attempt == 4:
                        raise
                    continue
                self._data_temp = name
                self._temps.append(name)
                if lock_new(self._fd, name, self._dir_fd):
                    return
                # A cleaner removed it before we locked it: start over.
                self._temps.remove(name)
                self._close()
            raise StoreError(errno.EAGAIN, "cannot start a spill: its temp files keep vanishing")

    def adopt(self, source: str, source_stat: os.stat_result) -> bool:
        """Hard-link ``source`` in as this spill's data; return False if impossible."""
        try:
            self._dir_fd = self._root.open_session(self._session, create=True)
            if os.fstat(self._dir_fd).st_dev != source_stat.st_dev:
                return False
            name = temp_name("out")
            try:
                os.link(source, name, dst_dir_fd=self._dir_fd, follow_symlinks=False)
            except OSError as exc:
                logger.debug("cannot hard-link %s into the store (%s); copying", source, exc)
                return False
            self._temps.append(name)
            self._data_temp = name
            self._fd = os.open(name, READ_FLAGS, dir_fd=self._dir_fd)
            if not lock_new(self._fd, name, self._dir_fd):
                self.discard()
                return False
            st = os.fstat(self._fd)
        except OSError as exc:
            self.discard()
            raise StoreError(exc.errno, f"cannot adopt {source}: {exc.strerror}") from exc
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (
            source_stat.st_dev,
            source_stat.st_ino,
        ):
            self.discard()
            return False
        self._identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        return True

    @property
    def fd(self) -> int:
        return self._fd

    def write(self, data: bytes | memoryview) -> None:
        if self._identity is not None:
            return  # adopted: the bytes are already in the file
        self._ensure_open()
        with map_os_errors("cannot write spill data"):
            write_all(self._fd, data)
        self._written += len(data)
        if self._written - self._advised >= WRITEBACK_BYTES and hasattr(os, "posix_fadvise"):
            # Start writeback now (it does not wait), so the final fsync is short.
            with contextlib.suppress(OSError):
                os.posix_fadvise(
                    self._fd, self._advised, self._written - self._advised, os.POSIX_FADV_DONTNEED
                )
            self._advised = self._written

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        self._ensure_open()
        spill_id = meta.spill_id
        try:
            with map_os_errors(f"cannot store spill {spill_id}"):
                if self._identity is not None:
                    meta = meta.model_copy(update={"adopted_inode": self._adopted()})
                identity = self._link_shared(meta) if self._identity is None else None
                if identity is None:
                    os.fsync(self._fd)
                    identity = self._link_own(spill_id)
                if identity is None:
                    return self._stored_meanwhile(spill_id)
                os.unlink(self._data_temp, dir_fd=self._dir_fd)
                self._temps.remove(self._data_temp)
                os.fsync(self._dir_fd)  # the data file's name is durable before the row
                meta = meta.model_copy(update={"path": self._root.data_path(meta)})
                stored = self._catalog.insert(meta, index, identity)
        except BaseException:
            self.discard()
            raise
        self._close()
        return stored

    def _stored_meanwhile(self, spill_id: str) -> SpillMeta:
        self.discard()
        found = self._catalog.get(spill_id)
        if found is None:
            raise StoreError(errno.EAGAIN, f"spill {spill_id} was stored and removed meanwhile")
        return found

    def _adopted(self) -> tuple[int, int, int, int]:
        """The adopted file's identity, checked unchanged since it was linked in."""
        os.fsync(self._fd)
        st = os.fstat(self._fd)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._identity:
            raise StoreError(
                errno.EBUSY, "the adopted file changed while it was being read; not stored"
            )
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _link_own(self, spill_id: str) -> Identity | None:
        """Link the temp data file to ``<id>.out``; return its identity (None: the same
        spill was stored meanwhile).

        A name already there without a row is a dead writer's leftover (it is replaced
        under its lock) or a live writer's of the same spill (we wait for its commit).
        """
        final = f"{spill_id}.out"
        try:
            self._link_here(self._data_temp, final)
        except FileExistsError:
            fd = os.open(final, READ_FLAGS, dir_fd=self._dir_fd)
            try:
                # The name may already be our own file (a file adopted in place before,
                # the same bytes under the same id): its lock is ours, so don't wait.
                ours = os.path.samestat(os.fstat(fd), os.fstat(self._fd))
                if not ours:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer holds it until its row
                if self._catalog.has(spill_id):
                    return None
                if not ours:
                    spare = temp_name("out")  # a second name of our locked file, renamed over
                    self._temps.append(spare)
                    self._link_here(self._data_temp, spare)
                    os.replace(spare, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
                    self._temps.remove(spare)
            finally:
                os.close(fd)
        self._created.append(final)
        st = os.fstat(self._fd)
        return (st.st_dev, st.st_ino)

    def _link_here(self, name: str, new: str) -> None:
        """Hard-link ``name`` as ``new`` in the session directory (never through a symlink)."""
        os.link(name, new, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd, follow_symlinks=False)

    def _link_shared(self, meta: SpillMeta) -> Identity | None:
        """Hard-link the data file of a spill holding the same bytes as ``<id>.out``;
        return its identity, or None (no such spill, or it went meanwhile: write our own).

        The shared file stays locked until this spill's row commits, so ``gc`` never
        takes the new name for an orphan; removing the other spill later unlinks only
        its own name.
        """
        final = f"{meta.spill_id}.out"
        for other, identity in self._catalog.same_content(meta):
            try:
                with self._root.session_dir(other.session) as src_dir:
                    fd = -1 if src_dir < 0 else self._share(other, identity, src_dir, final)
            except StoreError:  # its session directory is not usable: write our own
                continue
            if fd >= 0:
                self._shared_fd = fd
                return identity
        return None

    def _share(self, other: SpillMeta, identity: Identity, src_dir: int, final: str) -> int:
        """Link ``other``'s data file as ``final`` if it is still the recorded file; return
        its descriptor, locked (or -1: not linked)."""
        try:
            fd = os.open(f"{other.spill_id}.out", READ_FLAGS, dir_fd=src_dir)
        except OSError:
            return -1
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity or st.st_size != other.stored_bytes:
            os.close(fd)
            return -1
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.link(f"{other.spill_id}.out", final, src_dir_fd=src_dir,
                    dst_dir_fd=self._dir_fd, follow_symlinks=False)  # fmt: skip
        except (FileNotFoundError, FileExistsError):
            os.close(fd)
            return -1
        self._created.append(final)
        now = os.stat(final, dir_fd=self._dir_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != identity:  # the source name was swapped meanwhile
            unlink_quiet(final, self._dir_fd)
            self._created.remove(final)
            os.close(fd)
            return -1
        return fd

    def _close(self) -> None:
        if self._shared_fd >= 0:
            os.close(self._shared_fd)
            self._shared_fd = -1
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1

    def discard(self) -> None:
        if self._dir_fd >= 0:
            for name in reversed(self._created):
                unlink_quiet(name, self._dir_fd)
            for name in self._temps:
                unlink_quiet(name, self._dir_fd)
        self._created = []
        self._temps = []
        self._close()
