"""Properties of the stores, for random outputs, chunkings and caps."""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import tempfile
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spillstore._core.index as index_module
import spillstore._stores.pipeline as pipeline_module
import spillstore._stores.writer as writer_module
from spillstore._core.index import count_lines
from spillstore._errors import RangeNotStored, StoreError, UsageError
from spillstore._stores.base import Store
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta
from spillstore._stores.tally import Tally
from spillstore._stores.writer import Sink, SpillWriter, Utf8Check
from tests.strategies import chunks, hostile_text, retention_limits, spill_outputs

_TMP = tempfile.TemporaryDirectory(prefix="spillstore-props-")
STORES: dict[str, Store] = {
    "memory": MemoryStore(),
    "local": LocalStore(os.path.join(_TMP.name, "files")),
}
_counter = itertools.count()


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _check_spill(store: Store, data: bytes, cap: int | None, tail: int, cuts: list[int]) -> None:
    meta = store.put(
        chunks(data, cuts),
        session="props",
        tool_name="t",
        tool_call_id=str(next(_counter)),
        retention_bytes=cap,
        retained_tail_bytes=tail,
    )
    total = len(data)
    assert meta.total_bytes == total
    assert meta.total_lines == count_lines(data)
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    try:
        data.decode()
        assert not meta.invalid_utf8
    except UnicodeDecodeError:
        assert meta.invalid_utf8
    if cap is not None:
        assert meta.stored_bytes <= cap
    if cap is None or total <= cap:
        assert meta.complete
    for start, end in meta.stored_ranges:
        assert store.read_bytes(meta.spill_id, start, end) == data[start:end]
    for gap_start, gap_end in meta.gaps:
        with pytest.raises(RangeNotStored) as caught:
            store.read_bytes(meta.spill_id, max(0, gap_start - 1), gap_end + 1)
        assert (caught.value.start, caught.value.end) == (gap_start, gap_end)
    # Page through every line with small pages; each page is exact and positioned.
    fully_stored = {
        n + 1
        for n, (s, e) in enumerate(_line_spans(data))
        if any(a <= s and e <= b for a, b in meta.stored_ranges)
    }
    seen: set[int] = set()
    line: int | None = 1 if meta.total_lines else None
    last_end = -1
    while line is not None:
        page = store.read_lines(meta.spill_id, line, 3)
        if not page.data:
            assert page.gap is not None or page.first_line > meta.total_lines
            break
        assert page.start_byte >= last_end
        last_end = page.end_byte
        assert page.data == data[page.start_byte : page.end_byte]
        assert page.first_line == _line_of(data, page.start_byte)
        assert page.last_line == _line_of(data, page.end_byte - 1)
        assert page.first_line >= line
        assert page.first_line_partial == (
            page.start_byte > 0 and data[page.start_byte - 1 : page.start_byte] != b"\n"
        )
        assert page.last_line_partial == (page.end_byte < total and not page.data.endswith(b"\n"))
        seen.update(range(page.first_line, page.last_line + 1))
        line = page.next_line
    assert fully_stored <= seen


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    spans, start = [], 0
    for n, byte in enumerate(data):
        if byte == 0x0A:
            spans.append((start, n + 1))
            start = n + 1
    if start < len(data):
        spans.append((start, len(data)))
    return spans


@settings(max_examples=250)
@given(
    data=spill_outputs,
    limits=retention_limits(),
    cuts=st.lists(st.integers(0, 500), max_size=8),
    backend=st.sampled_from(sorted(STORES)),
    block=st.sampled_from([1, 3, 16, 32 * 1024]),
    large=st.sampled_from([(1 << 20, 16 << 20), (0, 1), (5, 7), (64, 1 << 20)]),
    threaded_past=st.sampled_from([0, 100, 1 << 20]),
)
def test_stored_ranges_and_pages_are_exact(
    data: bytes,
    limits: tuple[int | None, int],
    cuts: list[int],
    backend: str,
    block: int,
    large: tuple[int, int],
    threaded_past: int,
) -> None:
    """Any output, chunking and cap: stored ranges, pages, counts and hash are exact.

    Also when bytes chunks are large (``large``: the size past which a chunk goes to the
    hash and write stages whole, before it is counted and checked in windows of the
    second size; the part stored at once is known from positions alone), and whether the
    pipeline's threads run or not."""
    cap, tail = limits
    with (
        mock.patch.object(index_module, "INDEX_BLOCK_BYTES", block),
        mock.patch.object(writer_module, "PIECE_BYTES", large[0]),
        mock.patch.object(writer_module, "VIEW_BYTES", large[1]),
        mock.patch.object(pipeline_module, "PIPELINE_MIN_BYTES", threaded_past),
    ):
        _check_spill(STORES[backend], data, cap, tail, cuts)


@settings(max_examples=60)
@given(text=hostile_text, cuts=st.lists(st.integers(0, 100), max_size=5))
def test_str_chunks_store_their_fffd_encoding(text: str, cuts: list[int]) -> None:
    """str chunks are stored as UTF-8 with U+FFFD for lone surrogates, however split."""
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points)]
    store = STORES["memory"]
    meta = store.put(chunks, session="props", tool_name="t", tool_call_id=str(next(_counter)))
    expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text).encode()
    assert store.read_bytes(meta.spill_id, 0, len(expected) + 1) == expected
    assert not meta.invalid_utf8


@settings(max_examples=500)
@given(
    data=spill_outputs, cuts=st.lists(st.integers(0, 500), max_size=10), window=st.integers(4, 9)
)
def test_utf8_check_matches_strict_decode(data: bytes, cuts: list[int], window: int) -> None:
    """The incremental UTF-8 check agrees with a strict decode, however the bytes are split."""
    check = Utf8Check()
    check.WINDOW = window
    for chunk in chunks(data, cuts):
        check.feed(chunk)
    try:
        data.decode()
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert check.finish() == valid


class _SinkFailingAt(Sink):
    """A sink that takes ``room`` bytes, then fails every write (and, with ``room`` None,
    only the publish)."""

    def __init__(self, room: int | None) -> None:
        self.room = room

    def write(self, data: bytes | memoryview) -> None:
        if self.room is not None:
            self.room -= len(data)
            if self.room < 0:
                raise StoreError(errno.ENOSPC, "No space left on device")

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        raise StoreError(errno.EIO, "Input/output error")

    def discard(self) -> None:
        pass


def _measure_of(data: bytes) -> tuple[str, int, int, bool]:
    try:
        data.decode()
        invalid = False
    except UnicodeDecodeError:
        invalid = True
    return hashlib.sha256(data).hexdigest(), len(data), data.count(b"\n"), invalid


@settings(max_examples=300)
@given(
    data=spill_outputs,
    cuts=st.lists(st.integers(0, 500), max_size=10),
    room=st.one_of(st.none(), st.integers(0, 2_000)),
    threaded_past=st.sampled_from([0, 7, 1 << 20]),
    batch=st.sampled_from([1, 5, 64]),
    cap=st.sampled_from([None, 64, 1_000]),
    windows=st.sampled_from([(1 << 20, 16 << 20), (16, 3), (16, 40)]),
)
def test_a_failed_writer_hands_over_the_exact_measure_of_what_it_took(
    data: bytes,
    cuts: list[int],
    room: int | None,
    threaded_past: int,
    batch: int,
    cap: int | None,
    windows: tuple[int, int],
) -> None:
    """Whenever the store fails (a write, from the hash/write threads or inline, or the
    publish), the writer's measure covers exactly the bytes it took, and continued with
    the rest it equals the whole output's sha256, size, newlines and UTF-8 validity.
    Also when a large bytes chunk is taken in windows (``windows``: the size above
    which a chunk is large, and the window's size)."""
    with (
        mock.patch.object(pipeline_module, "PIPELINE_MIN_BYTES", threaded_past),
        mock.patch.object(pipeline_module, "PIPELINE_BATCH_BYTES", batch),
        mock.patch.object(writer_module, "PIECE_BYTES", windows[0]),
        mock.patch.object(writer_module, "VIEW_BYTES", windows[1]),
    ):
        writer = SpillWriter(
            _SinkFailingAt(room),
            session="s",
            tool_name="t",
            tool_call_id="c",
            retention_bytes=cap,
            retained_tail_bytes=0 if cap is None else cap // 4,
            created_at=lambda: 0.0,
        )
        failed = False
        try:
            for chunk in chunks(data, cuts):
                writer.write(chunk)
            writer.commit()
        except StoreError:
            failed = True
    assert failed
    taken = writer.taken
    took = taken.total_bytes
    assert took == writer.total_bytes <= len(data)
    measured = (taken.sha256, took, taken.newlines, taken.invalid_utf8)
    assert measured == _measure_of(data[:took])
    taken.feed(data[took:])
    assert (taken.sha256, taken.total_bytes, taken.newlines, taken.invalid_utf8) == _measure_of(
        data
    )


@settings(max_examples=200)
@given(data=spill_outputs, cuts=st.lists(st.integers(0, 500), max_size=10))
def test_a_tally_measures_like_the_whole_bytes(data: bytes, cuts: list[int]) -> None:
    """A tally fed the output in any pieces states its sha256, size, lines and validity."""
    tally = Tally()
    for chunk in chunks(data, cuts):
        tally.feed(chunk)
    assert (tally.sha256, tally.total_bytes, tally.newlines, tally.invalid_utf8) == _measure_of(
        data
    )


def test_an_open_or_committed_writer_has_no_measure_to_hand_over() -> None:
    """The measure is handed over only once the writer stopped without committing."""
    store = STORES["memory"]
    with store.writer(session="s", tool_name="t", tool_call_id="open") as writer:
        writer.write(b"abc\n")
        with pytest.raises(UsageError, match="once aborted"):
            _ = writer.taken
        writer.commit()
        with pytest.raises(UsageError, match="once aborted"):
            _ = writer.taken


def test_a_writer_the_caller_aborts_hands_over_every_byte_it_took() -> None:
    """Aborting a writer whose hash thread is busy still measures every byte it took."""
    data = b"caf\xc3\xa9 line\n" * 400_000  # 5.2 MB: the hash and write threads run
    writer = STORES["local"].writer(session="s", tool_name="t", tool_call_id="aborted")
    for start in range(0, len(data), 300_007):
        writer.write(data[start : start + 300_007])
    writer.abort()
    taken = writer.taken
    measured = (taken.sha256, taken.total_bytes, taken.newlines, taken.invalid_utf8)
    assert measured == _measure_of(data)


class _RecordingSink(Sink):
    """A sink that records the size of every write (and publishes nothing)."""

    def __init__(self) -> None:
        self.writes: list[int] = []

    def write(self, data: bytes | memoryview) -> None:
        self.writes.append(len(data))

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        return meta

    def discard(self) -> None:
        pass


@pytest.mark.parametrize("cap", [None, 2_000_000])
def test_a_large_bytes_chunk_reaches_the_sink_in_one_write(cap: int | None) -> None:
    """One large bytes (past PIECE_BYTES) is written whole, in one call, not window by
    window after each is counted; with a cap, its stored head goes in one write and the
    tail at the commit."""
    data = "caf\u00e9 \u2713 line\n".encode() * 300_000  # 4.8 MB, three windows of 2 MiB
    sink = _RecordingSink()
    with mock.patch.object(writer_module, "VIEW_BYTES", 2 << 20):
        writer = SpillWriter(
            sink,
            session="s",
            tool_name="t",
            tool_call_id="c",
            retention_bytes=cap,
            retained_tail_bytes=0 if cap is None else 500_000,
            created_at=lambda: 0.0,
        )
        writer.write(data)
        meta = writer.commit()
    assert meta.sha256 == hashlib.sha256(data).hexdigest()
    assert (meta.total_lines, meta.invalid_utf8) == (300_000, False)
    # With a cap, the bytes before the head cut's last 3 (which may move it) go at once.
    assert sink.writes[0] == (len(data) if cap is None else cap - 500_000 - 3)
    assert sum(sink.writes) == meta.stored_bytes
