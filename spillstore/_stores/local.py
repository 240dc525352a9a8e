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

How a spill is written: each file goes to a temp file in the session directory
(``O_CREAT|O_EXCL|O_NOFOLLOW``, 0600), is written and fsynced, then *hard-linked* to its
final name and the temp unlinked. ``link`` fails if the name exists, so a spill is never
overwritten (ids are content-derived: an existing id already holds the same content, and
the existing spill is returned). Data goes first, then the index, then the sidecar LAST,
then the directory is fsynced. A reader that finds no sidecar sees no spill; a data file
without a sidecar is a crashed writer's leftover that ``gc`` removes after the grace
period. Any ``write``/``fsync``/``link`` failure (ENOSPC, EIO, EACCES, ...) removes
everything of that spill and raises one :class:`~spillstore.StoreError`.

Writers hold an ``flock`` on their temp file until they finish, so ``gc`` never removes
the files of a writer that is still alive, even a slow one.

Files are opened with ``O_NOFOLLOW|O_NONBLOCK``, relative to a session directory opened
with ``O_NOFOLLOW|O_DIRECTORY``, and must be regular files. A data file must have one
link (a second link could point at a file that is not ours), unless the spill was
adopted without a copy: then its ``(st_dev, st_ino, st_size, st_mtime_ns)`` must still
match the sidecar, so a tool that changes its log after handing it over is detected.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import fcntl
import json
import logging
import mmap
import os
import re
import secrets
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

import platformdirs
from pydantic import ValidationError

from spillstore._core.gc_plan import GcEntry
from spillstore._errors import (
    PathOutsideStore,
    SpillNotFound,
    StoreError,
    UnsafeStoreRoot,
)
from spillstore._stores.base import (
    PIECE_BYTES,
    DataReader,
    Sink,
    SpillWriter,
    Store,
    expired_error,
    map_os_errors,
)
from spillstore._stores.meta import (
    DEFAULT_RETAINED_TAIL_BYTES,
    DEFAULT_RETENTION_BYTES,
    SpillMeta,
    is_spill_id,
    validate_session,
)

__all__ = ["ENV_DIR", "LocalStore"]

logger = logging.getLogger("spillstore")

ENV_DIR = "SPILLSTORE_DIR"
"""The environment variable that sets the root when no argument is given."""

TOMBSTONE_TTL_SECONDS = 7 * 24 * 3600.0
"""How long a removed spill's id is remembered (``gc`` prunes older tombstones)."""

WRITEBACK_BYTES = 8 << 20
"""Large spills ask the kernel to start writeback every this many bytes, so the final
fsync has little left to wait for."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TEMP_RE = re.compile(r"\.tmp-[0-9a-f]{16}\.(?:out|idx|json)")
_MAX_SIDECAR_BYTES = 16 << 20
_MAX_INDEX_BYTES = 1 << 30
_SESSION_CACHE_SIZE = 65536


def _temp_name(ext: str) -> str:
    return f".tmp-{secrets.token_hex(8)}.{ext}"


def _describe_mode(mode: int) -> str:
    return oct(stat.S_IMODE(mode))


def _check_dir(st: os.stat_result, path: str, what: str) -> None:
    """Refuse a directory that is a symlink, not ours, or writable by others."""
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeStoreRoot(
            errno.ELOOP, f"refusing {what} {path}: it is a symlink (use its target instead)"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeStoreRoot(errno.ENOTDIR, f"refusing {what} {path}: not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeStoreRoot(
            errno.EPERM,
            f"refusing {what} {path}: it is owned by uid {st.st_uid}, not by this user "
            f"(uid {os.geteuid()})",
        )
    if st.st_mode & 0o022:
        raise UnsafeStoreRoot(
            errno.EPERM,
            f"refusing {what} {path}: it is writable by group or others "
            f"(mode {_describe_mode(st.st_mode)}); spillstore never changes permissions "
            f"itself: run chmod go-w on it, or choose another directory",
        )


def _make_dirs(path: str) -> None:
    """Create ``path`` and missing parents one level at a time, each 0700."""
    missing: list[str] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)


def _read_all(fd: int, limit: int, what: str) -> bytes:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(errno.EINVAL, f"{what} is not a regular file")
    if st.st_size > limit:
        raise StoreError(errno.EFBIG, f"{what} is implausibly large ({st.st_size} bytes)")
    chunks = []
    while piece := os.read(fd, max(st.st_size, 4096)):
        chunks.append(piece)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _unlink_quiet(name: str, dir_fd: int) -> bool:
    """Unlink ``name``; return whether it existed. Other errors are logged, not raised."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        logger.warning("could not remove %s: %s", name, exc)
        return False
    return True


class _LocalReader(DataReader):
    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._size = size
        self._mmap: mmap.mmap | None = None

    def read(self, start: int, end: int) -> bytes:
        with map_os_errors("cannot read spill data"):
            data = os.pread(self._fd, end - start, start)
            while len(data) < end - start:
                more = os.pread(self._fd, end - start - len(data), start + len(data))
                if not more:
                    raise StoreError(errno.EIO, "spill data file is shorter than recorded")
                data += more
        return data

    def buffer(self) -> bytes | memoryview:
        if self._size == 0:
            return b""
        if self._mmap is None:
            with map_os_errors("cannot map spill data"):
                self._mmap = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
        return memoryview(self._mmap)

    def close(self) -> None:
        if self._mmap is not None:
            try:
                self._mmap.close()
            except BufferError:  # a caller kept a view; the mmap closes when freed
                logger.debug("spill mmap still exported; left to the garbage collector")
            self._mmap = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _LocalSink(Sink):
    """Writes one spill: a locked temp data file, then index, then sidecar, via links."""

    def __init__(self, store: LocalStore, session: str) -> None:
        self._store = store
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
            for attempt in range(3):
                self._dir_fd = self._store._session_fd(self._session, create=True)
                name = _temp_name("out")
                try:
                    self._fd = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=self._dir_fd)
                except FileNotFoundError:
                    # gc removed the (empty, old) session directory under us: redo it.
                    os.close(self._dir_fd)
                    self._dir_fd = -1
                    if attempt == 2:
                        raise
                    continue
                self._data_temp = name
                self._temps.append(name)
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return

    def adopt(self, source: str, source_stat: os.stat_result) -> bool:
        """Hard-link ``source`` in as this spill's data; return False if impossible."""
        try:
            self._dir_fd = self._store._session_fd(self._session, create=True)
            if os.fstat(self._dir_fd).st_dev != source_stat.st_dev:
                return False
            name = _temp_name("out")
            try:
                os.link(source, name, dst_dir_fd=self._dir_fd, follow_symlinks=False)
            except OSError as exc:
                logger.debug("cannot hard-link %s into the store (%s); copying", source, exc)
                return False
            self._temps.append(name)
            self._data_temp = name
            self._fd = os.open(name, _READ_FLAGS, dir_fd=self._dir_fd)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
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
            _write_all(self._fd, data)
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
        temp = _temp_name(final.rsplit(".", 1)[1])
        fd = os.open(temp, _CREATE_FLAGS, 0o600, dir_fd=self._dir_fd)
        self._temps.append(temp)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_all(fd, payload)
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
                self._write_small(f"{spill_id}.idx", index)
                stored = meta.model_copy(update={"path": self._store._data_path(meta)})
                if not self._write_small(f"{spill_id}.json", stored.model_dump_json().encode()):
                    existing = self._store._load_meta(self._dir_fd, self._session, spill_id)
                    if existing is None or existing.sha256 != meta.sha256:
                        raise StoreError(
                            errno.EEXIST, f"spill id {spill_id} is taken by other content"
                        )
                    stored = existing
                _unlink_quiet(f"{spill_id}.gone", self._dir_fd)
                os.fsync(self._dir_fd)
        except BaseException:
            self.discard()
            raise
        self._store._remember_session(spill_id, self._session)
        self._close()
        return stored

    def _check_existing_data(self, meta: SpillMeta) -> None:
        fd = os.open(f"{meta.spill_id}.out", _READ_FLAGS, dir_fd=self._dir_fd)
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
                _unlink_quiet(name, self._dir_fd)
            for name in self._temps:
                _unlink_quiet(name, self._dir_fd)
        self._created = []
        self._temps = []
        self._close()


class LocalStore(Store):
    """Spills in a local directory: atomic, private (0700/0600), indexed, collectable.

    Args:
        root: the store root. Default: ``$SPILLSTORE_DIR``, else platformdirs'
            ``user_cache_dir("spillstore")``. Missing directories are created one level
            at a time, mode 0700.
        clock: epoch seconds, for ``created_at`` and ``gc``.
        retention_bytes: default retention cap (None: keep everything).
        retained_tail_bytes: default tail kept past the cap.
        tombstone_ttl: seconds a removed spill's id is remembered as expired.

    Raises:
        UnsafeStoreRoot: the root is a symlink, owned by another user, or writable by
            group or others. spillstore never chmods it.
        StoreError: the root cannot be created.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        retention_bytes: int | None = DEFAULT_RETENTION_BYTES,
        retained_tail_bytes: int = DEFAULT_RETAINED_TAIL_BYTES,
        tombstone_ttl: float = TOMBSTONE_TTL_SECONDS,
    ) -> None:
        super().__init__(
            clock=clock, retention_bytes=retention_bytes, retained_tail_bytes=retained_tail_bytes
        )
        if root is None:
            root = os.environ.get(ENV_DIR) or platformdirs.user_cache_dir("spillstore")
        path = os.path.abspath(os.fspath(root))
        with map_os_errors(f"cannot create the store root {path}"):
            _make_dirs(path)
            _check_dir(os.lstat(path), path, "store root")
        self._root = path
        self._real_root = os.path.realpath(path)
        self._tombstone_ttl = tombstone_ttl
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._sessions_lock = threading.Lock()

    @property
    def root(self) -> str:
        """The absolute store root (symlinks in its parents resolved)."""
        return self._real_root

    def __repr__(self) -> str:
        return f"LocalStore({self._real_root!r})"

    # ----------------------------------------------------------------- directories

    def _root_fd(self) -> int:
        try:
            fd = os.open(self._root, _DIR_FLAGS)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeStoreRoot(
                    exc.errno, f"refusing store root {self._root}: it is a symlink"
                ) from exc
            raise StoreError(
                exc.errno, f"cannot open store root {self._root}: {exc.strerror}"
            ) from exc
        try:
            _check_dir(os.fstat(fd), self._root, "store root")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _session_fd(self, session: str, *, create: bool) -> int:
        """Open a session directory (creating it 0700 if asked); -1 if it does not exist."""
        validate_session(session)
        root_fd = self._root_fd()
        path = os.path.join(self._root, session)
        try:
            try:
                fd = os.open(session, _DIR_FLAGS, dir_fd=root_fd)
            except FileNotFoundError:
                if not create:
                    return -1
                with contextlib.suppress(FileExistsError):
                    os.mkdir(session, 0o700, dir_fd=root_fd)
                fd = os.open(session, _DIR_FLAGS, dir_fd=root_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeStoreRoot(
                    exc.errno, f"refusing session directory {path}: not a real directory"
                ) from exc
            raise StoreError(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
        finally:
            os.close(root_fd)
        try:
            _check_dir(os.fstat(fd), path, "session directory")
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _session_dir(self, session: str) -> Iterator[int]:
        fd = self._session_fd(session, create=False)
        try:
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)

    def _session_names(self) -> builtins.list[str]:
        root_fd = self._root_fd()
        try:
            with os.scandir(root_fd) as entries:
                return sorted(
                    entry.name
                    for entry in entries
                    if entry.is_dir(follow_symlinks=False) and _is_session(entry.name)
                )
        finally:
            os.close(root_fd)

    def _data_path(self, meta: SpillMeta) -> str:
        return os.path.join(self._real_root, meta.session, f"{meta.spill_id}.out")

    def _remember_session(self, spill_id: str, session: str) -> None:
        with self._sessions_lock:
            self._sessions[spill_id] = session
            self._sessions.move_to_end(spill_id)
            while len(self._sessions) > _SESSION_CACHE_SIZE:
                self._sessions.popitem(last=False)

    def _session_of(self, spill_id: str) -> str | None:
        with self._sessions_lock:
            session = self._sessions.get(spill_id)
        if session is not None:
            return session
        for name in self._session_names():
            base = os.path.join(self._root, name, spill_id)
            if os.path.lexists(base + ".json") or os.path.lexists(base + ".gone"):
                self._remember_session(spill_id, name)
                return name
        return None

    # ----------------------------------------------------------------- sidecars

    def _load_meta(self, dir_fd: int, session: str, spill_id: str) -> SpillMeta | None:
        try:
            fd = os.open(f"{spill_id}.json", _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        try:
            raw = _read_all(fd, _MAX_SIDECAR_BYTES, f"the sidecar of spill {spill_id}")
        finally:
            os.close(fd)
        try:
            meta = SpillMeta.model_validate_json(raw)
        except ValidationError as exc:
            raise StoreError(errno.EINVAL, f"the sidecar of spill {spill_id} is corrupt") from exc
        if meta.spill_id != spill_id or meta.session != session:
            raise StoreError(
                errno.EINVAL, f"the sidecar of spill {spill_id} names another spill or session"
            )
        return meta.model_copy(update={"path": self._data_path(meta)})

    def _tombstone(self, dir_fd: int, spill_id: str) -> tuple[str | None, float | None] | None:
        try:
            fd = os.open(f"{spill_id}.gone", _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        try:
            raw = _read_all(fd, 4096, "a tombstone")
        finally:
            os.close(fd)
        try:
            record = json.loads(raw)
            return str(record["reason"]), float(record["removed_at"])
        except (ValueError, KeyError, TypeError):
            return None, None

    # ----------------------------------------------------------------- primitives

    def _create(self, session: str) -> Sink:
        return _LocalSink(self, session)

    def _stat(self, spill_id: str) -> SpillMeta:
        with map_os_errors(f"cannot read spill {spill_id}"):
            session = self._session_of(spill_id)
            if session is not None:
                with self._session_dir(session) as dir_fd:
                    if dir_fd >= 0:
                        meta = self._load_meta(dir_fd, session, spill_id)
                        if meta is not None:
                            return meta
                        tombstone = self._tombstone(dir_fd, spill_id)
                        if tombstone is not None:
                            raise expired_error(spill_id, *tombstone)
                # It was here (we saw it), and now it is not.
                raise expired_error(spill_id, None, None)
        raise SpillNotFound(f"no spill with id {spill_id}", spill_id=spill_id)

    def _list(self, session: str | None) -> builtins.list[SpillMeta]:
        metas: builtins.list[SpillMeta] = []
        with map_os_errors("cannot list spills"):
            for name in [session] if session is not None else self._session_names():
                with self._session_dir(name) as dir_fd:
                    if dir_fd < 0:
                        continue
                    with os.scandir(dir_fd) as entries:
                        ids = [
                            entry.name[:-5]
                            for entry in entries
                            if entry.name.endswith(".json") and is_spill_id(entry.name[:-5])
                        ]
                    for spill_id in ids:
                        try:
                            meta = self._load_meta(dir_fd, name, spill_id)
                        except StoreError as exc:
                            logger.warning("skipping spill %s: %s", spill_id, exc)
                            continue
                        if meta is not None:
                            self._remember_session(spill_id, name)
                            metas.append(meta)
        return metas

    def _open(self, meta: SpillMeta) -> DataReader:
        spill_id = meta.spill_id
        with map_os_errors(f"cannot open spill {spill_id}"):
            with self._session_dir(meta.session) as dir_fd:
                if dir_fd < 0:
                    raise expired_error(spill_id, None, None)
                try:
                    fd = os.open(f"{spill_id}.out", _READ_FLAGS, dir_fd=dir_fd)
                except FileNotFoundError:
                    raise expired_error(
                        spill_id, *(self._tombstone(dir_fd, spill_id) or (None, None))
                    ) from None
            try:
                self._check_data(fd, meta)
            except BaseException:
                os.close(fd)
                raise
        return _LocalReader(fd, meta.stored_bytes)

    @staticmethod
    def _check_data(fd: int, meta: SpillMeta) -> None:
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

    def _read_index(self, meta: SpillMeta) -> bytes:
        spill_id = meta.spill_id
        with map_os_errors(f"cannot read the index of spill {spill_id}"):
            with self._session_dir(meta.session) as dir_fd:
                if dir_fd < 0:
                    raise expired_error(spill_id, None, None)
                try:
                    fd = os.open(f"{spill_id}.idx", _READ_FLAGS, dir_fd=dir_fd)
                except FileNotFoundError:
                    raise expired_error(
                        spill_id, *(self._tombstone(dir_fd, spill_id) or (None, None))
                    ) from None
            try:
                return _read_all(fd, _MAX_INDEX_BYTES, f"the index of spill {spill_id}")
            finally:
                os.close(fd)

    def _remove(self, meta: SpillMeta, *, reason: str, now: float) -> bool:
        spill_id = meta.spill_id
        with (
            map_os_errors(f"cannot remove spill {spill_id}"),
            self._session_dir(meta.session) as dir_fd,
        ):
            if dir_fd < 0:
                return False
            record = json.dumps({"reason": reason, "removed_at": now}).encode()
            try:
                fd = os.open(
                    f"{spill_id}.gone",
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=dir_fd,
                )
                try:
                    _write_all(fd, record)
                finally:
                    os.close(fd)
            except OSError as exc:  # removing must work even on a full disk
                logger.warning("no tombstone for spill %s: %s", spill_id, exc)
            removed = _unlink_quiet(f"{spill_id}.json", dir_fd)
            _unlink_quiet(f"{spill_id}.out", dir_fd)
            _unlink_quiet(f"{spill_id}.idx", dir_fd)
        return removed

    # ----------------------------------------------------------------- hooks

    @contextlib.contextmanager
    def _cleaner_lock(self) -> Iterator[None]:
        with super()._cleaner_lock(), map_os_errors("cannot take the cleaner lock"):
            root_fd = self._root_fd()
            try:
                fd = os.open(
                    ".gc.lock",
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=root_fd,
                )
            finally:
                os.close(root_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _orphans(
        self, session: str | None, *, now: float, grace: float
    ) -> builtins.list[tuple[GcEntry, Callable[[], None]]]:
        found: builtins.list[tuple[GcEntry, Callable[[], None]]] = []
        with map_os_errors("cannot scan for leftovers"):
            for name in [session] if session is not None else self._session_names():
                with self._session_dir(name) as dir_fd:
                    if dir_fd < 0:
                        continue
                    with os.scandir(dir_fd) as scan:
                        entries = [e for e in scan if e.is_file(follow_symlinks=False)]
                    names = {e.name for e in entries}
                    for entry in entries:
                        if not _is_orphan(entry.name, names):
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:  # its writer just finished
                            continue
                        if now - st.st_mtime < grace or _in_use(entry.name, dir_fd):
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

    def _unlinker(self, session: str, name: str) -> Callable[[], None]:
        def remove() -> None:
            with self._session_dir(session) as dir_fd:
                if dir_fd >= 0:
                    _unlink_quiet(name, dir_fd)

        return remove

    def _after_gc(self, *, now: float) -> None:
        with map_os_errors("cannot prune tombstones"):
            for name in self._session_names():
                with self._session_dir(name) as dir_fd:
                    if dir_fd < 0:
                        continue
                    with os.scandir(dir_fd) as scan:
                        entries = list(scan)
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
                            _unlink_quiet(entry.name, dir_fd)
                root_fd = self._root_fd()
                try:
                    # Only an empty directory goes; a writer that loses the race retries.
                    with contextlib.suppress(OSError):
                        st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                        if now - st.st_mtime > self._tombstone_ttl:
                            os.rmdir(name, dir_fd=root_fd)
                finally:
                    os.close(root_fd)

    def _spill_id_of_path(self, path: str) -> str:
        real = os.path.realpath(path)
        relative = os.path.relpath(real, self._real_root)
        parts = relative.split(os.sep)
        outside = PathOutsideStore(
            f"{path} is not a spill file of the store at {self._real_root}", path=path
        )
        if len(parts) != 2 or relative.startswith(os.pardir) or os.path.isabs(relative):
            raise outside
        session, name = parts
        if not _is_session(session) or not name.endswith(".out") or not is_spill_id(name[:-4]):
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
        self,
        path: str,
        *,
        session: str,
        tool_name: str,
        tool_call_id: str,
        suffix: str | None,
        media_notes: tuple[str, ...],
        retention_bytes: int | None,
        move: bool,
    ) -> SpillMeta | None:
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
        sink = _LocalSink(self, session)
        if not sink.adopt(path, st):
            sink.discard()
            return None
        with SpillWriter(
            sink,
            session=session,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            retention_bytes=None,
            retained_tail_bytes=0,
            created_at=self._clock,
            on_commit=self._remember_index,
        ) as writer:
            while True:
                with map_os_errors(f"cannot read {path}"):
                    piece = os.read(sink.fd, PIECE_BYTES)
                if not piece:
                    break
                writer.write(piece)
            meta = writer.commit(suffix=suffix, media_notes=media_notes)
        if move:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        logger.debug("adopted %s as spill %s without a copy", path, meta.spill_id)
        return meta


def _is_session(name: str) -> bool:
    try:
        validate_session(name)
    except ValueError:
        return False
    return True


def _is_orphan(name: str, names: set[str]) -> bool:
    """A temp file, or a data/index file whose sidecar was never written."""
    if _TEMP_RE.fullmatch(name):
        return True
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in ("out", "idx") and is_spill_id(stem) and f"{stem}.json" not in names


def _in_use(name: str, dir_fd: int) -> bool:
    """Whether a live writer holds the file's lock."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
