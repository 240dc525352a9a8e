"""LocalStore.list: every kind of catalog row comes back as the metadata put returned."""

from __future__ import annotations

import copy
import gc
import itertools
import logging
import pickle
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spillstore._core.collector import gc_paused
from spillstore._stores import local_db
from spillstore._stores.local import LocalStore
from spillstore._stores.local_catalog import SCHEMA_VERSION
from spillstore._stores.local_rows import LIST_COLUMNS, LISTING, metas_of
from spillstore._stores.meta import SpillMeta

_TMP = tempfile.TemporaryDirectory(prefix="spillstore-listing-")
_STORE = LocalStore(Path(_TMP.name) / "store")
_counter = itertools.count()


def _same(listed: SpillMeta, put: SpillMeta) -> None:
    """Equal to what put returned, and to pydantic's own validation of its fields."""
    assert listed == put
    assert type(listed) is SpillMeta
    assert listed == SpillMeta.model_validate(listed.model_dump())
    assert listed.model_fields_set == put.model_fields_set | set(SpillMeta.model_fields)
    assert listed.stored_bytes == put.stored_bytes
    assert listed.model_dump(exclude_unset=True) == put.model_dump()
    assert listed.model_copy(update={"tool_name": "x"}).tool_name == "x"
    assert listed.model_copy(update={"tool_name": "y"}, deep=True).tool_name == "y"
    assert copy.deepcopy(listed) == pickle.loads(pickle.dumps(listed)) == put
    with pytest.raises(TypeError, match="read-only"):
        listed.model_fields_set.add("x")


@settings(max_examples=60)
@example(data=b"t" * 20, retention=5, tail=5, suffix=None, notes=[], session="a")  # tail only
@example(data=b"\xff\n" * 9, retention=6, tail=2, suffix="s", notes=["n"], session="b.2")
@example(data=b"", retention=None, tail=0, suffix=None, notes=[], session="a")
@given(
    data=st.binary(max_size=64) | st.text(max_size=32).map(str.encode),
    retention=st.none() | st.integers(0, 40),
    tail=st.integers(0, 20),
    suffix=st.none() | st.text(max_size=20),
    notes=st.lists(st.text(max_size=10), max_size=3),
    session=st.sampled_from(["a", "b.2", "C-3"]),
)
def test_a_fresh_store_lists_what_put_returned(
    data: bytes,
    retention: int | None,
    tail: int,
    suffix: str | None,
    notes: list[str],
    session: str,
) -> None:
    """Ordinary rows and rows with a cut, a tail only, a suffix, media notes or invalid
    UTF-8 all list as the metadata put returned, in their session and across sessions."""
    meta = _STORE.put(
        data,
        session=session,
        tool_name="tool",
        tool_call_id=str(next(_counter)),
        retention_bytes=retention,
        retained_tail_bytes=tail if retention is None else min(tail, retention),
        suffix=suffix,
        media_notes=notes,
    )
    fresh = LocalStore(_STORE.root)
    by_session = {m.spill_id: m for m in fresh.list(session)}
    _same(by_session[meta.spill_id], meta)
    everything = fresh.list()
    assert [m.spill_id for m in everything if m.session == session] == list(by_session)
    assert everything == sorted(everything, key=lambda m: (m.created_at, m.spill_id))
    _same(fresh.stat(meta.spill_id), meta)


def test_an_adopted_file_lists_with_its_identity(tmp_path: Path) -> None:
    """An adopted spill's row (its inode recorded) lists like put returned it."""
    store = LocalStore(tmp_path / "store")
    log = tmp_path / "tool.log"
    log.write_bytes(b"line\n" * 10)
    meta = store.adopt(log, session="s", tool_name="t", tool_call_id="1")
    plain = store.put(b"plain\n", session="s", tool_name="t", tool_call_id="2")
    assert meta.adopted_inode is not None
    listed = LocalStore(store.root).list("s")
    _same(listed[0], meta)
    _same(listed[1], plain)


def test_a_flagged_row_removed_between_the_two_queries_is_left_out(tmp_path: Path) -> None:
    """The rare columns are read by a second query; a row gone by then is not listed."""
    store = LocalStore(tmp_path / "store")
    cut = store.put(b"x" * 50, session="s", tool_name="t", tool_call_id="1", retention_bytes=10)
    plain = store.put(b"y", session="s", tool_name="t", tool_call_id="2")
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        rows = db.execute(f"SELECT {LIST_COLUMNS} FROM spill ORDER BY created_at").fetchall()
    assert [LISTING.unpack(row[-1])[-1] for row in rows] == [1, 0]
    assert metas_of(store.root + "/", "s", rows, dict) == [plain]
    assert cut.stored_ranges != ((0, 50),)


def test_a_row_with_a_bad_id_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A corrupt id (it would name a file) skips that row only, with a warning."""
    store = LocalStore(tmp_path / "store")
    metas = [
        store.put(b"%d" % n, session="s", tool_name="t", tool_call_id=str(n)) for n in range(3)
    ]
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("UPDATE spill SET spill_id = '../x-0' WHERE spill_id = ?", (metas[1].spill_id,))
        db.commit()
    with caplog.at_level(logging.WARNING, logger="spillstore"):
        listed = LocalStore(store.root).list("s")
    assert listed == [metas[0], metas[2]]
    assert "'../x-0'" in caplog.text


@pytest.fixture
def gc_was_disabled() -> Iterator[None]:
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_listing_pauses_the_collector_and_restores_it(tmp_path: Path) -> None:
    """The collector is off while rows become objects and on again afterwards."""
    seen = []
    with gc_paused():
        seen.append(gc.isenabled())
    assert seen == [False]
    assert gc.isenabled()
    store = LocalStore(tmp_path / "store")
    store.put(b"x", session="s", tool_name="t", tool_call_id="1")
    assert len(store.list("s")) == 1
    assert gc.isenabled()


@pytest.mark.usefixtures("gc_was_disabled")
def test_listing_leaves_a_disabled_collector_disabled(tmp_path: Path) -> None:
    """A program that turned the collector off keeps it off."""
    with gc_paused():
        pass
    store = LocalStore(tmp_path / "store")
    store.put(b"x", session="s", tool_name="t", tool_call_id="1")
    assert len(store.list()) == 1
    assert not gc.isenabled()


@pytest.mark.parametrize("bad_id", ["two", "blob"])
def test_an_id_that_is_two_ids_or_not_text_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, bad_id: str
) -> None:
    """The ids of a list are checked in one match over them joined by newlines: an id
    holding a newline between two well-formed ids, or a value that is not text, is
    still caught (that row skipped and reported, the others listed), in a session's
    list and in the list of every session."""
    store = LocalStore(tmp_path / "store")
    metas = [
        store.put(b"%d" % n, session="s", tool_name="t", tool_call_id=str(n)) for n in range(3)
    ]
    other = store.put(b"o", session="o", tool_name="t", tool_call_id="o")
    value: object = f"{metas[0].spill_id}\n{metas[2].spill_id}"
    if bad_id == "blob":
        value = metas[1].spill_id.encode()
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("UPDATE spill SET spill_id = ? WHERE spill_id = ?", (value, metas[1].spill_id))
        db.commit()
    with caplog.at_level(logging.WARNING, logger="spillstore"):
        assert LocalStore(store.root).list("s") == [metas[0], metas[2]]
        assert LocalStore(store.root).list() == [metas[0], metas[2], other]
    assert "corrupt" in caplog.text


def test_every_session_lists_in_order_past_a_session_that_is_not_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``list()`` walks the catalog's sessions one by one (text and BLOBs sort apart in
    SQLite): a row whose session is not text is skipped and reported, and every other
    session's spills come back, oldest first across sessions."""
    store = LocalStore(tmp_path / "store")
    metas = [
        store.put(b"%d" % n, session=name, tool_name="t", tool_call_id=str(n))
        for n, name in enumerate(["b", "a", "c", "a", "b", "c"])
    ]
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("UPDATE spill SET session = ? WHERE spill_id = ?", (b"c", metas[2].spill_id))
        db.commit()
    with caplog.at_level(logging.WARNING, logger="spillstore"):
        assert LocalStore(store.root).list() == [m for n, m in enumerate(metas) if n != 2]
    assert caplog.text.count("corrupt") == 1


def _varied(store: LocalStore) -> list[SpillMeta]:
    """Spills of every kind of row: plain, cut, with a suffix, notes, invalid UTF-8."""
    return [
        store.put(b"plain\n", session="s", tool_name="t", tool_call_id="1"),
        store.put(b"x" * 50, session="s", tool_name="t", tool_call_id="2", retention_bytes=10),
        store.put(b"y\n", session="s", tool_name="t", tool_call_id="3", suffix="[exit 1]"),
        store.put(b"z", session="s", tool_name="t", tool_call_id="4", media_notes=["img"]),
        store.put(b"\xff\n", session="s", tool_name="t", tool_call_id="5"),
        store.put(b"", session="s", tool_name="t", tool_call_id="6"),
    ]


@pytest.mark.parametrize("listing", [None, b"short", b"\0" * (LISTING.size + 1)])
def test_a_row_without_a_listing_is_read_whole(tmp_path: Path, listing: bytes | None) -> None:
    """A row an earlier version wrote (no listing) or whose listing is not one lists as
    put returned it, read from its columns."""
    store = LocalStore(tmp_path / "store")
    metas = _varied(store)
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("UPDATE spill SET listing = ? WHERE tool_call_id IN ('1', '2')", (listing,))
        db.commit()
    fresh = LocalStore(store.root)
    for listed, meta in zip(fresh.list("s"), metas, strict=True):
        _same(listed, meta)
    assert fresh.list() == metas


def _as_version_3(root: Path) -> None:
    """Make a catalog what version 3 wrote: no listing column."""
    with closing(sqlite3.connect(root / "catalog.sqlite3")) as db:
        db.execute("ALTER TABLE spill DROP COLUMN listing")
        db.execute("PRAGMA user_version = 3")
        db.commit()


def test_a_version_3_catalog_gets_its_listings_in_place(tmp_path: Path) -> None:
    """Opening a catalog without listings adds them; every row lists as put returned."""
    store = LocalStore(tmp_path / "store")
    metas = _varied(store)
    _as_version_3(Path(store.root))
    assert LocalStore(store.root).list("s") == metas
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        listings = db.execute("SELECT listing FROM spill ORDER BY created_at").fetchall()
    assert [LISTING.unpack(row[0])[-1] for row in listings] == [0, 1, 1, 1, 1, 0]


def test_a_version_3_catalog_that_cannot_be_written_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog without listings that cannot be written now (here another connection
    holds the write lock and the store does not wait) is not upgraded: it still lists
    and reads everything, from whole rows."""
    store = LocalStore(tmp_path / "store")
    metas = _varied(store)
    _as_version_3(Path(store.root))
    monkeypatch.setattr(local_db, "BUSY_TIMEOUT_SECONDS", 0)
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("BEGIN IMMEDIATE")
        fresh = LocalStore(store.root)
        assert fresh.list("s") == metas
        assert fresh.list() == metas
        _same(fresh.stat(metas[1].spill_id), metas[1])
        assert fresh.read_bytes(metas[0].spill_id, 0, 100) == b"plain\n"
        db.execute("ROLLBACK")
        version = db.execute("PRAGMA user_version").fetchone()[0]
    assert version == 3


def test_check_finds_a_listing_that_disagrees_with_its_columns(tmp_path: Path) -> None:
    """The columns are the truth: a listing that says otherwise (or none) is reported by
    check and rewritten by check --fix, and the list then says what the columns say."""
    store = LocalStore(tmp_path / "store")
    metas = _varied(store)
    wrong = LISTING.pack(999, 9, 9, 1.0, b"\0" * 32, 0)
    with closing(sqlite3.connect(Path(store.root) / "catalog.sqlite3")) as db:
        db.execute("UPDATE spill SET listing = ? WHERE tool_call_id = '1'", (wrong,))
        db.execute("UPDATE spill SET listing = NULL WHERE tool_call_id = '3'")
        db.commit()
    assert LocalStore(store.root).list("s")[0].total_bytes == 999
    report = LocalStore(store.root).check()
    stale = sorted(p.where for p in report.problems if "listing" in p.detail)
    assert stale == sorted(f"s/{metas[n].spill_id}" for n in (0, 2))
    assert not report.ok
    assert LocalStore(store.root).check(fix=True).problems
    assert LocalStore(store.root).check().ok
    assert LocalStore(store.root).list("s") == metas
