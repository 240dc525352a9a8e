"""LocalStore only: permissions, refused roots, path confinement, adoption, gc on disk."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs
import pytest

from spillstore._errors import (
    InvalidSpillId,
    PathOutsideStore,
    SpillExpired,
    SpillNotFound,
    StoreError,
    UnsafeStoreRoot,
)
from spillstore._stores.local import LocalStore

if TYPE_CHECKING:
    from tests.backends import FakeClock


KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# --------------------------------------------------------------------------- modes


@pytest.mark.usefixtures("umask0")
def test_modes_are_private_under_umask_zero(tmp_path: Path) -> None:
    """Every directory is 0700 and every file 0600, even with umask 000."""
    root = tmp_path / "a" / "b" / "root"
    store = LocalStore(root)
    meta = store.put(b"data\n", **KW)
    store.delete(store.put(b"gone", **{**KW, "tool_call_id": "2"}).spill_id)
    store.gc(grace=0)
    for directory in [tmp_path / "a", tmp_path / "a" / "b", root, root / "s1"]:
        assert _mode(directory) == 0o700, directory
    files = list(root.rglob("*"))
    names = {p.name for p in files if p.is_file()}
    assert {f"{meta.spill_id}.out", ".gc.lock", "catalog.sqlite3", "catalog.sqlite3-wal"} <= names
    for path in files:
        if path.is_file():
            assert _mode(path) == 0o600, path
    assert meta.path == str(root / "s1" / f"{meta.spill_id}.out")


def test_root_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The root comes from the argument, else SPILLSTORE_DIR, else the user cache dir."""
    monkeypatch.setenv("SPILLSTORE_DIR", str(tmp_path / "from-env"))
    assert LocalStore().root == str(tmp_path / "from-env")
    assert LocalStore(tmp_path / "arg").root == str(tmp_path / "arg")
    monkeypatch.delenv("SPILLSTORE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert LocalStore().root == platformdirs.user_cache_dir("spillstore")
    assert LocalStore().root.startswith(str(tmp_path / "cache"))


def test_root_from_env_expands_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A quoted ``SPILLSTORE_DIR='~/x'`` (the shell left the ``~``) means the home's ``x``."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPILLSTORE_DIR", "~/spills")
    assert LocalStore().root == str(tmp_path / "home" / "spills")
    assert not (tmp_path / "~").exists()


# --------------------------------------------------------------------------- refused roots


def test_symlink_root_is_refused(tmp_path: Path) -> None:
    """A root that is a symlink is refused with a clear error."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeStoreRoot, match="symlink"):
        LocalStore(link)


@pytest.mark.parametrize("mode", [0o770, 0o775, 0o707, 0o777, 0o1777])
def test_writable_by_others_root_is_refused_and_not_chmodded(tmp_path: Path, mode: int) -> None:
    """A group- or world-writable root is refused, and its mode is left alone."""
    root = tmp_path / "open"
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(UnsafeStoreRoot, match="writable by group or others"):
        LocalStore(root)
    assert _mode(root) == mode


def test_foreign_root_is_refused(tmp_path: Path) -> None:
    """A root owned by another uid is refused."""
    if os.geteuid() != 0:
        pytest.skip("needs root to chown a directory to another uid")
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 12345, -1)
    with pytest.raises(UnsafeStoreRoot, match="owned by uid 12345"):
        LocalStore(root)


def test_root_swapped_for_symlink_later_is_refused(tmp_path: Path) -> None:
    """If the root is replaced by a symlink after opening, the next operation refuses it."""
    root = tmp_path / "root"
    store = LocalStore(root)
    meta = store.put(b"x", **KW)
    root.rename(tmp_path / "moved")
    root.symlink_to(tmp_path / "moved")
    with pytest.raises(UnsafeStoreRoot):
        store.read_bytes(meta.spill_id, 0, 1)
    with pytest.raises(UnsafeStoreRoot):
        store.put(b"y", **KW)


def test_symlinked_or_open_session_dir_is_refused(local_store: LocalStore, tmp_path: Path) -> None:
    """A session directory that is a symlink, or writable by others, is refused."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (Path(local_store.root) / "evil").symlink_to(elsewhere)
    with pytest.raises(UnsafeStoreRoot):
        local_store.put(b"x", session="evil", tool_name="t", tool_call_id="c")
    assert list(elsewhere.iterdir()) == []
    open_dir = Path(local_store.root) / "open"
    open_dir.mkdir(mode=0o700)
    os.chmod(open_dir, 0o777)
    with pytest.raises(UnsafeStoreRoot):
        local_store.put(b"x", session="open", tool_name="t", tool_call_id="c")


# --------------------------------------------------------------------------- paths


def test_is_spill_path_confines_to_the_store(local_store: LocalStore, tmp_path: Path) -> None:
    """Only real spill data files inside the root count; siblings, symlinks out and FIFOs do not."""
    meta = local_store.put(b"secret\n", **KW)
    assert meta.path is not None
    data = Path(meta.path)
    root = Path(local_store.root)
    assert local_store.is_spill_path(data)
    assert local_store.resolve(str(data)) == meta.spill_id
    assert local_store.is_spill_path(root / "s1" / ".." / "s1" / data.name)
    # A symlink elsewhere pointing at a spill resolves into the store: accepted.
    outside_link = tmp_path / "link.out"
    outside_link.symlink_to(data)
    assert local_store.is_spill_path(outside_link)
    # A prefix sibling directory ("spills" vs "spills-evil") is not the store.
    sibling = Path(str(root) + "-evil") / "s1"
    sibling.mkdir(parents=True)
    (sibling / data.name).write_bytes(b"secret\n")
    assert not local_store.is_spill_path(sibling / data.name)
    with pytest.raises(PathOutsideStore):
        local_store.resolve(str(sibling / data.name))
    # A symlink inside the store pointing out is refused.
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n", encoding="utf-8")
    fake_id = "bash-" + "a" * 20
    (root / "s1" / f"{fake_id}.out").symlink_to(target)
    assert not local_store.is_spill_path(root / "s1" / f"{fake_id}.out")
    # A FIFO named like a spill is refused.
    fifo_id = "bash-" + "b" * 20
    os.mkfifo(root / "s1" / f"{fifo_id}.out")
    assert not local_store.is_spill_path(root / "s1" / f"{fifo_id}.out")
    # Sidecars, NUL bytes, relative tricks and the root itself are refused.
    for bad in [
        str(data)[:-4] + ".json",
        str(data) + "\x00",
        str(root),
        str(root / "s1"),
        str(root / ".." / "x" / "s1" / data.name),
        "/etc/passwd",
    ]:
        assert not local_store.is_spill_path(bad), bad


def test_resolve_of_a_removed_spill_path_says_expired(local_store: LocalStore) -> None:
    """resolve() on the path of a deleted spill raises SpillExpired, not 'outside'."""
    meta = local_store.put(b"x", **KW)
    assert meta.path is not None
    local_store.delete(meta.spill_id)
    with pytest.raises(SpillExpired):
        local_store.resolve(meta.path)
    assert not local_store.is_spill_path(meta.path)


@pytest.mark.parametrize(
    "bad", ["..", "../s1/x", "s1/bash-0123456789abcdef0123", "bash-0123456789abcdef012\x00", "/"]
)
def test_bad_ids_never_reach_the_filesystem(local_store: LocalStore, bad: str) -> None:
    """Ids with '..', '/' or NUL are rejected before any path is built."""
    with pytest.raises(InvalidSpillId):
        local_store.stat(bad)
    with pytest.raises(InvalidSpillId):
        local_store.read_bytes(bad, 0, 1)
    with pytest.raises(InvalidSpillId):
        local_store.delete(bad)
    with pytest.raises((InvalidSpillId, PathOutsideStore)):
        local_store.resolve(bad)


# --------------------------------------------------------------------------- tampering


def test_hardlink_to_a_foreign_file_is_refused(local_store: LocalStore, tmp_path: Path) -> None:
    """A data file replaced by a hard link to another file is not served."""
    meta = local_store.put(b"harmless", **KW)
    assert meta.path is not None
    secret = tmp_path / "secret"
    secret.write_bytes(b"password")
    os.unlink(meta.path)
    os.link(secret, meta.path)
    with pytest.raises(StoreError, match="not the file the store wrote"):
        local_store.read_bytes(meta.spill_id, 0, 8)


def test_symlinked_data_file_is_refused(local_store: LocalStore, tmp_path: Path) -> None:
    """A data file replaced by a symlink is never followed."""
    meta = local_store.put(b"harmless", **KW)
    assert meta.path is not None
    secret = tmp_path / "secret"
    secret.write_bytes(b"password")
    os.unlink(meta.path)
    os.symlink(secret, meta.path)
    with pytest.raises(StoreError):
        local_store.read_bytes(meta.spill_id, 0, 8)


def _sql(store: LocalStore, statement: str, *args: object) -> None:
    with contextlib.closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute(statement, args)
        db.commit()


def test_truncated_data_or_corrupt_row_raise_store_error(local_store: LocalStore) -> None:
    """A data file that does not match its row, or a corrupt row, is an error."""
    meta = local_store.put(b"0123456789", **KW)
    assert meta.path is not None
    with open(meta.path, "r+b") as handle:
        handle.truncate(5)
    with pytest.raises(StoreError, match="record says 10"):
        local_store.read_bytes(meta.spill_id, 0, 3)
    other = local_store.put(b"x", **{**KW, "tool_call_id": "2"})
    _sql(local_store, "UPDATE spill SET session = '../etc' WHERE spill_id = ?", other.spill_id)
    fresh = LocalStore(local_store.root)
    with pytest.raises(StoreError, match="corrupt"):
        fresh.stat(other.spill_id)
    assert [m.spill_id for m in fresh.list()] == [meta.spill_id]


def test_data_without_row_is_invisible(local_store: LocalStore) -> None:
    """A crash before the row commits leaves no visible spill: the row is the commit point."""
    meta = local_store.put(b"x\n", **KW)
    assert meta.path is not None
    _sql(local_store, "DELETE FROM spill WHERE spill_id = ?", meta.spill_id)
    fresh = LocalStore(local_store.root)
    with pytest.raises(SpillNotFound):
        fresh.stat(meta.spill_id)
    assert fresh.list() == []
    fresh.gc(grace=0)
    assert not os.path.exists(meta.path)


# --------------------------------------------------------------------------- adopt


def test_adopt_hard_links_without_copy(local_store: LocalStore, tmp_path: Path) -> None:
    """Adopting a file on the same filesystem links it; a later change by the tool is caught."""
    log = tmp_path / "tool.log"
    log.write_bytes(b"line\n" * 1000)
    meta = local_store.adopt(log, **KW)
    assert meta.path is not None
    assert os.stat(meta.path).st_ino == os.stat(log).st_ino
    assert meta.adopted_inode is not None
    assert local_store.read_lines(meta.spill_id, 1000, 1).data == b"line\n"
    with open(log, "ab") as handle:
        handle.write(b"more\n")
    with pytest.raises(StoreError, match="changed"):
        local_store.read_bytes(meta.spill_id, 0, 5)


def test_adopt_move_takes_the_file(local_store: LocalStore, tmp_path: Path) -> None:
    """With move=True the file moves into the store (same inode, original name gone)."""
    log = tmp_path / "tool.log"
    log.write_bytes(b"moved\n")
    inode = os.stat(log).st_ino
    meta = local_store.adopt(log, **KW, move=True)
    assert meta.path is not None
    assert not log.exists()
    assert os.stat(meta.path).st_ino == inode
    assert os.stat(meta.path).st_nlink == 1
    assert local_store.read_bytes(meta.spill_id, 0, 100) == b"moved\n"


def test_adopt_too_large_copies_with_cap(local_store: LocalStore, tmp_path: Path) -> None:
    """A file over the retention cap is copied with the cap, not linked."""
    log = tmp_path / "big.log"
    log.write_bytes(b"x" * 10_000)
    meta = local_store.adopt(log, **KW, retention_bytes=1000, retained_tail_bytes=100)
    assert meta.path is not None
    assert meta.adopted_inode is None
    assert os.stat(meta.path).st_ino != os.stat(log).st_ino
    assert meta.stored_ranges == ((0, 900), (9900, 10_000))


def test_adopt_refuses_non_regular_files(local_store: LocalStore, tmp_path: Path) -> None:
    """A FIFO or a missing file cannot be adopted; nothing is left behind."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(StoreError):
        local_store.adopt(fifo, **KW)
    with pytest.raises(StoreError):
        local_store.adopt(tmp_path / "missing", **KW)
    assert local_store.list() == []
    session = Path(local_store.root) / "s1"
    assert not session.exists() or list(session.iterdir()) == []


# --------------------------------------------------------------------------- gc on disk


def _age(path: Path, seconds: float, clock: FakeClock) -> None:
    os.utime(path, (clock.now - seconds, clock.now - seconds))


def test_gc_removes_only_old_unlocked_leftovers(local_store: LocalStore, clock: FakeClock) -> None:
    """Old orphan temps and sidecar-less data go; young, locked and foreign files stay."""
    clock.now = __import__("time").time()
    session = Path(local_store.root) / "s1"
    kept = local_store.put(b"keep", **KW)
    old_temp = session / ".tmp-0123456789abcdef.out"
    young_temp = session / ".tmp-1111111111111111.idx"
    locked_temp = session / ".tmp-2222222222222222.out"
    orphan_data = session / ("bash-" + "c" * 20 + ".out")
    foreign = session / "notes.txt"
    link = session / ".tmp-3333333333333333.out"
    for path in [old_temp, young_temp, locked_temp, orphan_data, foreign]:
        path.write_bytes(b"z" * 10)
    link.symlink_to(foreign)
    for path in [old_temp, locked_temp, orphan_data, foreign]:
        _age(path, 3600, clock)
    fd = os.open(locked_temp, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        dry = local_store.gc(dry_run=True)
        report = local_store.gc()
    finally:
        os.close(fd)
    assert {e.name for e in dry.entries} == {old_temp.name, orphan_data.name}
    assert report.entries == dry.entries
    assert {e.reason for e in report.entries} == {"orphan_temp"}
    assert report.bytes_freed == 20
    left = {p.name for p in session.iterdir()}
    assert {young_temp.name, locked_temp.name, foreign.name, link.name} <= left
    assert old_temp.name not in left and orphan_data.name not in left
    assert local_store.read_bytes(kept.spill_id, 0, 4) == b"keep"


def test_one_cleaner_at_a_time(local_store: LocalStore) -> None:
    """A second cleaner waits while another holds the lock."""
    lock_path = Path(local_store.root) / ".gc.lock"
    lock_path.touch(mode=0o600)
    fd = os.open(lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    finished = threading.Event()

    def run() -> None:
        local_store.gc()
        finished.set()

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert not finished.wait(0.3)  # blocked behind the lock
    finally:
        os.close(fd)
    worker.join(10)
    assert finished.is_set()


def test_tombstones_expire_after_ttl(tmp_path: Path, clock: FakeClock) -> None:
    """Tombstones (and then empty session dirs) are pruned once older than their TTL."""
    clock.now = __import__("time").time()
    store = LocalStore(tmp_path / "root", clock=clock, tombstone_ttl=100)
    meta = store.put(b"x", **KW)
    store.delete(meta.spill_id)
    with pytest.raises(SpillExpired):
        LocalStore(tmp_path / "root").stat(meta.spill_id)
    session = tmp_path / "root" / "s1"
    clock.advance(1000)
    _age(session, 1000, clock)
    store.gc()
    assert not session.exists()
    with pytest.raises(SpillNotFound):
        LocalStore(tmp_path / "root").stat(meta.spill_id)
    again = store.put(b"y", **KW)
    assert store.read_bytes(again.spill_id, 0, 1) == b"y"


def test_file_deleted_by_someone_else_is_success(local_store: LocalStore) -> None:
    """delete/gc of a spill whose files vanished meanwhile succeeds quietly."""
    meta = local_store.put(b"x", **KW)
    assert meta.path is not None
    os.unlink(meta.path)
    assert local_store.delete(meta.spill_id) is True
    with pytest.raises(SpillExpired):
        local_store.stat(meta.spill_id)


# --------------------------------------------------------------------------- shared bytes


def test_identical_bytes_are_stored_once(local_store: LocalStore) -> None:
    """The same output spilled twice (other call, other session) is one data file with two
    names; each spill keeps its own id and metadata, and deleting one keeps the other."""
    data = b"".join(b"same line %d\n" % n for n in range(5000))
    first = local_store.put(data, **KW)
    second = local_store.put(data, **{**KW, "session": "s2", "tool_call_id": "other"})
    assert first.spill_id != second.spill_id and second.tool_call_id == "other"
    assert first.path is not None and second.path is not None
    assert os.stat(first.path).st_ino == os.stat(second.path).st_ino
    assert os.stat(first.path).st_nlink == 2
    assert local_store.delete(first.spill_id)
    assert local_store.read_bytes(second.spill_id, 0, len(data)) == data
    assert os.stat(second.path).st_nlink == 1
    assert local_store.read_lines(second.spill_id, 5000, 1).data == b"same line 4999\n"


def test_a_file_adopted_twice_under_one_id_is_one_spill(
    local_store: LocalStore, tmp_path: Path
) -> None:
    """Adopting the same file again for the same call (same id) returns the spill already
    stored; the writer must not wait on the lock of its own (hard-linked) file."""
    log = tmp_path / "run.log"
    log.write_bytes(b"".join(b"log line %d\n" % n for n in range(3000)))
    first = local_store.adopt(log, **KW)
    done: list[str] = []
    again = threading.Thread(
        target=lambda: done.append(local_store.adopt(log, **KW).spill_id), daemon=True
    )
    again.start()
    again.join(timeout=30)
    assert done == [first.spill_id], "the second adopt did not finish"
    assert local_store.read_bytes(first.spill_id, 0, 11) == b"log line 0\n"


def test_gc_counts_shared_bytes_once(local_store: LocalStore, clock: FakeClock) -> None:
    """max_total_bytes sees shared bytes once, and a removal frees bytes only when it
    removes their last holder."""
    data = b"x" * 1000
    a = local_store.put(data, **{**KW, "tool_call_id": "a"})
    clock.advance(1)
    b = local_store.put(data, **{**KW, "tool_call_id": "b"})
    clock.advance(1)
    c = local_store.put(b"y" * 1000, **{**KW, "tool_call_id": "c"})
    clock.advance(10)
    assert local_store.gc(max_total_bytes=2000, grace=0).entries == ()
    report = local_store.gc(max_total_bytes=1500, grace=0)
    assert [(e.spill_id, e.bytes) for e in report.entries] == [(a.spill_id, 0), (b.spill_id, 1000)]
    assert report.bytes_freed == 1000
    assert local_store.read_bytes(c.spill_id, 0, 3) == b"yyy"


def test_a_shared_data_file_swapped_is_not_shared(local_store: LocalStore, tmp_path: Path) -> None:
    """A spill whose data file was replaced is never linked to: a new spill of the same
    bytes gets its own file."""
    data = b"shared\n" * 100
    first = local_store.put(data, **KW)
    assert first.path is not None
    os.replace(first.path, tmp_path / "kept")  # still alive: its inode is not reused
    Path(first.path).write_bytes(data)  # same bytes, another file: not the recorded one
    second = local_store.put(data, **{**KW, "tool_call_id": "2"})
    assert second.path is not None
    assert os.stat(second.path).st_ino != os.stat(first.path).st_ino
    assert local_store.read_bytes(second.spill_id, 0, 7) == b"shared\n"


def test_identical_bytes_beside_a_bad_session_directory_are_written_anew(
    local_store: LocalStore,
) -> None:
    """A spill holding the same bytes in a session directory others may write to is not
    shared: the new spill is saved in its own file, and the bad directory is untouched."""
    data = b"same\n" * 50
    first = local_store.put(data, **KW)
    session = Path(local_store.root) / "s1"
    session.chmod(0o777)
    try:
        second = local_store.put(data, **{**KW, "session": "s2"})
        assert second.path is not None and first.path is not None
        assert os.stat(second.path).st_nlink == 1
        assert local_store.read_bytes(second.spill_id, 0, 5) == b"same\n"
        assert stat.S_IMODE(session.stat().st_mode) == 0o777
    finally:
        session.chmod(0o700)
