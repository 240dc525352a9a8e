"""How the local store's ``gc`` decides, safely against live writers, what it may remove.

A writer locks (``flock``) each temp file it creates and then checks that the file still
has its name (:func:`lock_new`): if a cleaner removed it in between, the writer starts
another one. It holds the lock on its data file, whose final name ``<id>.out`` is a link
to the same inode, until the sidecar ``<id>.json`` is linked: the spill is then visible.

A cleaner decides from a fresh view, under the lock (:func:`remove_orphan`): it takes the
file's lock without waiting (a live writer holds it: not an orphan), then checks again,
by name, that the file is still the one it locked and that no sidecar appeared; only then
does it unlink, still holding the lock. A data or index file is judged by the lock of the
spill's data file, so the index of a spill being published is never taken for an orphan.
Session directories go only when they hold nothing but the store's ``.session`` marker.

On a full disk the catalog cannot be written (a write appends to SQLite's ``-wal``), so a
spill's row could not be removed before its data file: the store then unlinks the data
file first, which frees room, and removes the row after (:func:`on_full_disk`). This
order is safe only for a spill already chosen for removal (by ``rm``, ``clean``, ``gc``
or ``check --fix``): until its row goes, a read finds the row and no file and says the
spill expired, which is what it is about to be; a writer holding the same bytes that
links to it finds no file and writes its own copy; a spill sharing the file (a hard
link of identical bytes) keeps its own name; and a crash in between leaves a torn row
that ``check --fix`` drops, never a file without a row. For any other spill it would
lose bytes the model was told are saved, so nothing else is ever removed file first.
A dead writer's data files are still judged by the catalog (read through the exclusive
fallback connection, :mod:`~spillstore._stores.local_db`): a file is never taken for an
orphan because the catalog could not be read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from collections.abc import Callable
from typing import Final

from spillstore._core.ids import is_spill_id
from spillstore._errors import StoreError
from spillstore._stores.local_files import (
    READ_FLAGS,
    SESSION_MARKER,
    TEMP_RE,
    LocalRoot,
    exists_at,
    unlink_quiet,
)

__all__ = [
    "RowsLeft",
    "finish_rows_left",
    "in_use",
    "is_orphan_name",
    "lock_new",
    "on_full_disk",
    "open_cleaner_lock",
    "open_lock_file",
    "remove_orphan",
    "remove_session_dir",
]

logger = logging.getLogger("spillstore")

_SPILL_EXTS: Final = ("out", "idx")


def lock_new(fd: int, name: str, dir_fd: int) -> bool:
    """Lock a file just created as ``name``; False if a cleaner removed it meanwhile.

    The lock is taken waiting (a cleaner holds it only while it checks and unlinks).
    """
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def is_orphan_name(name: str, names: set[str]) -> bool:
    """A temp file, or a data/index file whose sidecar was not listed (checked again later)."""
    if TEMP_RE.fullmatch(name):
        return True
    stem, dot, ext = name.rpartition(".")
    return bool(dot) and ext in _SPILL_EXTS and is_spill_id(stem) and f"{stem}.json" not in names


def _guard(name: str, dir_fd: int) -> tuple[str, bool]:
    """The file whose lock protects ``name``, and whether ``name`` is a final name."""
    final = not TEMP_RE.fullmatch(name)
    stem = name.rpartition(".")[0]
    return (f"{stem}.out" if final and exists_at(f"{stem}.out", dir_fd) else name), final


def in_use(name: str, dir_fd: int) -> bool:
    """Whether a live writer holds the lock that protects ``name`` (a quick first look)."""
    try:
        fd = os.open(_guard(name, dir_fd)[0], READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def remove_orphan(name: str, dir_fd: int, published: Callable[[str], bool]) -> bool:
    """Remove the leftover ``name`` if, looked at again under its lock, it still is one.

    Returns whether it was removed. A file whose lock a live writer holds, a data or
    index file whose spill is now published (``published(spill_id)``, read fresh: its
    sidecar, or its catalog row), or a file replaced since it was listed stays.
    """
    stem = name.rpartition(".")[0]
    guard, final = _guard(name, dir_fd)
    try:
        fd = os.open(guard, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # a live writer's
        if final and published(stem):
            return False  # published since the listing
        if guard == name:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            mine = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (mine.st_dev, mine.st_ino):
                return False
        return unlink_quiet(name, dir_fd)
    finally:
        os.close(fd)


def remove_session_dir(root: LocalRoot, name: str, root_fd: int) -> bool:
    """Remove the session directory ``name`` if it holds only the store's marker.

    A directory without the marker was not made by the store and is never removed. A
    writer that starts a spill meanwhile either finds the marker put back or recreates
    the directory.
    """
    try:
        with root.session_dir(name) as dir_fd:
            if dir_fd < 0:
                return False
            with os.scandir(dir_fd) as entries:
                names = [entry.name for entry in entries]
            if names != [SESSION_MARKER]:
                return False
            if not unlink_quiet(SESSION_MARKER, dir_fd):
                return False
            try:
                os.rmdir(name, dir_fd=root_fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                    logger.warning("could not remove session directory %s: %s", name, exc)
                root.mark_session(dir_fd)  # a writer got in first: the directory stays ours
                return False
            return True
    except OSError as exc:
        logger.warning("skipping session directory %s: %s", name, exc)
        return False


def open_lock_file(root_fd: int, name: str) -> int:
    """Open (creating) the lock file ``name``, replacing it if it is not a plain file.

    It is opened read-only (``flock`` needs no write access), so a hard link planted in
    its place is never written through; one with a second link is replaced by a new file.
    """
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(name, flags, 0o600, dir_fd=root_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
            logger.warning("replacing %s: it is not a regular file", name)
        else:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_uid == os.geteuid():
                return fd
            os.close(fd)
            logger.warning("replacing %s: it is not a private regular file", name)
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            os.unlink(name, dir_fd=root_fd)
    raise OSError(errno.EAGAIN, f"cannot make a private {name}")


def open_cleaner_lock(root: LocalRoot) -> int:
    """The root's ``.gc.lock``, open (to ``flock``); -1 on a read-only filesystem, or in
    a root this user may not write that has no lock file: nothing can change the catalog
    there (see :func:`~spillstore._stores.local_db.choose_mode`), no other cleaner of
    this user can hold the lock, and none is needed."""
    root_fd = root.open()
    try:
        return open_lock_file(root_fd, ".gc.lock")
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return -1
        if exc.errno == errno.EACCES and not exists_at(".gc.lock", root_fd):
            return -1
        raise
    finally:
        os.close(root_fd)


RowsLeft = list[tuple[str, Callable[[], bool]]]
"""Spills whose data files a cleaner removed on a full disk but whose rows it could not
yet: ``(spill_id, remove_row)``."""


def on_full_disk(remove_row: Callable[[], bool], spill_id: str, left: RowsLeft | None) -> bool:
    """Remove a spill's row again, once its data file is gone (see the module docstring);
    return whether the row was there. If the disk is still too full, the row stays: it is
    added to ``left`` (tried again when the cleaner finishes: :func:`finish_rows_left`),
    or warned about at once."""
    try:
        return remove_row()
    except StoreError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    if left is None:
        _warn_rows_left([spill_id])
    else:
        left.append((spill_id, remove_row))
    return True


def finish_rows_left(left: RowsLeft) -> None:
    """Remove the rows a cleaner left, now that it freed what it could; warn about those
    the disk still has no room for."""
    still = []
    for spill_id, remove_row in left:
        try:
            remove_row()
        except StoreError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            still.append(spill_id)
    _warn_rows_left(still)


def _warn_rows_left(spill_ids: list[str]) -> None:
    if spill_ids:
        logger.warning(
            "the disk is full: %d spill(s) (%s%s) had their data files removed, but not yet "
            "their catalog rows: they are still listed, and reading them says expired; "
            "'spillstore check --fix' or the next gc removes the rows once there is room",
            len(spill_ids),
            ", ".join(spill_ids[:3]),
            ", ..." if len(spill_ids) > 3 else "",
        )
