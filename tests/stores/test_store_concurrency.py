"""LocalStore under concurrency: 8 writer processes, a reader and a cleaner at once."""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from spillstore._core.index import count_lines
from spillstore._errors import SpillExpired, SpillNotFound
from spillstore._stores.local import LocalStore

WRITERS = 8
SPILLS_EACH = 200
RETENTION = {"retention_bytes": 6000, "retained_tail_bytes": 1500}


def output(writer: int, n: int) -> bytes:
    """The deterministic output of spill ``n`` of ``writer`` (some over the cap)."""
    rng = random.Random(writer * 100_003 + n)
    words = ["ok", "caf\u00e9", "\U0001f600", "error:", "x" * 40, "\u20ac"]
    lines = (" ".join(rng.choices(words, k=rng.randint(0, 12))) for _ in range(rng.randint(0, 200)))
    return "\n".join(lines).encode()


def _fork(target: Callable[[], None], log: Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            target()
            code = 0
        except BaseException:
            log.write_text(traceback.format_exc(), encoding="utf-8")
        finally:
            os._exit(code)
    return pid


def _writer(
    root: Path,
    writer: int,
    out: Path,
    *,
    spills: int = SPILLS_EACH,
    sessions: int = 3,
    store_class: type[LocalStore] = LocalStore,
    shared: int = 0,
) -> None:
    """Write ``spills`` outputs; with ``shared``, all writers write the same ``shared``
    outputs over and over (each a spill of its own, their bytes stored once)."""
    store = store_class(root, **RETENTION)
    records = []
    for n in range(spills):
        source = f"0-{n % shared}" if shared else f"{writer}-{n}"
        meta = store.put(
            output(*map(int, source.split("-"))),
            session=f"s{writer % sessions}",
            tool_name="bash",
            tool_call_id=f"{source}-{writer}-{n}",
        )
        records.append([meta.spill_id, meta.sha256, meta.tool_call_id])
    out.write_text(json.dumps(records), encoding="utf-8")


def _verify(store: LocalStore, spill_id: str, stats: dict[str, int]) -> None:
    """Read a spill fully; count a read that disagrees with its output as torn."""
    try:
        meta = store.stat(spill_id)
        writer, n = map(int, meta.tool_call_id.split("-")[:2])
        data = output(writer, n)
        parts = [store.read_bytes(spill_id, a, b) for a, b in meta.stored_ranges]
        page = store.read_lines(spill_id, 1, 3)
    except SpillExpired:
        stats["expired"] += 1
        return
    except SpillNotFound:
        stats["not_found"] += 1
        return
    good = (
        meta.sha256 == hashlib.sha256(data).hexdigest()
        and meta.total_bytes == len(data)
        and meta.total_lines == count_lines(data)
        and parts == [data[a:b] for a, b in meta.stored_ranges]
        and page.data == data[page.start_byte : page.end_byte]
    )
    stats["reads" if good else "torn"] += 1


def _reader(root: Path, stop: Path, out: Path) -> None:
    store = LocalStore(root, **RETENTION)
    stats = {"reads": 0, "torn": 0, "expired": 0, "not_found": 0}
    while not stop.exists():
        for meta in store.list():
            _verify(store, meta.spill_id, stats)
    out.write_text(json.dumps(stats), encoding="utf-8")


def _cleaner(root: Path, stop: Path, out: Path) -> None:
    store = LocalStore(root, **RETENTION)
    removed = 0
    while not stop.exists():
        # Grace 1 s: a committed spill lives at least that long; live writers' temp
        # files are protected by their lock whatever their age.
        removed += len(store.gc(max_files=300, grace=1.0).entries)
        time.sleep(0.05)
    out.write_text(json.dumps({"removed": removed}), encoding="utf-8")


def test_eight_writers_a_reader_and_gc(tmp_path: Path) -> None:
    """8 processes x 200 spills with a concurrent reader and gc: no collision, no torn read."""
    root = tmp_path / "root"
    LocalStore(root)
    stop = tmp_path / "stop"
    logs = {name: tmp_path / f"{name}.log" for name in ["reader", "cleaner"]}
    helpers = [
        _fork(lambda: _reader(root, stop, tmp_path / "reader.json"), logs["reader"]),
        _fork(lambda: _cleaner(root, stop, tmp_path / "cleaner.json"), logs["cleaner"]),
    ]
    writers = [
        _fork(
            lambda w=w: _writer(root, w, tmp_path / f"w{w}.json"),  # type: ignore[misc]
            tmp_path / f"w{w}.log",
        )
        for w in range(WRITERS)
    ]
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in writers]
    stop.touch()
    codes += [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in helpers]
    failures = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.log")}
    assert codes == [0] * (WRITERS + 2), failures

    records = [r for w in range(WRITERS) for r in json.loads((tmp_path / f"w{w}.json").read_text())]
    ids = [spill_id for spill_id, _, _ in records]
    assert len(ids) == WRITERS * SPILLS_EACH
    assert len(set(ids)) == len(ids), "id collision"
    reader = json.loads((tmp_path / "reader.json").read_text())
    assert reader["torn"] == 0 and reader["not_found"] == 0
    assert reader["reads"] > 0
    assert json.loads((tmp_path / "cleaner.json").read_text())["removed"] > 0

    # Afterwards every spill is either whole or expired (never "not found").
    final = {"reads": 0, "torn": 0, "expired": 0, "not_found": 0}
    fresh = LocalStore(root)
    for spill_id in ids:
        _verify(fresh, spill_id, final)
    assert final["torn"] == 0 and final["not_found"] == 0
    assert final["reads"] + final["expired"] == len(ids)
    assert not list(root.rglob(".tmp-*"))


RACE_WRITERS = 8
RACE_SPILLS = 300


def _race_cleaner(
    root: Path, stop: Path, out: Path, max_files: int | None, store_class: type[LocalStore]
) -> None:
    store = store_class(root, **RETENTION)
    rounds = 0
    while not stop.exists():
        store.gc(max_files=max_files, grace=0)
        rounds += 1
    out.write_text(json.dumps({"rounds": rounds}), encoding="utf-8")


def _race(
    tmp_path: Path,
    max_files: int | None,
    store_class: type[LocalStore] = LocalStore,
    *,
    spills: int = RACE_SPILLS,
    shared: int = 0,
) -> tuple[LocalStore, list[str]]:
    """8 writer processes x 300 spills while a cleaner loops gc at grace 0."""
    root = tmp_path / "root"
    store_class(root)
    stop = tmp_path / "stop"
    cleaner = _fork(
        lambda: _race_cleaner(root, stop, tmp_path / "cleaner.json", max_files, store_class),
        tmp_path / "cleaner.log",
    )
    writers = [
        _fork(
            lambda w=w: _writer(  # type: ignore[misc]
                root,
                w,
                tmp_path / f"w{w}.json",
                spills=spills,
                sessions=2,
                store_class=store_class,
                shared=shared,
            ),
            tmp_path / f"w{w}.log",
        )
        for w in range(RACE_WRITERS)
    ]
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in writers]
    stop.touch()
    codes.append(os.waitstatus_to_exitcode(os.waitpid(cleaner, 0)[1]))
    failures = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.glob("*.log")}
    assert codes == [0] * (RACE_WRITERS + 1), failures  # no writer was ever refused
    assert json.loads((tmp_path / "cleaner.json").read_text())["rounds"] > 0
    ids = [
        record[0]
        for w in range(RACE_WRITERS)
        for record in json.loads((tmp_path / f"w{w}.json").read_text())
    ]
    assert len(ids) == RACE_WRITERS * spills
    return store_class(root), ids


@pytest.mark.parametrize("store_class", [LocalStore], ids=["catalog"])
def test_gc_at_grace_zero_never_loses_a_writers_spill(
    tmp_path: Path, store_class: type[LocalStore]
) -> None:
    """Leftover-only gc looping at grace 0 beside 8 writers: every saved spill reads back whole."""
    store, ids = _race(tmp_path, None, store_class)
    stats = {"reads": 0, "torn": 0, "expired": 0, "not_found": 0}
    for spill_id in ids:
        _verify(store, spill_id, stats)
    assert stats == {"reads": len(ids), "torn": 0, "expired": 0, "not_found": 0}
    assert not list((tmp_path / "root").rglob(".tmp-*"))


@pytest.mark.parametrize("shared", [0, 20], ids=["distinct", "shared-bytes"])
def test_gc_by_count_at_grace_zero_removes_spills_only_with_a_tombstone(
    tmp_path: Path, shared: int
) -> None:
    """gc --max-files 10 --grace 0 beside 8 writers: each spill whole, or expired with a
    reason; also when the writers keep writing the same bytes (hard-linked to a spill gc
    may be removing at that moment)."""
    store, ids = _race(tmp_path, 10, spills=150 if shared else RACE_SPILLS, shared=shared)
    whole = expired = 0
    for spill_id in ids:
        try:
            store.stat(spill_id)
        except SpillExpired as exc:
            assert "max_files" in str(exc), exc  # a plan's removal, never a lost file
            expired += 1
            continue
        stats = {"reads": 0, "torn": 0, "expired": 0, "not_found": 0}
        _verify(store, spill_id, stats)
        assert stats["reads"] == 1, (spill_id, stats)
        whole += 1
    assert whole + expired == len(ids) and expired > 0
