"""S3Store beyond the shared contract: layout, keys, streaming, fleets, cleanup, tools.

The contract suite (tests/stores/test_store_contract.py) already runs over S3 through the
``any_store`` fixture; these tests pin what only an object store has: key validation, the
delimiter, multipart streaming, ranged reads, conditional create between workers,
orphans of dead writers, the cleaner's lease, and the recovery tools on top.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import obstore
import pytest

import spillstore._stores.s3_io as s3_io
from spillstore._core.index import INDEX_BLOCK_BYTES
from spillstore._errors import ConfigError, SpillExpired, SpillNotFound, StoreError
from spillstore._stores.base import Store
from spillstore._stores.memory import MemoryStore
from spillstore._stores.s3_bucket import Sidecar
from spillstore._tools.spill_tools import SpillTools
from spillstore.s3 import S3Store, check_key

if TYPE_CHECKING:
    from tests.backends import FakeClock
    from tests.stores.s3_server import FaultProxy


MakeS3 = Callable[..., S3Store]
BUCKET = "b"
REGION = "us-east-1"
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing"}

KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}


def _log(lines: int, width: int = 30) -> bytes:
    return b"".join(b"%07d " % n + b"x" * (width - 9) + b"\n" for n in range(lines))


def _keys(store: S3Store, under: str = "") -> list[str]:
    """Every object key below the store's prefix (relative), sorted."""
    listing = obstore.list(store._bucket.objects, under or None).collect()
    return sorted(obj["path"] for obj in listing)


def _text(result: object) -> str:
    (part,) = result.content  # type: ignore[attr-defined]
    return part.text  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize(
    "key",
    ["", "a/../b", "..", "a/./b", "a//b", "/a", "a/", "a\\b", "a\x00b", "a\nb", "\x7f", "k" * 1025],
)
def test_unsafe_keys_are_refused(key: str) -> None:
    """Empty, '.' or '..' segments, backslashes, NUL, control characters and long keys."""
    with pytest.raises(ConfigError):
        check_key(key)


def test_safe_keys_pass() -> None:
    """Ordinary keys, up to S3's 1,024 bytes, pass unchanged."""
    for key in ["s1/bash-0123456789abcdef0123.json", "a.b/c-d_e", "é" * 512]:
        assert check_key(key) == key


@pytest.mark.parametrize(
    "prefix", ["a/../b", "..", "x\\y", "x\x00y", "a//b", "p" * 1000, "tab\there"]
)
def test_bad_prefixes_are_config_errors(prefix: str) -> None:
    """The configured prefix is validated like every key before anything is sent."""
    with pytest.raises(ConfigError) as caught:
        S3Store(BUCKET, prefix=prefix, endpoint="http://127.0.0.1:9", region=REGION)
    assert caught.value.field == "prefix"


def test_prefix_slashes_are_trimmed_and_root_allowed() -> None:
    """'/team/spills/' means 'team/spills'; '' stores at the bucket root."""
    kw = {"endpoint": "http://127.0.0.1:9", "region": REGION, "config": CREDENTIALS}
    assert S3Store(BUCKET, prefix="/team/spills/", **kw).prefix == "team/spills"  # type: ignore[arg-type]
    assert S3Store(BUCKET, prefix="", **kw).prefix == ""  # type: ignore[arg-type]
    assert repr(S3Store(BUCKET, **kw)) == f"S3Store(bucket={BUCKET!r}, prefix='spillstore')"  # type: ignore[arg-type]


def test_bad_upload_settings_are_config_errors() -> None:
    """Parts below S3's 5 MiB minimum, or no upload concurrency, are refused."""
    kw = {"endpoint": "http://127.0.0.1:9", "region": REGION}
    with pytest.raises(ConfigError, match="part_bytes"):
        S3Store(BUCKET, part_bytes=1 << 20, **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="upload_concurrency"):
        S3Store(BUCKET, upload_concurrency=0, **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="bucket"):
        S3Store("", **kw)  # type: ignore[arg-type]


def test_missing_obstore_names_the_extra() -> None:
    """Without obstore, importing spillstore.s3 says exactly what to install."""
    code = "import sys; sys.modules['obstore'] = None; import spillstore.s3"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode != 0
    assert 'pip install "spillstore[s3]"' in result.stderr


# --------------------------------------------------------------------------- layout


def test_layout_sidecar_index_and_data_under_the_session(s3_store: S3Store) -> None:
    """A spill is a sidecar, an index and a data object under its session, plus an id entry."""
    meta = s3_store.put(b"hello\n", **KW)
    keys = _keys(s3_store)
    assert f"s1/{meta.spill_id}.json" in keys
    assert f"_ids/{meta.spill_id}" in keys
    data = [k for k in keys if k.startswith("s1/data/")]
    assert len(data) == 2 and {k.rsplit(".", 1)[1] for k in data} == {"out", "idx"}
    assert meta.path is None


def test_session_listing_uses_the_delimiter(s3_store: S3Store) -> None:
    """Session s1 never lists s10 (or s1.x), and all-sessions lists every one."""
    ids = {
        session: s3_store.put(b"x", session=session, tool_name="t", tool_call_id="c").spill_id
        for session in ["s1", "s10", "s1.x", "s"]
    }
    assert [m.spill_id for m in s3_store.list("s1")] == [ids["s1"]]
    assert [m.spill_id for m in s3_store.list("s")] == [ids["s"]]
    assert {m.spill_id for m in s3_store.list()} == set(ids.values())


# --------------------------------------------------------------------------- writing


def test_large_output_streams_as_multipart_before_commit(
    make_s3: MakeS3, fault_proxy: FaultProxy
) -> None:
    """Parts are uploaded while the output is still being written: it is never buffered whole."""
    store = make_s3(endpoint=fault_proxy.url, part_bytes=5 << 20)
    piece = _log(35_000)  # ~1 MB
    with store.writer(**KW, retention_bytes=None) as writer:
        for _ in range(30):
            writer.write(piece)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = [r for r in fault_proxy.requests if "partNumber=" in r.path]
            if len(parts) >= 2:
                break
            time.sleep(0.05)
        assert len(parts) >= 2, fault_proxy.requests
        assert store.list() == []  # nothing visible before the commit
        meta = writer.commit()
    assert meta.total_bytes == 30 * len(piece)
    assert store.read_bytes(meta.spill_id, 0, 100) == piece[:100]
    assert store.read_bytes(meta.spill_id, meta.total_bytes - 60, meta.total_bytes) == piece[-60:]


def test_abandoned_writer_aborts_its_upload(make_s3: MakeS3) -> None:
    """A writer left without commit after parts went up leaves no object and no open upload."""
    store = make_s3(part_bytes=5 << 20)
    with store.writer(**KW, retention_bytes=None) as writer:
        writer.write(b"y" * (12 << 20))
    assert _keys(store) == []
    assert store.list() == []


def test_a_different_spill_is_never_written_over_an_id(s3_store: S3Store) -> None:
    """If an id's sidecar holds other content, the put fails and the sidecar is untouched."""
    planned = MemoryStore().put(b"mine\n", **KW)
    forged = planned.model_copy(update={"sha256": "0" * 64})
    key = f"s1/{planned.spill_id}.json"
    body = Sidecar(data="f" * 32, meta=forged).model_dump_json().encode()
    obstore.put(s3_store._bucket.objects, key, body)
    with pytest.raises(StoreError, match="taken by other content"):
        s3_store.put(b"mine\n", **KW)
    assert bytes(obstore.get(s3_store._bucket.objects, key).bytes()) == body
    assert [k for k in _keys(s3_store) if "/data/" in k] == []


def test_identical_puts_from_two_workers_share_one_spill(make_s3: MakeS3) -> None:
    """Two workers putting the same output race to one sidecar; the loser drops its copy."""
    workers = [make_s3(), make_s3()]
    data = _log(20_000)
    results: list[str] = []
    barrier = threading.Barrier(2)

    def put(store: S3Store) -> None:
        barrier.wait()
        results.append(store.put(data, **KW).spill_id)

    threads = [threading.Thread(target=put, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1
    assert len([k for k in _keys(workers[0]) if k.endswith(".out")]) == 1
    assert workers[1].read_bytes(results[0], 0, len(data)) == data


# --------------------------------------------------------------------------- reading


def test_reads_are_ranged_gets(make_s3: MakeS3, fault_proxy: FaultProxy) -> None:
    """A page deep in a spill fetches an index block or two and the page, never the object."""
    store = make_s3(endpoint=fault_proxy.url)
    data = _log(60_000)  # 1.8 MB
    meta = store.put(data, **KW, retention_bytes=None)
    reader = make_s3(endpoint=fault_proxy.url)  # a cold worker
    fault_proxy.requests.clear()
    page = reader.read_lines(meta.spill_id, 30_000, 2_000)
    lines = data.splitlines(keepends=True)
    assert page.data == b"".join(lines[29_999:31_999])
    data_gets = [r for r in fault_proxy.requests if r.method == "GET" and r.path.endswith(".out")]
    assert 1 <= len(data_gets) <= 2  # the first index block, then up to the last one
    assert all(r.range is not None for r in data_gets)
    fetched = 0
    for request in data_gets:
        assert request.range is not None
        first, last = request.range.removeprefix("bytes=").split("-")
        fetched += int(last) - int(first) + 1
    assert fetched <= len(page.data) + 2 * INDEX_BLOCK_BYTES
    assert reader.read_bytes(meta.spill_id, 900_000, 900_030) == data[900_000:900_030]


def test_segments_spool_large_spills_to_an_mmap(
    s3_store: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the spool threshold Grep's buffers are an mmap of a temp file, not RAM copies."""
    data = _log(10_000)
    meta = s3_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    monkeypatch.setattr(s3_io, "SPOOL_MIN_BYTES", 1000)
    with s3_store.segments(meta.spill_id) as segments:
        assert [start for start, _ in segments] == [0, len(data) - 30_000]
        for start, view in segments:
            assert type(view.obj).__name__ == "mmap"
            assert bytes(view) == data[start : start + len(view)]
    monkeypatch.setattr(s3_io, "SPOOL_MIN_BYTES", 1 << 30)
    with s3_store.segments(meta.spill_id) as segments:
        assert all(isinstance(view.obj, bytes) for _, view in segments)


# --------------------------------------------------------------------------- fleets


def test_a_spill_written_by_one_worker_is_read_and_expired_on_another(
    make_s3: MakeS3, clock: FakeClock
) -> None:
    """Worker B's spill reads on worker A (cold caches); A's delete is 'expired' on B."""
    worker_b = make_s3(clock=clock)
    worker_a = make_s3(clock=clock)
    data = _log(5_000)
    meta = worker_b.put(data, **KW)
    assert worker_a.stat(meta.spill_id) == meta
    assert worker_a.read_lines(meta.spill_id, 4_999, 5).data == data[-60:]
    assert [m.spill_id for m in worker_a.list("s1")] == [meta.spill_id]
    assert worker_a.delete(meta.spill_id)
    with pytest.raises(SpillExpired, match="deleted"):
        worker_b.read_bytes(meta.spill_id, 0, 10)
    with pytest.raises(SpillExpired):
        worker_b.read_lines(meta.spill_id, 1, 1)


def test_unknown_id_is_not_found_not_expired(s3_store: S3Store) -> None:
    """An id that never existed is SpillNotFound, even when a dead writer left its id entry."""
    dead = "bash-" + "a" * 20
    obstore.put(s3_store._bucket.objects, f"_ids/{dead}", b"s1")
    for spill_id in [dead, "bash-" + "b" * 20]:
        with pytest.raises(SpillNotFound) as caught:
            s3_store.stat(spill_id)
        assert not isinstance(caught.value, SpillExpired)


# --------------------------------------------------------------------------- cleanup


def _orphan(store: S3Store, session: str = "s1") -> str:
    key = f"{session}/data/{'e' * 32}.out"
    obstore.put(store._bucket.objects, key, b"left by a writer that died")
    return key


def test_gc_removes_orphans_of_dead_writers_after_the_grace(s3_store: S3Store) -> None:
    """Unreferenced data objects go once older than the grace; referenced ones never."""
    kept = s3_store.put(b"kept\n", **KW)
    key = _orphan(s3_store)
    young = s3_store.gc(now=time.time(), grace=600)
    assert young.entries == ()
    report = s3_store.gc(now=time.time() + 3600, grace=600)
    assert [(e.name, e.reason, e.spill_id) for e in report.entries] == [
        ("data/" + "e" * 32 + ".out", "orphan_temp", None)
    ]
    assert key not in _keys(s3_store)
    assert s3_store.read_bytes(kept.spill_id, 0, 5) == b"kept\n"


def test_leftover_scan_never_trusts_a_stale_token(make_s3: MakeS3, clock: FakeClock) -> None:
    """A token cached before another worker removed and re-stored a spill is not trusted.

    gc lists (and so re-reads) every sidecar before it looks for leftovers, so this calls
    the leftover scan itself, as a cleaner whose listing raced with that worker would.
    """
    worker_a, worker_b = make_s3(clock=clock), make_s3(clock=clock)
    data = _log(1_000)
    meta = worker_a.put(data, **KW)
    worker_b.delete(meta.spill_id)
    again = worker_b.put(data, **KW)  # same id, same created_at, new data objects
    assert again.spill_id == meta.spill_id
    assert worker_a._orphans(None, now=time.time() + 3600, grace=600) == []
    assert worker_a.gc(now=time.time() + 3600, grace=600).entries == ()
    assert worker_b.read_bytes(again.spill_id, 0, len(data)) == data


def test_clean_takes_the_session_prefix_and_nothing_else(s3_store: S3Store) -> None:
    """clean(session) removes its spills and old orphans; other sessions stay whole."""
    gone = s3_store.put(b"a\n", session="s1", tool_name="t", tool_call_id="1")
    stays = s3_store.put(b"b\n", session="s10", tool_name="t", tool_call_id="2")
    _orphan(s3_store, "s1")
    report = s3_store.clean("s1", grace=0)
    assert report.spill_ids == (gone.spill_id,)
    assert [k for k in _keys(s3_store, "s1") if not k.endswith(".gone")] == []
    assert s3_store.read_bytes(stays.spill_id, 0, 2) == b"b\n"


def test_gc_prunes_old_tombstones_and_their_id_entries(make_s3: MakeS3) -> None:
    """After the tombstone TTL a removed id is forgotten entirely; live spills keep theirs."""
    store = make_s3(tombstone_ttl=60.0)
    removed = store.put(b"old\n", **KW)
    live = store.put(b"new\n", **{**KW, "tool_call_id": "2"})
    store.delete(removed.spill_id)
    store.gc(now=time.time() + 3600, grace=1e9)
    assert f"s1/{removed.spill_id}.gone" not in _keys(store)
    assert f"_ids/{removed.spill_id}" not in _keys(store)
    with pytest.raises(SpillNotFound) as caught:
        make_s3().stat(removed.spill_id)
    assert not isinstance(caught.value, SpillExpired)
    assert store.stat(live.spill_id) == live


def test_one_cleaner_at_a_time_and_lapsed_leases_are_taken_over(
    make_s3: MakeS3, clock: FakeClock
) -> None:
    """gc waits while another cleaner's lease is live, and takes it over once it lapses."""
    store = make_s3(clock=clock)
    store.put(b"x\n", **KW)
    lease = b'{"owner": "another worker", "expires_at": %f}' % (clock.now + 100)
    obstore.put(store._bucket.objects, "_cleaner.lock", lease)
    done = threading.Event()

    def cleaner() -> None:
        store.gc(max_files=0, grace=0)
        done.set()

    thread = threading.Thread(target=cleaner)
    thread.start()
    assert not done.wait(0.5)  # still waiting on the live lease
    assert len(store.list()) == 1
    clock.advance(200)
    thread.join(30)
    assert done.is_set()
    assert store.list() == []
    assert "_cleaner.lock" not in _keys(store)  # released


# --------------------------------------------------------------------------- tools


def test_read_tool_pages_a_spill_on_s3(make_s3: MakeS3) -> None:
    """SpillTools.read pages an S3 spill exactly as it pages a local one."""
    store: Store = make_s3()
    data = _log(3_000)
    meta = store.put(data, session="default", tool_name="bash", tool_call_id="c")
    text = _text(SpillTools(store).read(meta.spill_id, offset=1_500, limit=3))
    assert "lines 1500-1502 of 3000" in text
    assert "0001499 xxx" in text and "0001501 xxx" in text


def test_grep_tool_finds_lines_on_s3(make_s3: MakeS3) -> None:
    """SpillTools.grep searches S3 spills with true line numbers, session-wide."""
    store: Store = make_s3()
    store.put(_log(3_000), session="default", tool_name="bash", tool_call_id="c")
    text = _text(SpillTools(store).grep("0002345 "))
    assert ":2346:0002345 x" in text


def test_list_tool_lists_the_session_on_s3(make_s3: MakeS3) -> None:
    """SpillTools.list shows this session's S3 spills and no other session's."""
    store: Store = make_s3()
    meta = store.put(b"first\n", session="default", tool_name="bash", tool_call_id="c1")
    store.put(b"other\n", session="default0", tool_name="bash", tool_call_id="c2")
    text = _text(SpillTools(store).list())
    assert meta.spill_id in text and "spills 1-1 of 1" in text
    assert 'first line: "first"' in text


# --------------------------------------------------------------------------- async


@pytest.mark.anyio
async def test_async_twins_over_s3(s3_store: S3Store) -> None:
    """The async API reads, lists and removes S3 spills like the sync one."""
    data = _log(4_000)
    meta = await s3_store.aput(data, **KW)
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    assert await s3_store.astat(meta.spill_id) == meta
    assert await s3_store.aread_bytes(meta.spill_id, 30, 60) == data[30:60]
    page = await s3_store.aread_lines(meta.spill_id, 3_999, 10)
    assert page.data == data[-60:]
    assert [m.spill_id for m in await s3_store.alist("s1")] == [meta.spill_id]
    assert await s3_store.adelete(meta.spill_id)
    with pytest.raises(SpillExpired):
        await s3_store.astat(meta.spill_id)
