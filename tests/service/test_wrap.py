"""spillstore.wrap: results of plain Python tools go through the service, in their own shape."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from spillstore import (
    ConfigError,
    MediaPart,
    MemoryStore,
    Settings,
    SpillTools,
    TextPart,
    ToolResult,
    TruncationService,
)
from spillstore._service.wrap import UNKNOWN_CALL_ID, call_context, current_call_id, wrap
from spillstore.text import utf8_size

BIG = "".join(f"{i:07d} log line with some words in it\n" for i in range(80_000))
"""About 3 MB of text: far over the default 50,000-byte budget."""

SPILL = re.compile(r'spill="([^"]+)"')


def read_bytes(store: MemoryStore, pointer: str, start: int, size: int) -> str:
    """What a model gets back from read_spill in byte mode: the page body."""
    spill = SPILL.search(pointer)
    assert spill is not None, pointer
    page = SpillTools(store).read(spill.group(1), byte_offset=start, max_bytes=size)
    text = page.content[0].text  # type: ignore[union-attr]
    return text.split("\n", 1)[1].rsplit("\nnext: ", 1)[0]


def test_small_str_comes_back_as_the_same_object(memory_service: TruncationService) -> None:
    """A result within budget is returned as the very same object."""
    value = "short output"

    @wrap(service=memory_service)
    def tool() -> str:
        return value

    assert tool() is value


def test_big_str_becomes_a_pointer_and_the_bytes_can_be_read_back(
    memory_service: TruncationService, memory_store: MemoryStore
) -> None:
    """A multi-megabyte str becomes a str pointer within budget; Read returns the exact bytes."""

    @wrap(service=memory_service)
    def dump() -> str:
        return BIG

    with call_context("call_42"):
        out = dump()
    assert isinstance(out, str)
    assert utf8_size(out) <= memory_service.settings.max_bytes
    assert "tool dump (call call_42)" in out
    assert read_bytes(memory_store, out, 1_500_000, 4096) == BIG[1_500_000:1_504_096]


def test_async_tool_stays_a_coroutine_function(memory_service: TruncationService) -> None:
    """An async tool's wrapper is a coroutine function whose result is capped."""

    @wrap(service=memory_service)
    async def dump(n: int) -> str:
        await asyncio.sleep(0)
        return BIG[:n]

    assert inspect.iscoroutinefunction(dump)
    out = asyncio.run(dump(2_000_000))
    assert out.startswith("[spillstore] The output of tool dump (call unknown)")
    assert asyncio.run(dump(10)) == BIG[:10]


def test_async_callable_object_is_awaited(memory_service: TruncationService) -> None:
    """A callable object with an async __call__ is wrapped as an async tool."""

    class Tool:
        __name__ = "obj_tool"

        async def __call__(self) -> str:
            return BIG

    wrapped = wrap(Tool(), service=memory_service)
    assert inspect.iscoroutinefunction(wrapped)
    assert "tool obj_tool" in asyncio.run(wrapped())


def test_signature_name_doc_and_wrapped_are_preserved(memory_service: TruncationService) -> None:
    """Frameworks that introspect see the tool's own signature, name, docstring and annotations."""

    def search(query: str, limit: int = 10) -> str:
        """Search the logs."""
        return query * limit

    wrapped = wrap(search, service=memory_service)
    assert wrapped.__wrapped__ is search  # type: ignore[attr-defined]
    assert wrapped.__name__ == "search"
    assert wrapped.__doc__ == "Search the logs."
    assert inspect.signature(wrapped) == inspect.signature(search)
    assert wrapped.__annotations__ == search.__annotations__
    assert not inspect.iscoroutinefunction(wrapped)


def test_exceptions_pass_through_untouched(memory_service: TruncationService) -> None:
    """An exception is not a result: the very same exception object propagates."""
    error = ValueError("boom")

    @wrap(service=memory_service)
    def tool() -> str:
        raise error

    with pytest.raises(ValueError) as caught:
        tool()
    assert caught.value is error


def test_async_exceptions_pass_through_untouched(memory_service: TruncationService) -> None:
    """An async tool's exception propagates unchanged too."""

    @wrap(service=memory_service)
    async def tool() -> str:
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        asyncio.run(tool())


def test_tool_result_keeps_media_and_gets_spill_info(memory_service: TruncationService) -> None:
    """A ToolResult comes back as a ToolResult: media kept in order, spill info set."""
    image = MediaPart(kind="image", mime_type="image/png", data=b"\x89PNG")

    @wrap(service=memory_service)
    def tool() -> ToolResult:
        return ToolResult(content=(TextPart(BIG), image), is_error=True)

    out = tool()
    assert isinstance(out, ToolResult)
    assert out.is_error
    assert out.spill is not None and out.spill.saved == "full"
    assert out.content[1] is image


def test_mapping_with_text_keeps_its_other_keys(memory_service: TruncationService) -> None:
    """A dict with a str "text" comes back as a dict with the same keys and a capped text."""

    @wrap(service=memory_service)
    def tool() -> dict[str, Any]:
        return {"text": BIG, "exit_code": 3}

    out = tool()
    assert set(out) == {"text", "exit_code"}
    assert out["exit_code"] == 3
    assert utf8_size(out["text"]) <= memory_service.settings.max_bytes
    assert out["text"].startswith("[spillstore]")


def test_lists_come_back_as_lists(memory_service: TruncationService) -> None:
    """A list of str gives a list of str; a list of parts gives a list of parts."""

    @wrap(service=memory_service)
    def strings() -> list[str]:
        return [BIG[:1_000_000], BIG[1_000_000:]]

    @wrap(service=memory_service)
    def parts() -> list[Any]:
        return ["intro", MediaPart(kind="audio", mime_type="audio/wav", data=b"RIFF"), BIG]

    texts = strings()
    assert isinstance(texts, list) and all(isinstance(t, str) for t in texts)
    assert texts[0].startswith("[spillstore]")
    mixed = parts()
    assert isinstance(mixed[0], TextPart)
    assert isinstance(mixed[1], MediaPart)


@pytest.mark.parametrize(
    "value",
    [None, 42, b"x" * 100_000, {"data": {1, 2}, "big": "x" * 100_000}, [], {"small": [1, 2]}],
)
def test_other_values_pass_through(memory_service: TruncationService, value: object) -> None:
    """Values with no text the wrapper knows, and JSON values that fit, come back
    untouched (the same object)."""

    @wrap(service=memory_service)
    def tool() -> object:
        return value

    assert tool() is value


@pytest.mark.parametrize(
    "value",
    [
        {"rows": [{"id": n, "name": f"caf\u00e9 \U0001f600 {n}"} for n in range(20_000)]},
        [n * 1.5 for n in range(60_000)],
        ("tuple", 1, "x" * 80_000),
    ],
    ids=["dict", "list", "tuple"],
)
def test_a_big_json_value_becomes_a_pointer_to_its_exact_json_text(
    memory_store: MemoryStore, memory_service: TruncationService, value: object
) -> None:
    """A dict, list or tuple is measured as the JSON a host sends for it: over budget,
    the wrapper returns the pointer (a str), and the saved copy is that JSON, byte for
    byte, queryable. The async twin gives the same pointer."""
    expected = json.dumps(value, ensure_ascii=False)

    def tool() -> object:
        return value

    async def atool() -> object:
        return value

    out = wrap(tool, service=memory_service)()
    assert isinstance(out, str)
    assert utf8_size(out) <= memory_service.settings.max_bytes
    assert "query_spill" in out
    spill = SPILL.search(out)
    assert spill is not None
    raw = expected.encode()
    assert memory_store.read_bytes(spill.group(1), 0, len(raw) + 1) == raw
    again = asyncio.run(wrap(atool, service=memory_service, name="tool")())
    assert isinstance(again, str)
    assert again.split("\n", 1)[0] == out.split("\n", 1)[0]


def test_per_tool_budget_caps_smaller(memory_service: TruncationService) -> None:
    """max_bytes gives one tool a smaller budget, and its previews shrink to fit it."""

    before = memory_service.settings

    @wrap(service=memory_service, max_bytes="3KB")
    def tool() -> str:
        return BIG

    out = tool()
    assert utf8_size(out) <= 3000
    assert memory_service.settings == before  # the shared service is unchanged


@pytest.mark.parametrize("bad", [0, -1, 100, True, 2.5, "lots", "1K"])
def test_bad_budget_is_rejected_when_wrapping(
    memory_service: TruncationService, bad: object
) -> None:
    """A budget that is not a size of at least 2,048 bytes raises ConfigError at wrap time."""
    with pytest.raises(ConfigError):
        wrap(lambda: "x", service=memory_service, max_bytes=bad)  # type: ignore[arg-type]


def test_exempt_tool_is_never_cut(memory_service: TruncationService) -> None:
    """An exempt tool's result comes back untouched however big it is."""

    @wrap(service=memory_service, exempt=True)
    def reader() -> str:
        return BIG

    assert reader() is BIG


def test_wrapping_twice_caps_once(memory_service: TruncationService) -> None:
    """wrap(wrap(f)) wraps f itself: one cap, the outer options winning."""

    def dump() -> str:
        return BIG

    once = wrap(dump, service=memory_service, max_bytes=20_000)
    twice = wrap(once, max_bytes=10_000)
    assert twice.__wrapped__ is dump  # type: ignore[attr-defined]
    out = twice()
    assert utf8_size(out) <= 10_000
    assert out.count("[spillstore]") == 1
    exempt = wrap(once, exempt=True)
    assert exempt() is BIG


def test_decorator_forms(
    memory_service: TruncationService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """@wrap without parentheses uses a default service made on first call."""

    def echo(text: str) -> str:
        return text

    tool = wrap(echo)  # what @wrap without parentheses does
    assert tool is not echo
    assert tool.__wrapped__ is echo  # type: ignore[attr-defined]
    monkeypatch.setenv("SPILLSTORE_DIR", str(tmp_path))  # after wrapping: read on first call
    assert tool("ok") == "ok"
    out = tool(BIG)
    assert SPILL.search(out) is not None
    assert utf8_size(out) <= Settings().max_bytes
    assert str(tmp_path) in out

    shared = wrap(service=memory_service)(echo)  # what @wrap(service=...) does
    assert shared.__wrapped__ is echo  # type: ignore[attr-defined]
    assert shared("ok") == "ok"
    assert SPILL.search(shared(BIG)) is not None
    assert len(memory_service.store.list()) == 1


def test_default_service_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a service, the first call builds one from SPILLSTORE_* (the store root too)."""
    root = tmp_path / "spills"
    monkeypatch.setenv("SPILLSTORE_DIR", str(root))
    monkeypatch.setenv("SPILLSTORE_MAX_BYTES", "8KB")

    @wrap
    def tool() -> str:
        return BIG

    out = tool()
    assert utf8_size(out) <= 8000
    assert str(root) in out


def test_call_context_nests_and_resets() -> None:
    """call_context names the call for wrapped tools inside it, and restores the outer one."""
    assert current_call_id() == UNKNOWN_CALL_ID
    with call_context("outer"):
        with call_context("inner"):
            assert current_call_id() == "inner"
        assert current_call_id() == "outer"
    assert current_call_id() == UNKNOWN_CALL_ID
    with pytest.raises(ConfigError), call_context(""):
        pass


def test_wrapping_a_non_callable_is_a_developer_error() -> None:
    """wrap raises ConfigError for a value that cannot be called."""
    with pytest.raises(ConfigError):
        wrap(42)  # type: ignore[call-overload]
