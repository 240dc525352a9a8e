"""A stream in any pieces ends exactly as the whole output does, and List tells the metas.

The accumulator takes ``str`` and ``bytes`` pieces mixed: text pieces (lone surrogates
and halves of a surrogate pair included) and byte pieces cut anywhere, inside a UTF-8
character too. Whatever the pieces, the model-facing text, the host's ``SpillInfo`` and
the saved bytes equal those of ``truncate_for_model`` on the whole text, sync and async,
with retention cutting or not, long lines shaped or not. ``list_spills`` then states
each spill's figures as its metadata has them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore import (
    MediaPart,
    MemoryStore,
    Settings,
    SpillTools,
    TextPart,
    ToolResult,
    TruncationService,
)
from spillstore._core.utf8 import encode
from tests.oracle.harness import FailingStore as OracleFailingStore
from tests.strategies import HOSTILE_PIECES, json_documents

PIECES = (*HOSTILE_PIECES, "line of text\n", "word ", "\ud83d", "\ude00", "\n\n")

texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=6), min_size=1, max_size=400).map(
    "".join
)


def _retained(**previews: int) -> Settings:
    """Settings whose retention cap (4,096 bytes) cuts the padded outputs."""
    return Settings(max_bytes=2048, max_line_bytes=None, retention_bytes=4096, **previews)


configs = st.sampled_from(
    [
        Settings(max_bytes=2048, head_bytes=300, tail_bytes=200, max_line_bytes=None),
        Settings(max_bytes=4096, head_bytes=400, tail_bytes=100, max_line_bytes=None),
        Settings(max_bytes=4096, head_bytes=400, tail_bytes=100, max_line_bytes=80),
        Settings(max_bytes=2048, max_line_bytes=200, retention_bytes=4096, retained_tail_bytes=900),
        _retained(head_bytes=300, tail_bytes=200, retained_tail_bytes=1000),
        _retained(head_bytes=1, tail_bytes=1, retained_tail_bytes=3),
    ]
)


@st.composite
def pieces(draw: st.DrawFn, text: str) -> list[str | bytes]:
    """``text`` cut at random characters; some pieces sent as bytes cut anywhere."""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=12))))
    bounds = [0, *cuts, len(text)]
    out: list[str | bytes] = []
    for a, b in itertools.pairwise(bounds):
        piece = text[a:b]
        if not draw(st.booleans()):
            out.append(piece)
            continue
        data = encode(piece)
        inner = sorted(set(draw(st.lists(st.integers(0, len(data)), max_size=3))))
        edges = [0, *inner, len(data)]
        out += [data[x:y] for x, y in itertools.pairwise(edges)]
    return out


def test_a_stream_whose_long_lines_alone_overflow_is_shaped_as_the_whole_output() -> None:
    """One 6,000-byte line: the whole output is shaped (append mode); so is the stream.

    The accumulator shaped nothing before session 7 (a stream got replace mode).
    """
    config = Settings(max_bytes=2048, head_bytes=300, tail_bytes=200, max_line_bytes=80)
    text = "x" * 6000
    whole = TruncationService(MemoryStore(), config).truncate_for_model(
        text, tool_name="t", tool_call_id="c"
    )
    acc = TruncationService(MemoryStore(), config).accumulator(tool_name="t", tool_call_id="c")
    acc.write(text)
    streamed = acc.ok()
    assert whole.spill is not None and whole.spill.mode == "append"
    assert streamed.spill == whole.spill


def _text(result: ToolResult) -> str:
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(), text=texts, config=configs, suffix=st.sampled_from([None, "exit 1", "\ud800"])
)
def test_a_stream_in_mixed_pieces_ends_as_the_whole_output(
    data: st.DataObject, text: str, config: Settings, suffix: str | None
) -> None:
    """Same pointer text, same SpillInfo, same saved bytes, whatever the pieces."""
    padded = text * (1 + 6000 // max(1, len(encode(text))))  # over the budget, mostly
    if data.draw(st.booleans()):  # lines that line shaping cuts
        padded = padded.replace("\n", "") + "\n" + padded[:300]
    chunks = data.draw(pieces(padded))
    whole_store, stream_store, async_store = MemoryStore(), MemoryStore(), MemoryStore()
    whole = TruncationService(whole_store, config).truncate_for_model(
        ToolResult(content=(TextPart(padded),), suffix=suffix), tool_name="t", tool_call_id="c"
    )
    acc = TruncationService(stream_store, config).accumulator(tool_name="t", tool_call_id="c")
    for chunk in chunks:
        acc.write(chunk)
    streamed = acc.ok(suffix)

    async def run_async() -> ToolResult:
        service = TruncationService(async_store, config)
        twin = service.accumulator(tool_name="t", tool_call_id="c")
        for chunk in chunks:
            await twin.awrite(chunk)
        return await twin.aok(suffix)

    # A whole result that fits comes back as itself, lone surrogates kept; a stream's
    # pieces are bytes once taken, so its text is strict UTF-8 (each one U+FFFD).
    expected = encode(_text(whole)).decode("utf-8")
    for other, store in ((streamed, stream_store), (asyncio.run(run_async()), async_store)):
        assert _text(other) == expected
        assert other.spill == whole.spill
        if whole.spill is not None and whole.spill.spill_id is not None:
            meta = whole_store.stat(whole.spill.spill_id)
            assert store.stat(whole.spill.spill_id).stored_ranges == meta.stored_ranges
            for start, end in meta.stored_ranges:
                assert store.read_bytes(meta.spill_id, start, end - start) == (
                    whole_store.read_bytes(meta.spill_id, start, end - start)
                )


_LISTED = re.compile(
    r"^\d+\. (\S+) tool \"[^\"]*\" call \"[^\"]*\": (\d+) bytes, (\d+) lines?, "
    r"(saved in full|saved in part \(kept [^)]*\))(?:; first line: .*)?$"
)


@settings(max_examples=30, deadline=None)
@given(outputs=st.lists(st.binary(min_size=1, max_size=3000) | texts, min_size=1, max_size=6))
def test_list_spills_states_each_spill_s_figures_as_its_metadata_has_them(
    outputs: list[str | bytes],
) -> None:
    """Sizes, line counts and saved-in-full/in-part in List are the metadata's."""
    store = MemoryStore()
    for n, output in enumerate(outputs):
        retention = 1024 if n % 2 else None  # every other spill cut by retention
        store.put(
            output,
            session="default",
            tool_name="t",
            tool_call_id=f"c{n}",
            retention_bytes=retention,
            retained_tail_bytes=100 if retention else 0,
        )
    metas = {meta.spill_id: meta for meta in store.list("default")}
    page = _text(SpillTools(store).list(limit=1000))
    listed = [_LISTED.match(line) for line in page.split("\n")[1:]]
    found = {m.group(1): m for m in listed if m is not None}
    assert set(found) == set(metas), page[:400]
    for spill_id, meta in metas.items():
        m = found[spill_id]
        assert int(m.group(2)) == meta.total_bytes
        assert int(m.group(3)) == meta.total_lines
        assert ("saved in full" in m.group(4)) == meta.complete, m.group(0)


def test_a_file_whose_long_lines_alone_overflow_is_shaped_as_the_whole_output(
    tmp_path: Path,
) -> None:
    """One 6,000-byte line in the tool's own log file: shaped, as the same text would be."""
    config = Settings(max_bytes=2048, head_bytes=300, tail_bytes=200, max_line_bytes=80)
    log = tmp_path / "out.log"
    log.write_bytes(b"x" * 6000)
    whole = TruncationService(MemoryStore(), config).truncate_for_model(
        "x" * 6000, tool_name="t", tool_call_id="c"
    )
    adopted = TruncationService(MemoryStore(), config).truncate_for_model(
        ToolResult(content=(), full_output_path=str(log)), tool_name="t", tool_call_id="c"
    )
    assert whole.spill is not None and whole.spill.mode == "append"
    assert adopted.spill == whole.spill


def test_a_file_of_long_lines_with_a_suffix_and_a_blob_is_shaped_as_the_same_text() -> None:
    """Several long lines, a suffix and a blob: the file gets the whole text's append
    mode, sync and async, with the same model text."""
    config = Settings(max_bytes=4096, max_line_bytes=100)
    text = "".join(f"{n:03d} " + "é" * 700 + "\n" for n in range(8))
    blob = MediaPart("blob", "application/pdf", b"%PDF" * 2000)
    whole = TruncationService(MemoryStore(), config).truncate_for_model(
        ToolResult(content=(TextPart(text), blob), suffix="exit 1"), tool_name="t", tool_call_id="c"
    )
    assert whole.spill is not None and whole.spill.mode == "append"
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "out.log"
        log.write_text(text, encoding="utf-8")
        adopted = ToolResult(content=(blob,), suffix="exit 1", full_output_path=str(log))
        service = TruncationService(MemoryStore(), config)
        sync = service.truncate_for_model(adopted, tool_name="t", tool_call_id="c")
        twin = asyncio.run(service.atruncate_for_model(adopted, tool_name="t", tool_call_id="c"))
    for result in (sync, twin):
        assert result.spill == whole.spill
        assert _text(result) == _text(whole)


def _three_ways(
    text: str, config: Settings, store: Callable[[], MemoryStore], log: Path
) -> list[ToolResult]:
    """``text`` given whole, streamed in 1,000-byte pieces, and handed over as a file."""
    whole = TruncationService(store(), config).truncate_for_model(
        text, tool_name="t", tool_call_id="c"
    )
    data = encode(text)
    acc = TruncationService(store(), config).accumulator(tool_name="t", tool_call_id="c")
    for start in range(0, len(data), 1000):
        acc.write(data[start : start + 1000])
    streamed = acc.ok()
    log.write_bytes(data)
    adopted = TruncationService(store(), config).truncate_for_model(
        ToolResult(content=(), full_output_path=str(log)), tool_name="t", tool_call_id="c"
    )
    return [whole, streamed, adopted]


_CUT = Settings(max_bytes=4096, head_bytes=1000, tail_bytes=500, retention_bytes=8192)
_JSON_ROWS = [{"id": n, "name": "x" * 20} for n in range(1000)]


@pytest.mark.parametrize(
    ("text", "mode"),
    [(json.dumps(_JSON_ROWS), "append"), (json.dumps(_JSON_ROWS, indent=1), "replace")],
    ids=["one-line", "pretty"],
)
def test_a_json_output_the_retention_cap_cut_reads_the_same_on_every_path(
    tmp_path: Path, text: str, mode: str
) -> None:
    """Whole, streamed or handed over: no shape (a cut document does not parse), and why.

    Before session 9 only the whole text got a shape (of bytes that were not saved), the
    stream and the file none and no word of why; a one-line document was shaped as
    lines by the stream (append mode) and not by the whole text.
    """
    results = _three_ways(text, _CUT, MemoryStore, tmp_path / "out.json")
    texts = [_text(r) for r in results]
    assert texts[1] == texts[0] and texts[2] == texts[0]
    assert results[1].spill == results[0].spill == results[2].spill
    assert results[0].spill is not None and results[0].spill.mode == mode
    assert results[0].spill.saved == "partial"
    assert "array[1000]" not in texts[0]
    if mode == "replace":
        assert "the retention cap saved it in part" in texts[0]
        assert "query_spill cannot parse it; search it with grep_spill" in texts[0]


def test_a_file_over_the_retention_cap_whose_long_lines_alone_overflow_is_shaped(
    tmp_path: Path,
) -> None:
    """Three 5,000-byte lines, 8,192 bytes kept: the file is shaped (append mode), as the
    whole text and the stream are; before session 9 only a file saved whole was."""
    config = Settings(
        max_bytes=9000, head_bytes=1000, tail_bytes=500, max_line_bytes=100, retention_bytes=8192
    )
    results = _three_ways(("y" * 5000 + "\n") * 3, config, MemoryStore, tmp_path / "out.log")
    assert [_text(r) for r in results[1:]] == [_text(results[0])] * 2
    assert results[0].spill is not None and results[0].spill.mode == "append"
    assert results[2].spill == results[0].spill


def test_a_file_whose_long_lines_alone_overflow_on_a_dead_store_is_shaped(
    tmp_path: Path,
) -> None:
    """A store that fails: the file is still shaped from itself, as the whole text and the
    stream are ("NOT saved", append mode); it got a replace-mode preview before session 9."""
    config = Settings(max_bytes=4096, head_bytes=1000, tail_bytes=500, max_line_bytes=100)
    results = _three_ways(
        ("y" * 5000 + "\n") * 3, config, lambda: OracleFailingStore(100), tmp_path / "out.log"
    )
    assert [_text(r) for r in results[1:]] == [_text(results[0])] * 2
    assert results[0].spill is not None and results[0].spill.mode == "append"
    assert results[0].spill.saved == "none"


def test_a_json_output_on_a_dead_store_reads_the_same_on_every_path(tmp_path: Path) -> None:
    """A JSON output that could not be saved: the whole text gave its shape, the stream
    line-shaped it; now all three paths give the same preview (a shape guides a query,
    and there is nothing to query)."""
    results = _three_ways(
        json.dumps(_JSON_ROWS),
        Settings(max_bytes=4096, head_bytes=1000, tail_bytes=500),
        lambda: OracleFailingStore(100),
        tmp_path / "out.json",
    )
    assert [_text(r) for r in results[1:]] == [_text(results[0])] * 2
    assert results[0].spill is not None and results[0].spill.saved == "none"


@pytest.mark.parametrize(
    "config",
    [
        Settings(
            max_bytes=7260,
            head_bytes=2819,
            tail_bytes=2579,
            retention_bytes=13843,
            retained_tail_bytes=384,
            max_line_bytes=None,
        ),
        Settings(
            max_bytes=5606,
            head_bytes=4042,
            tail_bytes=26,
            retention_bytes=8164,
            retained_tail_bytes=7367,
            max_line_bytes=None,
        ),
    ],
    ids=["tail-kept-shorter", "head-kept-shorter"],
)
def test_a_file_the_retention_cap_kept_less_of_shows_the_previews_of_the_whole_text(
    tmp_path: Path, config: Settings
) -> None:
    """The store kept less of an end than its preview shows: a file's previews are read
    from the file, as the whole text and the stream show them (they showed only what the
    store kept before session 9, so the same output read differently by path)."""
    text = "".join(f"{n:05d} step ok\n" for n in range(1500))
    results = _three_ways(text, config, MemoryStore, tmp_path / "out.log")
    assert [_text(r) for r in results[1:]] == [_text(results[0])] * 2
    assert results[2].spill == results[0].spill
    assert results[0].spill is not None and results[0].spill.saved == "partial"


@settings(max_examples=120, deadline=None)
@given(
    data=st.data(),
    text=texts | json_documents,
    config=configs,
    suffix=st.sampled_from([None, "exit 1", "\ud800"]),
    fail_after=st.none() | st.integers(0, 9000),
)
def test_a_file_and_a_stream_end_as_the_whole_output(
    data: st.DataObject, text: str, config: Settings, suffix: str | None, fail_after: int | None
) -> None:
    """The same output given whole, streamed or handed over as a file reads the same:
    pointer text and SpillInfo, saved or not (a store that fails after some bytes)."""
    padded = text * (1 + 6000 // max(1, len(encode(text))))
    if data.draw(st.booleans()):  # lines that line shaping cuts
        padded = padded.replace("\n", "") + "\n" + padded[:300]

    def store() -> MemoryStore:
        return MemoryStore() if fail_after is None else OracleFailingStore(fail_after)

    def run(result: ToolResult | None = None) -> ToolResult:
        service = TruncationService(store(), config)
        if result is not None:
            return service.truncate_for_model(result, tool_name="t", tool_call_id="c")
        acc = service.accumulator(tool_name="t", tool_call_id="c")
        for chunk in data.draw(pieces(padded)):
            acc.write(chunk)
        return acc.ok(suffix)

    whole = run(ToolResult(content=(TextPart(padded),), suffix=suffix))
    with tempfile.NamedTemporaryFile(suffix=".log") as log:
        log.write(encode(padded))
        log.flush()
        adopted = run(ToolResult(content=(), full_output_path=log.name, suffix=suffix))
    expected = encode(_text(whole)).decode("utf-8")
    for other in (run(), adopted):
        saved = (other.spill and other.spill.saved, whole.spill and whole.spill.saved)
        if fail_after is not None and saved[0] != saved[1]:
            continue  # the failing store took different writes before it failed
        assert _text(other) == expected
        assert other.spill == whole.spill


@pytest.mark.parametrize(
    "parts",
    [
        ["[INFO] step ok\n" * 400, json.dumps(_JSON_ROWS, indent=1)],
        ['[{"id": 0', json.dumps(_JSON_ROWS)[9:]],
    ],
    ids=["log-then-json", "json-split-early"],
)
def test_a_result_of_several_parts_reads_as_its_joined_output_streamed(
    parts: list[str],
) -> None:
    """Whether a cut output "starts like JSON" is judged on the start of the whole output
    (its parts joined), as a stream of it is: a log followed by JSON structured content
    does not (it was judged on the last part before session 9)."""
    from spillstore.text import PART_SEPARATOR

    whole = TruncationService(MemoryStore(), _CUT).truncate_for_model(
        ToolResult(content=tuple(TextPart(p) for p in parts)), tool_name="t", tool_call_id="c"
    )
    acc = TruncationService(MemoryStore(), _CUT).accumulator(tool_name="t", tool_call_id="c")
    acc.write(PART_SEPARATOR.join(parts))
    streamed = acc.ok()
    assert _text(streamed) == _text(whole)
    assert ("starts like JSON" in _text(whole)) == parts[0].startswith("[{")
