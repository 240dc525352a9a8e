"""A damaged catalog: every use names ``check --fix``, which sets it aside and rebuilds
the catalog from the data files (``_stores/local_rebuild.py``)."""

from __future__ import annotations

import errno
import gc
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from spillstore._errors import SpillExpired, SpillNotFound, StoreError
from spillstore._stores.local import LocalStore
from spillstore._stores.local_rebuild import RECOVERED_NOTE, repairing
from tests.stores.in_operation import thread_in_an_operation

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


@pytest.mark.parametrize("bad", ["directory", "wal_symlink"])
def test_a_catalog_file_that_is_not_ours_is_set_aside(tmp_path: Path, bad: str) -> None:
    """A catalog that is a directory, or a -wal that is a symlink: every use fails naming
    check --fix, and no target is touched; check --fix moves the bad name aside (the
    database with it only if it was the bad one) and the store works."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    catalog = root / "catalog.sqlite3"
    if bad == "directory":
        catalog.unlink()
        catalog.mkdir()
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


def _rows(root: Path) -> list[tuple[object, ...]]:
    """Every row of the catalog's tables, as SQLite reads them."""
    conn = sqlite3.connect(f"file:{root / 'catalog.sqlite3'}?mode=ro", uri=True)
    try:
        return [
            row
            for table in ("spill", "spill_index", "tombstone")
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1")
        ]
    finally:
        conn.close()


@pytest.mark.parametrize("bad", ["hard_link", "hard_link_with_wal", "other_owner"])
def test_a_valid_catalog_unsafe_only_as_a_file_is_copied_keeping_every_row(
    tmp_path: Path, bad: str
) -> None:
    """A catalog that is a sound database of ours but an unsafe file (a second hard link,
    another user's file): check says --fix copies it; check --fix copies it into a fresh
    private file (the backup API, then a rename) and every row stays, the tool names,
    call ids, times and tombstones with it; the other name is left as it was."""
    if bad == "other_owner" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    catalog = root / "catalog.sqlite3"
    if bad == "hard_link_with_wal":  # rows only in the -wal, as a crash leaves them
        late = store.put(b"late\n", session="s3", tool_name="late_tool", tool_call_id="c9")
        ids.append(late.spill_id)
        holder = sqlite3.connect(catalog, isolation_level=None)
        holder.execute("PRAGMA wal_autocheckpoint=0")
        holder.execute("SELECT count(*) FROM spill").fetchall()  # holds it open
        before = _rows(root)
        store._catalog.close()
        wal = (root / "catalog.sqlite3-wal").read_bytes()
        saved = catalog.read_bytes()
        holder.close()
        catalog.write_bytes(saved)  # the file as it was before the checkpoint
        (root / "catalog.sqlite3-wal").write_bytes(wal)
        assert wal
    else:
        before = _rows(root)
    if bad == "other_owner":
        os.chown(catalog, 65534, 65534)
        other = None
    else:
        other = tmp_path / "second-name"
        os.link(catalog, other)
    other_bytes = None if other is None else other.read_bytes()
    with pytest.raises(StoreError, match=r"'spillstore check --fix' copies the catalog into a"):
        LocalStore(root)
    [found] = store.check().problems
    assert (found.kind, found.fixed) == ("bad_catalog", False)
    assert "copies it into a private file, keeping every row" in found.detail, found.detail
    fixed = store.check(fix=True)
    assert fixed.ok, fixed.problems
    assert "copied into a private file" in fixed.problems[0].detail
    assert not list(root.glob("catalog.sqlite3~damaged-*"))
    st = catalog.stat()
    assert (st.st_nlink, st.st_uid, st.st_mode & 0o777) == (1, os.geteuid(), 0o600)
    assert _rows(root) == before
    if other is not None:
        assert other.read_bytes() == other_bytes or bad == "hard_link_with_wal"
    fresh = LocalStore(root)
    assert sorted(m.spill_id for m in fresh.list()) == sorted(ids)
    meta = fresh.stat(ids[0])
    assert (meta.tool_name, meta.tool_call_id, meta.media_notes) == ("bash", "call-1", ())
    with pytest.raises(SpillExpired):  # the tombstone stayed
        fresh.stat(_removed_id(root))
    assert fresh.check().ok


def _removed_id(root: Path) -> str:
    conn = sqlite3.connect(f"file:{root / 'catalog.sqlite3'}?mode=ro", uri=True)
    try:
        [(spill_id,)] = conn.execute("SELECT spill_id FROM tombstone").fetchall()
        return str(spill_id)
    finally:
        conn.close()


def test_a_hard_linked_catalog_that_is_damaged_is_rebuilt(tmp_path: Path) -> None:
    """A hard-linked catalog that SQLite finds corrupt cannot be copied: check says it
    will be rebuilt, and check --fix moves it aside and rebuilds it."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    _damage(root, "corrupt")
    os.link(root / "catalog.sqlite3", tmp_path / "second-name")
    [found] = store.check().problems
    assert "moves it aside and rebuilds the catalog from the data files" in found.detail
    fixed = store.check(fix=True)
    aside = list(root.glob("catalog.sqlite3~damaged-*"))
    assert fixed.ok and len([p for p in aside if not p.name.endswith(("-wal", "-shm"))]) == 1
    assert LocalStore(root).stat(ids[0]).media_notes == (RECOVERED_NOTE,)


class _Worker:
    """A thread that runs the calls it is given, one at a time, and keeps each result."""

    def __init__(self) -> None:
        self._calls: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._results: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        while (call := self._calls.get()) is not None:
            try:
                self._results.put(call())
            except Exception as exc:
                self._results.put(exc)

    def run(self, call: Callable[[], object]) -> object:
        self._calls.put(call)
        result = self._results.get(timeout=60)
        if isinstance(result, Exception):
            raise result
        return result

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join(timeout=60)


@pytest.mark.parametrize("damage", ["hard_link", "corrupt"])
def test_check_fix_closes_the_connections_other_threads_hold(tmp_path: Path, damage: str) -> None:
    """check --fix while other threads of the process (one on another LocalStore of the
    same root) hold catalog connections: each thread's next operation reads the
    repaired catalog, and what it writes then is in it, also after those threads end."""
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    other_store = LocalStore(root)
    workers = [_Worker(), _Worker()]
    try:
        assert sorted(m.spill_id for m in workers[0].run(store.list)) == sorted(ids)  # type: ignore[attr-defined]
        assert workers[1].run(lambda: other_store.stat(ids[0]).tool_name) == "bash"
        if damage == "hard_link":
            os.link(root / "catalog.sqlite3", tmp_path / "second-name")
        else:
            _damage(root, "corrupt")
        assert store.check(fix=True).ok
        listed = workers[0].run(lambda: sorted(m.spill_id for m in store.list()))
        assert listed == sorted(ids)
        new = [
            workers[n].run(
                lambda s=s: s.put(b"after the fix\n", session="s9", tool_name="t", tool_call_id="c")
            )
            for n, s in enumerate([store, other_store])
        ]
        assert workers[1].run(lambda: other_store.read_bytes(new[0].spill_id, 0, 5)) == b"after"  # type: ignore[attr-defined]
    finally:
        for worker in workers:
            worker.stop()
    gc.collect()  # the threads' connections close with them: the -wal stays the new one's
    found = subprocess.run(
        [sys.executable, "-c", _LIST_IN_A_CHILD, str(root)], capture_output=True, check=True
    )
    listed_after = found.stdout.decode().split()
    assert sorted(listed_after) == sorted([*ids, new[0].spill_id])  # type: ignore[attr-defined]
    assert store.check().ok


_LIST_IN_A_CHILD = (
    "import sys\n"
    "from spillstore._stores.local import LocalStore\n"
    "print(' '.join(m.spill_id for m in LocalStore(sys.argv[1]).list()))\n"
)


def test_check_fix_leaves_the_catalog_while_another_thread_is_in_an_operation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread that stays inside a catalog operation keeps its connection: check --fix
    then leaves the catalog in place and says why; once it is idle, the fix goes."""
    import spillstore._stores.local_db as local_db

    monkeypatch.setattr(local_db, "REPLACE_WAIT_SECONDS", 0.2)
    root = tmp_path / "root"
    store, ids = _store_with_spills(root)
    with thread_in_an_operation(store, "s1"):
        os.link(root / "catalog.sqlite3", tmp_path / "second-name")
        [problem] = store.check(fix=True).problems
        assert not problem.fixed and "another thread of this process" in problem.detail
        assert (root / "catalog.sqlite3").stat().st_nlink == 2
    assert store.check(fix=True).ok
    assert (root / "catalog.sqlite3").stat().st_nlink == 1
    assert sorted(m.spill_id for m in store.list()) == sorted(ids)
