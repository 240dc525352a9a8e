"""``LocalStore.check``: find what is wrong in a store directory, and repair what can be.

What it finds (each a :class:`Problem`):

- ``orphan``: a temp file, or a data file without a catalog row, that no live writer
  holds; or a ``.json``/``.idx``/``.gone`` file of the files layout left after its
  migration. Fix: removed (a leftover data file decided again under its lock, as ``gc``
  does).
- ``torn``: a catalog row whose data file is missing, not a regular file, or of the
  wrong size (:func:`torn_rows`). Fix: the spill is removed, leaving a tombstone
  (``check``).
- ``bad_entry``: a name the store makes that is not a private regular file of this
  user (a symlink, a directory, a file with a second link), or a sidecar of the files
  layout that the migration refused. Fix: the name is unlinked (never its target) and
  the spill, if any, tombstoned.
- ``permissions``: a session directory or a file of the store that others may read or
  write. Fix: chmod 0700/0600 (only this user's).
- ``unmarked``: a session directory holding spills but no ``.session`` marker (a 0.1
  store). Fix: marked.
- ``bad_catalog``: a catalog that is not a database, or that SQLite finds corrupt, or
  whose files are not private regular files (every other command fails naming ``check
  --fix``). Fix (:mod:`~spillstore._stores.local_rebuild`): a sound database that is only
  an unsafe file (a second hard link, another user's) is copied into a private file,
  keeping every row; one that cannot be read is moved aside and rebuilt from the data
  files.
- ``foreign``: a name the store never makes, or a damaged catalog moved aside. Reported,
  never touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
import time
from collections.abc import Callable, Iterator
from typing import Final, Literal

from spillstore._core.ids import is_session, is_spill_id
from spillstore._stores.local_files import (
    DIR_FLAGS,
    READ_FLAGS,
    SESSION_MARKER,
    TEMP_RE,
    LocalRoot,
    unlink_quiet,
)
from spillstore._stores.local_gc import in_use, is_orphan_name, remove_orphan
from spillstore._stores.local_marks import ASIDE_MARK, CATALOG_FILES, MARKER, is_store_name
from spillstore._stores.meta import SpillMeta

__all__ = ["CheckReport", "Problem", "ProblemKind", "Remover", "audit", "torn_rows"]

ProblemKind = Literal[
    "orphan", "torn", "bad_entry", "permissions", "unmarked", "bad_catalog", "foreign"
]


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong in the store: what, where (relative to the root), why, fixed."""

    kind: ProblemKind
    where: str
    detail: str
    fixed: bool = False


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """What ``check`` found, and (with ``fix``) repaired."""

    problems: tuple[Problem, ...]
    fix: bool

    @property
    def ok(self) -> bool:
        """Whether nothing is left to repair (foreign names are only reported)."""
        return all(p.fixed or p.kind == "foreign" for p in self.problems)


ROOT_FILES = frozenset({MARKER, ".gc.lock", *CATALOG_FILES})

ROOT_TEMP_GRACE_SECONDS: Final = 3600
"""How old a temp file in the root must be to be an orphan (an hour; the writes that
make them take well under a second)."""
"""The files of the root the store makes."""

Remover = Callable[[str, str], bool]
"""Removes a damaged spill by ``(session, spill_id)``, leaving a tombstone; returns
whether its row is gone (on a full disk it may stay, see :mod:`~spillstore._stores.
local_gc`)."""


def audit(
    root: LocalRoot,
    *,
    fix: bool,
    remove_spill: Remover,
    recorded: Callable[[str], set[str]],
    published: Callable[[int], Callable[[str], bool]],
) -> CheckReport:
    """Check every entry of the store at ``root``; repair what can be with ``fix``.

    ``remove_spill(session, spill_id)`` removes a damaged spill, leaving a tombstone;
    ``recorded(session)`` names the spills recorded outside the session's files (the
    catalog's); ``published(dir_fd)(spill_id)`` says, fresh, whether a spill is visible.
    """
    problems: list[Problem] = []
    root_fd = root.open()
    try:
        with os.scandir(root_fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in entries:
            if entry.name in ROOT_FILES:
                problems += _check_file(root_fd, entry.name, entry.name, fix=fix)
            elif TEMP_RE.fullmatch(entry.name):
                problems += _check_root_temp(root_fd, entry.name, fix=fix)
            elif entry.name.startswith(ASIDE_MARK):
                why = "a damaged catalog that check --fix moved aside: remove it when not needed"
                problems.append(Problem("foreign", entry.name, why))
            elif not is_session(entry.name):
                problems.append(Problem("foreign", entry.name, "not a name spillstore makes"))
            elif entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                problems.append(_bad_session(root_fd, entry.name, fix=fix))
            else:
                problems += _check_session(
                    root,
                    root_fd,
                    entry.name,
                    fix=fix,
                    remove_spill=remove_spill,
                    recorded=recorded(entry.name),
                    published=published,
                )
    finally:
        os.close(root_fd)
    return CheckReport(problems=tuple(problems), fix=fix)


def _bad_session(root_fd: int, name: str, *, fix: bool) -> Problem:
    fixed = False
    if fix:  # a symlink or file under a session's name: unlink the name, never the target
        fixed = unlink_quiet(name, root_fd)
    return Problem("bad_entry", name, "a session name that is not a directory", fixed)


def _check_file(dir_fd: int, name: str, where: str, *, fix: bool) -> list[Problem]:
    """A bookkeeping file: a private regular file of this user with one link."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return []
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid():
        fixed = fix and unlink_quiet(name, dir_fd)
        return [Problem("bad_entry", where, _why_bad(st), fixed)]
    if stat.S_IMODE(st.st_mode) & 0o077:
        return [_chmod(dir_fd, name, where, st, 0o600, fix=fix)]
    return []


def _check_root_temp(root_fd: int, name: str, *, fix: bool) -> list[Problem]:
    """A temp file in the root (a catalog copy of ``check --fix``, its journal, a marker
    being rewritten): an orphan once older than :data:`ROOT_TEMP_GRACE_SECONDS` (their
    writers finish in well under a second), else checked as a bookkeeping file."""
    try:
        st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    except FileNotFoundError:
        return []
    if not stat.S_ISREG(st.st_mode) or time.time() - st.st_mtime < ROOT_TEMP_GRACE_SECONDS:
        return _check_file(root_fd, name, name, fix=fix)
    fixed = fix and unlink_quiet(name, root_fd)
    return [Problem("orphan", name, f"{st.st_size} bytes left by an interrupted write", fixed)]


def _why_bad(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return "a symlink"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.geteuid():
        return f"owned by uid {st.st_uid}"
    return f"has {st.st_nlink} hard links"


def _chmod(
    dir_fd: int, name: str, where: str, st: os.stat_result, mode: int, *, fix: bool
) -> Problem:
    detail = f"mode {oct(stat.S_IMODE(st.st_mode))}, not {oct(mode)}"
    fixed = False
    if fix:
        flags = DIR_FLAGS if stat.S_ISDIR(st.st_mode) else READ_FLAGS
        with contextlib.suppress(OSError):
            fd = os.open(name, flags, dir_fd=dir_fd)
            try:
                now = os.fstat(fd)
                if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                    os.fchmod(fd, mode)
                    fixed = True
            finally:
                os.close(fd)
    return Problem("permissions", where, detail, fixed)


@contextlib.contextmanager
def _session_fd(root_fd: int, name: str) -> Iterator[int]:
    fd = os.open(name, DIR_FLAGS, dir_fd=root_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _check_session(
    root: LocalRoot,
    root_fd: int,
    name: str,
    *,
    fix: bool,
    remove_spill: Remover,
    recorded: set[str],
    published: Callable[[int], Callable[[str], bool]],
) -> list[Problem]:
    problems: list[Problem] = []
    st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    if st.st_uid != os.geteuid():
        return [Problem("permissions", name, f"owned by uid {st.st_uid}; not touched")]
    if stat.S_IMODE(st.st_mode) & 0o077:
        problems.append(_chmod(root_fd, name, name, st, 0o700, fix=fix))
    with _session_fd(root_fd, name) as dir_fd, os.scandir(dir_fd) as listing:
        entries = {e.name: e for e in listing}
        names = set(entries) | {f"{spill_id}.json" for spill_id in recorded}
        has_spills = bool(recorded)
        for entry_name in sorted(names):
            where = f"{name}/{entry_name}"
            if not is_store_name(entry_name):
                problems.append(Problem("foreign", where, "not a name spillstore makes"))
                continue
            if entry_name == SESSION_MARKER:
                problems += _check_file(dir_fd, entry_name, where, fix=fix)
                continue
            stem, _, ext = entry_name.rpartition(".")
            if ext == "json" and is_spill_id(stem):
                has_spills = True  # a catalog row (checked by torn_rows), or a leftover:
            if ext == "idx" and f"{stem}.json" in entries and stem not in recorded:
                continue  # reported with its sidecar
            if ext in ("json", "idx", "gone") and is_spill_id(stem) and entry_name in entries:
                problems.append(
                    _leftover(
                        dir_fd,
                        name,
                        entry_name,
                        recorded=recorded,
                        fix=fix,
                        remove_spill=remove_spill,
                    )
                )
            elif is_orphan_name(entry_name, names):
                problems += _check_orphan(
                    dir_fd, entry_name, where, fix=fix, published=published(dir_fd)
                )
        if has_spills and SESSION_MARKER not in names:
            if fix:
                root.mark_session(dir_fd)
            problems.append(Problem("unmarked", name, "holds spills but no .session", fix))
    return problems


def _check_orphan(
    dir_fd: int, name: str, where: str, *, fix: bool, published: Callable[[str], bool]
) -> list[Problem]:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return []
    if not stat.S_ISREG(st.st_mode):
        fixed = fix and unlink_quiet(name, dir_fd)
        return [Problem("bad_entry", where, _why_bad(st), fixed)]
    if in_use(name, dir_fd):
        return []  # a live writer's
    fixed = fix and remove_orphan(name, dir_fd, published)
    return [Problem("orphan", where, f"{st.st_size} bytes left by a writer that died", fixed)]


def _leftover(
    dir_fd: int, session: str, name: str, *, recorded: set[str], fix: bool, remove_spill: Remover
) -> Problem:
    """A ``.json``/``.idx``/``.gone`` file of the files layout, left after its migration."""
    stem = name.rpartition(".")[0]
    if stem in recorded or not name.endswith(".json"):
        fixed = fix and unlink_quiet(name, dir_fd)
        return Problem("orphan", f"{session}/{name}", "left by the migration to the catalog", fixed)
    fixed = False
    if fix:  # a sidecar the migration refused: its spill goes, leaving a tombstone
        unlink_quiet(name, dir_fd)
        unlink_quiet(f"{stem}.idx", dir_fd)
        fixed = remove_spill(session, stem)
    return Problem(
        "bad_entry",
        f"{session}/{name}",
        "a sidecar of the files layout that could not be migrated (a link, corrupt, or "
        "its data file is missing, torn or shared)",
        fixed,
    )


def torn_rows(
    root: LocalRoot, metas: list[SpillMeta], *, fix: bool, remove_spill: Remover
) -> list[Problem]:
    """Catalog rows whose data file is missing, not a regular file, of the wrong size, or
    readable by others (``fix``: the spill is removed, leaving a tombstone; or chmod)."""
    problems: list[Problem] = []
    for meta in metas:
        where = f"{meta.session}/{meta.spill_id}"
        try:
            st: os.stat_result | None = os.stat(root.data_path(meta), follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size == meta.stored_bytes:
            if meta.adopted_inode is None and stat.S_IMODE(st.st_mode) & 0o077:
                with _session_fd_of(root, meta.session) as dir_fd:
                    name = f"{meta.spill_id}.out"
                    problems.append(_chmod(dir_fd, name, f"{where}.out", st, 0o600, fix=fix))
            continue
        if st is None:
            why = "its data file is missing"
        elif not stat.S_ISREG(st.st_mode):
            why = f"its data file is {_why_bad(st)}"
        else:
            why = f"its data file holds {st.st_size} bytes, its row says {meta.stored_bytes}"
        fixed = fix and remove_spill(meta.session, meta.spill_id)
        problems.append(Problem("torn", where, why, fixed))
    return problems


@contextlib.contextmanager
def _session_fd_of(root: LocalRoot, session: str) -> Iterator[int]:
    root_fd = root.open()
    try:
        with _session_fd(root_fd, session) as fd:
            yield fd
    finally:
        os.close(root_fd)
