"""A root of the files layout (0.1) is migrated into the catalog when the store opens it:
every spill and tombstone carries over, one file per spill is left, and a migration
killed with -9 at any step leaves a store that opens and reads back everything."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from spillstore._errors import SpillExpired
from spillstore._stores.local import LocalStore
from spillstore._stores.meta import SpillMeta
from tests.stores.files_layout import write_files_layout, write_tombstone
from tests.stores.test_store_faults import run_until

DATA = [b"".join(b"%s line %d\n" % (tag, n) for n in range(3000)) for tag in (b"a", b"b", b"c")]
GONE = "bash-" + "f" * 20


def _old_root(root: Path) -> list[SpillMeta]:
    metas = write_files_layout(root, [("s1", DATA[0]), ("s1", DATA[1]), ("s2", DATA[2])])
    write_tombstone(root, "s1", GONE, "delete", 1_700_000_000.0)
    return metas


def _same(meta: SpillMeta, migrated: SpillMeta) -> bool:
    return meta.model_copy(update={"path": migrated.path}) == migrated


def _spill_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*/*") if not p.name.startswith("."))


def test_files_layout_is_migrated_in_place(tmp_path: Path) -> None:
    """Spills, line indexes and tombstones move into the catalog; data files stay."""
    root = tmp_path / "root"
    metas = _old_root(root)
    inodes = {m.spill_id: (root / m.session / f"{m.spill_id}.out").stat().st_ino for m in metas}
    store = LocalStore(root)
    assert json.loads((root / ".spillstore").read_text())["format"] == 2
    assert _spill_files(root) == sorted(f"{m.spill_id}.out" for m in metas)
    listed = store.list()
    assert sorted(m.spill_id for m in listed) == sorted(m.spill_id for m in metas)
    for meta, data in zip(metas, DATA, strict=True):
        migrated = store.stat(meta.spill_id)
        assert _same(meta, migrated)
        assert os.stat(str(migrated.path)).st_ino == inodes[meta.spill_id]  # not copied
        assert (
            store.read_lines(meta.spill_id, 2001, 2).data
            == data.splitlines(True)[2000] * 1 + (data.splitlines(True)[2001])
        )
    with pytest.raises(SpillExpired, match="deleted"):
        store.stat(GONE)
    assert store.check().ok
    assert LocalStore(root).list() == listed  # opened again: nothing left to migrate


def _migrate_until(root: Path, kill_at: int | None) -> tuple[int, bool]:
    """Open ``root`` in a child (migrating it); kill it at handshake point ``kill_at``."""
    return run_until(lambda: lambda: LocalStore(root), kill_at)


def test_kill_9_at_every_step_of_the_migration_leaves_a_readable_store(tmp_path: Path) -> None:
    """Wherever the migration dies, the next open finishes it and every spill reads back."""
    template = tmp_path / "template"
    metas = _old_root(template)
    probe = tmp_path / "probe"
    shutil.copytree(template, probe)
    points, killed = _migrate_until(probe, None)
    assert not killed and points >= 20, points
    for k in range(points + 1):
        root = tmp_path / f"k{k}"
        shutil.copytree(template, root)
        _, killed = _migrate_until(root, k)
        assert killed == (k < points)
        store = LocalStore(root)
        for meta, data in zip(metas, DATA, strict=True):
            assert _same(meta, store.stat(meta.spill_id)), k
            assert store.read_bytes(meta.spill_id, 0, len(data)) == data
        with pytest.raises(SpillExpired):
            store.stat(GONE)
        assert _spill_files(root) == sorted(f"{m.spill_id}.out" for m in metas), k
        assert store.check().ok, (k, store.check().problems)
        shutil.rmtree(root)


def test_catalog_of_json_rows_is_upgraded(tmp_path: Path) -> None:
    """A catalog of 0.2's development (one JSON record per row) is upgraded in place."""
    root = tmp_path / "root"
    (meta,) = write_files_layout(root, [("s1", DATA[0])])
    (root / ".spillstore").write_text(json.dumps({"spillstore": "store", "format": 2}))
    index = (root / "s1" / f"{meta.spill_id}.idx").read_bytes()
    (root / "s1" / f"{meta.spill_id}.idx").unlink()
    (root / "s1" / f"{meta.spill_id}.json").unlink()
    with contextlib.closing(sqlite3.connect(root / "catalog.sqlite3")) as db:
        db.execute(
            "CREATE TABLE spills (spill_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
            "created_at REAL NOT NULL, stored_bytes INTEGER NOT NULL, meta BLOB NOT NULL, "
            "idx BLOB NOT NULL) WITHOUT ROWID"
        )
        db.execute(
            "CREATE TABLE tombstones (spill_id TEXT PRIMARY KEY, session TEXT NOT NULL, "
            "reason TEXT, removed_at REAL) WITHOUT ROWID"
        )
        db.execute(
            "INSERT INTO spills VALUES (?, ?, ?, ?, ?, ?)",
            (meta.spill_id, "s1", meta.created_at, meta.stored_bytes,
             meta.model_dump_json().encode(), index),
        )  # fmt: skip
        db.execute("INSERT INTO tombstones VALUES (?, 's1', 'age', 1.0)", (GONE,))
        db.commit()
    (root / "catalog.sqlite3").chmod(0o600)
    store = LocalStore(root)
    assert _same(meta, store.stat(meta.spill_id))
    assert store.read_lines(meta.spill_id, 3000, 1).data == b"a line 2999\n"
    with pytest.raises(SpillExpired, match="max_age"):
        store.stat(GONE)
