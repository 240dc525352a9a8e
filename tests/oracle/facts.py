"""The facts the model is told: parsed from the pointer text and ``SpillInfo``, then checked.

The pointer's wording belongs to the library (and its snapshots); this module reads only
the facts in it: sizes, the sha256, byte and line ranges, the previews, the save state
and the next-call hints. Each fact is compared with the independent model, and every
range the model could act on is paged back through the real tools (:mod:`.reader`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spillstore import SpillInfo, SpillTools, ToolResult
from tests.oracle.model import Truth, clean, model_encode, shown
from tests.oracle.reader import Pager, call_args, text_of

TOTALS = re.compile(r"(\d+) bytes, (\d+) lines, sha256 ([0-9a-f]{64}|unknown)")
NOT_SHOWN = re.compile(
    r"^Not shown: bytes \[(\d+), (\d+)\), (no lines|line \d+|lines \d+-\d+)", re.M
)
HEAD = re.compile(r"^--- head: bytes \[0, (\d+)\), (no lines|line \d+|lines \d+-\d+) ---$", re.M)
TAIL = re.compile(
    r"^--- tail: bytes \[(\d+), (\d+)\), (no lines|line \d+|lines \d+-\d+) ---$", re.M
)
END = "\n--- end of preview ---"
RANGE = re.compile(r"\[(\d+), (\d+)\)")
SHAPED_CUT = re.compile(r" \[\.\.\. line cut: (\d+) more bytes from byte (\d+)\]$")
APPEND_NEXT = re.compile(
    r"byte_offset=(\d+), max_bytes=\d+\) reads on from the first cut \(line (\d+)\)"
)


def span_words(span: tuple[int, int] | None) -> str:
    """A line span as the pointer words it."""
    if span is None:
        return "no lines"
    return f"line {span[0]}" if span[0] == span[1] else f"lines {span[0]}-{span[1]}"


def text_size(result: ToolResult) -> int:
    """Bytes of model text in a result: every text part, notices included, joined by newlines."""
    texts = [p.text for p in result.content if hasattr(p, "text") and not hasattr(p, "uri")]
    return sum(len(model_encode(t)) for t in texts) + max(len(texts) - 1, 0)


def check_strict_utf8(result: ToolResult) -> None:
    """Every model-facing text encodes strictly (no lone surrogate reaches a host)."""
    for part in result.content:
        text = getattr(part, "text", None)
        if isinstance(text, str):
            text.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate


@dataclass
class Case:
    """One checked output: what went in and what came out.

    Attributes:
        truth: the original output and the retention settings.
        result: what the model got.
        max_bytes: the budget.
        suffix: the suffix given (None: none).
        pager: the tools over the store (None when the store is dead).
        store_failed: whether the store was made to fail.
        needle: a string placed in the output, to be found by Grep.
    """

    truth: Truth
    result: ToolResult
    max_bytes: int
    suffix: str | None
    pager: Pager | None
    store_failed: bool
    needle: str | None = None
    context: int = 0
    byte_page: int | None = None
    blobs: tuple[tuple[str, bytes], ...] = ()


def check_spilled(case: Case) -> None:
    """Check every fact of a cut result against the truth, and read every range back."""
    result, truth = case.result, case.truth
    info = result.spill
    assert info is not None
    check_strict_utf8(result)
    size = text_size(result)
    assert size <= case.max_bytes, f"model text is {size} bytes, over max_bytes={case.max_bytes}"
    assert (info.total_bytes, info.total_lines) == (truth.total, truth.total_lines), info
    assert info.sha256 == truth.sha256, f"stated sha256 {info.sha256!r} is not the output's"
    assert info.invalid_utf8 == (not truth.valid), f"invalid_utf8={info.invalid_utf8}"
    pointer = result.content[0].text  # type: ignore[union-attr]
    _check_saved_state(case, info)
    if info.saved != "none":
        _check_suffix_kept(case, info)
    if info.mode == "replace":
        _check_replace(case, info, pointer)
    else:
        _check_append(case, info, pointer)
    if case.pager is not None and info.saved != "none" and case.needle is not None:
        case.pager.grep_needle(case.needle, case.context)
    if case.blobs:
        _check_blobs(case)
    if info.path is not None and case.pager is not None:
        _check_path(case, info.path, pointer)


def _check_path(case: Case, path: str, pointer: str) -> None:
    """The path is told with nothing glued to it, and it reads like the spill id."""
    at = pointer.find(path)
    assert at >= 0, "the spill's path is not in the pointer"
    before, after = pointer[at - 1 : at], pointer[at + len(path) : at + len(path) + 1]
    assert before in (" ", "\n") and after in ("", " ", "\n"), f"glued: {before!r} {after!r}"
    assert case.pager is not None
    by_path = text_of(case.pager.tools.read(path, byte_offset=0))
    by_id = text_of(case.pager.tools.read(case.pager.spill, byte_offset=0))
    assert by_path == by_id, "Read by path and by id differ"


CLOSING = re.compile(
    r"\[(\d+) more blob\(s\), not named here: (\d+) saved as spills of their own"
    r" \(the spill list of this session shows them\), (\d+) NOT saved \(the store failed\)\]"
)
BLOB_NOTICE = re.compile(
    r"\[blob (\S+), (\d+) bytes(?:, uri [^\]]*)?, (?:saved as spill (\S+);"
    r' read it with \w+\(spill="(\S+)", byte_offset=0\)|NOT saved \(.*\))\]'
)


def _check_blobs(case: Case) -> None:
    """Each blob of a cut result is a spill of its decoded bytes, named by its notice."""
    assert case.pager is not None or case.store_failed
    tools = None if case.pager is None else case.pager.tools
    check_blob_notices(case.result, case.blobs, tools, store_failed=case.store_failed)


def check_blob_notices(
    result: ToolResult,
    blobs: tuple[tuple[str, bytes], ...],
    tools: SpillTools | None,
    *,
    store_failed: bool,
) -> None:
    """Each blob is named by a notice (or counted by the closing one) with its MIME type
    and decoded size, and its spill reads back as its decoded bytes (``tools``: None
    when the store is dead)."""
    notices = [getattr(p, "text", "") for p in result.content]
    named = [m for m in map(BLOB_NOTICE.fullmatch, notices) if m is not None]
    closing = [m for m in map(CLOSING.fullmatch, notices) if m is not None]
    unnamed = sum(int(m[1]) for m in closing)
    assert len(named) + unnamed == len(blobs), f"blobs unaccounted for: {notices}"
    for m in closing:
        assert int(m[1]) == int(m[2]) + int(m[3]), m[0]
        assert store_failed or m[3] == "0", m[0]
    for (mime, decoded), notice in zip(blobs, named, strict=False):
        assert (notice[1], int(notice[2])) == (mime, len(decoded)), notice[0]
        if notice[3] is None:
            assert store_failed, f"a blob not saved on a working store: {notice[0]}"
            continue
        assert notice[3] == notice[4], notice[0]
        if tools is None or not decoded:
            continue
        meta = tools.store.stat(notice[3])
        assert meta.total_bytes == len(decoded) and meta.complete, notice[0]
        blob = Pager(tools, notice[3], Truth(decoded), ((0, len(decoded)),))
        blob.bytes_from(0, len(decoded))


def _told(totals: re.Match[str] | None) -> tuple[int, int, str] | None:
    """The told size, lines and sha256."""
    return None if totals is None else (int(totals[1]), int(totals[2]), totals[3])


def _check_saved_state(case: Case, info: SpillInfo) -> None:
    truth = case.truth
    if info.saved == "none":  # the store may also fail only for a side spill (a suffix)
        assert case.store_failed and info.spill_id is None, info
        return
    assert info.saved in ("full", "partial") and info.spill_id, info
    ranges = tuple(tuple(r) for r in info.stored_ranges)
    if not truth.cut_by_retention:
        assert info.saved == "full", f"saved={info.saved} but the retention cap was not reached"
        assert ranges == (((0, truth.total),) if truth.total else ()), ranges
        return
    assert info.saved == "partial", f"{truth.total} bytes over retention, saved={info.saved}"
    retention, tail = truth.retention_bytes, truth.retained_tail_bytes
    assert retention is not None
    kept = sum(end - start for start, end in ranges)
    assert kept <= retention, f"kept {kept} bytes over the retention cap {retention}"
    if retention - tail >= 4:  # a smaller head share may not hold one whole character
        assert ranges[0][0] == 0, ranges
    elif ranges[0][0] != 0:  # the head share kept nothing: only the tail is kept
        assert len(ranges) == 1, ranges
    if tail >= 4:  # a smaller tail may not hold one whole character
        assert ranges[-1][1] == truth.total, ranges
    assert ranges[0][1] >= retention - tail - 3 and ranges[-1][0] <= truth.total - tail + 3
    pointer = case.result.content[0].text  # type: ignore[union-attr]
    assert " in part " in pointer.replace("\n", " ") or "saved in part" in pointer
    assert all(f"[{a}, {b})" in pointer for a, b in ranges), "kept ranges not all named"


def _check_suffix_kept(case: Case, info: SpillInfo) -> None:
    """The suffix is shown whole, or stored whole."""
    if not case.suffix:
        return
    texts = "\n".join(getattr(p, "text", "") for p in case.result.content)
    if clean(case.suffix) in texts:
        return
    assert case.pager is not None and info.spill_id is not None
    meta = case.pager.tools.store.stat(info.spill_id)
    assert meta.suffix is not None and clean(meta.suffix) == clean(case.suffix), (
        f"the suffix ({len(case.suffix)} chars) is neither shown whole nor stored whole"
    )


def _check_replace(case: Case, info: SpillInfo, pointer: str) -> None:
    truth = case.truth
    totals = TOTALS.search(pointer)
    expected = (truth.total, truth.total_lines, truth.sha256)
    assert _told(totals) == expected, f"told {_told(totals)}: {pointer[:400]!r}"
    if "\n--- head: " not in pointer:  # the pointer itself was elided (a huge name)
        return
    head = HEAD.search(pointer)
    assert head is not None
    head_end = int(head[1])
    assert head[2] == span_words(truth.lines_of(0, head_end)), head[0]
    tail = TAIL.search(pointer)
    tail_start = tail_end = truth.total
    if tail is not None:
        tail_start, tail_end = int(tail[1]), int(tail[2])
        assert tail_end == truth.total and head_end <= tail_start, tail[0]
        assert tail[3] == span_words(truth.lines_of(tail_start, tail_end)), tail[0]
    head_text = pointer[
        head.end() + 1 : tail.start() - 1 if tail else pointer.index(END, head.end())
    ]
    assert head_text == shown(truth.data[:head_end]).removesuffix("\n"), "head preview differs"
    if tail is not None:
        tail_text = pointer[tail.end() + 1 : pointer.index(END, tail.end())]
        assert tail_text == shown(truth.data[tail_start:]).removesuffix("\n"), "tail differs"
    hidden = NOT_SHOWN.search(pointer)
    assert hidden is not None
    assert (int(hidden[1]), int(hidden[2])) == (head_end, tail_start), hidden[0]
    assert hidden[3] == span_words(truth.lines_of(head_end, tail_start)), hidden[0]
    assert tuple(info.elided_bytes) == (((head_end, tail_start),) if tail_start > head_end else ())
    if case.pager is None or info.saved == "none":
        return
    pager = case.pager
    _read_kept_ranges(case, pager)
    if tail_start > head_end:
        first_line, last_line = truth.lines_of(head_end, tail_start)  # type: ignore[misc]
        nxt = re.search(r"^Next: (.*)$", pointer, re.M)
        assert nxt is not None, "no next-call hint for a saved, cut output"
        args = call_args(nxt[1])
        pager.bytes_from(head_end, tail_start)  # every stated range, from its start
        if tail_start < truth.total:
            pager.bytes_from(tail_start, truth.total)
        if "byte_offset" in args:
            assert args["byte_offset"] == head_end, nxt[0]
        else:
            assert args["offset"] == first_line, nxt[0]
        pager.lines_from(first_line, last_line)


def _read_kept_ranges(case: Case, pager: Pager) -> None:
    """Every kept range reads back exactly, in byte mode and in line mode."""
    truth, stored = case.truth, pager.stored
    for start, end in stored:
        pager.bytes_from(start, end, case.byte_page)
    for start, end in stored:
        pager.lines_from(truth.line_of(start), truth.line_of(end - 1))


def _check_append(case: Case, info: SpillInfo, pointer: str) -> None:
    truth = case.truth
    cut = pointer.rfind("\n[spillstore] ")
    assert cut >= 0, "append mode without its note"
    shaped, note = pointer[:cut], pointer[cut + 1 :]
    totals = TOTALS.search(note)
    expected = (truth.total, truth.total_lines, truth.sha256)
    assert _told(totals) == expected, f"told {_told(totals)}: {note[:300]!r}"
    rows = shaped.split("\n")
    first_cut: tuple[int, int] | None = None
    for number, row in enumerate(rows, 1):
        if number > truth.total_lines:
            break
        start, end = truth.line_start(number), truth.line_end(number)
        marker = SHAPED_CUT.search(row)
        if marker is None:
            assert row == shown(truth.data[start:end]), f"append line {number} differs"
            continue
        resume = int(marker[2])
        assert start < resume <= end and int(marker[1]) == end - resume, (number, marker[0])
        assert row[: marker.start()] == shown(truth.data[start:resume]), f"line {number} prefix"
        if first_cut is None:
            first_cut = (number, resume)
        if case.pager is not None and info.saved != "none":
            case.pager.bytes_from(resume, end)
    assert first_cut is not None, "append mode but no line was cut"
    if case.pager is not None and info.saved != "none":
        _read_kept_ranges(case, case.pager)
    hint = APPEND_NEXT.search(note)
    if info.saved != "none":
        assert hint is not None, note
        offset, line = int(hint[1]), int(hint[2])
        assert offset == first_cut[1], (
            f"the hint reads from {offset}, the first cut is at {first_cut[1]}"
        )
        assert truth.line_of(offset) == line, (
            f"byte {offset} is on line {truth.line_of(offset)}, the hint says {line}"
        )
