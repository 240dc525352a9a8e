"""Writing a local spill atomically: temp files, fsync, then hard links, sidecar last.

Each file goes to a temp file in the session directory (``O_CREAT|O_EXCL|O_NOFOLLOW``,
0600), is written and fsynced, then *hard-linked* to its final name and the temp
unlinked. ``link`` fails if the name exists, so a spill is never overwritten (ids are
content-derived: an existing id already holds the same content, and the existing spill
is returned). Data goes first, then the index, then the sidecar LAST, then the
directory is fsynced. Any ``write``/``fsync``/``link`` failure (ENOSPC, EIO, EACCES, ...)
removes everything of that spill and raises one :class:`~spillstore.StoreError`.

Writers lock (``flock``) each temp file as soon as it exists, and keep the data file's
lock until the sidecar is linked, so ``gc`` never removes the files of a writer that is
still alive, even a slow one (the protocol is in :mod:`~spillstore._stores.local_gc`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from typing import Final

from spillstore._errors import StoreError
from spillstore._stores.errors import map_os_errors
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

    def __init__(self, root: LocalRoot, session: str) -> None:
        self._root = root
        self._session = session
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

    def _link(self, temp: str, final: str) -> bool:
        try:
            os.link(
                temp, final, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd, follow_symlinks=False
            )
        except FileExistsError:
            return False
        self._created.append(final)
        return True

    def _write_small(self, final: str, payload: bytes) -> bool:
        for _ in range(5):
            temp = temp_name(final.rsplit(".", 1)[1])
            fd = os.open(temp, CREATE_FLAGS, 0o600, dir_fd=self._dir_fd)
            if lock_new(fd, temp, self._dir_fd):
                break
            os.close(fd)  # a cleaner removed it before we locked it
        else:
            raise StoreError(errno.EAGAIN, f"cannot write {final}: its temp file keeps vanishing")
        self._temps.append(temp)
        try:
            write_all(fd, payload)
            os.fsync(fd)
            created = self._link(temp, final)
            os.unlink(temp, dir_fd=self._dir_fd)
            self._temps.remove(temp)
        finally:
            os.close(fd)
        return created

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        self._ensure_open()
        spill_id = meta.spill_id
        try:
            with map_os_errors(f"cannot store spill {spill_id}"):
                os.fsync(self._fd)
                if self._identity is not None:
                    st = os.fstat(self._fd)
                    now_identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
                    if now_identity != self._identity:
                        raise StoreError(
                            errno.EBUSY,
                            f"the adopted file changed while it was being read; "
                            f"spill {spill_id} not stored",
                        )
                    meta = meta.model_copy(update={"adopted_inode": self._identity})
                if not self._link(self._data_temp, f"{spill_id}.out"):
                    self._check_existing_data(meta)
                os.unlink(self._data_temp, dir_fd=self._dir_fd)
                self._temps.remove(self._data_temp)
                stored = self._record(
                    meta.model_copy(update={"path": self._root.data_path(meta)}), index
                )
        except BaseException:
            self.discard()
            raise
        self._root.remember_session(spill_id, self._session)
        self._close()
        return stored

    def _record(self, stored: SpillMeta, index: bytes) -> SpillMeta:
        """Make the spill visible once its data file is linked: index, then sidecar last.

        Returns the spill as recorded (an existing identical spill if there is one).
        """
        spill_id = stored.spill_id
        self._write_small(f"{spill_id}.idx", index)
        if not self._write_small(f"{spill_id}.json", stored.model_dump_json().encode()):
            existing = self._root.load_meta(self._dir_fd, self._session, spill_id)
            if existing is None or existing.sha256 != stored.sha256:
                raise StoreError(errno.EEXIST, f"spill id {spill_id} is taken by other content")
            stored = existing
        unlink_quiet(f"{spill_id}.gone", self._dir_fd)
        os.fsync(self._dir_fd)
        return stored

    def _check_existing_data(self, meta: SpillMeta) -> None:
        fd = os.open(f"{meta.spill_id}.out", READ_FLAGS, dir_fd=self._dir_fd)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != meta.stored_bytes:
            raise StoreError(
                errno.EEXIST,
                f"a different file already exists as spill {meta.spill_id}; not overwritten",
            )

    def _close(self) -> None:
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
