"""What marks a directory as a spillstore store, and which roots the local store refuses.

A store root holds a marker file, ``.spillstore`` (``{"spillstore": "store", "format":
2}``), written when the store first opens the directory; each session directory the
store creates holds an empty ``.session`` file. ``gc``, ``clean`` and ``rm`` touch only
names the store makes (spill files, temp files, tombstones, session directories that
carry ``.session``), so a directory nobody marked is never removed.

A root is refused (:class:`~spillstore.UnsafeStoreRoot`) when it is ``/`` or the home
directory, or when it is a non-empty directory without a marker, unless ``force_root``.
A directory written by spillstore 0.1 (no marker; only session directories of spill
files, temp files, tombstones and ``.gc.lock``) is recognised and marked as format 1,
the files layout, which the store then migrates into its catalog
(:mod:`~spillstore._stores.local_migrate`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
from typing import Final

from spillstore._core.ids import is_session, is_spill_id
from spillstore._errors import StoreError, UnsafeStoreRoot
from spillstore._stores.local_files import (
    CREATE_FLAGS,
    DIR_FLAGS,
    READ_FLAGS,
    TEMP_RE,
    LocalRoot,
    read_all,
    temp_name,
    unlink_quiet,
    write_all,
)

__all__ = [
    "ASIDE_MARK",
    "CATALOG_FILES",
    "CATALOG_FORMAT",
    "MARKER",
    "STORE_FORMAT",
    "is_store_name",
    "mark_root",
    "refuse_special_root",
    "set_format",
]

logger = logging.getLogger("spillstore")

MARKER: Final = ".spillstore"
"""The marker file of a store root."""

STORE_FORMAT: Final = 1
"""The files layout of 0.1: a sidecar and an index file beside each data file. Only read,
to migrate it (:mod:`~spillstore._stores.local_migrate`)."""

CATALOG_FORMAT: Final = 2
"""The on-disk format of :class:`~spillstore.LocalStore`: one data file per spill,
metadata, line indexes and tombstones in ``catalog.sqlite3`` (see
:mod:`~spillstore._stores.local_catalog`)."""

ASIDE_MARK: Final = "catalog.sqlite3~damaged-"
"""How the name of a damaged catalog that ``check --fix`` moved aside starts (``~`` is in
no session name); ``check`` reports it, nothing removes it."""

CATALOG_FILES: Final = frozenset({"catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"})
"""The catalog's database and SQLite's companions (root-level names the store makes)."""

_FORMAT_NAMES: Final = {STORE_FORMAT: "files", CATALOG_FORMAT: "catalog"}

MARKER_MAX_BYTES: Final = 4096

_SPILL_FILE_RE: Final = re.compile(r"(?P<id>[a-z0-9_]+-[0-9a-f]+)\.(?:out|idx|json|gone)")
_ROOT_NAMES: Final = frozenset({MARKER, ".gc.lock", *CATALOG_FILES})


def is_store_name(name: str) -> bool:
    """Whether ``name`` (inside a session directory) is one the store creates."""
    if name == ".session" or TEMP_RE.fullmatch(name):
        return True
    matched = _SPILL_FILE_RE.fullmatch(name)
    return matched is not None and is_spill_id(matched.group("id"))


def refuse_special_root(path: str) -> None:
    """Refuse ``/`` and the home directory as a store root.

    Raises:
        UnsafeStoreRoot: ``path`` is one of them.
    """
    real = os.path.realpath(path)
    homes = {os.path.realpath(os.path.expanduser("~"))}
    with contextlib.suppress(KeyError, ImportError):
        import pwd  # noqa: PLC0415 - POSIX only

        homes.add(os.path.realpath(pwd.getpwuid(os.geteuid()).pw_dir))
    if real == os.path.realpath(os.sep) or real in homes:
        what = "the filesystem root" if real == os.path.realpath(os.sep) else "your home directory"
        raise UnsafeStoreRoot(
            errno.EPERM,
            f"refusing store root {path}: it is {what}, and gc would share it with files "
            "that are not spillstore's; choose a directory of its own (or pass --force-root)",
        )


def mark_root(root: LocalRoot, *, force: bool, fmt: int = CATALOG_FORMAT) -> int:
    """Make sure the root carries a marker, writing one of format ``fmt`` if the directory
    may be ours; return the format it holds.

    A store of the files layout (format 1, or an unmarked 0.1 store holding sidecars)
    returns :data:`STORE_FORMAT`, marked as such: the caller migrates it and then calls
    :func:`set_format`.

    Raises:
        UnsafeStoreRoot: the directory is not empty and not a store, or its marker is not
            a regular file or not spillstore's.
        StoreError: the marker names a format this spillstore does not read, or cannot
            be written.
    """
    root_fd = root.open()
    try:
        for _ in range(3):
            found = _read_marker(root_fd, root.path)
            if found in _FORMAT_NAMES:
                return found
            if found is not None:
                raise _wrong_format(root.path, found)
            foreign = _foreign_entries(root_fd)
            if foreign and not force:
                shown = ", ".join(repr(name) for name in foreign[:3])
                raise UnsafeStoreRoot(
                    errno.ENOTEMPTY,
                    f"refusing store root {root.path}: it is not empty and not a spillstore "
                    f"store (it holds {shown}); choose an empty or new directory, or pass "
                    "--force-root to use it anyway",
                )
            _mark_sessions(root, root_fd)
            marked = STORE_FORMAT if _holds_spills(root_fd) else fmt
            if _link_new(root_fd, MARKER, _marker(marked)):
                logger.info("marked %s as a spillstore store", root.path)
                return marked
        raise StoreError(errno.EAGAIN, f"cannot mark the store root {root.path}")
    finally:
        os.close(root_fd)


def set_format(root: LocalRoot, fmt: int) -> None:
    """Replace the root's marker by one of format ``fmt`` (a new file renamed over it)."""
    root_fd = root.open()
    try:
        temp = temp_name("mark")
        fd = os.open(temp, CREATE_FLAGS, 0o600, dir_fd=root_fd)
        try:
            write_all(fd, _marker(fmt))
            os.fsync(fd)
            os.replace(temp, MARKER, src_dir_fd=root_fd, dst_dir_fd=root_fd)
            os.fsync(root_fd)
        finally:
            os.close(fd)
            unlink_quiet(temp, root_fd)
    finally:
        os.close(root_fd)


def _marker(fmt: int) -> bytes:
    return json.dumps({"spillstore": "store", "format": fmt}).encode() + b"\n"


def _wrong_format(path: str, found: int) -> StoreError:
    return StoreError(
        errno.EPROTO,
        f"the store at {path} has format {found}, which this spillstore does not read "
        f"(it reads {sorted(_FORMAT_NAMES)}); upgrade spillstore",
    )


def _holds_spills(root_fd: int) -> bool:
    """Whether an unmarked root already holds sidecars of the files layout."""
    with os.scandir(root_fd) as entries:
        sessions = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    return any(
        name.endswith(".json") for s in sessions for name in (_session_entries(root_fd, s) or [])
    )


def _read_marker(root_fd: int, path: str) -> int | None:
    """The format the marker names; None if there is none (raising if it is not ours)."""
    try:
        fd = os.open(MARKER, READ_FLAGS, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnsafeStoreRoot(
            exc.errno, f"refusing store root {path}: its {MARKER} is not a regular file"
        ) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise UnsafeStoreRoot(
                errno.EPERM, f"refusing store root {path}: its {MARKER} is not this user's file"
            )
        raw = read_all(fd, MARKER_MAX_BYTES, f"the marker of {path}")
    finally:
        os.close(fd)
    try:
        marker = json.loads(raw)
        version = int(marker["format"]) if marker.get("spillstore") == "store" else None
    except (ValueError, TypeError, KeyError, AttributeError):
        version = None
    if version is None:
        raise UnsafeStoreRoot(
            errno.EINVAL, f"refusing store root {path}: its {MARKER} is not a spillstore marker"
        )
    return version


def _foreign_entries(root_fd: int) -> list[str]:
    """The entries of an unmarked root that a spillstore 0.1 store would not hold."""
    foreign: list[str] = []
    empty: list[str] = []
    proof = False
    with os.scandir(root_fd) as entries:
        for entry in entries:
            if entry.name in _ROOT_NAMES or TEMP_RE.fullmatch(entry.name):
                proof = True
                continue
            if not (entry.is_dir(follow_symlinks=False) and is_session(entry.name)):
                foreign.append(entry.name)
                continue
            names = _session_entries(root_fd, entry.name)
            if names == []:
                empty.append(entry.name)
            elif names is None or not all(is_store_name(name) for name in names):
                foreign.append(entry.name)
            else:
                proof = True
    # Empty directories alone are no proof of a store (they stay unmarked either way).
    return sorted(foreign if proof else foreign + empty)


def _session_entries(root_fd: int, name: str) -> list[str] | None:
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        return None
    try:
        with os.scandir(fd) as entries:
            return [entry.name for entry in entries]
    finally:
        os.close(fd)


def _mark_sessions(root: LocalRoot, root_fd: int) -> None:
    """Mark the session directories of a 0.1 store (those holding spill files)."""
    with os.scandir(root_fd) as entries:
        names = [e.name for e in entries if e.is_dir(follow_symlinks=False) and is_session(e.name)]
    for name in names:
        if not _session_entries(root_fd, name):
            continue
        try:
            with root.session_dir(name) as dir_fd:
                if dir_fd >= 0:
                    root.mark_session(dir_fd)
        except OSError as exc:  # a bad session directory is skipped (and reported)
            logger.warning("session %s not marked: %s", name, exc)


def _link_new(dir_fd: int, final: str, payload: bytes) -> bool:
    """Write ``payload`` to a new file ``final`` (never overwriting); False if it exists."""
    temp = temp_name("mark")
    fd = os.open(temp, CREATE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        write_all(fd, payload)
        os.fsync(fd)
        try:
            os.link(temp, final, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            return False
        os.fsync(dir_fd)
        return True
    finally:
        os.close(fd)
        unlink_quiet(temp, dir_fd)
