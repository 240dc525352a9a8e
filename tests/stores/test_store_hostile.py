"""LocalStore against a hostile or stray store directory: bad entries are skipped and
reported, nothing is written through a link, gc touches only what the store made, and
roots that are not the store's own are refused."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path

import pytest

from spillstore._errors import SpillExpired, SpillNotFound, StoreError, UnsafeStoreRoot
from spillstore._stores.local import LocalStore
from spillstore._stores.local_marks import CATALOG_FILES
from tests.backends import FakeClock
from tests.stores.files_layout import write_files_layout

KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}
DATA = b"".join(b"line %d\n" % n for n in range(2000))


def _two_spills(store: LocalStore) -> tuple[str, str]:
    first = store.put(DATA, **KW).spill_id
    second = store.put(DATA + b"more\n", **{**KW, "session": "s2"}).spill_id
    return first, second


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)


# --------------------------------------------------------------------------- bad entries


def test_symlinked_sidecar_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 0.1 sidecar replaced by a symlink is left out of the migration and reported; the
    other spills migrate, and ls and gc keep working."""
    root = tmp_path / "root"
    bad, good = (
        m.spill_id for m in write_files_layout(root, [("s1", DATA), ("s2", DATA + b"x\n")])
    )
    sidecar = root / "s1" / f"{bad}.json"
    copy = tmp_path / "copy.json"
    shutil.copy(sidecar, copy)
    sidecar.unlink()
    sidecar.symlink_to(copy)
    with caplog.at_level(logging.WARNING, logger="spillstore"):
        store = LocalStore(root)
        listed = [m.spill_id for m in store.list()]
    assert listed == [good]
    assert any(bad in r.getMessage() for r in caplog.records)
    assert [(p.kind, p.where) for p in store.check().problems] == [("bad_entry", f"s1/{bad}.json")]
    report = store.gc(max_files=0, grace=0)
    assert [e.spill_id for e in report.entries if e.spill_id] == [good]
    assert copy.read_bytes()  # the link's target was not touched
    with pytest.raises(SpillNotFound):
        store.stat(bad)


@pytest.mark.parametrize("mode", [0o777, 0o720])
def test_session_dir_writable_by_others_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int
) -> None:
    """A session directory writable by others is skipped (never chmodded) and reported once
    by gc; the rest works."""
    store = LocalStore(tmp_path / "root")
    bad, good = _two_spills(store)
    session = tmp_path / "root" / "s1"
    session.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="spillstore"):
        assert [m.spill_id for m in store.list()] == [good]
        caplog.clear()
        report = store.gc(max_files=0, grace=0)
    # gc looks at the sessions twice (leftovers, then empty directories): reported once
    assert sum("s1" in r.getMessage() for r in caplog.records) == 1
    assert [e.spill_id for e in report.entries] == [good]
    assert (session.stat().st_mode & 0o777) == mode
    with pytest.raises(UnsafeStoreRoot):
        store.list("s1")  # asked for by name, it is an error, not an empty list
    session.chmod(0o700)
    assert store.read_bytes(bad, 0, 7) == b"line 0\n"


# --------------------------------------------------------------------------- links


def test_rm_never_writes_through_a_hard_linked_tombstone(tmp_path: Path) -> None:
    """A tombstone name hard-linked to another file is never written through (tombstones
    are catalog rows), and check --fix unlinks the name only."""
    store = LocalStore(tmp_path / "root")
    spill_id = store.put(DATA, **KW).spill_id
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    os.link(victim, tmp_path / "root" / "s1" / f"{spill_id}.gone")
    assert store.delete(spill_id)
    assert victim.read_bytes() == b"precious\n"
    assert store.check(fix=True).ok
    assert victim.read_bytes() == b"precious\n"
    assert victim.stat().st_nlink == 1
    with pytest.raises(SpillExpired, match="delete"):
        store.stat(spill_id)


def test_gc_lock_hard_linked_elsewhere_is_replaced(tmp_path: Path) -> None:
    """A ``.gc.lock`` hard-linked to another file is replaced; the file is unchanged."""
    root = tmp_path / "root"
    store = LocalStore(root)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    os.link(victim, root / ".gc.lock")
    store.gc(grace=0)
    assert victim.read_bytes() == b"precious\n"
    assert victim.stat().st_nlink == 1
    assert (root / ".gc.lock").stat().st_nlink == 1


# --------------------------------------------------------------------------- gc's reach


def test_gc_removes_only_session_dirs_the_store_made(tmp_path: Path) -> None:
    """An old empty directory the store did not make stays; an old empty session it made goes."""
    root = tmp_path / "root"
    store = LocalStore(root, tombstone_ttl=60)
    spill_id = store.put(DATA, **KW).spill_id
    store.delete(spill_id)
    for name in ["Templates", "node_modules"]:
        (root / name).mkdir(mode=0o700)
        _age(root / name, 8 * 24 * 3600)
    _age(root / "s1", 3600)
    report = store.gc(grace=0)
    assert not report.entries
    assert sorted(p.name for p in root.iterdir() if p.name not in CATALOG_FILES) == [
        ".gc.lock",
        ".spillstore",
        "Templates",
        "node_modules",
    ]


def test_gc_keeps_a_session_dir_a_writer_just_used(tmp_path: Path) -> None:
    """A marked session directory with a file in it is not removed, and stays marked."""
    root = tmp_path / "root"
    store = LocalStore(root, tombstone_ttl=60)
    spill_id = store.put(DATA, **KW).spill_id
    _age(root / "s1", 3600)
    store.gc(grace=0)
    assert (root / "s1" / ".session").exists()
    assert store.read_bytes(spill_id, 0, 7) == b"line 0\n"


# --------------------------------------------------------------------------- roots


def test_root_and_home_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``/`` and the home directory are refused as roots unless forced."""
    with pytest.raises(UnsafeStoreRoot, match="filesystem root"):
        LocalStore("/")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(UnsafeStoreRoot, match="home directory"):
        LocalStore(home)
    store = LocalStore(home, force_root=True)
    assert (home / ".spillstore").is_file()
    assert store.put(DATA, **KW).stored_bytes == len(DATA)


def test_non_empty_unmarked_dir_is_refused(tmp_path: Path) -> None:
    """A directory holding other things is refused (and left untouched) unless forced."""
    root = tmp_path / "docs"
    (root / "Templates").mkdir(parents=True, mode=0o700)
    root.chmod(0o700)
    (root / "notes.txt").write_text("mine\n")
    with pytest.raises(UnsafeStoreRoot, match=r"not a spillstore store.*--force-root"):
        LocalStore(root)
    assert sorted(p.name for p in root.iterdir()) == ["Templates", "notes.txt"]
    store = LocalStore(root, force_root=True)
    store.gc(grace=0, max_age=0)
    assert sorted(p.name for p in root.iterdir() if p.name not in CATALOG_FILES) == [
        ".gc.lock",
        ".spillstore",
        "Templates",
        "notes.txt",
    ]
    LocalStore(root)  # marked now: no force needed


def test_store_of_version_0_1_is_marked_in_place_and_readable(tmp_path: Path) -> None:
    """A 0.1 store (no markers) opens, is marked and migrated, and its spills read back."""
    root = tmp_path / "root"
    (meta,) = write_files_layout(root, [("s1", DATA)], marked=False)
    (root / "old-empty").mkdir(mode=0o700)  # an empty directory is not proof of a store
    (root / ".gc.lock").touch(mode=0o600)
    store = LocalStore(root)
    assert json.loads((root / ".spillstore").read_text())["format"] == 2
    assert (root / "s1" / ".session").is_file()
    assert not (root / "old-empty" / ".session").exists()
    assert sorted(p.name for p in (root / "s1").iterdir()) == [".session", f"{meta.spill_id}.out"]
    assert store.read_bytes(meta.spill_id, 0, len(DATA)) == DATA
    assert store.read_lines(meta.spill_id, 2000, 1).data == b"line 1999\n"


def test_marker_of_a_newer_format_or_not_ours_is_refused(tmp_path: Path) -> None:
    """A marker naming a newer format, or one that is a symlink, is refused clearly."""
    root = tmp_path / "root"
    LocalStore(root)
    marker = root / ".spillstore"
    marker.write_text(json.dumps({"spillstore": "store", "format": 99}))
    with pytest.raises(StoreError, match=r"format 99.*upgrade spillstore"):
        LocalStore(root)
    marker.unlink()
    marker.symlink_to(tmp_path)
    with pytest.raises(UnsafeStoreRoot, match="not a regular file"):
        LocalStore(root)


def test_tombstone_ttl_still_prunes_tombstones(tmp_path: Path) -> None:
    """Tombstones older than the TTL are pruned by gc: the id is then unknown."""
    clock = FakeClock()
    store = LocalStore(tmp_path / "root", clock=clock, tombstone_ttl=60)
    spill_id = store.put(DATA, **KW).spill_id
    store.delete(spill_id)
    with pytest.raises(SpillExpired):
        store.stat(spill_id)
    clock.advance(120)
    store.gc(grace=0)
    with pytest.raises(SpillNotFound):
        store.stat(spill_id)


# --------------------------------------------------------------------------- check


def test_check_lists_problems_and_fix_repairs_them(tmp_path: Path) -> None:
    """check finds orphans, torn spills, bad entries, loose modes; --fix repairs, keeps foreign."""
    root = tmp_path / "root"
    store = LocalStore(root)
    good = store.put(DATA, **KW).spill_id
    torn = store.put(DATA + b"torn\n", **KW).spill_id
    session = root / "s1"
    os.truncate(session / f"{torn}.out", 10)
    linked = "bash-" + "e" * 20  # a sidecar of the files layout, a symlink: not migrated
    copy = tmp_path / "copy.json"
    copy.write_text("{}")
    (session / f"{linked}.json").symlink_to(copy)
    (session / ".tmp-0123456789abcdef.out").write_bytes(b"left over")
    (session / "notes.txt").write_text("mine\n")
    (session / f"{good}.out").chmod(0o644)
    found = store.check()
    assert not found.ok
    kinds = sorted((p.kind, p.where) for p in found.problems)
    assert kinds == [
        ("bad_entry", f"s1/{linked}.json"),
        ("foreign", "s1/notes.txt"),
        ("orphan", "s1/.tmp-0123456789abcdef.out"),
        ("permissions", f"s1/{good}.out"),
        ("torn", f"s1/{torn}"),
    ]
    assert not any(p.fixed for p in found.problems)
    fixed = store.check(fix=True)
    assert fixed.ok
    assert all(p.fixed for p in fixed.problems if p.kind != "foreign")
    assert [(p.kind, p.where) for p in store.check().problems] == [("foreign", "s1/notes.txt")]
    assert (session / "notes.txt").read_text() == "mine\n" and copy.exists()
    assert oct((session / f"{good}.out").stat().st_mode & 0o777) == oct(0o600)
    assert store.read_bytes(good, 0, len(DATA)) == DATA
    with pytest.raises(SpillExpired, match="check --fix"):
        store.stat(torn)


def test_check_leaves_a_live_writers_files_alone(tmp_path: Path) -> None:
    """A spill being written (its temp file locked) is no orphan to check --fix."""
    store = LocalStore(tmp_path / "root")
    writer = store.writer(**KW)
    writer.write(b"partial output\n")
    assert [p for p in store.check(fix=True).problems if p.kind != "foreign"] == []
    writer.write(b"rest\n")
    meta = writer.commit()
    assert store.read_bytes(meta.spill_id, 0, 20) == b"partial output\nrest\n"


# --------------------------------------------------------------------------- the catalog


def test_store_keeps_one_file_per_spill(tmp_path: Path) -> None:
    """The store writes one data file per spill; metadata and index are catalog rows."""
    root = tmp_path / "root"
    store = LocalStore(root)
    ids = [store.put(DATA + b"%d\n" % n, **KW).spill_id for n in range(20)]
    spill_files = [p.name for p in (root / "s1").iterdir() if p.name != ".session"]
    assert sorted(spill_files) == sorted(f"{i}.out" for i in ids)
    assert store.read_lines(ids[3], 2000, 2).data == b"line 1999\n3\n"
    assert oct((root / "catalog.sqlite3").stat().st_mode & 0o777) == oct(0o600)


def test_catalog_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    """SQLite follows links, so a catalog file that is one is refused before it opens."""
    root = tmp_path / "root"
    LocalStore(root).put(DATA, **KW)
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"precious")
    (root / "catalog.sqlite3-wal").unlink(missing_ok=True)
    os.link(victim, root / "catalog.sqlite3-wal")
    with pytest.raises(UnsafeStoreRoot, match="catalog file"):
        LocalStore(root)
    assert victim.read_bytes() == b"precious"


def test_catalog_check_finds_a_row_without_its_data(tmp_path: Path) -> None:
    """A row whose data file is gone is torn; check --fix tombstones it; orphans go too."""
    root = tmp_path / "root"
    store = LocalStore(root)
    kept = store.put(DATA, **KW).spill_id
    torn = store.put(DATA + b"x\n", **KW).spill_id
    (root / "s1" / f"{torn}.out").unlink()
    orphan = root / "s1" / ("bash-" + "d" * 20 + ".out")
    orphan.write_bytes(b"no row")
    problems = {(p.kind, p.where) for p in store.check().problems}
    assert problems == {("torn", f"s1/{torn}"), ("orphan", f"s1/{orphan.name}")}
    assert store.check(fix=True).ok
    assert not store.check().problems
    with pytest.raises(SpillExpired, match="check --fix"):
        store.stat(torn)
    assert store.read_bytes(kept, 0, len(DATA)) == DATA


def test_check_fix_removes_temp_files_an_interrupted_root_write_left(tmp_path: Path) -> None:
    """A crash while check --fix copied the catalog (or the root's marker was rewritten)
    leaves ``.tmp-<hex>.db`` (and its journal) or ``.tmp-<hex>.mark`` in the root: an hour
    on, check lists them as orphans and --fix removes them; a fresh one is left alone, and
    none of them is "foreign" or makes the root look like someone else's."""
    root = tmp_path / "spills"
    store = LocalStore(root)
    store.put(b"x\n", session="s1", tool_name="t", tool_call_id="c")
    stale = [".tmp-0123456789abcdef.db", ".tmp-0123456789abcdef.db-journal",
             ".tmp-fedcba9876543210.mark"]  # fmt: skip
    fresh = ".tmp-00000000000000aa.db"
    hour_ago = time.time() - 3_700
    for name in [*stale, fresh]:
        (root / name).write_bytes(b"partial")
        os.chmod(root / name, 0o600)
    for name in stale:
        os.utime(root / name, (hour_ago, hour_ago))
    found = {(p.kind, p.where) for p in store.check().problems}
    assert found == {("orphan", name) for name in stale}
    fixed = store.check(fix=True)
    assert {(p.kind, p.where, p.fixed) for p in fixed.problems} == {
        ("orphan", name, True) for name in stale
    }
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".tmp-")) == [fresh]
    assert store.check().ok
    assert LocalStore(root).list("s1")  # the root still opens as ours
