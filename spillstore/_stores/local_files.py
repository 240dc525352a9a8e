"""The local store's files: safe system calls, the root and its session directories.

Every file is opened with ``O_NOFOLLOW|O_NONBLOCK``, relative to a session directory
opened with ``O_NOFOLLOW|O_DIRECTORY``, and must be a regular file; every directory is
created 0700, one level at a time, and refused when it is a symlink, not ours, or
writable by others. :class:`LocalRoot` knows where everything lives (see the layout in
:mod:`~spillstore._stores.local`); :class:`LocalReader` reads a data file. Writing is
:mod:`~spillstore._stores.local_sink`.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from typing import Final

from spillstore._core.ids import is_session, is_spill_id, validate_session
from spillstore._errors import PathOutsideStore, StoreError, UnsafeStoreRoot
from spillstore._stores.backend import MappedReader
from spillstore._stores.errors import map_os_errors
from spillstore._stores.meta import SpillMeta

__all__ = [
    "CREATE_FLAGS",
    "DIR_FLAGS",
    "READ_FLAGS",
    "SESSION_MARKER",
    "TEMP_RE",
    "LocalReader",
    "LocalRoot",
    "check_dir",
    "exists_at",
    "make_dirs",
    "read_all",
    "temp_name",
    "unlink_quiet",
    "write_all",
]

logger = logging.getLogger("spillstore")

DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_RE: Final = re.compile(
    r"\.tmp-[0-9a-f]{16}\.(?:out|idx|json|gone|mark|db(?:-journal|-wal|-shm)?)"
)
"""The name of a file being written (data, index, sidecar, tombstone or marker)."""

SESSION_MARKER: Final = ".session"
"""The empty file in every session directory the store created (``gc`` removes only
those directories)."""


def temp_name(ext: str) -> str:
    """A fresh temp file name (``.tmp-<16 hex>.<ext>``), never a spill's name."""
    return f".tmp-{secrets.token_hex(8)}.{ext}"


def check_dir(st: os.stat_result, path: str, what: str) -> None:
    """Refuse a directory that is a symlink, not ours, or writable by others.

    Raises:
        UnsafeStoreRoot: it is; spillstore never changes permissions itself.
    """
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
            f"(mode {oct(stat.S_IMODE(st.st_mode))}); spillstore never changes permissions "
            f"itself: run chmod go-w on it, or choose another directory",
        )


def make_dirs(path: str) -> None:
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


def read_all(fd: int, limit: int, what: str) -> bytes:
    """Read a whole small regular file.

    Raises:
        StoreError: it is not a regular file, or it is larger than ``limit``.
    """
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(errno.EINVAL, f"{what} is not a regular file")
    if st.st_size > limit:
        raise StoreError(errno.EFBIG, f"{what} is implausibly large ({st.st_size} bytes)")
    chunks = []
    while piece := os.read(fd, max(st.st_size, 4096)):
        chunks.append(piece)
    return b"".join(chunks)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def exists_at(name: str, dir_fd: int) -> bool:
    """Whether ``name`` exists in the directory ``dir_fd`` (a link is not followed)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def unlink_quiet(name: str, dir_fd: int) -> bool:
    """Unlink ``name``; return whether it existed. Other errors are logged, not raised."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        logger.warning("could not remove %s: %s", name, exc)
        return False
    return True


class LocalReader(MappedReader):
    """Reads a spill's data file with ``pread``; its buffer is an ``mmap`` of the file."""

    def __init__(self, fd: int, size: int) -> None:
        self._fd = fd
        self._size = size

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
        with map_os_errors("cannot map spill data"):
            return self._map(self._fd)

    def close(self) -> None:
        super().close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def warn_skipped(name: str, exc: StoreError) -> None:
    """Report a session directory that cannot be used and is skipped."""
    logger.warning("skipping session %s: %s", name, exc.strerror or exc)


class LocalRoot:
    """A store root on disk: where each session's directory and each spill's files are.

    Args:
        path: the absolute root; it must exist and pass :func:`check_dir`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.real_path = os.path.realpath(path)

    def open(self) -> int:
        """Open the root directory, checked again (it may have been swapped since)."""
        try:
            fd = os.open(self.path, DIR_FLAGS)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeStoreRoot(
                    exc.errno, f"refusing store root {self.path}: it is a symlink"
                ) from exc
            raise StoreError(
                exc.errno, f"cannot open store root {self.path}: {exc.strerror}"
            ) from exc
        try:
            check_dir(os.fstat(fd), self.path, "store root")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_session(self, session: str, *, create: bool) -> int:
        """Open a session directory (creating it 0700 if asked); -1 if it does not exist."""
        validate_session(session)
        root_fd = self.open()
        path = os.path.join(self.path, session)
        made = False
        try:
            try:
                fd = os.open(session, DIR_FLAGS, dir_fd=root_fd)
            except FileNotFoundError:
                if not create:
                    return -1
                try:
                    os.mkdir(session, 0o700, dir_fd=root_fd)
                    made = True
                except FileExistsError:
                    pass
                except PermissionError as exc:
                    raise StoreError(
                        exc.errno,
                        f"cannot create the session directory {path}: the store root "
                        f"{self.path} is not writable by this user",
                    ) from exc
                fd = os.open(session, DIR_FLAGS, dir_fd=root_fd)
        except StoreError:
            raise
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafeStoreRoot(
                    exc.errno, f"refusing session directory {path}: not a real directory"
                ) from exc
            raise StoreError(exc.errno, f"cannot open {path}: {exc.strerror}") from exc
        finally:
            os.close(root_fd)
        try:
            check_dir(os.fstat(fd), path, "session directory")
        except BaseException:
            os.close(fd)
            raise
        if made:
            self.mark_session(fd)
        return fd

    @staticmethod
    def mark_session(dir_fd: int) -> None:
        """Mark a session directory as the store's (an empty ``.session``; idempotent).

        Best effort: an unmarked session directory is only never removed by ``gc``.
        """
        try:
            os.close(os.open(SESSION_MARKER, CREATE_FLAGS, 0o600, dir_fd=dir_fd))
        except FileExistsError:
            pass
        except OSError as exc:
            logger.warning("session directory not marked: %s", exc)

    @contextlib.contextmanager
    def session_dir(self, session: str) -> Iterator[int]:
        """Hold a session directory open; the fd is -1 if it does not exist."""
        fd = self.open_session(session, create=False)
        try:
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)

    def session_names(self) -> builtins.list[str]:
        """The session directories under the root, sorted."""
        root_fd = self.open()
        try:
            with os.scandir(root_fd) as entries:
                return sorted(
                    entry.name
                    for entry in entries
                    if entry.is_dir(follow_symlinks=False) and is_session(entry.name)
                )
        finally:
            os.close(root_fd)

    def scan(
        self, session: str | None, *, skipped: Callable[[str, StoreError], None] | None = None
    ) -> Iterator[tuple[str, int, builtins.list[os.DirEntry[str]]]]:
        """Yield ``(session, dir_fd, entries)`` for ``session``, or for every session.

        A session directory that does not exist is skipped; ``dir_fd`` stays open until
        the next item is asked for. When scanning every session, a session directory
        that cannot be used (a symlink, another user's, writable by others) is skipped
        and reported (to ``skipped``, else as a warning), so one bad entry never stops the
        others.
        """
        for name in [session] if session is not None else self.session_names():
            try:
                fd = self.open_session(name, create=False)
            except StoreError as exc:
                if session is not None:
                    raise
                (skipped or warn_skipped)(name, exc)
                continue
            if fd < 0:
                continue
            try:
                with os.scandir(fd) as entries:
                    listed = builtins.list(entries)
                yield name, fd, listed
            finally:
                os.close(fd)

    def outside(self, path: str) -> PathOutsideStore:
        """The error for ``path``, which names no spill file of this store."""
        return PathOutsideStore(
            f"{path} is not a spill file of the store at {self.real_path}", path=path
        )

    def spill_of_path(self, path: str) -> tuple[str, str]:
        """``(session, spill_id)`` named by the path of a data file in this store (it may
        be gone); :class:`PathOutsideStore` for any other path or a non-regular file."""
        real = os.path.realpath(path)
        relative = os.path.relpath(real, self.real_path)
        parts = relative.split(os.sep)
        if len(parts) != 2 or relative.startswith(os.pardir) or os.path.isabs(relative):
            raise self.outside(path)
        session, name = parts
        if not is_session(session) or not name.endswith(".out") or not is_spill_id(name[:-4]):
            raise self.outside(path)
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise PathOutsideStore(f"{path} is not a regular file", path=path)
        return session, name[:-4]

    def data_path(self, meta: SpillMeta) -> str:
        """The absolute path of a spill's data file (symlinks in the root resolved)."""
        return os.path.join(self.real_path, meta.session, f"{meta.spill_id}.out")

    def open_data(self, meta: SpillMeta) -> int | None:
        """Open a spill's data file for reading; None if it (or its session) is gone."""
        with self.session_dir(meta.session) as dir_fd:
            if dir_fd < 0:
                return None
            try:
                return os.open(f"{meta.spill_id}.out", READ_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                return None
