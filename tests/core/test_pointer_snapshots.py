"""Snapshot tests pin the pointer's three wordings and append mode, byte for byte.

To accept a deliberate format change, run ``pytest --update-snapshots``: each snapshot
that differs is rewritten and its test fails, naming the file, so an update never passes
unseen. Review the diff of tests/core/snapshots/, run again (now green), and commit it
with the change (and the README).
"""

from __future__ import annotations

import errno
from collections.abc import Iterable
from pathlib import Path

import pytest

from spillstore._content import TextPart, ToolResult
from spillstore._errors import StoreError
from spillstore._service.service import TruncationService
from spillstore._settings import Settings
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta

SNAPSHOTS = Path(__file__).parent / "snapshots"
CONFIG = Settings(max_bytes=2_400, head_bytes=300, tail_bytes=200, max_line_bytes=120)
PARTIAL = Settings(
    max_bytes=2_400,
    head_bytes=300,
    tail_bytes=200,
    max_line_bytes=120,
    retention_bytes=4_096,
    retained_tail_bytes=1_024,
)


class FullDisk(MemoryStore):
    """A store that always fails to save, like a full disk."""

    def put(self, data: Iterable[bytes | str] | bytes | str, **kwargs: object) -> SpillMeta:  # type: ignore[override]
        raise StoreError(errno.ENOSPC, "No space left on device")


class WithPath(MemoryStore):
    """A memory store whose spills name a file, as the local store's do."""

    def put(self, data: Iterable[bytes | str] | bytes | str, **kwargs: object) -> SpillMeta:  # type: ignore[override]
        meta = super().put(data, **kwargs)  # type: ignore[arg-type]
        return meta.model_copy(update={"path": f"/home/u/.cache/spillstore/{meta.spill_id}.out"})


def _log(lines: int) -> str:
    return "".join(f"{n:05d} step ok\n" for n in range(1, lines + 1))


CASES = {
    "saved_in_full": (MemoryStore, CONFIG, _log(800), "exit code 0"),
    "saved_in_part": (MemoryStore, PARTIAL, _log(800), "exit code 0"),
    "not_saved": (FullDisk, CONFIG, _log(800), "exit code 1"),
    "append_mode": (MemoryStore, CONFIG, "start\n" + "J" * 5_000 + "\nend\n", None),
    "saved_in_full_with_path": (WithPath, CONFIG, _log(800), "exit code 0"),
    "append_mode_with_path": (WithPath, CONFIG, "start\n" + "J" * 5_000 + "\nend\n", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pointer_snapshot(name: str, pytestconfig: pytest.Config) -> None:
    """The rendered text for each wording matches its snapshot exactly."""
    store_type, config, output, suffix = CASES[name]
    service = TruncationService(store_type(), config)
    result = service.truncate_for_model(
        ToolResult(content=(TextPart(output),), suffix=suffix),
        tool_name="bash",
        tool_call_id="call_42",
    )
    text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
    path = SNAPSHOTS / f"{name}.txt"
    expected = path.read_text(encoding="utf-8") if path.exists() else None
    if pytestconfig.getoption("update_snapshots") and text != expected:
        path.write_text(text, encoding="utf-8")
        pytest.fail(f"rewrote {path}: review its diff, then run the tests again")
    assert text == expected


@pytest.mark.parametrize("name", ["saved_in_full_with_path", "append_mode_with_path"])
def test_a_spill_path_ends_its_own_line_with_nothing_glued_to_it(name: str) -> None:
    """The file path is alone after its label, so copying it never copies punctuation."""
    store_type, config, output, suffix = CASES[name]
    result = TruncationService(store_type(), config).truncate_for_model(
        ToolResult(content=(TextPart(output),), suffix=suffix), tool_name="bash", tool_call_id="c"
    )
    assert result.spill is not None and result.spill.path is not None
    text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
    assert f"\nFile: {result.spill.path}\n" in f"{text}\n"
    assert text.count(result.spill.path) == 1
