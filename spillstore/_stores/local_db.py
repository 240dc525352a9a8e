"""Connections to a store's catalog database, also when the disk is full or the file is
damaged (see :mod:`~spillstore._stores.local_catalog` for what the catalog holds).

A normal connection runs ``journal_mode=WAL`` with SQLite's ``-shm`` wal-index shared
between processes. SQLite deletes ``-wal`` and ``-shm`` when the last connection closes,
and the next connection must create them again: on a full disk it cannot give the
``-shm`` its 32 KiB (``SQLITE_IOERR_SHMSIZE``), so no command could even list the
store, let alone free space. Then :func:`open_catalog` (``exclusive``) opens the database
with ``locking_mode=EXCLUSIVE`` set before its first read: SQLite then keeps the
wal-index in this process's heap and never touches ``-shm``, and the connection holds an
exclusive lock, so no other process reads or writes meanwhile (they wait, for up to the
busy timeout). Reads need no new disk blocks; a write still appends to the ``-wal`` and
fails with ``ENOSPC`` until space is freed (the store then deletes the data files of
spills it was asked to remove first: :mod:`~spillstore._stores.local_gc`). Such a
connection serves one catalog operation only (:class:`db_errors` closes it when the
outermost operation ends), so a long-lived process never holds the lock between calls.
Below :data:`LOW_SPACE_BYTES` free, with no ``-shm`` in use, the exclusive connection is
taken at once (:func:`choose_mode`); a shared open that fails for room is followed by
one too. On a read-only filesystem neither can open (no ``-wal`` can be made, no lock
taken): the catalog is opened ``immutable``, which is safe there, as nothing can change
the file, unless a ``-wal`` holds changes the file has not got (then it is refused). A
root its owner may not write (mode 0500; root ignores modes) is treated alike: no
process of this user can make the ``-wal`` a writer needs (:func:`read_only`); if one is
there with its ``-shm``, a process that opened it earlier is still writing, and the
connection is shared as usual.

Measured on a full 256 KiB tmpfs with SQLite 3.40: the normal open fails with
``SQLITE_IOERR_SHMSIZE``, ``file:...?mode=ro`` fails the same way, the exclusive
connection reads, and its ``DELETE`` fails with ``SQLITE_FULL`` and is rolled back (the
database is unchanged). ``journal_mode=MEMORY`` would write in place without a journal,
but a crash in the middle could corrupt the catalog, so it is not used.

Every SQLite failure becomes a :class:`~spillstore.StoreError`: ``ENOSPC`` for a full
disk, ``EROFS`` for a write on a read-only filesystem, ``EILSEQ`` for a file that is not
a database or is corrupt (:data:`DAMAGED`, whose message names ``spillstore check
--fix``), ``EIO`` otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import stat
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Final, Literal, NamedTuple

from spillstore._errors import StoreError
from spillstore._stores.errors import map_os_errors
from spillstore._stores.local_marks import CATALOG_FILES

__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "DAMAGED",
    "MMAP_BYTES",
    "BadFile",
    "Held",
    "Holders",
    "Mode",
    "bad_files",
    "check_header",
    "choose_mode",
    "db_errors",
    "file_stats",
    "held_elsewhere",
    "is_damaged",
    "on_scope_end",
    "open_catalog",
    "read_only",
    "store_errno",
]

BUSY_TIMEOUT_SECONDS: Final = 60.0
"""How long a writer waits for another process's transaction (they last milliseconds)."""

MMAP_BYTES: Final = 1 << 30
"""How much of the catalog file SQLite reads through a memory map instead of copying
pages into its cache: a list of 10,000 rows then takes ~90 page faults instead of
400-1,400 (a fault costs ~4.5 us on this project's machine; RESULTS.md, issue 14,
session 8). Pages are only read through the map: writes go through ``write``, and the
``-shm`` file is always mapped in WAL mode anyway, so a file truncated under a reader
by something other than SQLite was already a risk of the same kind."""

DAMAGED: Final = errno.EILSEQ
"""The ``errno`` of a :class:`StoreError` for a catalog that is not a database or is
corrupt, or whose file is not a private regular file: only ``spillstore check --fix``
repairs it."""

LOW_SPACE_BYTES: Final = 256 * 1024
"""Below this much free space, a catalog whose ``-shm`` is not there yet is opened
exclusively at once: a shared open that fails halfway leaves the pages it could give the
``-shm`` allocated, taking the room the exclusive connection's write needs."""

SHM_BYTES: Final = 32 * 1024
"""The size of SQLite's first wal-index block: a ``-shm`` this big is in use (or was),
and a shared open needs no new blocks for it."""

_MAGIC: Final = b"SQLite format 3\x00"
_FIX_HINT: Final = "; 'spillstore check --fix' moves the damaged catalog aside and rebuilds it"

_FULL: Final = frozenset({"SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"})
"""SQLite's words for a full disk: a write that found no room, and a ``-shm`` that could
not be given its blocks."""


def store_errno(exc: sqlite3.Error) -> int:
    """The ``errno`` a SQLite failure becomes (see the module docstring)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name in _FULL or "full" in str(exc).lower():
        return errno.ENOSPC
    if name == "SQLITE_NOTADB" or name.startswith("SQLITE_CORRUPT"):
        return DAMAGED
    if name.startswith("SQLITE_READONLY"):
        return errno.EROFS
    return errno.EIO


def check_header(name: str, dir_fd: int) -> None:
    """Raise the :data:`DAMAGED` error if the non-empty file ``name`` does not begin as an
    SQLite database does. Checked before SQLite opens it: SQLite's failed connection
    would delete the ``-wal`` beside it, which ``check --fix`` moves aside instead."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        header = os.pread(fd, len(_MAGIC), 0)
    finally:
        os.close(fd)
    if header != _MAGIC:
        cause = sqlite3.DatabaseError("file is not a database")  # as SQLite would say
        raise StoreError(DAMAGED, f"cannot open the catalog: {cause}{_FIX_HINT}") from cause


def file_stats(root_fd: int) -> dict[str, os.stat_result]:
    """``lstat`` of the catalog's files that exist, by name, in a stable order."""
    stats = {}
    for name in sorted(CATALOG_FILES):
        with contextlib.suppress(FileNotFoundError):
            stats[name] = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
    return stats


class BadFile(NamedTuple):
    """Why a catalog file must not be opened as it is, and whether it can be read."""

    why: str
    readable: bool
    """A regular file (a second hard link, another user's): its rows can be copied into a
    private file; else (a symlink, a directory) it is never opened."""


def bad_files(stats: dict[str, os.stat_result]) -> dict[str, BadFile]:
    """``{name: why}`` of the files in ``stats`` SQLite must not open."""
    bad = {}
    for name, st in stats.items():
        if stat.S_ISLNK(st.st_mode):
            bad[name] = BadFile("a symlink", readable=False)
        elif not stat.S_ISREG(st.st_mode):
            bad[name] = BadFile("not a regular file", readable=False)
        elif st.st_uid != os.geteuid():
            bad[name] = BadFile(f"owned by uid {st.st_uid}", readable=True)
        elif st.st_nlink != 1:
            bad[name] = BadFile(f"has {st.st_nlink} hard links", readable=True)
    return bad


SHARED_LOCKS: Final = (0x40000002, 510)
"""``(start, length)`` of the bytes of the database file that SQLite's unix VFS read-locks
for a reader; a connection in WAL mode holds one of them as long as it is open."""


def held_elsewhere(path: str) -> bool:
    """Whether another process has the database at ``path`` open through SQLite (it holds
    a read lock). This process must have no connection to it: closing the descriptor
    opened here drops every POSIX lock the process holds on the file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    start, length = SHARED_LOCKS
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, length, start)
    except OSError:
        return True
    finally:
        os.close(fd)  # the probe's lock goes with it
    return False


def is_damaged(exc: BaseException) -> bool:
    """Whether ``exc`` says the catalog is not a database or is corrupt, or one of its
    files is not a private regular file (what ``check --fix`` repairs)."""
    return isinstance(exc, StoreError) and exc.errno == DAMAGED


Mode = Literal["shared", "exclusive", "immutable"]
"""How a connection opens the catalog: shared (WAL with ``-shm``, kept for the thread),
exclusive (the wal-index in memory: a full disk) or immutable (a read-only filesystem,
where nothing can change the file: no locks, no ``-wal``); the last two for one
operation at a time."""


def choose_mode(path: str) -> Mode:
    """How to open the catalog at ``path`` (see :data:`Mode`): exclusive at once when its
    ``-shm`` is missing or small and the disk is all but full; immutable when it cannot
    be written (:func:`read_only`) and no ``-wal`` holds changes (then it is refused)."""
    found = os.statvfs(os.path.dirname(path))
    why = read_only(path, found)
    if why is not None:
        code, reason = why
        try:
            if os.stat(f"{path}-wal", follow_symlinks=False).st_size:
                if code == errno.EACCES and os.path.lexists(f"{path}-shm"):
                    return "shared"  # another process has it open: it reads and writes
                raise StoreError(
                    code,
                    f"cannot read the catalog: {reason}, and its -wal holds changes the "
                    "database file has not got yet (make it writable once, and any "
                    "spillstore command folds them in)",
                )
        except FileNotFoundError:
            pass
        return "immutable"
    try:
        if os.stat(f"{path}-shm", follow_symlinks=False).st_size >= SHM_BYTES:
            return "shared"
    except FileNotFoundError:
        pass
    return "exclusive" if found.f_bavail * found.f_frsize < LOW_SPACE_BYTES else "shared"


def read_only(path: str, found: os.statvfs_result | None = None) -> tuple[int, str] | None:
    """``(errno, why)`` when the catalog at ``path`` cannot be written, as SQLite needs
    (a ``-wal`` and ``-shm`` made beside it): its filesystem is read-only, or this user
    may not write its directory (a root of mode 0500 as its owner; root ignores modes);
    None when it can. ``found`` is the directory's ``statvfs`` if the caller has it."""
    directory = os.path.dirname(path)
    if (found or os.statvfs(directory)).f_flag & os.ST_RDONLY:
        return errno.EROFS, "the store's filesystem is read-only"
    if not os.access(directory, os.W_OK, effective_ids=True):
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        return (
            errno.EACCES,
            f"the store root {directory} is not writable by this user (mode {mode:o})",
        )
    return None


class _Depth:
    """How many catalog operations a thread is in; its lock is held from the start of
    the outermost one to its end (:meth:`Holders.replacing` takes it to close the
    thread's connection between two operations)."""

    __slots__ = ("depth", "lock")

    def __init__(self) -> None:
        self.depth = 0
        self.lock = threading.Lock()


class _Scope(threading.local):
    """This thread's open catalog operations and the fallback connections they opened."""

    def __init__(self) -> None:
        self.state = _Depth()
        self.closers: list[Callable[[], None]] = []


_scope = _Scope()


class db_errors(map_os_errors):  # lower case: a context manager used like a function
    """One catalog operation: translate ``sqlite3.Error`` into :class:`StoreError`; when
    the outermost operation of the thread ends, close the fallback connections it
    opened (:func:`on_scope_end`)."""

    __slots__ = ()
    _KIND = sqlite3.Error

    def __enter__(self) -> None:
        state = _scope.state
        if not state.depth:
            state.lock.acquire()
        state.depth += 1

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        state = _scope.state
        state.depth -= 1
        if not state.depth:
            try:
                if _scope.closers:
                    closers, _scope.closers = _scope.closers, []
                    for close in closers:
                        close()
            finally:
                state.lock.release()
        super().__exit__(kind, exc, tb)

    def _error(self, exc: Exception) -> StoreError:
        assert isinstance(exc, sqlite3.Error)
        code = store_errno(exc)
        message = f"{self._action}: {exc}"
        if code == DAMAGED:
            message += _FIX_HINT
        return StoreError(code, message)


def on_scope_end(close: Callable[[], None]) -> None:
    """Run ``close`` when this thread's outermost :class:`db_errors` ends."""
    if not _scope.state.depth:
        raise RuntimeError("a fallback connection opened outside a catalog operation")
    _scope.closers.append(close)


def open_catalog(
    path: str, schema: Callable[[sqlite3.Connection], Any], mode: Mode = "shared"
) -> sqlite3.Connection:
    """A connection in ``mode`` with ``synchronous=FULL`` and the schema made current
    (``schema``)."""
    if mode == "immutable":
        uri = f"file:{urllib.parse.quote(path)}?immutable=1"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
        )
    try:
        if mode == "exclusive":  # before the first read: SQLite then never uses the -shm
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        elif mode == "shared":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        schema(conn)
    except BaseException:
        conn.close()  # a failed connection must not keep its locks
        raise
    return conn


REPLACE_WAIT_SECONDS: Final = 10.0
"""How long ``check --fix`` waits for another thread's catalog operation to end before
it leaves the catalog in place (operations last milliseconds)."""


class Held:
    """A connection of one thread, as :class:`Holders` sees it (shared, or a fallback for
    one operation): ``conn`` is None once closed (the thread then opens the catalog
    again)."""

    __slots__ = ("__weakref__", "conn", "pid", "state")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn: sqlite3.Connection | None = conn
        self.state = _scope.state
        self.pid = os.getpid()

    def close(self, *, wait: bool = True) -> bool:
        """Close the connection between two operations of its thread (from that thread,
        or from another with ``wait=False``); return False if its thread is in one."""
        state = self.state
        mine = state is _scope.state and state.depth > 0  # this thread, in an operation
        if not mine and not state.lock.acquire(blocking=wait):
            return False
        try:
            conn, self.conn = self.conn, None
            if conn is not None:
                conn.close()
        finally:
            if not mine:
                state.lock.release()
        return True


class Holders:
    """The connections this process holds to one catalog file, whatever thread or store
    opened them, so ``check --fix`` can replace the file under them.

    A connection is used by the thread that opened it, one operation at a time.
    :meth:`replacing` closes each thread's connection between two of its operations
    (holding the thread's operation lock meanwhile; connections are made with
    ``check_same_thread`` off), and that thread's next operation opens the catalog
    again, once the repair is over (opens wait for it). Closing them first also keeps
    their SQLite from deleting the new catalog's ``-wal`` by name when they close, and
    lets :func:`held_elsewhere` see other processes only.
    """

    _by_path: ClassVar[dict[str, Holders]] = {}
    _by_path_lock: ClassVar = threading.Lock()

    def __init__(self) -> None:
        self._held: weakref.WeakSet[Held] = weakref.WeakSet()
        self._changed = threading.Condition()
        self._repairer: int | None = None
        self._generation = 0

    @classmethod
    def of(cls, path: str) -> Holders:
        """The holders of the catalog at ``path`` (one object a path, per process)."""
        with cls._by_path_lock:
            return cls._by_path.setdefault(os.path.realpath(path), cls())

    def hold(self, conn: sqlite3.Connection, generation: int) -> Held | None:
        """Record this thread's new connection (forgotten with the handle); None, the
        connection closed, if a repair began since :meth:`wait_for_repair` returned
        ``generation``: it may be open on the file being replaced (open again)."""
        with self._changed:
            if generation != self._generation:
                conn.close()
                return None
            held = Held(conn)
            weakref.finalize(held, conn.close)  # a connection sits in a cycle: gc is late
            self._held.add(held)
        return held

    def wait_for_repair(self) -> int:
        """Wait while another thread replaces the catalog file (before an open); return
        the count of repairs begun, for :meth:`hold`."""
        with self._changed:
            while self._repairer not in (None, threading.get_ident()):
                self._changed.wait()
            return self._generation

    @contextlib.contextmanager
    def replacing(self) -> Iterator[bool]:
        """Close every shared connection of this process to the catalog, and hold the
        opens of other threads until the block ends; yield False if another thread was
        still in a catalog operation after :data:`REPLACE_WAIT_SECONDS` (its connection
        stays open: the file must not be replaced)."""
        with self._changed:
            while self._repairer is not None:
                self._changed.wait()
            self._repairer = threading.get_ident()
            self._generation += 1
        try:
            yield self._close_all()
        finally:
            with self._changed:
                self._repairer = None
                self._changed.notify_all()

    @classmethod
    def after_fork(cls) -> None:
        """In a forked child: no repair is under way, and the parent's connections are
        not the child's (it opens its own)."""
        for holders in cls._by_path.values():
            holders.__init__()  # type: ignore[misc]
        cls._by_path_lock = threading.Lock()

    def _close_all(self) -> bool:
        deadline = time.monotonic() + REPLACE_WAIT_SECONDS
        pause = 0.001
        while True:
            with self._changed:
                held = [h for h in self._held if h.pid == os.getpid() and h.conn is not None]
            busy = [h for h in held if not h.close(wait=False)]  # tried again below
            if not busy:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


os.register_at_fork(after_in_child=Holders.after_fork)
