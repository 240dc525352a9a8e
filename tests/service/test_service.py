"""TruncationService: the decision flow of design.md §2, the pointer, and its guarantees."""

from __future__ import annotations

import asyncio
import errno
import hashlib
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._content import EmbeddedText, MediaPart, TextPart, ToolResult
from spillstore._core.utf8 import encode, utf8_size
from spillstore._errors import ConfigError, StoreError
from spillstore._service.service import TruncationService
from spillstore._settings import MIN_BUDGET_BYTES, POINTER_RESERVE_BYTES, Settings
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta
from tests.strategies import hostile_text

SMALL = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)


def _service(store: object | None = None, settings: Settings = SMALL) -> TruncationService:
    return TruncationService(store or MemoryStore(), settings)  # type: ignore[arg-type]


def _text(result: ToolResult) -> str:
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


def _log(lines: int, width: int = 40) -> str:
    return "".join(f"line {n:07d} " + "x" * (width - 14) + "\n" for n in range(1, lines + 1))


class FullDisk(MemoryStore):
    """A store whose disk is full: every put fails as a real one would."""

    def put(self, data: Iterable[bytes | str] | bytes | str, **kwargs: object) -> SpillMeta:  # type: ignore[override]
        raise StoreError(errno.ENOSPC, "No space left on device")


def test_spill_exempt_result_is_same_object() -> None:
    """A result marked spill-exempt comes back as the very same object, whatever its size."""
    result = ToolResult(content=(TextPart("x" * 100_000),), spill_exempt=True)
    assert _service().truncate_for_model(result, tool_name="t", tool_call_id="c") is result


@pytest.mark.parametrize(
    "texts",
    [("a\ud800b",), ("\udfff", "é"), ("ok", "x\ud83d"), ("\ud800" * 1_000,)],
)
def test_a_fitting_result_with_lone_surrogates_reaches_the_model_as_strict_utf8(
    texts: tuple[str, ...],
) -> None:
    """Design 0b: the model's text is strict UTF-8 in every mode, a result that fits
    included (each lone surrogate U+FFFD; it came back as the same object, surrogates and
    all); its other parts, flags and metadata stay; sync and async agree."""
    media = MediaPart(kind="image", mime_type="image/png", data=b"\x89PNG")
    result = ToolResult(
        content=(*[TextPart(text) for text in texts], media),
        is_error=True,
        metadata={"k": 1},
        suffix="end \udc80",
    )
    service = _service()
    out = service.truncate_for_model(result, tool_name="t", tool_call_id="c")
    again = asyncio.run(service.atruncate_for_model(result, tool_name="t", tool_call_id="c"))
    assert out == again
    shown = [part.text for part in out.content if isinstance(part, TextPart)]
    assert shown == [encode(text).decode("utf-8") for text in (*texts, "end \udc80")]
    assert all(text.encode("utf-8") for text in shown)  # strict: raises on a surrogate
    assert media in out.content and out.is_error and out.metadata == {"k": 1}
    assert out.spill is None
    plain = service.truncate_for_model(texts[0], tool_name="t", tool_call_id="c")
    assert [part.text for part in plain.content] == [encode(texts[0]).decode("utf-8")]


def test_fitting_result_is_same_object() -> None:
    """A result within budget comes back as the very same object, with no spill info."""
    result = ToolResult(content=(TextPart("hello"),), metadata={"k": 1})
    out = _service().truncate_for_model(result, tool_name="t", tool_call_id="c")
    assert out is result
    assert out.spill is None


def test_plain_str_is_wrapped_without_copy() -> None:
    """A fitting plain str is wrapped in a ToolResult that holds the very same str."""
    text = "short output"
    out = _service().truncate_for_model(text, tool_name="t", tool_call_id="c")
    assert out.content[0].text is text  # type: ignore[union-attr]


def test_exactly_budget_fits_and_one_more_spills() -> None:
    """Output of exactly the budget passes untouched; budget + 1 is cut and spilled."""
    service = _service()
    exact = ToolResult(content=(TextPart("a" * 4_000),))
    assert service.truncate_for_model(exact, tool_name="t", tool_call_id="c") is exact
    over = service.truncate_for_model("a" * 4_001, tool_name="t", tool_call_id="c")
    assert over.spill is not None
    assert utf8_size(_text(over)) <= 4_000


def test_replace_mode_previews_and_exact_elided_range() -> None:
    """An oversized output is replaced by a pointer whose elided range reads back exactly."""
    store = MemoryStore()
    output = _log(1_000)
    out = _service(store).truncate_for_model(output, tool_name="bash", tool_call_id="call_1")
    info = out.spill
    assert info is not None and info.mode == "replace" and info.saved == "full"
    text = _text(out)
    assert utf8_size(text) <= SMALL.max_bytes
    assert text.startswith("[spillstore] The output of tool bash (call call_1)")
    data = encode(output)
    assert info.total_bytes == len(data)
    assert info.total_lines == 1_000
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    [(start, end)] = info.elided_bytes
    assert store.read_bytes(info.spill_id, start, end) == data[start:end]  # type: ignore[arg-type]
    assert f"Not shown: bytes [{start}, {end})" in text
    head_label = f"--- head: bytes [0, {start}), lines 1-"
    assert head_label in text
    shown_head = text.split(head_label, 1)[1].split("\n", 1)[1]
    assert shown_head.startswith(output[:start].rstrip("\n"))
    first, last = info.elided_lines[0]
    assert first == data.count(b"\n", 0, start) + 1
    assert last == data.count(b"\n", 0, end - 1) + 1
    assert f'read_spill(spill="{info.spill_id}", offset={first}, limit=200)' in text
    assert f'grep_spill(pattern="...", spill="{info.spill_id}")' in text


def test_append_mode_when_cutting_long_lines_suffices() -> None:
    """A few huge lines are cut in place, every line still shows, and a pointer is appended."""
    store = MemoryStore()
    output = "header\n" + "j" * 50_000 + "\nfooter\n"
    out = _service(store).truncate_for_model(output, tool_name="cat", tool_call_id="c2")
    info = out.spill
    assert info is not None and info.mode == "append"
    text = _text(out)
    assert text.startswith(
        "header\n" + "j" * 200 + " [... line cut: 49800 more bytes from byte 207]"
    )
    assert "\nfooter" in text
    assert "1 line(s) of cat (call c2) were longer than 200 bytes" in text
    assert f'read_spill(spill="{info.spill_id}", byte_offset=207, max_bytes=4096)' in text
    assert store.read_bytes(info.spill_id, 0, info.total_bytes) == encode(output)  # type: ignore[arg-type]
    assert utf8_size(text) <= SMALL.max_bytes


def test_single_50mb_line_is_shaped_to_one_cut_line() -> None:
    """One 50 MB line becomes its first max_line_bytes plus a marker, and is saved whole."""
    store = MemoryStore()
    output = "z" * 50_000_000
    out = _service(store).truncate_for_model(output, tool_name="t", tool_call_id="c")
    assert out.spill is not None and out.spill.mode == "append"
    assert out.spill.total_bytes == 50_000_000
    assert utf8_size(_text(out)) <= SMALL.max_bytes


def test_store_failure_still_returns_bounded_preview() -> None:
    """When the store fails, the call does not: the preview says the output was not saved."""
    output = _log(1_000)
    out = _service(FullDisk()).truncate_for_model(output, tool_name="t", tool_call_id="c")
    info = out.spill
    assert info is not None and info.saved == "none"
    text = _text(out)
    assert "NOT saved (StoreError: [Errno 28] No space left on device)" in text
    assert "read_spill" not in text
    assert info.sha256 == hashlib.sha256(encode(output)).hexdigest()
    assert utf8_size(text) <= SMALL.max_bytes


def test_partial_save_never_claims_full() -> None:
    """Past the retention cap the pointer names the stored ranges and never says 'in full'."""
    settings = Settings(
        max_bytes=4_000,
        head_bytes=1_000,
        tail_bytes=500,
        retention_bytes=8_192,
        retained_tail_bytes=2_048,
    )
    store = MemoryStore()
    output = _log(2_000)
    out = _service(store, settings).truncate_for_model(output, tool_name="t", tool_call_id="c")
    info = out.spill
    assert info is not None and info.saved == "partial"
    text = _text(out)
    assert "in full" not in text
    assert "Saved in part as spill" in text
    assert "were not kept anywhere" in text
    for start, end in info.stored_ranges:
        assert store.read_bytes(info.spill_id, start, end) == encode(output)[start:end]  # type: ignore[arg-type]


def test_media_kept_in_order_and_blobs_saved_as_spills() -> None:
    """Images stay attached in order; a blob of a cut result is saved as a spill of its own."""
    image = MediaPart("image", "image/png", b"\x89PNG")
    blob = MediaPart("blob", "application/pdf", b"%PDF" * 10, uri="file:///r.pdf")
    result = ToolResult(
        content=(TextPart(_log(1_000)), image, blob), is_error=True, metadata={"m": 1}
    )
    service = _service()
    out = service.truncate_for_model(result, tool_name="t", tool_call_id="c")
    assert out.content[1] is image
    notice = out.content[2]
    assert isinstance(notice, TextPart)
    assert notice.text.startswith("[blob application/pdf, 40 bytes, uri file:///r.pdf, saved as")
    spill = notice.text.split("saved as spill ")[1].split(";")[0]
    assert service.store.read_bytes(spill, 0, 40) == b"%PDF" * 10
    assert out.is_error is True and out.metadata == {"m": 1}
    assert "Only the text was saved; 1 media part(s) stay attached unchanged." in _text(out)


def test_fitting_result_with_blob_comes_back_unchanged() -> None:
    """A small result with a blob fits, blob included, so it comes back as the same object."""
    blob = MediaPart("blob", "application/zip", b"PK")
    result = ToolResult(content=(TextPart("ok"), blob))
    assert _service().truncate_for_model(result, tool_name="t", tool_call_id="c") is result


def test_embedded_text_resources_are_capped_and_spilled() -> None:
    """An embedded text resource counts as text: capped, spilled, and named in the pointer."""
    store = MemoryStore()
    result = ToolResult(content=(EmbeddedText("file:///big.log", _log(500)),))
    out = _service(store).truncate_for_model(result, tool_name="t", tool_call_id="c")
    assert out.spill is not None
    assert "Embedded text resource file:///big.log is part of the text." in _text(out)


def test_suffix_after_pointer_and_never_cut() -> None:
    """The suffix follows the pointer and survives the cap; a fitting one is folded in."""
    out = _service().truncate_for_model(
        ToolResult(content=(TextPart(_log(1_000)),), suffix="exit code 2"),
        tool_name="t",
        tool_call_id="c",
    )
    text = _text(out)
    assert text.endswith("--- end of preview ---\nexit code 2")
    small = _service().truncate_for_model(
        ToolResult(content=(TextPart("ok"),), suffix="exit code 0"), tool_name="t", tool_call_id="c"
    )
    assert _text(small) == "ok\nexit code 0"


def test_huge_suffix_is_itself_capped() -> None:
    """A suffix larger than the budget is shown cut, with a note naming where it is whole."""
    out = _service().truncate_for_model(
        ToolResult(content=(TextPart(_log(1_000)),), suffix="E" * 20_000),
        tool_name="t",
        tool_call_id="c",
    )
    text = _text(out)
    assert utf8_size(text) <= SMALL.max_bytes
    assert "of 20000 not shown; the whole suffix is saved as spill" in text


def test_suffix_not_repeated_in_append_mode() -> None:
    """In append mode a suffix already ending the text is not repeated."""
    output = "j" * 10_000 + "\nexit code 1\n"
    out = _service().truncate_for_model(
        ToolResult(content=(TextPart(output),), suffix="exit code 1"),
        tool_name="t",
        tool_call_id="c",
    )
    assert _text(out).count("exit code 1") == 1


def test_output_is_deterministic_across_stores(tmp_path: Path) -> None:
    """The same result and config give byte-identical text, even from a fresh store object."""
    output = _log(1_000)
    first = _service(LocalStore(tmp_path)).truncate_for_model(
        output, tool_name="t", tool_call_id="c"
    )
    second = _service(LocalStore(tmp_path)).truncate_for_model(
        output, tool_name="t", tool_call_id="c"
    )
    assert _text(first) == _text(second)


@pytest.mark.parametrize(
    "name", ["", "x" * 10_000, "../../etc/passwd", "a/b\\c", "line\nbreak", ".."]
)
def test_hostile_tool_names_and_call_ids(tmp_path: Path, name: str) -> None:
    """Empty, huge, path-like and multi-line names neither break the store nor the budget."""
    store = LocalStore(tmp_path)
    out = _service(store).truncate_for_model(_log(500), tool_name=name, tool_call_id=name)
    assert out.spill is not None and out.spill.saved == "full"
    assert utf8_size(_text(out)) <= SMALL.max_bytes
    assert Path(out.spill.path or "").resolve().is_relative_to(tmp_path.resolve())


def test_empty_output_passes() -> None:
    """An empty output passes through untouched."""
    result = ToolResult(content=(TextPart(""),))
    assert _service().truncate_for_model(result, tool_name="t", tool_call_id="c") is result


def test_nul_bytes_are_kept_exactly() -> None:
    """NUL characters are counted, stored and read back like any other byte."""
    store = MemoryStore()
    output = "a\x00b\n" * 3_000
    out = _service(store).truncate_for_model(output, tool_name="t", tool_call_id="c")
    assert out.spill is not None
    assert store.read_bytes(out.spill.spill_id, 0, out.spill.total_bytes) == encode(output)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_async_twin_gives_identical_result() -> None:
    """atruncate_for_model makes the same decisions and text as the sync shell."""
    output = _log(1_000)
    sync = _service().truncate_for_model(output, tool_name="t", tool_call_id="c")
    asynced = await _service().atruncate_for_model(output, tool_name="t", tool_call_id="c")
    assert asynced == sync


budgets = st.integers(min_value=MIN_BUDGET_BYTES, max_value=6_000)


@settings(max_examples=200)
@given(hostile_text, st.integers(1, 400), budgets, st.sampled_from([None, 80, 300]))
def test_model_text_never_exceeds_budget_and_ranges_read_back(
    piece: str, reps: int, budget: int, max_line: int | None
) -> None:
    """For any output and budget, text stays in budget and every elided range reads back."""
    config = Settings(
        max_bytes=budget,
        head_bytes=(budget - POINTER_RESERVE_BYTES) // 2,
        tail_bytes=(budget - POINTER_RESERVE_BYTES) // 4,
        max_line_bytes=max_line,
    )
    store = MemoryStore()
    output = piece * reps
    out = _service(store, config).truncate_for_model(output, tool_name="t", tool_call_id="c")
    assert utf8_size(_text(out)) <= budget
    if out.spill is None:
        return
    data = encode(output)
    assert out.spill.total_bytes == len(data)
    for start, end in out.spill.elided_bytes:
        assert store.read_bytes(out.spill.spill_id, start, end) == data[start:end]  # type: ignore[arg-type]


def _file_result(path: Path, **kwargs: object) -> ToolResult:
    return ToolResult(content=(), full_output_path=str(path), **kwargs)  # type: ignore[arg-type]


def test_full_output_file_is_adopted_and_previewed(tmp_path: Path) -> None:
    """A tool's own log file becomes the spill; the preview and ranges come from it."""
    log = tmp_path / "run.log"
    output = _log(2_000)
    log.write_text(output, encoding="utf-8")
    store = LocalStore(tmp_path / "store")
    out = _service(store).truncate_for_model(
        _file_result(log, suffix="exit code 0"), tool_name="sh", tool_call_id="c"
    )
    info = out.spill
    assert info is not None and info.saved == "full" and info.mode == "replace"
    data = encode(output)
    assert info.total_bytes == len(data) and info.total_lines == 2_000
    assert info.sha256 == hashlib.sha256(data).hexdigest()
    [(start, end)] = info.elided_bytes
    assert store.read_bytes(info.spill_id or "", start, end) == data[start:end]
    assert _text(out).endswith("--- end of preview ---\nexit code 0")
    assert out.full_output_path is None


def test_small_full_output_file_is_shown_inline(tmp_path: Path) -> None:
    """A small output file is simply shown: its text becomes the result's text."""
    log = tmp_path / "small.log"
    log.write_text("all good\n", encoding="utf-8")
    out = _service().truncate_for_model(_file_result(log), tool_name="t", tool_call_id="c")
    assert _text(out) == "all good\n"
    assert out.spill is None


def test_missing_full_output_file_is_said(tmp_path: Path) -> None:
    """A file that cannot be adopted is named with the reason; the inline text still shows."""
    result = ToolResult(
        content=(TextPart("partial inline output"),), full_output_path=str(tmp_path / "nope.log")
    )
    out = _service().truncate_for_model(result, tool_name="t", tool_call_id="c")
    text = _text(out)
    assert text.startswith("partial inline output\n[spillstore] The tool's full output in")
    assert "could not be saved (FileNotFoundError" in text


@pytest.mark.anyio
async def test_async_file_mode_equals_sync(tmp_path: Path) -> None:
    """The async shell adopts a file with the same result as the sync one."""
    log = tmp_path / "run.log"
    log.write_text(_log(2_000), encoding="utf-8")
    sync = _service(LocalStore(tmp_path / "a")).truncate_for_model(
        _file_result(log), tool_name="t", tool_call_id="c"
    )
    asynced = await _service(LocalStore(tmp_path / "a")).atruncate_for_model(
        _file_result(log), tool_name="t", tool_call_id="c"
    )
    assert _text(asynced) == _text(sync)


def test_spill_tools_answer_the_pointer_hint_verbatim() -> None:
    """The service's spill tools carry the names its hints call, and the hint's call works."""
    store = MemoryStore()
    service = TruncationService(store, SMALL, read_tool="fetch_spill", grep_tool="search_spill")
    out = service.truncate_for_model(_log(1_000), tool_name="t", tool_call_id="c")
    info = out.spill
    assert info is not None and info.spill_id is not None
    first = info.elided_lines[0][0]
    assert f'fetch_spill(spill="{info.spill_id}", offset={first}, limit=200)' in _text(out)
    tools = service.spill_tools()
    page = tools.call("fetch_spill", {"spill": info.spill_id, "offset": first, "limit": 200})
    assert not page.is_error
    assert f"line {first:07d}" in _text(page)
    assert page.spill_exempt


@pytest.mark.anyio
@pytest.mark.parametrize("value", [None, 123, b"x" * 60_000, ["a", "b"], {"text": "x"}])
async def test_a_result_that_is_not_a_str_or_tool_result_is_a_config_error(
    value: object,
) -> None:
    """A wrong type gets a ConfigError naming it, from both twins (not an AttributeError)."""
    service = TruncationService(MemoryStore())
    with pytest.raises(ConfigError, match=type(value).__name__):
        service.truncate_for_model(value, tool_name="t", tool_call_id="c")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=type(value).__name__):
        await service.atruncate_for_model(value, tool_name="t", tool_call_id="c")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("result", "named"),
    [
        (ToolResult(content=None), "content"),  # type: ignore[arg-type]
        (ToolResult(content="x" * 60_000), "content"),  # type: ignore[arg-type]
        (ToolResult(content=["x" * 60_000]), "holds a str"),  # type: ignore[list-item]
        (ToolResult(content=(TextPart(None),)), "TextPart.text"),  # type: ignore[arg-type]
        (ToolResult(content=(TextPart(b"x"),)), "TextPart.text"),  # type: ignore[arg-type]
        (ToolResult(content=(TextPart("x" * 60_000),), suffix=5), "suffix"),  # type: ignore[arg-type]
        (ToolResult(content=(), full_output_path=123), "full_output_path"),  # type: ignore[arg-type]
        (ToolResult(content=(MediaPart("blob", "x", None),)), "MediaPart.data"),  # type: ignore[arg-type]
    ],
)
def test_a_tool_result_holding_wrong_types_is_a_config_error_naming_the_field(
    result: ToolResult, named: str
) -> None:
    """Wrong field types raise a ConfigError naming the field, not a TypeError from inside."""
    with pytest.raises(ConfigError, match=named):
        TruncationService(MemoryStore()).truncate_for_model(result, tool_name="t", tool_call_id="c")


def test_a_spill_exempt_result_passes_through_whatever_it_holds() -> None:
    """The exemption is checked first: such a result comes back as the same object."""
    result = ToolResult(content=("not a part",), spill_exempt=True)  # type: ignore[arg-type]
    service = TruncationService(MemoryStore())
    assert service.truncate_for_model(result, tool_name="t", tool_call_id="c") is result


@pytest.mark.parametrize("entry", ["text", "async", "stream", "file"])
def test_a_tool_name_or_call_id_with_a_lone_surrogate_is_saved_on_a_local_store(
    tmp_path: Path, entry: str
) -> None:
    """The names a host passes are strict UTF-8 by the time they reach the store (a lone
    surrogate becomes U+FFFD): the local catalog raised UnicodeEncodeError, which is no
    store failure, so the tool call itself failed."""
    service = TruncationService(LocalStore(tmp_path / "store"), Settings(max_bytes=4096))
    text = "line of output\n" * 1000
    names = {"tool_name": "bash\ud800", "tool_call_id": "call\udfff"}
    if entry == "text":
        result = service.truncate_for_model(text, **names)
    elif entry == "async":
        result = asyncio.run(service.atruncate_for_model(text, **names))
    elif entry == "stream":
        acc = service.accumulator(**names)
        acc.write(text)
        result = acc.ok()
    else:
        log = tmp_path / "out.log"
        log.write_text(text, encoding="utf-8")
        result = service.truncate_for_model(
            ToolResult(content=(), full_output_path=str(log)), **names
        )
    assert result.spill is not None and result.spill.saved == "full"
    (meta,) = service.store.list("default")
    assert (meta.tool_name, meta.tool_call_id) == ("bash\ufffd", "call\ufffd")
    assert service.store.read_bytes(meta.spill_id, 0, meta.total_bytes) == text.encode()
