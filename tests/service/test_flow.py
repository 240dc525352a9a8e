"""The flow machinery: store failures become "NOT saved", programming errors surface."""

from __future__ import annotations

from pathlib import Path

import pytest

from spillstore._content import TextPart, ToolResult
from spillstore._core.utf8 import utf8_size
from spillstore._errors import ConfigError, SpillExpired
from spillstore._service.flow import Flow, Request, adrive, blocking, call, drive
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from tests.service.failures import BUGS, DEAD_BACKENDS, FailingStore

SMALL = Settings(max_bytes=4_000, head_bytes=1_000, tail_bytes=500, max_line_bytes=200)
BIG = "".join(f"line {n:06d} of a long log\n" for n in range(2_000))


def _text(result: ToolResult) -> str:
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


@pytest.mark.parametrize("error", DEAD_BACKENDS, ids=lambda e: type(e).__name__)
def test_dead_backend_never_fails_the_call(error: Exception) -> None:
    """Disk full, a refused connection, a timeout: the model gets a bounded NOT saved preview."""
    out = TruncationService(FailingStore(error), SMALL).truncate_for_model(
        BIG, tool_name="t", tool_call_id="c"
    )
    assert out.spill is not None and out.spill.saved == "none"
    assert f"NOT saved ({type(error).__name__}: " in _text(out)


@pytest.mark.anyio
@pytest.mark.parametrize("error", DEAD_BACKENDS, ids=lambda e: type(e).__name__)
async def test_dead_backend_never_fails_the_async_call(error: Exception) -> None:
    """The async twin turns the same store failures into the same preview."""
    service = TruncationService(FailingStore(error), SMALL)
    out = await service.atruncate_for_model(BIG, tool_name="t", tool_call_id="c")
    assert out == service.truncate_for_model(BIG, tool_name="t", tool_call_id="c")


@pytest.mark.parametrize("error", BUGS, ids=lambda e: type(e).__name__)
def test_programming_errors_surface_as_themselves(error: Exception) -> None:
    """A bug (a typo'd attribute, a bad argument, a misuse) raises; it is never "NOT saved"."""
    service = TruncationService(FailingStore(error), SMALL)
    with pytest.raises(type(error)) as raised:
        service.truncate_for_model(BIG, tool_name="t", tool_call_id="c")
    assert raised.value is error


@pytest.mark.anyio
@pytest.mark.parametrize("error", BUGS, ids=lambda e: type(e).__name__)
async def test_programming_errors_surface_from_the_async_twin(error: Exception) -> None:
    """The async twin raises the very same error object."""
    service = TruncationService(FailingStore(error), SMALL)
    with pytest.raises(type(error)) as raised:
        await service.atruncate_for_model(BIG, tool_name="t", tool_call_id="c")
    assert raised.value is error


def test_a_bad_session_is_a_developer_error() -> None:
    """A session name the store refuses raises ConfigError instead of hiding in a preview."""
    service = TruncationService(MemoryStore(), SMALL, session="no/slashes")
    with pytest.raises(ConfigError):
        service.truncate_for_model(BIG, tool_name="t", tool_call_id="c")


def _two_steps() -> Flow[str]:
    first = yield blocking(str.upper, "a")
    try:
        yield blocking(int, "not a number")
    except ValueError as exc:
        second = type(exc).__name__
    return f"{first} {second}"


def test_drive_sends_results_and_throws_errors_into_the_flow() -> None:
    """The sync driver sends each request's result, and throws its exception at the yield."""
    assert drive(_two_steps()) == "A ValueError"


@pytest.mark.anyio
async def test_adrive_awaits_the_same_requests() -> None:
    """The async driver runs the same flow to the same answer."""
    assert await adrive(_two_steps()) == "A ValueError"


@pytest.mark.anyio
async def test_requests_run_their_sync_or_async_callable() -> None:
    """run() calls the sync callable, arun() awaits the async twin, with the same arguments."""
    calls: list[str] = []

    def sync(x: int, *, y: int) -> int:
        calls.append("sync")
        return x + y

    async def twin(x: int, *, y: int) -> int:
        calls.append("async")
        return x * y

    request: Request[int] = call(sync, twin, 3, y=4)
    assert request.run() == 7
    assert await request.arun() == 12
    assert calls == ["sync", "async"]


class LosesSpillAfterAdopt(LocalStore):
    """A store whose spill is collected between the adoption and the read-back."""

    def read_bytes(self, spill_id: str, start: int, end: int) -> bytes:
        raise SpillExpired(f"spill {spill_id} expired", spill_id=spill_id)


def test_spill_collected_after_adoption_falls_back_to_a_preview_of_the_file(
    tmp_path: Path,
) -> None:
    """A file-backed output whose spill vanished is said, with a preview read from the file."""
    log = tmp_path / "run.log"
    log.write_text(BIG, encoding="utf-8")
    result = ToolResult(content=(TextPart("inline part"),), full_output_path=str(log))
    service = TruncationService(LosesSpillAfterAdopt(tmp_path / "store"), SMALL)
    text = _text(service.truncate_for_model(result, tool_name="t", tool_call_id="c"))
    assert "NOT saved (SpillExpired: spill " in text
    assert BIG[:20] in text and BIG.rstrip("\n")[-20:] in text


class ReadBackFailsAfterAdopt(LocalStore):
    """A store that adopts a file, then fails to read it back (a transient I/O error)."""

    def read_bytes(self, spill_id: str, start: int, end: int) -> bytes:
        raise OSError(5, "Input/output error (injected)")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_read_back_failing_after_adoption_still_says_saved(
    tmp_path: Path, mode: str
) -> None:
    """The spill exists once adopted: a failed read-back takes the previews from the file,
    and the pointer names the saved spill (it said NOT saved)."""
    log = tmp_path / "run.log"
    log.write_text(BIG, encoding="utf-8")
    result = ToolResult(content=(TextPart("inline part"),), full_output_path=str(log))
    root = tmp_path / "store"
    service = TruncationService(ReadBackFailsAfterAdopt(root), SMALL)
    if mode == "sync":
        out = service.truncate_for_model(result, tool_name="t", tool_call_id="c")
    else:
        out = await service.atruncate_for_model(result, tool_name="t", tool_call_id="c")
    text = _text(out)
    assert "NOT saved" not in text
    assert out.spill is not None
    assert out.spill.spill_id in text
    assert BIG[:20] in text and BIG.rstrip("\n")[-20:] in text
    healthy = LocalStore(root)
    assert healthy.read_bytes(out.spill.spill_id, 0, utf8_size(BIG)) == BIG.encode()
