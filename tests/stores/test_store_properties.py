"""Properties of the store and its pure planners, for random outputs, chunkings and caps."""

from __future__ import annotations

import hashlib
import itertools
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spillstore._core.index as index_module
from spillstore._core.gc_plan import GcCandidate, plan_gc
from spillstore._core.ids import is_spill_id, make_spill_id, sanitize_stem
from spillstore._core.index import IndexBuilder, count_lines, nth_newline
from spillstore._errors import RangeNotStored
from spillstore._stores.base import Store
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from spillstore._stores.writer import Utf8Check
from tests.strategies import hostile_text, raw_bytes

PIECES = [b"\n", b"a", b"line of text\n", b"\r\n", "\u00e9".encode(), "\u20ac".encode()]
PIECES += ["\U0001f600".encode(), b"\xff", b"\x80", b"\xf0\x9f", b""]

outputs = st.one_of(
    raw_bytes,
    st.lists(st.sampled_from(PIECES), max_size=400).map(b"".join),
    hostile_text.map(lambda s: s.encode("utf-8", "surrogatepass")),
)


@st.composite
def retention(draw: st.DrawFn) -> tuple[int | None, int]:
    cap = draw(st.one_of(st.none(), st.integers(0, 300)))
    tail = 0 if cap is None else draw(st.integers(0, cap))
    return cap, tail


def _chunks(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    for a, b in itertools.pairwise(points):
        yield data[a:b]


_TMP = tempfile.TemporaryDirectory(prefix="spillstore-props-")
STORES: dict[str, Store] = {"memory": MemoryStore(), "local": LocalStore(_TMP.name)}
_counter = itertools.count()


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _check_spill(store: Store, data: bytes, cap: int | None, tail: int, cuts: list[int]) -> None:
    meta = store.put(
        _chunks(data, cuts),
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


@settings(max_examples=150)
@given(
    data=outputs,
    limits=retention(),
    cuts=st.lists(st.integers(0, 500), max_size=8),
    backend=st.sampled_from(sorted(STORES)),
    block=st.sampled_from([1, 3, 16, 32 * 1024]),
)
def test_stored_ranges_and_pages_are_exact(
    data: bytes, limits: tuple[int | None, int], cuts: list[int], backend: str, block: int
) -> None:
    """Any output, chunking and cap: stored ranges, pages, counts and hash are exact."""
    cap, tail = limits
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_module, "INDEX_BLOCK_BYTES", block)
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


@settings(max_examples=300)
@given(data=outputs, limits=retention(), cuts=st.lists(st.integers(0, 500), max_size=8))
def test_index_builder_is_exact(
    data: bytes, limits: tuple[int | None, int], cuts: list[int]
) -> None:
    """The streaming builder stores what it says, cuts on boundaries, and indexes exactly."""
    cap, tail = limits
    builder = IndexBuilder(cap, tail, block_bytes=7)
    written = bytearray()
    for chunk in _chunks(data, cuts):
        written += builder.feed(chunk)
    cut = builder.finish()
    for part in cut.final_parts:
        written += part
    assert bytes(written) == b"".join(data[a:b] for a, b in cut.stored_ranges)
    assert cut.total_lines == count_lines(data)
    index = cut.index
    assert list(index.offsets) == sorted(set(index.offsets))
    for offset, newlines in zip(index.offsets, index.newlines, strict=True):
        assert data.count(b"\n", 0, offset) == newlines
    if cap is not None and len(data) > cap:
        ranges = cut.stored_ranges
        head = ranges[0][1] if ranges and ranges[0][0] == 0 else 0
        assert max(0, cap - tail - 3) <= head <= cap - tail
        if ranges and ranges[-1][1] == len(data) and ranges[-1][0] > 0:
            assert len(data) - tail <= ranges[-1][0] <= len(data) - tail + 3
    try:
        data.decode()
    except UnicodeDecodeError:
        return
    for start, end in cut.stored_ranges:
        data[start:end].decode()  # a cut never splits a character of valid input


@given(
    data=st.binary(max_size=3000).map(lambda b: b.replace(b"\x00", b"\n")),
    n=st.integers(1, 200),
    lo=st.integers(0, 3000),
    span=st.integers(0, 3000),
)
def test_nth_newline_matches_naive(data: bytes, n: int, lo: int, span: int) -> None:
    """nth_newline finds the same position as counting one by one."""
    lo = min(lo, len(data))
    hi = min(lo + span, len(data))
    positions = [i for i in range(lo, hi) if data[i] == 0x0A]
    expected = positions[n - 1] if len(positions) >= n else -1
    assert nth_newline(data, n, lo, hi) == expected


candidates = st.lists(
    st.builds(
        GcCandidate,
        spill_id=st.text("abc", min_size=1, max_size=6),
        session=st.just("s"),
        created_at=st.integers(0, 1000).map(float),
        stored_bytes=st.integers(0, 100),
    ),
    max_size=30,
    unique_by=lambda c: c.spill_id,
)


@given(
    cands=candidates,
    max_age=st.one_of(st.none(), st.integers(0, 1000)),
    max_total=st.one_of(st.none(), st.integers(0, 2000)),
    max_files=st.one_of(st.none(), st.integers(0, 30)),
    grace=st.integers(0, 500),
)
def test_gc_plan_properties(
    cands: list[GcCandidate],
    max_age: int | None,
    max_total: int | None,
    max_files: int | None,
    grace: int,
) -> None:
    """gc never takes young spills, goes oldest first, and stops once within limits."""
    now = 1000.0
    plan = plan_gc(
        cands, now=now, max_age=max_age, max_total_bytes=max_total, max_files=max_files,
        grace=grace,
    )  # fmt: skip
    chosen = [c for c, _ in plan]
    assert all(now - c.created_at >= grace for c in chosen)
    keys = [(c.created_at, c.spill_id) for c in chosen]
    assert keys == sorted(keys)
    left = [c for c in cands if c not in chosen]
    eligible_left = [c for c in left if now - c.created_at >= grace]
    if max_age is not None:
        assert all(now - c.created_at <= max_age for c in eligible_left)
    if max_files is not None and len(left) > max_files:
        assert not eligible_left
    if max_total is not None and sum(c.stored_bytes for c in left) > max_total:
        assert not eligible_left
    for c, reason in plan:
        if reason in ("total_bytes", "max_files"):
            # Only removed because it was the oldest left outside the grace period.
            assert all((o.created_at, o.spill_id) > (c.created_at, c.spill_id) or o in chosen
                       for o in cands if now - o.created_at >= grace)  # fmt: skip


@given(name=st.text(max_size=80), call=st.text(max_size=20), session=st.just("s"))
def test_ids_are_always_valid(name: str, call: str, session: str) -> None:
    """Whatever the tool name, the id is valid, bounded and starts with a clean stem."""
    spill_id = make_spill_id(
        session=session, tool_name=name, tool_call_id=call, sha256="0" * 64, total_bytes=0,
        stored_ranges=(), suffix=None, media_notes=(),
    )  # fmt: skip
    assert is_spill_id(spill_id)
    assert spill_id.startswith(sanitize_stem(name) + "-")
    assert len(spill_id) <= 32 + 1 + 20


@settings(max_examples=500)
@given(data=outputs, cuts=st.lists(st.integers(0, 500), max_size=10), window=st.integers(4, 9))
def test_utf8_check_matches_strict_decode(data: bytes, cuts: list[int], window: int) -> None:
    """The incremental UTF-8 check agrees with a strict decode, however the bytes are split."""
    check = Utf8Check()
    check.WINDOW = window
    for chunk in _chunks(data, cuts):
        check.feed(chunk)
    try:
        data.decode()
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert check.finish() == valid
