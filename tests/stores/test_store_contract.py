"""The store contract: every backend passes the same tests (house-style 6)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spillstore._core.ids import is_spill_id
from spillstore._core.index import count_lines
from spillstore._errors import (
    ConfigError,
    InvalidSpillId,
    PathOutsideStore,
    RangeNotStored,
    SpillExpired,
    SpillNotFound,
    UsageError,
)
from spillstore._stores.base import Store

if TYPE_CHECKING:
    from tests.backends import FakeClock, StoreFactory


KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}


def _log(lines: int, width: int = 30) -> bytes:
    return b"".join(b"%07d " % n + b"x" * (width - 9) + b"\n" for n in range(lines))


def _stored(store: Store, spill_id: str) -> list[bytes]:
    meta = store.stat(spill_id)
    return [store.read_bytes(spill_id, a, b) for a, b in meta.stored_ranges]


# --------------------------------------------------------------------------- round trips


def test_bytes_round_trip_exact(any_store: Store, clock: FakeClock) -> None:
    """Bytes put into a store read back identical, with exact metadata."""
    data = b"alpha\nbeta\r\ngamma \x00 \xc3\xa9"
    meta = any_store.put(data, **KW, retention_bytes=None)
    assert any_store.read_bytes(meta.spill_id, 0, len(data)) == data
    assert meta.total_bytes == len(data)
    assert meta.total_lines == 3
    assert meta.stored_ranges == ((0, len(data)),)
    assert meta.complete and meta.stored_bytes == len(data)
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    assert meta.created_at == clock.now
    assert (meta.session, meta.tool_name, meta.tool_call_id) == ("s1", "bash", "call-1")
    assert not meta.invalid_utf8
    assert any_store.stat(meta.spill_id) == meta


def test_str_round_trip_is_utf8(any_store: Store) -> None:
    """A str is stored as its UTF-8 bytes, sizes counted in bytes."""
    text = "caf\u00e9 \U0001f600\nline two\n"
    meta = any_store.put(text, **KW)
    assert any_store.read_bytes(meta.spill_id, 0, 10**9) == text.encode()
    assert meta.total_bytes == len(text.encode())
    assert meta.total_lines == 2


def test_stream_of_mixed_chunks(any_store: Store) -> None:
    """An iterable of bytes and str chunks (split mid-character) is stored in order."""
    whole = "h\u00e9llo \U0001f600 w\u00f6rld\n".encode() * 50

    def chunks() -> Iterator[bytes | str]:
        for i in range(0, len(whole), 7):
            yield whole[i : i + 7]
        yield "tail \u20ac"

    meta = any_store.put(chunks(), **KW)
    expected = whole + "tail \u20ac".encode()
    assert any_store.read_bytes(meta.spill_id, 0, meta.total_bytes) == expected
    assert meta.sha256 == hashlib.sha256(expected).hexdigest()
    assert not meta.invalid_utf8


def test_writer_streams_and_commits(any_store: Store) -> None:
    """The writer accepts chunks, then commit makes the spill visible with its suffix."""
    with any_store.writer(**KW) as w:
        w.write(b"one\n")
        w.write(bytearray(b"two\n"))
        w.write(memoryview(b"three"))
        assert w.total_bytes == 13
        meta = w.commit(suffix="exit code 1", media_notes=("image/png 10 bytes",))
    assert any_store.read_bytes(meta.spill_id, 0, 100) == b"one\ntwo\nthree"
    assert meta.suffix == "exit code 1"
    assert meta.media_notes == ("image/png 10 bytes",)


def test_writer_left_uncommitted_leaves_nothing(any_store: Store) -> None:
    """Leaving the writer without commit (or aborting) leaves no spill."""
    with any_store.writer(**KW) as w:
        w.write(b"x" * 5000)
    with pytest.raises(RuntimeError), any_store.writer(**KW) as w2:
        w2.write(b"y")
        raise RuntimeError("tool crashed")
    w3 = any_store.writer(**KW)
    w3.write(b"z")
    w3.abort()
    w3.abort()
    with pytest.raises(UsageError):
        w3.write(b"more")
    assert any_store.list() == []


def test_identical_put_is_idempotent(any_store: Store) -> None:
    """Putting the same output for the same call twice gives one spill, the same id."""
    first = any_store.put(b"same\n", **KW)
    second = any_store.put(b"same\n", **KW)
    other = any_store.put(b"same\n", **{**KW, "tool_call_id": "call-2"})
    assert first.spill_id == second.spill_id
    assert other.spill_id != first.spill_id
    assert {m.spill_id for m in any_store.list()} == {first.spill_id, other.spill_id}


def test_ids_never_carry_raw_names(any_store: Store) -> None:
    """Ids come from a sanitized, bounded stem whatever the tool name holds."""
    for name in ["../../etc/passwd", "Bash", "a" * 200, "", "\x00/\\..", "mcp__gh__search"]:
        meta = any_store.put(b"x", session="s1", tool_name=name, tool_call_id="../c\x00")
        assert is_spill_id(meta.spill_id), meta.spill_id
        assert "/" not in meta.spill_id and ".." not in meta.spill_id
        assert meta.tool_name == name
        assert any_store.read_bytes(meta.spill_id, 0, 1) == b"x"


# --------------------------------------------------------------------------- retention


def test_retention_keeps_head_and_tail(any_store: Store) -> None:
    """Past the cap the first R-K and last K bytes are stored; totals stay true."""
    data = _log(10_000)  # 300,000 ASCII bytes
    total = len(data)
    meta = any_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    assert meta.stored_ranges == ((0, 70_000), (total - 30_000, total))
    assert not meta.complete
    assert meta.total_bytes == total
    assert meta.total_lines == 10_000
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    assert _stored(any_store, meta.spill_id) == [data[:70_000], data[-30_000:]]


def test_read_in_gap_names_the_exact_unstored_range(any_store: Store) -> None:
    """A read touching the gap raises RangeNotStored with exactly the unstored part."""
    data = _log(10_000)
    meta = any_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    (_, head_end), (tail_start, _) = meta.stored_ranges
    cases = [
        ((head_end - 5, head_end + 5), (head_end, head_end + 5)),
        ((0, len(data)), (head_end, tail_start)),
        ((tail_start - 1, tail_start + 10), (tail_start - 1, tail_start)),
        ((150_000, 150_001), (150_000, 150_001)),
    ]
    for (start, end), (gap_start, gap_end) in cases:
        with pytest.raises(RangeNotStored) as caught:
            any_store.read_bytes(meta.spill_id, start, end)
        assert (caught.value.start, caught.value.end) == (gap_start, gap_end)
        assert caught.value.spill_id == meta.spill_id
        assert f"[{gap_start}, {gap_end})" in str(caught.value)
    assert (
        any_store.read_bytes(meta.spill_id, head_end - 3, head_end) == data[head_end - 3 : head_end]
    )


def test_retention_cuts_on_utf8_boundaries(any_store: Store) -> None:
    """Head and tail cuts never split a UTF-8 sequence, even mid 4-byte character."""
    for char in ["\u00e9", "\u20ac", "\U0001f600"]:
        data = (char * 20_000).encode()
        meta = any_store.put(
            data, session="s1", tool_name="t", tool_call_id=char,
            retention_bytes=10_001, retained_tail_bytes=3_001,
        )  # fmt: skip
        (h0, h1), (t0, t1) = meta.stored_ranges
        assert h0 == 0 and t1 == len(data)
        assert 7_000 - 3 <= h1 <= 7_000
        assert len(data) - 3_001 <= t0 <= len(data) - 3_001 + 3
        head, tail = _stored(any_store, meta.spill_id)
        assert head.decode() and tail.decode()  # strict: raises if split
        assert meta.stored_bytes <= 10_001


def test_retention_edge_cases(any_store: Store) -> None:
    """Output exactly at the cap is complete; one byte over cuts; K=0 keeps only the head."""
    at_cap = any_store.put(b"a" * 100, **KW, retention_bytes=100, retained_tail_bytes=10)
    assert at_cap.stored_ranges == ((0, 100),)
    over = any_store.put(b"a" * 101, **KW, retention_bytes=100, retained_tail_bytes=10)
    assert over.stored_ranges == ((0, 90), (91, 101))
    head_only = any_store.put(b"b" * 500, **KW, retention_bytes=100, retained_tail_bytes=0)
    assert head_only.stored_ranges == ((0, 100),)
    tail_only = any_store.put(b"c" * 500, **KW, retention_bytes=100, retained_tail_bytes=100)
    assert tail_only.stored_ranges == ((400, 500),)
    nothing = any_store.put(b"d" * 500, **KW, retention_bytes=0, retained_tail_bytes=0)
    assert nothing.stored_ranges == ()
    assert nothing.total_bytes == 500
    with pytest.raises(RangeNotStored):
        any_store.read_bytes(nothing.spill_id, 0, 1)


def test_store_default_retention(make_any_store: StoreFactory) -> None:
    """The store's own retention applies when put() is not told otherwise."""
    store = make_any_store(retention_bytes=1000, retained_tail_bytes=100)
    meta = store.put(b"z" * 5000, **KW)
    assert meta.stored_ranges == ((0, 900), (4900, 5000))
    full = store.put(b"z" * 5000, **KW, retention_bytes=None)
    assert full.complete


def test_read_bytes_clamps_and_rejects_negatives(any_store: Store) -> None:
    """End is clamped to the size; an empty or past-the-end range reads nothing."""
    meta = any_store.put(b"0123456789", **KW)
    assert any_store.read_bytes(meta.spill_id, 5, 1000) == b"56789"
    assert any_store.read_bytes(meta.spill_id, 10, 20) == b""
    assert any_store.read_bytes(meta.spill_id, 7, 3) == b""
    with pytest.raises(ConfigError):
        any_store.read_bytes(meta.spill_id, -1, 3)


# --------------------------------------------------------------------------- lines


def test_read_lines_pages(any_store: Store) -> None:
    """Line pages hold exact lines and say where to continue; the last line may lack a newline."""
    data = b"one\ntwo\nthree\nfour"
    meta = any_store.put(data, **KW)
    page = any_store.read_lines(meta.spill_id, 2, 2)
    assert (page.first_line, page.last_line) == (2, 3)
    assert page.data == b"two\nthree\n"
    assert (page.start_byte, page.end_byte) == (4, 14)
    assert page.next_line == 4 and page.next_byte == 14
    last = any_store.read_lines(meta.spill_id, 4, 10)
    assert last.data == b"four" and (last.first_line, last.last_line) == (4, 4)
    assert not last.last_line_partial and last.next_line is None and last.next_byte is None
    beyond = any_store.read_lines(meta.spill_id, 5, 1)
    assert beyond.data == b"" and beyond.last_line == 4 and beyond.next_line is None
    with pytest.raises(ConfigError):
        any_store.read_lines(meta.spill_id, 0, 1)
    with pytest.raises(ConfigError):
        any_store.read_lines(meta.spill_id, 1, 0)


def test_read_lines_deep_in_a_large_spill(any_store: Store) -> None:
    """Reading lines far into a multi-block spill gives exactly those lines."""
    data = _log(60_000)  # 1.8 MB, many index blocks
    meta = any_store.put(data, **KW, retention_bytes=None)
    lines = data.splitlines(keepends=True)
    for first in [1, 2, 1000, 33_333, 59_990]:
        page = any_store.read_lines(meta.spill_id, first, 20)
        assert page.data == b"".join(lines[first - 1 : first + 19])
        assert page.last_line == min(first + 19, 60_000)


def test_read_lines_after_the_gap_have_true_numbers(any_store: Store) -> None:
    """Lines after the gap keep their true numbers; a request in the gap skips to the tail."""
    data = _log(10_000)  # 30-byte lines
    meta = any_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    lines = data.splitlines(keepends=True)
    tail_first = 10_000 - 1_000 + 1  # the tail holds exactly the last 1,000 lines
    page = any_store.read_lines(meta.spill_id, 9_500, 3)
    assert page.data == b"".join(lines[9_499:9_502])
    assert page.first_line == 9_500 and page.gap is None
    skipped = any_store.read_lines(meta.spill_id, 5_000, 2)
    assert skipped.first_line == tail_first
    assert skipped.gap == meta.stored_ranges[0][1:] + meta.stored_ranges[1][:1]
    assert skipped.data == b"".join(lines[tail_first - 1 : tail_first + 1])
    assert not skipped.first_line_partial
    stop = any_store.read_lines(meta.spill_id, 2_330, 100)  # head ends inside line 2,334
    assert stop.gap == (70_000, 270_000)
    assert stop.last_line == 2_334 and stop.last_line_partial
    assert stop.data == data[2_329 * 30 : 70_000]
    assert stop.next_byte == 270_000


def test_read_lines_max_bytes_cuts_long_lines_safely(any_store: Store) -> None:
    """max_bytes returns fewer whole lines, or cuts one long line on a UTF-8 boundary."""
    data = b"short\n" + ("\U0001f600" * 100).encode() + b"\nend\n"
    meta = any_store.put(data, **KW)
    two = any_store.read_lines(meta.spill_id, 1, 3, max_bytes=50)
    assert two.data == b"short\n" and two.last_line == 1 and two.next_line == 2
    cut = any_store.read_lines(meta.spill_id, 2, 1, max_bytes=10)
    assert cut.data == ("\U0001f600" * 2).encode()
    assert cut.last_line_partial and cut.next_byte == 6 + 8 and cut.next_line == 3


def test_line_of_offset(any_store: Store) -> None:
    """line_of_offset gives the 1-based line of a byte, also after the gap."""
    data = _log(10_000)
    meta = any_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    for offset in [0, 29, 30, 69_999, 270_000, 299_999, 300_000]:
        expected = min(data.count(b"\n", 0, offset) + 1, 10_000)
        assert any_store.line_of_offset(meta.spill_id, offset) == expected
    with pytest.raises(RangeNotStored):
        any_store.line_of_offset(meta.spill_id, 100_001)
    with pytest.raises(ConfigError):
        any_store.line_of_offset(meta.spill_id, 300_001)


# --------------------------------------------------------------------------- odd outputs


def test_invalid_utf8_is_flagged_and_stored_raw(any_store: Store) -> None:
    """Invalid UTF-8 is stored byte for byte and flagged; valid input split mid-char is not."""
    bad = any_store.put([b"ok \xff", b"\xfe\n"], **KW)
    assert bad.invalid_utf8
    assert any_store.read_bytes(bad.spill_id, 0, 100) == b"ok \xff\xfe\n"
    split = "\U0001f600".encode()
    good = any_store.put([split[:1], split[1:3], split[3:]], **KW)
    assert not good.invalid_utf8
    truncated = any_store.put([b"abc", split[:2]], **KW)
    assert truncated.invalid_utf8


def test_empty_output(any_store: Store) -> None:
    """An empty output is a spill with no bytes, no lines and no stored ranges."""
    meta = any_store.put(b"", **KW)
    assert (meta.total_bytes, meta.total_lines, meta.stored_ranges) == (0, 0, ())
    assert meta.complete
    assert meta.sha256 == hashlib.sha256(b"").hexdigest()
    assert any_store.read_bytes(meta.spill_id, 0, 10) == b""
    page = any_store.read_lines(meta.spill_id, 1, 5)
    assert page.data == b"" and page.next_line is None
    with any_store.segments(meta.spill_id) as segments:
        assert segments == []
    assert any_store.line_of_offset(meta.spill_id, 0) == 1


def test_lone_surrogates_become_fffd(any_store: Store) -> None:
    """Lone surrogates in a str are stored as U+FFFD (3 bytes each), never crashing."""
    meta = any_store.put(["a\ud800b", "\udfff"], **KW)
    stored = any_store.read_bytes(meta.spill_id, 0, 100)
    assert stored == "a\ufffdb\ufffd".encode()
    assert meta.total_bytes == 8
    assert not meta.invalid_utf8


def test_lone_surrogates_in_names_suffix_and_notes_are_stored_as_fffd(
    any_store: Store, tmp_path: Path
) -> None:
    """Names, the suffix and media notes with lone surrogates are recorded as strict
    UTF-8 by every backend, through put and adopt (the local catalog raised
    UnicodeEncodeError), and read back the same from a fresh listing."""
    source = tmp_path / "out.log"
    source.write_bytes(b"adopted\n")
    metas = [
        any_store.put(
            b"x",
            session="s1",
            tool_name="t\ud800",
            tool_call_id="c\udfff",
            suffix="end \udc80",
            media_notes=("image \ud83d",),
        ),
        any_store.adopt(
            source,
            session="s1",
            tool_name="a\ud800",
            tool_call_id="\udfff",
            suffix="\ud800",
        ),
    ]
    assert (metas[0].tool_name, metas[0].tool_call_id) == ("t\ufffd", "c\ufffd")
    assert (metas[0].suffix, metas[0].media_notes) == ("end \ufffd", ("image \ufffd",))
    assert (metas[1].tool_name, metas[1].tool_call_id, metas[1].suffix) == (
        "a\ufffd", "\ufffd", "\ufffd"
    )  # fmt: skip
    listed = {meta.spill_id: meta for meta in any_store.list("s1")}
    for meta in metas:
        assert listed[meta.spill_id] == meta
        assert any_store.stat(meta.spill_id) == meta


def test_line_counting_convention(any_store: Store) -> None:
    """total_lines counts newlines, plus one for a final line without one."""
    for data, lines in [(b"", 0), (b"a", 1), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2)]:
        meta = any_store.put(data, session="s1", tool_name="t", tool_call_id=repr(data))
        assert meta.total_lines == lines == count_lines(data)


# --------------------------------------------------------------------------- segments


def test_segments_expose_stored_ranges_with_line_numbers(any_store: Store) -> None:
    """segments() yields one buffer per stored range; the index numbers their lines."""
    data = _log(10_000)
    meta = any_store.put(data, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    index = any_store.line_index(meta.spill_id)
    with any_store.segments(meta.spill_id) as segments:
        assert [start for start, _ in segments] == [a for a, _ in meta.stored_ranges]
        for start, buffer in segments:
            assert bytes(buffer) == data[start : start + len(buffer)]
            assert index.newlines_at(start) == data.count(b"\n", 0, start)


def test_scan_data_yields_each_spills_stored_bytes_from_the_metadata_given(
    any_store: Store,
) -> None:
    """scan_data() yields every listed spill's stored ranges, laid out one after another,
    in the order given, and the error of a spill removed since it was listed."""
    whole = _log(10_000)
    cut = any_store.put(whole, **KW, retention_bytes=100_000, retained_tail_bytes=30_000)
    small = any_store.put(b"one\ntwo\n", **KW)
    empty = any_store.put(b"", **KW)
    gone = any_store.put(b"removed after the listing\n", **KW)
    metas = [cut, small, empty, gone]
    any_store.delete(gone.spill_id)
    seen = []
    for meta, data in any_store.scan_data(metas):
        seen.append(meta.spill_id)
        if meta is gone:
            assert isinstance(data, SpillExpired)
            continue
        assert not isinstance(data, Exception)
        assert bytes(data) == b"".join(_stored(any_store, meta.spill_id))
        assert any_store.line_index_of(meta).describes(meta.total_bytes, meta.total_lines)
    assert seen == [m.spill_id for m in metas]


# --------------------------------------------------------------------------- names


def test_resolve_and_invalid_ids(any_store: Store) -> None:
    """resolve accepts a real id; malformed ids and unknown ids raise distinct errors."""
    meta = any_store.put(b"x", **KW)
    assert any_store.resolve(meta.spill_id) == meta.spill_id
    for bad in [
        "..",
        "../x",
        "bash-0123",
        "BASH-0123456789abcdef0123",
        "bash_0123456789abcdef0123",
    ]:
        with pytest.raises(InvalidSpillId):
            any_store.stat(bad)
    with pytest.raises(InvalidSpillId):
        any_store.resolve("not an id")
    with pytest.raises(PathOutsideStore):
        any_store.resolve("bash-0123456789abcdef0123\x00")
    with pytest.raises(PathOutsideStore):
        any_store.resolve("/etc/passwd")
    assert not any_store.is_spill_path("/etc/passwd")
    never = "bash-" + "0" * 20
    with pytest.raises(SpillNotFound) as caught:
        any_store.resolve(never)
    assert not isinstance(caught.value, SpillExpired)


def test_bad_arguments_raise_config_errors(any_store: Store) -> None:
    """Bad sessions and retention values are refused before anything is written."""
    for session in ["", "..", "a/b", ".hidden", "x" * 65, "a..b"]:
        with pytest.raises(ConfigError):
            any_store.put(b"x", session=session, tool_name="t", tool_call_id="c")
    with pytest.raises(ConfigError):
        any_store.put(b"x", **KW, retention_bytes=10, retained_tail_bytes=11)
    with pytest.raises(ConfigError):
        any_store.put(b"x", **KW, retention_bytes=-1)
    with pytest.raises(ConfigError):
        any_store.gc(max_files=-1)
    with pytest.raises(ConfigError):
        any_store.gc(max_age=float("nan"))
    assert any_store.list() == []


# --------------------------------------------------------------------------- cleanup


def _three(store: Store, clock: FakeClock) -> list[str]:
    ids = []
    for n, session in enumerate(["a", "b", "a"]):
        meta = store.put(
            b"x" * (100 * (n + 1)), session=session, tool_name="t", tool_call_id=str(n)
        )
        ids.append(meta.spill_id)
        clock.advance(1000)
    return ids


def test_list_is_oldest_first_and_per_session(any_store: Store, clock: FakeClock) -> None:
    """list() returns spills oldest first, all sessions or one."""
    ids = _three(any_store, clock)
    assert [m.spill_id for m in any_store.list()] == ids
    assert [m.spill_id for m in any_store.list("a")] == [ids[0], ids[2]]
    assert any_store.list("nobody") == []


def test_delete_then_expired(any_store: Store) -> None:
    """A deleted spill raises SpillExpired (saying so); a second delete is not an error."""
    meta = any_store.put(b"bye\n", **KW)
    assert any_store.delete(meta.spill_id) is True
    with pytest.raises(SpillExpired, match=r"expired.*deleted"):
        any_store.stat(meta.spill_id)
    with pytest.raises(SpillExpired):
        any_store.read_bytes(meta.spill_id, 0, 1)
    with pytest.raises(SpillExpired):
        any_store.read_lines(meta.spill_id, 1, 1)
    assert any_store.delete(meta.spill_id) is False
    assert any_store.delete("bash-" + "1" * 20) is False
    again = any_store.put(b"bye\n", **KW)
    assert again.spill_id == meta.spill_id
    assert any_store.read_bytes(again.spill_id, 0, 10) == b"bye\n"


def test_clean_removes_one_session(any_store: Store, clock: FakeClock) -> None:
    """clean(session) removes that session's spills whatever their age, and reports them."""
    ids = _three(any_store, clock)
    fresh = any_store.put(b"new", session="a", tool_name="t", tool_call_id="new")
    report = any_store.clean("a")
    assert report.spill_ids == (ids[0], ids[2], fresh.spill_id)
    assert {e.reason for e in report.entries} == {"session"}
    assert report.bytes_freed == 100 + 300 + 3
    assert [m.spill_id for m in any_store.list()] == [ids[1]]
    with pytest.raises(SpillExpired, match="session was cleaned"):
        any_store.stat(ids[0])


def test_gc_dry_run_removes_nothing(any_store: Store, clock: FakeClock) -> None:
    """A dry run reports exactly what a real run then removes."""
    ids = _three(any_store, clock)
    clock.advance(10_000)
    dry = any_store.gc(max_files=1, dry_run=True)
    assert dry.dry_run and dry.spill_ids == tuple(ids[:2])
    assert len(any_store.list()) == 3
    real = any_store.gc(max_files=1)
    assert not real.dry_run
    assert real.entries == dry.entries
    assert [m.spill_id for m in any_store.list()] == [ids[2]]


def test_gc_respects_grace(any_store: Store, clock: FakeClock) -> None:
    """Nothing younger than the grace period is removed, even with max_files=0."""
    ids = _three(any_store, clock)  # ages now: 3000, 2000, 1000 s
    report = any_store.gc(max_files=0, grace=1500)
    assert report.spill_ids == tuple(ids[:2])
    assert [m.spill_id for m in any_store.list()] == [ids[2]]
    assert any_store.gc(max_files=0, grace=1001).spill_ids == ()
    assert any_store.gc(max_files=0).spill_ids == (ids[2],)  # default grace: 600 s
    assert any_store.list() == []


def test_gc_limits_oldest_first_with_reasons(any_store: Store, clock: FakeClock) -> None:
    """max_age, then max_total_bytes, then max_files remove the oldest, each saying why."""
    ids = [
        any_store.put(b"%d" % n * 100, session="s", tool_name="t", tool_call_id=str(n)).spill_id
        for n in range(6)
        if clock.advance(1000) is None
    ]  # distinct bytes: a store may keep identical bytes once (and count them once)
    now = clock.now + 1000  # ages: 6000 .. 1000
    report = any_store.gc(max_age=5500, max_total_bytes=350, max_files=2, now=now, grace=0)
    assert [(e.spill_id, e.reason) for e in report.entries] == [
        (ids[0], "age"),
        (ids[1], "total_bytes"),
        (ids[2], "total_bytes"),
        (ids[3], "max_files"),
    ]
    assert report.bytes_freed == 400
    assert [m.spill_id for m in any_store.list()] == ids[4:]
    with pytest.raises(SpillExpired, match="max_age"):
        any_store.stat(ids[0])


def test_gc_on_empty_store(any_store: Store) -> None:
    """gc on an empty store reports nothing."""
    report = any_store.gc(max_age=0, grace=0)
    assert report.entries == () and report.bytes_freed == 0


# --------------------------------------------------------------------------- adopt


def test_adopt_a_tool_file(any_store: Store, tmp_path: Path) -> None:
    """A tool's existing output file becomes a spill with the same bytes."""
    source = tmp_path / "tool.log"
    data = _log(2000)
    source.write_bytes(data)
    meta = any_store.adopt(source, **KW)
    assert any_store.read_bytes(meta.spill_id, 0, meta.total_bytes) == data
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    assert meta.total_lines == 2000
    assert any_store.read_lines(meta.spill_id, 1999, 5).data == data[-60:]
    assert source.read_bytes() == data
    moved = tmp_path / "moved.log"
    moved.write_bytes(b"moved\n")
    meta2 = any_store.adopt(moved, **{**KW, "tool_call_id": "2"}, move=True)
    assert not moved.exists()
    assert any_store.read_bytes(meta2.spill_id, 0, 100) == b"moved\n"


def test_adopt_respects_retention(any_store: Store, tmp_path: Path) -> None:
    """A file larger than the cap is copied with the cap, the original untouched."""
    source = tmp_path / "big.log"
    data = _log(1000)
    source.write_bytes(data)
    meta = any_store.adopt(source, **KW, retention_bytes=3000, retained_tail_bytes=1000)
    assert meta.stored_ranges == ((0, 2000), (len(data) - 1000, len(data)))
    assert source.read_bytes() == data


# --------------------------------------------------------------------------- async


async def _agen(parts: list[bytes | str]) -> AsyncIterator[bytes | str]:
    for part in parts:
        yield part


@pytest.mark.anyio
async def test_async_twins_match_sync(
    make_any_store: StoreFactory, clock: FakeClock, tmp_path: Path
) -> None:
    """Every async twin returns what its sync method returns (two stores, two places)."""
    sync_store = make_any_store()
    async_store = make_any_store(under=tmp_path / f"{tmp_path.name}-async")
    data = _log(5000)
    kw = {**KW, "retention_bytes": 50_000, "retained_tail_bytes": 10_000}
    s_meta = sync_store.put(data, **kw)
    a_meta = await async_store.aput(data, **kw)
    assert a_meta.model_dump(exclude={"path"}) == s_meta.model_dump(exclude={"path"})
    sid = a_meta.spill_id
    assert await async_store.astat(sid) == async_store.stat(sid)
    assert await async_store.alist() == async_store.list()
    assert await async_store.aread_bytes(sid, 10, 500) == sync_store.read_bytes(sid, 10, 500)
    assert await async_store.aread_lines(sid, 4900, 10) == sync_store.read_lines(sid, 4900, 10)
    assert await async_store.aline_of_offset(sid, 145_000) == sync_store.line_of_offset(
        sid, 145_000
    )
    assert await async_store.aresolve(sid) == sid
    assert await async_store.ais_spill_path("/nonexistent") is False
    streamed = await async_store.aput(
        _agen([data[:1000], data[1000:].decode()]), **{**kw, "tool_call_id": "other"}
    )
    assert streamed.sha256 == s_meta.sha256
    clock.advance(10_000)
    assert (await async_store.agc(max_files=1, dry_run=True)).spill_ids == (sid,)
    assert await async_store.adelete(sid) is True
    with pytest.raises(SpillExpired):
        await async_store.astat(sid)
    report = await async_store.aclean("s1")
    assert report.spill_ids == (streamed.spill_id,)


@pytest.mark.anyio
async def test_async_writer(any_store: Store, tmp_path: Path) -> None:
    """The async writer batches chunks and commits like the sync one."""
    async with any_store.awriter(**KW) as w:
        for n in range(3000):
            await w.write(f"line {n}\n")
        meta = await w.commit(suffix="done")
    expected = "".join(f"line {n}\n" for n in range(3000)).encode()
    assert any_store.read_bytes(meta.spill_id, 0, meta.total_bytes) == expected
    async with any_store.awriter(**{**KW, "tool_call_id": "dropped"}) as w2:
        await w2.write(b"never committed")
    assert [m.spill_id for m in any_store.list()] == [meta.spill_id]
    source = tmp_path / "a.log"
    source.write_bytes(b"adopted\n")
    adopted = await any_store.aadopt(os.fspath(source), **{**KW, "tool_call_id": "adopt"})
    assert any_store.read_bytes(adopted.spill_id, 0, 100) == b"adopted\n"


@pytest.mark.anyio
async def test_a_finished_writer_refuses_more_with_one_error_type(any_store: Store) -> None:
    """Writing to or committing a committed writer raises UsageError, sync and async alike."""
    with any_store.writer(**KW) as w:
        w.write(b"once\n")
        w.commit()
        with pytest.raises(UsageError, match="committed"):
            w.write(b"twice\n")
        with pytest.raises(UsageError, match="committed"):
            w.commit()
    async with any_store.awriter(**{**KW, "tool_call_id": "async"}) as aw:
        await aw.write(b"once\n")
        await aw.commit()
        with pytest.raises(UsageError, match="committed"):
            await aw.write(b"twice\n")
        with pytest.raises(UsageError, match="committed"):
            await aw.commit()
