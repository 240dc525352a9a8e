"""Grep's batched listing (``grep_plain.render_plain``) against the hit-by-hit scan."""

from __future__ import annotations

import mmap
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from spillstore._core.index import LineIndex
from spillstore._stores.memory import MemoryStore
from spillstore._tools import grep_plain, scan
from spillstore._tools.grep_plain import render_plain
from spillstore._tools.regex import Buffer, Matcher, compile_pattern
from spillstore._tools.scan import Haystack, count_matching_lines, iter_hits

_STORE = MemoryStore()


def _index(data: bytes) -> LineIndex:
    """The store's own line index of ``data`` (checkpoints every index block)."""
    meta = _STORE.put(data, session="render", tool_name="t", tool_call_id="c")
    return _STORE.line_index_of(meta)


def _long_line(line: int, start: int, end: int, match: int) -> bytes:
    return b"<long %d %d %d %d>\n" % (line, start, end, match)


def _reference(
    hay: Haystack, matcher: Matcher, index: LineIndex, options: dict[str, Any]
) -> tuple[tuple[int, int, int, bool], list[bytes]]:
    """What a page holds, from :func:`iter_hits` one hit at a time."""
    head, column_bytes, budget = options["head"], options["column_bytes"], options["budget"]
    skip, limit = options["skip"], options["limit"]
    found = list(iter_hits(hay, matcher, index))
    seen = min(skip, len(found))
    pieces: list[bytes] = []
    used = 0
    for line, start, end, match, _ in found[seen:]:
        if limit is not None and len(pieces) >= limit:
            return (seen + len(pieces) + 1, len(pieces), used, True), pieces
        if end - start <= column_bytes:
            piece = head + b"%d:" % line + hay.buf[start:end] + b"\n"
        else:
            piece = _long_line(line, start, end, match)
        if used + len(piece) > budget:
            return (seen + len(pieces) + 1, len(pieces), used, True), pieces
        pieces.append(piece)
        used += len(piece)
    return (seen + len(pieces), len(pieces), used, False), pieces


@contextmanager
def _as_mmap(data: bytes) -> Iterator[Buffer]:
    with tempfile.TemporaryFile() as file:
        file.write(data)
        file.flush()
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            yield mapped


@contextmanager
def _small_batches() -> Iterator[None]:
    """Batches and mmap windows of a few hundred bytes, so a short output spans many."""
    saved = scan.BATCH_BYTES, grep_plain.WINDOW_BYTES
    scan.BATCH_BYTES, grep_plain.WINDOW_BYTES = 300, 200
    try:
        yield
    finally:
        scan.BATCH_BYTES, grep_plain.WINDOW_BYTES = saved


_LINES = st.one_of(
    st.integers(0, 120).map(lambda n: b"x" * n + b"\n"),  # short filler
    st.integers(2000, 70000).map(lambda n: b"y" * n + b"\n"),  # index blocks
    st.sampled_from(
        [
            b"a Needle here\n",
            b"Needle\n",
            b"NeedleNeedle twice\n",
            b"eedle, not quite\n",
            b"\n",
            b"caf\xc3\xa9 Needle\n",
            b"Needle " + b"z" * 300 + b"\n",  # over the column cap
            b"ends with Needle",  # no newline (only at the end, below)
            b"Need\nle split\n",
            b"idle " * 70 + b"\n",  # the rest of "eedle" without its lead, many times
        ]
    ),
)
_PATTERNS = ["Needle", "eedle", "a Needle", "Ne+dle", "dle$", "^$", "^", "dle\\n", "x*", "le", "e"]


def _example(
    lines: list[bytes], pattern: str, *, as_mmap: bool = False, small: bool = False, skip: int = 0
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """An explicit example of the test below: the whole page, no head, no column cut."""
    return example(
        lines=lines,
        pattern=pattern,
        as_mmap=as_mmap,
        small=small,
        head=b"",
        before=b"",
        column=4096,
        skip=skip,
        limit=None,
        budget=1 << 30,
    )


@settings(max_examples=250, deadline=None)
@given(
    lines=st.lists(_LINES, max_size=60),
    pattern=st.sampled_from(_PATTERNS),
    as_mmap=st.booleans(),
    small=st.booleans(),
    head=st.sampled_from([b"", b"bash-0123:"]),
    before=st.sampled_from([b"", b"other\n", b"a Needle"]),  # bytes of another range
    column=st.sampled_from([40, 4096]),
    skip=st.integers(0, 6),
    limit=st.one_of(st.none(), st.integers(0, 8)),
    budget=st.one_of(st.just(1 << 30), st.integers(0, 400)),
)
@_example(  # hits index blocks apart: numbered hit by hit from checkpoints
    [b"x\n", b"Needle\n", b"y" * 70000 + b"\n"] * 4, "Needle", as_mmap=True, skip=1
)
@_example(  # dense hits, then in an mmap window a hit an index block away: a checkpoint
    [b"a Needle here\n"] * 70 + [b"y" * 70000 + b"\n", b"y\n" * 30000, b"Needle\n"] * 4,
    "Needle",
    as_mmap=True,
)
@_example(  # the rest of a literal without its lead, until it is searched whole
    [b"idle " * 70 + b"\n", b"a Needle here\n"] * 2, "eedle", small=True
)
def test_the_batched_listing_is_the_hit_by_hit_listing(
    lines: list[bytes],
    pattern: str,
    as_mmap: bool,
    small: bool,
    head: bytes,
    before: bytes,
    column: int,
    skip: int,
    limit: int | None,
    budget: int,
) -> None:
    """Same lines, numbers, long-line windows, page cut, limit and counts, on bytes and
    mmap, dense and sparse hits, in one batch or many, in a range after another's bytes."""
    data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines[:-1])
    data += lines[-1] if lines else b""
    matcher = compile_pattern(pattern)
    index = _index(data)
    options: dict[str, Any] = {
        "head": head,
        "column_bytes": column,
        "skip": skip,
        "limit": limit,
        "budget": budget,
    }
    with _as_mmap(before + data) if as_mmap and data else nullcontext(before + data) as buf:
        hay = Haystack(buf, len(before), len(buf), 0, True)
        expected = _reference(hay, matcher, index, options)
        pieces: list[bytes] = []
        with _small_batches() if small else nullcontext():
            got = render_plain(hay, matcher, index, pieces=pieces, long_line=_long_line, **options)
            counted = count_matching_lines(hay, matcher)
        assert counted == len(list(iter_hits(hay, matcher, None)))
    assert (got, b"".join(pieces)) == (expected[0], b"".join(expected[1]))
