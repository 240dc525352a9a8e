"""OutputAccumulator: streamed output ends in the same result as truncate_for_model."""

from __future__ import annotations

import errno
import hashlib

import pytest

from spillstore._content import TextPart, ToolResult
from spillstore._core.utf8 import utf8_size
from spillstore._errors import ConfigError, StoreError, UsageError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta
from spillstore._stores.writer import Sink, SpillWriter
from tests.service.failures import DEAD_BACKENDS

SMALL = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)


def _text(result: ToolResult) -> str:
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


def _log() -> str:
    return "".join(f"{n:06d} caf\u00e9 \U0001f600 ok\n" for n in range(40_000))


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_streamed_equals_whole_result() -> None:
    """Chunks split mid-character give the same pointer and spill as the whole output."""
    output = _log()
    whole = TruncationService(MemoryStore(), SMALL).truncate_for_model(
        ToolResult(content=(TextPart(output),), suffix="exit code 0"),
        tool_name="bash",
        tool_call_id="c1",
    )
    store = MemoryStore()
    acc = TruncationService(store, SMALL).accumulator(tool_name="bash", tool_call_id="c1")
    for chunk in _chunks(output.encode(), 4_093):
        acc.write(chunk)
    streamed = acc.ok("exit code 0")
    assert _text(streamed) == _text(whole)
    assert streamed.spill == whole.spill
    info = streamed.spill
    assert info is not None and info.spill_id is not None
    assert store.read_bytes(info.spill_id, 0, info.total_bytes) == output.encode()


def test_small_stream_is_inline_with_suffix() -> None:
    """A stream within budget comes back inline, with its suffix after it."""
    acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    acc.write("hello ")
    acc.write(b"world")
    out = acc.ok("exit code 0")
    assert _text(out) == "hello world\nexit code 0"
    assert out.spill is None


def test_error_marks_result_and_keeps_message() -> None:
    """error() makes an is_error result whose message survives the cap."""
    acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    acc.write(_log())
    out = acc.error("exit code 3: build failed")
    assert out.is_error is True
    assert _text(out).endswith("--- end of preview ---\nexit code 3: build failed")
    assert utf8_size(_text(out)) <= SMALL.max_bytes


def test_invalid_utf8_is_stored_raw_and_said() -> None:
    """Invalid UTF-8 shows as U+FFFD in the preview, is stored raw, and the pointer says so."""
    store = MemoryStore()
    acc = TruncationService(store, SMALL).accumulator(tool_name="t", tool_call_id="c")
    raw = (b"ok \xff\xfe line\n") * 2_000
    for chunk in _chunks(raw, 777):
        acc.write(chunk)
    out = acc.ok()
    info = out.spill
    assert info is not None and info.invalid_utf8 and info.spill_id is not None
    assert "not valid UTF-8" in _text(out)
    assert "\ufffd" in _text(out)
    assert store.read_bytes(info.spill_id, 0, info.total_bytes) == raw


def test_counts_true_total_past_retention() -> None:
    """Past the retention cap the true total, lines and tail are still reported."""
    config = Settings(
        max_bytes=4_000,
        head_bytes=1_000,
        tail_bytes=500,
        retention_bytes=8_192,
        retained_tail_bytes=2_048,
    )
    output = _log()
    acc = TruncationService(MemoryStore(), config).accumulator(tool_name="t", tool_call_id="c")
    for chunk in _chunks(output.encode(), 10_000):
        acc.write(chunk)
    out = acc.ok()
    info = out.spill
    assert info is not None and info.saved == "partial"
    assert info.total_bytes == len(output.encode())
    assert info.total_lines == 40_000
    assert (
        _text(out)
        .rstrip()
        .endswith("039999 caf\u00e9 \U0001f600 ok\n--- end of preview ---".rstrip())
    )


@pytest.mark.parametrize("error", DEAD_BACKENDS, ids=lambda e: type(e).__name__)
def test_store_failure_mid_stream_gives_bounded_preview(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """If the store fails while streaming (any store failure), the run still ends in a
    bounded, honest preview."""

    def fail(self: SpillWriter, chunk: object) -> None:
        raise error

    monkeypatch.setattr(SpillWriter, "write", fail)
    acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    for chunk in _chunks(_log().encode(), 50_000):
        acc.write(chunk)
    out = acc.ok("exit code 0")
    assert out.spill is not None and out.spill.saved == "none"
    assert "NOT saved" in _text(out)
    assert _text(out).endswith("exit code 0")
    assert utf8_size(_text(out)) <= SMALL.max_bytes


def test_bug_in_the_writer_surfaces_mid_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    """A programming error in the writer raises from write(); it is not swallowed."""

    def broken(self: SpillWriter, chunk: object) -> None:
        raise TypeError("a bug")

    monkeypatch.setattr(SpillWriter, "write", broken)
    acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    with pytest.raises(TypeError, match="a bug"):
        acc.write(_log())


@pytest.mark.parametrize("size", [10, 50_000], ids=["inline", "spilling"])
def test_finished_accumulator_refuses_more(size: int) -> None:
    """Writing or finishing after ok() is a developer error and raises UsageError."""
    acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    acc.write("x" * size)
    acc.ok()
    with pytest.raises(UsageError, match="finished"):
        acc.write("late")
    with pytest.raises(UsageError, match="finished"):
        acc.ok()
    with pytest.raises(UsageError, match="finished"):
        acc.error("late")


@pytest.mark.anyio
async def test_mixing_sync_and_async_is_refused_and_harmless() -> None:
    """A spilling accumulator written with write() refuses awrite() and aok(), and can
    still be finished with ok(): the refusal changes nothing."""
    store = MemoryStore()
    acc = TruncationService(store, SMALL).accumulator(tool_name="t", tool_call_id="c")
    acc.write("x" * 50_000)
    with pytest.raises(UsageError, match="not both"):
        await acc.awrite("more")
    with pytest.raises(UsageError, match="not both"):
        await acc.aok()
    out = acc.ok()
    assert out.spill is not None and out.spill.saved == "full"
    assert out.spill.total_bytes == 50_000
    assert [meta.total_bytes for meta in store.list()] == [50_000]


@pytest.mark.anyio
async def test_async_stream_equals_sync_stream() -> None:
    """awrite/aok make the same result as write/ok."""
    data = _log().encode()
    sync_acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    async_acc = TruncationService(MemoryStore(), SMALL).accumulator(tool_name="t", tool_call_id="c")
    for chunk in _chunks(data, 65_536):
        sync_acc.write(chunk)
        await async_acc.awrite(chunk)
    assert await async_acc.aok("done") == sync_acc.ok("done")


class _DiskFillsUp(MemoryStore):
    """A store whose disk fills up once ``room`` bytes of a spill are written."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def _create(self, session: str) -> Sink:
        return _FillingSink(super()._create(session), self.room)


class _FillingSink(Sink):
    """A sink that fails with ENOSPC once more than ``room`` bytes were written to it."""

    def __init__(self, inner: Sink, room: int) -> None:
        self.inner = inner
        self.room = room

    def write(self, data: bytes | memoryview) -> None:
        self.room -= len(data)
        if self.room < 0:
            raise StoreError(errno.ENOSPC, "No space left on device")
        self.inner.write(data)

    def publish(self, meta: SpillMeta, index: bytes) -> SpillMeta:
        return self.inner.publish(meta, index)

    def discard(self) -> None:
        self.inner.discard()


def _cut(data: bytes, chunking: str) -> list[bytes]:
    """``data`` in chunks: even ones, small ones the accumulator batches, or small and
    large ones by turns (a batch and a large chunk handed over together)."""
    if chunking != "mixed":
        return _chunks(data, int(chunking))
    out, at, n = [], 0, 0
    while at < len(data):
        size = 997 if n % 3 else 300_001
        out.append(data[at : at + size])
        at, n = at + size, n + 1
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("room", [0, 100_000, 3_000_000])
@pytest.mark.parametrize("twin", ["sync", "async"])
@pytest.mark.parametrize("stray", [None, 50_000, 5_000_000])
@pytest.mark.parametrize("chunking", ["70001", "997", "mixed"])
async def test_not_saved_preview_states_the_real_measure_when_the_disk_fills(
    room: int, twin: str, stray: int | None, chunking: str
) -> None:
    """When the store fails part-way (before, during or after the writer's threads took
    over), the "not saved" preview still gives the exact byte and line totals, sha256 and
    UTF-8 validity (an invalid byte before or after the failure included), whatever the
    chunks' sizes (small ones are handed over in batches)."""
    line = "0123456789 caf\u00e9 \U0001f600 timeout ok\n".encode()
    data = line * 200_000  # 7.6 MB: the writer's pipeline runs in its threads
    if stray is not None:
        data = data[:stray] + b"\xff" + data[stray:]
    config = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, retention_bytes=None)
    acc = TruncationService(_DiskFillsUp(room), config).accumulator(tool_name="t", tool_call_id="c")
    for chunk in _cut(data, chunking):
        if twin == "sync":
            acc.write(chunk)
        else:
            await acc.awrite(chunk)
    out = acc.ok("exit code 0") if twin == "sync" else await acc.aok("exit code 0")
    assert out.spill is not None and out.spill.saved == "none"
    assert out.spill.total_bytes == len(data)
    assert out.spill.total_lines == data.count(b"\n")
    assert out.spill.sha256 == hashlib.sha256(data).hexdigest()
    assert out.spill.invalid_utf8 == (stray is not None)
    lines = data.count(b"\n")
    assert f"{len(data)} bytes, {lines} lines" in _text(out)


@pytest.mark.anyio
@pytest.mark.parametrize("chunk", [5, None, [65, 66], 1.5])
async def test_a_chunk_that_is_not_str_or_bytes_is_refused_not_converted(chunk: object) -> None:
    """``write(5)`` is a ConfigError, not five NUL bytes; the accumulator stays usable."""
    store = MemoryStore()
    acc = TruncationService(store, SMALL).accumulator(tool_name="t", tool_call_id="c")
    with pytest.raises(ConfigError, match=type(chunk).__name__):
        acc.write(chunk)  # type: ignore[arg-type]
    twin = TruncationService(store, SMALL).accumulator(tool_name="t", tool_call_id="d")
    with pytest.raises(ConfigError):
        await twin.awrite(chunk)  # type: ignore[arg-type]
    acc.write("ok")
    assert acc.total_bytes == 2


@pytest.mark.parametrize("budget", ["4KB", "8KB", "50KB"])
def test_mostly_invalid_bytes_still_get_a_head_and_a_tail_preview(budget: str) -> None:
    """Each invalid byte shows as a 3-byte U+FFFD: the previews shrink to fit the
    budget by what they show per byte, not to nothing."""
    data = b"\xff\xfe\xc3(" * 50_000 + b"\ntail\xe2\x82"
    store = MemoryStore()
    service = TruncationService(store, Settings(max_bytes=budget))
    acc = service.accumulator(tool_name="t", tool_call_id="c")
    acc.write(data)
    out = acc.ok()
    info = out.spill
    assert info is not None and info.spill_id is not None
    assert utf8_size(_text(out)) <= service.settings.max_bytes
    (start, end), *_ = info.elided_bytes
    assert start > service.settings.head_bytes // 4  # a head, not an empty one
    assert end < len(data)  # and a tail
    head_shown = data[:start].decode("utf-8", "replace")
    assert head_shown in _text(out)
    assert store.read_bytes(info.spill_id, 0, start) == data[:start]
