"""LocalStore on a full disk: it can still be listed and read, and cleaned to free space;
and on a read-only filesystem: it can be listed and read.

SQLite deletes the catalog's ``-wal``/``-shm`` when its last connection closes, and the
next one cannot create a ``-shm`` on a full disk; the store then opens the catalog
exclusively with its wal-index in memory, one operation at a time, and removes the data
files of spills chosen for removal before their rows (see ``_stores/local_db.py`` and
``_stores/local_gc.py``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

import spillstore._stores.local_catalog as local_catalog_module
from spillstore._errors import SpillExpired, StoreError
from spillstore._stores.local import LocalStore
from tests.cli.test_cli import cli
from tests.stores.files_layout import write_files_layout
from tests.stores.in_operation import thread_in_an_operation
from tests.stores.small_fs import fill, tmpfs

KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}


def _spill(n: int, size: int = 60_000) -> bytes:
    """``size`` bytes: ``n n n ... \n``."""
    return ((b"%d " % n) * size)[: size - 1] + b"\n"


def _full_store(mount: Path, sizes: list[int]) -> tuple[Path, list[str]]:
    """A store on ``mount`` with spills of ``sizes``, every connection closed, then the
    disk filled."""
    root = mount / "store"
    store = LocalStore(root)
    ids = [
        store.put(_spill(n, size), **{**KW, "tool_call_id": str(n)}).spill_id
        for n, size in enumerate(sizes)
    ]
    store._catalog.close()
    fill(mount / "fill")
    return root, ids


def _data_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*/*.out"))


def test_a_full_disk_is_listed_read_and_cleaned(tmp_path: Path) -> None:
    """On a full tmpfs: list, stat, read and scan work; delete, gc, clean and check --fix
    free space and succeed; afterwards the store writes again, in WAL mode."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "384k"):
        root, ids = _full_store(mount, [60_000] * 4)
        store = LocalStore(root)  # the normal open fails here: no -shm can be made
        assert [m.spill_id for m in store.list()] == ids
        assert store.stat(ids[0]).total_bytes == len(_spill(0))
        assert store.read_bytes(ids[1], 0, 3) == b"1 1"
        assert [meta.spill_id for meta, _ in store.scan_data(store.list())] == ids
        assert store.check().ok
        assert [m.spill_id for m in asyncio.run(store.alist())] == ids  # in a worker thread
        assert asyncio.run(store.aread_bytes(ids[2], 0, 3)) == b"2 2"
        assert store.delete(ids[0])
        with pytest.raises(SpillExpired):
            store.read_bytes(ids[0], 0, 1)
        assert [m.spill_id for m in store.list()] == ids[1:]
        fill(mount / "fill")  # full again
        report = store.gc(max_files=2, grace=0)
        assert [e.spill_id for e in report.entries] == [ids[1]]
        fill(mount / "fill")
        assert [e.spill_id for e in store.clean("s1").entries] == ids[2:]
        assert _data_files(root) == []
        assert store.list() == []
        assert store.check(fix=True).ok
        os.unlink(mount / "fill")
        meta = store.put(b"room again\n", **KW)
        assert store.read_bytes(meta.spill_id, 0, 4) == b"room"
        conn = sqlite3.connect(root / "catalog.sqlite3")
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        conn.close()


def test_spills_whose_rows_cannot_go_are_said_expired_and_finished_later(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Small spills free too little for the catalog's write: their files go, their rows
    stay (a warning says so, reads say expired), and gc removes the rows once there is
    room. A spill nobody chose to remove is never touched."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "256k"):
        root, ids = _full_store(mount, [100, 100, 100])
        store = LocalStore(root)
        with caplog.at_level(logging.WARNING, logger="spillstore"):
            report = store.gc(max_files=1, grace=0)
        assert [e.spill_id for e in report.entries] == ids[:2]
        warned = [r.getMessage() for r in caplog.records if "disk is full" in r.getMessage()]
        assert len(warned) == 1 and "2 spill(s)" in warned[0], caplog.text
        assert _data_files(root) == [f"{ids[2]}.out"]
        assert [m.spill_id for m in store.list()] == ids  # the rows are still there
        with pytest.raises(SpillExpired):
            store.read_bytes(ids[0], 0, 1)
        assert store.read_bytes(ids[2], 0, 3) == b"2 2"
        os.unlink(mount / "fill")
        store.gc(max_files=1, grace=0)
        assert [m.spill_id for m in store.list()] == [ids[2]]
        assert store.check().ok


def test_a_dead_writers_file_is_judged_by_the_catalog_on_a_full_disk(tmp_path: Path) -> None:
    """gc with no limits on a full disk removes a leftover data file without a row, and no
    file of a spill that has one (the catalog is read, not guessed)."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "256k"):
        root = mount / "store"
        store = LocalStore(root)
        kept = store.put(_spill(1), **KW).spill_id
        leftover = root / "s1" / "bash-0123456789abcdef0123.out"
        leftover.write_bytes(b"x" * 10_000)
        os.utime(leftover, (1, 1))
        store._catalog.close()
        fill(mount / "fill")
        report = LocalStore(root).gc(grace=60)
        assert [e.name for e in report.entries] == [leftover.name]
        assert _data_files(root) == [f"{kept}.out"]


def test_the_full_disk_connection_is_held_for_one_operation_only(tmp_path: Path) -> None:
    """The exclusive connection of a full disk is closed when each operation ends, so
    another connection can read the catalog between two operations."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "256k"):
        root, ids = _full_store(mount, [60_000])
        store = LocalStore(root)
        assert [m.spill_id for m in store.list()] == ids
        other = sqlite3.connect(root / "catalog.sqlite3", timeout=0)
        other.execute("PRAGMA locking_mode=EXCLUSIVE")
        assert other.execute("SELECT count(*) FROM spill").fetchone() == (1,)
        other.close()
        assert store.read_bytes(ids[0], 0, 1) == b"0"


def _failing_open(modes: list[str]) -> Any:
    """``open_catalog`` that fails the shared open as a full disk does."""
    real = local_catalog_module.open_catalog

    def open_catalog(path: str, schema: Any, mode: str = "shared") -> sqlite3.Connection:
        modes.append(mode)
        if mode == "shared":
            exc = sqlite3.OperationalError("disk I/O error")
            exc.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"  # type: ignore[attr-defined]
            raise exc
        return real(path, schema, mode)  # type: ignore[arg-type]

    return open_catalog


def test_the_exclusive_connection_is_chosen_only_for_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shared open failing as on a full disk (SQLITE_IOERR_SHMSIZE) falls back to the
    exclusive connection, per operation and per thread; any other failure is an error."""
    store = LocalStore(tmp_path / "root")
    meta = store.put(b"line\n" * 10, **KW)
    store._catalog.close()
    opened: list[str] = []
    monkeypatch.setattr(local_catalog_module, "open_catalog", _failing_open(opened))
    fresh = LocalStore(tmp_path / "root")
    assert fresh.read_bytes(meta.spill_id, 0, 5) == b"line\n"
    assert opened.count("shared") == opened.count("exclusive") >= 2
    done: list[bytes] = []
    thread = threading.Thread(target=lambda: done.append(fresh.read_bytes(meta.spill_id, 0, 4)))
    thread.start()
    thread.join()
    assert done == [b"line"]
    assert fresh.delete(meta.spill_id)
    assert fresh.list() == []

    def locked(path: str, schema: Any, mode: str = "shared") -> sqlite3.Connection:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(local_catalog_module, "open_catalog", locked)
    with pytest.raises(StoreError) as caught:
        LocalStore(tmp_path / "root").list()
    assert caught.value.errno == errno.EIO


def test_cli_cleans_a_full_disk(tmp_path: Path) -> None:
    """The commands of the repro: ls, gc, then check --fix, all exit 0 on a full disk."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "256k"):
        root, ids = _full_store(mount, [60_000, 60_000])
        listed = cli(root, "ls", "-a")
        assert listed.returncode == 0 and ids[1].encode() in listed.stdout, listed.stderr
        gc = cli(root, "gc", "--max-files", "0", "--grace", "0")
        assert gc.returncode == 0, gc.stderr
        assert b"2 " in gc.stdout and gc.stderr == b"", gc.stdout
        fixed = cli(root, "check", "--fix")
        assert fixed.returncode == 0 and b"no problems found" in fixed.stdout, fixed.stderr
        assert _data_files(root) == []


def test_a_store_on_a_read_only_filesystem_is_listed_and_read(tmp_path: Path) -> None:
    """Remounted read-only: list, stat, read, scan, check and a dry-run gc work (the
    catalog opens immutable); a removal or a write fails with one EROFS StoreError and
    changes nothing."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "1m"):
        root, ids = _full_store(mount, [60_000, 100])
        os.unlink(mount / "fill")
        remount = ["mount", "-o", "remount,ro", str(mount)]
        assert subprocess.run(remount, capture_output=True, check=False).returncode == 0
        store = LocalStore(root)
        assert [m.spill_id for m in store.list()] == ids
        assert store.read_bytes(ids[0], 0, 3) == b"0 0"
        assert [meta.spill_id for meta, _ in store.scan_data(store.list())] == ids
        for change in (
            lambda: store.delete(ids[0]),
            lambda: store.put(b"x\n", **KW),
        ):
            with pytest.raises(StoreError) as caught:
                change()
            assert caught.value.errno == errno.EROFS, caught.value
        assert [m.spill_id for m in store.list()] == ids
        assert store.check().ok  # no cleaner lock can be made there, nor is one needed
        assert len(store.gc(max_files=0, grace=0, dry_run=True).entries) == 2


def test_an_empty_catalog_on_a_full_disk_is_used_and_cleaned(tmp_path: Path) -> None:
    """A catalog whose tables were never made (0 bytes) on a full disk: ls, read, gc,
    clean and check [--fix] work (it reads as empty; a leftover data file is removed by
    gc, freeing its room); a put fails with one ENOSPC error; once there is room the
    catalog gets its tables and the store writes again."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "256k"):
        root = mount / "store"
        LocalStore(root).put(b"made a session\n", **KW)
        (root / "catalog.sqlite3").unlink()
        (root / "catalog.sqlite3").touch(mode=0o600)  # as a store whose tables never came
        leftover = root / "s1" / "bash-0123456789abcdef0123.out"
        leftover.write_bytes(b"x" * 20_000)
        os.utime(leftover, (1, 1))
        fill(mount / "fill")
        listed = cli(root, "ls", "-a")
        assert listed.returncode == 0 and b"no spills" in listed.stdout, listed.stderr
        missing = cli(root, "read", "bash-0123456789abcdef0123")
        assert missing.returncode == 1 and b"no spill" in missing.stderr, missing.stderr
        for args in (["check"], ["clean", "--session", "s2", "--yes"]):
            done = cli(root, *args)
            expected = 1 if args == ["check"] else 0  # check lists the leftover
            assert done.returncode == expected, (args, done.stderr)
        store = LocalStore(root)
        with pytest.raises(StoreError) as caught:
            store.put(b"x\n", **KW)
        assert caught.value.errno == errno.ENOSPC, caught.value
        gc = cli(root, "gc", "--grace", "0")
        assert gc.returncode == 0 and leftover.name.encode() in gc.stdout, gc.stderr
        assert not leftover.exists()
        fixed = cli(root, "check", "--fix")
        assert fixed.returncode == 0, fixed.stderr
        os.unlink(mount / "fill")
        meta = store.put(b"room again\n", **KW)
        assert [m.spill_id for m in LocalStore(root).list()] == [meta.spill_id]


def test_a_files_layout_store_on_a_full_disk_says_why_it_cannot_be_opened(tmp_path: Path) -> None:
    """A store of spillstore 0.1's files layout must be migrated into a catalog before any
    use; on a full disk that cannot be done: every command fails in one line saying so
    and what to do, nothing is lost, and with room it is migrated."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "384k"):
        root = mount / "store"
        metas = write_files_layout(root, [("s1", b"line %d\n" % n * 2000) for n in range(3)])
        before = sorted(p.name for p in root.rglob("*"))
        fill(mount / "fill")
        for args in (["ls", "-a"], ["read", metas[0].spill_id], ["gc"], ["check", "--fix"]):
            failed = cli(root, *args)
            assert failed.returncode == 1, (args, failed.stdout)
            error = failed.stderr.decode()
            assert error.count("\n") == 1 and "cannot migrate" in error, error
            assert "disk is full" in error and "free some space" in error, error
        made = {"catalog.sqlite3", ".gc.lock"}  # empty files: an inode each, no block
        after = sorted(p.name for p in root.rglob("*"))
        assert [n for n in after if n not in made] == [n for n in before if n not in made]
        os.unlink(mount / "fill")
        listed = cli(root, "ls", "-a")
        assert listed.returncode == 0, listed.stderr
        assert all(m.spill_id.encode() in listed.stdout for m in metas)


def test_check_fix_waits_for_a_thread_in_an_operation_on_a_full_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a full disk a thread's operation has a connection of its own (exclusive): check
    --fix sees that thread in its operation too, and leaves the catalog in place, saying
    so, instead of replacing it under that connection."""
    import spillstore._stores.local_db as local_db

    monkeypatch.setattr(local_db, "REPLACE_WAIT_SECONDS", 0.2)
    mount = tmp_path / "mnt"
    with tmpfs(mount, "384k"):
        root, ids = _full_store(mount, [60_000, 100])
        store = LocalStore(root)
        with thread_in_an_operation(store, "s1") as listed:
            assert [m.spill_id for m in listed] == ids
            os.link(root / "catalog.sqlite3", mount / "second-name")
            [problem] = store.check(fix=True).problems
            assert not problem.fixed and "another thread of this process" in problem.detail
        os.unlink(mount / "fill")
        assert store.check(fix=True).ok
        assert (root / "catalog.sqlite3").stat().st_nlink == 1
        assert [m.spill_id for m in store.list()] == ids
