"""The pointer of a JSON output: its shape, and how to query it, within the same budget."""

from __future__ import annotations

import json

import pytest

from spillstore import MemoryStore, Settings, TruncationService

DOCUMENT = json.dumps(
    {"total": 4000, "items": [{"id": i, "name": f"user{i}"} for i in range(4000)]}
)


def _text(service: TruncationService, output: str) -> str:
    result = service.truncate_for_model(output, tool_name="fetch", tool_call_id="c1")
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def test_json_pointer_shows_the_shape_and_a_ready_query_within_the_budget() -> None:
    """A JSON output's pointer has its shape and a query call; the text stays in budget."""
    service = TruncationService(MemoryStore(), Settings(max_bytes=8000))
    text = _text(service, DOCUMENT)
    assert len(text.encode()) <= 8000
    assert '  items: array[4000] of {id: int (0), name: str ("user0")}' in text
    assert 'query_spill(spill="fetch-' in text and 'expression=".items[0]")' in text
    assert text.index("JSON object") < text.index("--- head:")
    head_end = int(text.split("--- head: bytes [0, ", 1)[1].split(")", 1)[0])
    assert head_end < service.settings.head_bytes  # the shape took part of the head's room


def test_json_pointer_is_deterministic_and_stores_the_bytes_unchanged() -> None:
    """Detection never changes what is stored, and the same output renders the same bytes."""
    store = MemoryStore()
    service = TruncationService(store)
    doubled = DOCUMENT * 1  # the same text
    first, second = _text(service, DOCUMENT), _text(service, doubled)
    assert first == second
    (meta,) = store.list("default")
    assert store.read_bytes(meta.spill_id, 0, meta.total_bytes) == DOCUMENT.encode()


def test_a_json_output_saved_in_part_says_why_it_has_no_shape() -> None:
    """When the retention cap cut the spill, no shape (a stream or a file could not give
    one) and the pointer says why and points to grep instead of query."""
    service = TruncationService(
        MemoryStore(), Settings(retention_bytes=20_000, retained_tail_bytes=4096)
    )
    text = _text(service, DOCUMENT)
    assert "JSON object" not in text
    assert (
        "It starts like JSON, but the retention cap saved it in part, so it has no shape and"
        " query_spill cannot parse it; search it with grep_spill." in text
    )


def test_text_output_pointer_has_no_json_block() -> None:
    """Output that is not JSON keeps the pointer it had (the snapshots pin its wording)."""
    text = _text(TruncationService(MemoryStore()), "x" * 100_000)
    assert "query_spill" not in text and "JSON" not in text


def test_a_streamed_json_output_gets_its_shape_from_the_store() -> None:
    """A stream (``spillstore run -- cat big.json``) is read back once for its shape."""
    store = MemoryStore()
    accumulator = TruncationService(store).accumulator(tool_name="cat", tool_call_id="run")
    data = DOCUMENT.encode()
    for start in range(0, len(data), 4096):
        accumulator.write(data[start : start + 4096])
    (part,) = accumulator.ok().content
    text = part.text  # type: ignore[union-attr]
    assert '  items: array[4000] of {id: int (0), name: str ("user0")}' in text
    assert 'query_spill(spill="cat-' in text


def test_a_streamed_log_is_not_read_back() -> None:
    """A stream whose first byte cannot start JSON costs no read of the spill."""
    store = MemoryStore()
    reads: list[object] = []
    original = store.read_bytes
    store.read_bytes = lambda *a: reads.append(a) or original(*a)  # type: ignore[method-assign]
    accumulator = TruncationService(store).accumulator(tool_name="sh", tool_call_id="run")
    accumulator.write("log line\n" * 20_000)
    (part,) = accumulator.ok().content
    assert "JSON" not in part.text  # type: ignore[union-attr]
    assert reads == []


@pytest.mark.anyio
@pytest.mark.parametrize("depth", [1100, 100_000])
@pytest.mark.parametrize("entry", ["whole", "async", "stream"])
async def test_json_nested_deeper_than_the_parsers_go_gets_a_pointer_not_an_error(
    depth: int, entry: str
) -> None:
    """A document nested past the decoders' recursion is cut and saved, without a shape."""
    output = '{"a":' * depth + "1" + "}" * depth
    store = MemoryStore()
    service = TruncationService(store, Settings(max_bytes=4000))
    if entry == "whole":
        result = service.truncate_for_model(output, tool_name="fetch", tool_call_id="c1")
    elif entry == "async":
        result = await service.atruncate_for_model(output, tool_name="fetch", tool_call_id="c1")
    else:
        accumulator = service.accumulator(tool_name="fetch", tool_call_id="c1")
        accumulator.write(output)
        result = accumulator.ok()
    assert result.spill is not None and result.spill.saved == "full"
    (part,) = result.content
    assert len(part.text.encode()) <= 4000  # type: ignore[union-attr]
    assert "query_spill" not in part.text  # type: ignore[union-attr]
    (meta,) = store.list("default")
    assert store.read_bytes(meta.spill_id, 0, meta.total_bytes) == output.encode()
