"""A damaged catalog: every use names ``check --fix``, which sets it aside and rebuilds
the catalog from the data files (``_stores/local_rebuild.py``)."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spillstore._errors import SpillNotFound, StoreError
from spillstore._stores.local import LocalStore
from spillstore._stores.local_rebuild import RECOVERED_NOTE, repairing

KW = {"tool_name": "bash", "tool_call_id": "call-1"}
OUTPUTS = [
    ("s1", b"".join(b"line %d\n" % n for n in range(50_000))),
    ("s1", b"no newline at the end \xff\xfe"),
    ("s2", b"".join(b"line %d\n" % n for n in range(50_000))),  # the same bytes: one file
]


def _store_with_spills(root: Path) -> tuple[LocalStore, list[str]]:
    store = LocalStore(root)
    ids = [store.put(data, session=session, **KW).spill_id for session, data in OUTPUTS]
    store.delete(store.put(b"removed\n", session="s1", **KW).spill_id)
    store._catalog.close()
    return store, ids


def _damage(root: Path, how: str) -> None:
    catalog = root / "catalog.sqlite3"
    if how == "garbage":
        catalog.write_bytes(b"garbage")
    else:  # a valid header, then pages of noise
        with open(catalog, "r+b") as f:
            f.seek(100)
            f.write(os.urandom(8192))


@pytest.mark.parametrize("how", ["garbage", "corrupt"])
def test_a_damaged_catalog_is_reported_set_aside_and_rebuilt(tmp_path: Path, how: str) -> None:
    """Every use fails naming check --fix and touches no data file; check reports it;
    check --fix moves it aside and recovers every spill from its data file, exactly."""
    root = tmp_path / "root"
    _, ids = _store_with_spills(root)
    before = {p.name: p.read_bytes() for p in root.glob("*/*.out")}
    _damage(root, how)
    damaged_bytes = (root / "catalog.sqlite3").read_bytes()
    with pytest.raises(StoreError, match="spillstore check --fix"):
        LocalStore(root)
    with repairing():  # as check opens it
        store = LocalStore(root)
    uses = [
        store.list,
        lambda: store.read_bytes(ids[0], 0, 1),
        lambda: store.put(b"new\n", session="s1", **KW),
        lambda: store.gc(max_files=0, grace=0),
        lambda: store.gc(grace=0),
        lambda: store.clean("s1", grace=0),
    ]
    for use in uses:
        with pytest.raises(StoreError) as caught:
            use()
        assert caught.value.errno == errno.EILSEQ, caught.value
        assert "spillstore check --fix" in str(caught.value)
    assert {p.name: p.read_bytes() for p in root.glob("*/*.out")} == before
    found = store.check()
    assert [(p.kind, p.fixed) for p in found.problems] == [("bad_catalog", False)]
    assert not found.ok
    fixed = store.check(fix=True)
    assert fixed.ok and fixed.problems[0].kind == "bad_catalog" and fixed.problems[0].fixed
    (aside,) = root.glob("catalog.sqlite3~damaged-*")
    assert aside.read_bytes() == damaged_bytes
    assert "2 " not in fixed.problems[0].detail and "3 spill(s)" in fixed.problems[0].detail
    assert sorted(m.spill_id for m in store.list()) == sorted(ids)
    for (session, data), spill_id in zip(OUTPUTS, ids, strict=True):
        meta = store.stat(spill_id)
        assert (meta.session, meta.total_bytes, meta.media_notes) == (
            session,
            len(data),
            (RECOVERED_NOTE,),
        )
        assert store.read_bytes(spill_id, 0, len(data)) == data
        assert meta.invalid_utf8 == (b"\xff" in data)
        assert meta.total_lines == data.count(b"\n") + (not data.endswith(b"\n"))
    page = store.read_lines(ids[0], 40_001, 2)
    assert bytes(page.data) == b"line 40000\nline 40001\n"
    [bad] = [p for p in store.check().problems if p.kind == "foreign"]
    assert bad.where == aside.name and store.check().ok
    with pytest.raises(SpillNotFound):  # a removed spill's tombstone went with the catalog
        store.stat("bash-0123456789abcdef0123")


def test_a_stale_wal_goes_aside_with_its_database(tmp_path: Path) -> None:
    """The -wal a crash left beside the damaged catalog is moved aside with it: its
    frames never reach the new catalog."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    holder = sqlite3.connect(root / "catalog.sqlite3", isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("PRAGMA wal_autocheckpoint=0")
    holder.execute("CREATE TABLE stale (x)")
    wal = (root / "catalog.sqlite3-wal").read_bytes()
    holder.close()
    _damage(root, "garbage")
    (root / "catalog.sqlite3-wal").write_bytes(wal)  # as a crash leaves it
    assert store.check(fix=True).ok
    aside = sorted(p.name for p in root.glob("catalog.sqlite3~damaged-*"))
    assert [name.endswith("-wal") for name in aside] == [False, True]
    assert (root / aside[1]).read_bytes() == wal
    assert not store._catalog.has_table("stale")
    assert sorted(m.spill_id for m in LocalStore(root).list()) == sorted(ids)


def test_a_recovered_spill_whose_file_changes_is_refused(tmp_path: Path) -> None:
    """A recovered row records its file's identity, size and time: a later change is
    refused, never served as the spill."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    _damage(root, "garbage")
    assert store.check(fix=True).ok
    data_file = root / "s1" / f"{ids[1]}.out"
    with open(data_file, "r+b") as f:
        f.write(b"NO")
    with pytest.raises(StoreError, match="changed"):
        store.read_bytes(ids[1], 0, 2)


@pytest.mark.parametrize("bad", ["directory", "wal_symlink", "hard_link"])
def test_a_catalog_file_that_is_not_ours_is_set_aside(tmp_path: Path, bad: str) -> None:
    """A catalog that is a directory or a hard link, or a -wal that is a symlink: every
    use fails naming check --fix, and no target is touched; check --fix moves the bad
    name aside (the database with it only if it was the bad one) and the store works."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    catalog = root / "catalog.sqlite3"
    if bad == "directory":
        catalog.unlink()
        catalog.mkdir()
    elif bad == "hard_link":
        os.link(catalog, tmp_path / "second-name")
    else:
        (root / "catalog.sqlite3-wal").unlink(missing_ok=True)
        (root / "catalog.sqlite3-wal").symlink_to(victim)
    with pytest.raises(StoreError, match="'spillstore check --fix' moves it aside"):
        LocalStore(root)
    found = store.check()
    assert [(p.kind, p.fixed) for p in found.problems] == [("bad_catalog", False)]
    assert store.check(fix=True).ok
    assert victim.read_bytes() == b"precious"
    fresh = LocalStore(root)
    assert sorted(m.spill_id for m in fresh.list()) == sorted(ids)
    recovered = fresh.stat(ids[0]).media_notes == (RECOVERED_NOTE,)
    assert recovered == (bad != "wal_symlink")  # a bad -wal alone costs no metadata
    assert fresh.read_bytes(ids[1], 0, 2) == b"no"


def test_a_damaged_catalog_another_process_holds_open_is_not_moved(tmp_path: Path) -> None:
    """check --fix leaves a damaged catalog in place while another process has it open
    (its SQLite would delete the new catalog's -wal by name when it closes), says so,
    and repairs it once that process is gone."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    hold = (
        "import sqlite3, sys\n"
        f"c = sqlite3.connect({str(root / 'catalog.sqlite3')!r})\n"
        "c.execute('SELECT count(*) FROM spill').fetchall()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        _damage(root, "corrupt")
        [problem] = store.check(fix=True).problems
        assert (problem.kind, problem.fixed) == ("bad_catalog", False)
        assert "another process has it open" in problem.detail
        assert list(root.glob("catalog.sqlite3~damaged-*")) == []
    finally:
        holder.communicate(b"")
    assert store.check(fix=True).ok
    assert sorted(m.spill_id for m in store.list()) == sorted(ids)
