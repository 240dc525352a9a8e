"""Writes a store root in the files layout of spillstore 0.1 (format 1), byte for byte as
0.1's ``LocalStore`` did: per spill a data file ``<id>.out``, a line index ``<id>.idx``
and a sidecar ``<id>.json`` (its presence made the spill visible), tombstones
``<id>.gone``. The store no longer writes this layout; it migrates it when it opens it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta

Spill = tuple[str, bytes]
"""``(session, data)``: one spill to write (tool ``bash``, call id its position)."""


def write_files_layout(root: Path, spills: list[Spill], *, marked: bool = True) -> list[SpillMeta]:
    """Write ``spills`` under ``root`` in the files layout; return their metadata."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    memory = MemoryStore(retention_bytes=None)
    metas = []
    for n, (session, data) in enumerate(spills):
        meta = memory.put(data, session=session, tool_name="bash", tool_call_id=str(n))
        directory = root / session
        if not directory.exists():
            directory.mkdir(mode=0o700)
            if marked:
                (directory / ".session").touch(mode=0o600)
        base = directory / meta.spill_id
        _write(base.with_suffix(".out"), data)
        _write(base.with_suffix(".idx"), memory.line_index(meta.spill_id).to_bytes())
        _write(base.with_suffix(".json"), meta.model_dump_json().encode())
        metas.append(meta)
    if marked:
        _write(root / ".spillstore", json.dumps({"spillstore": "store", "format": 1}).encode())
    return metas


def write_tombstone(root: Path, session: str, spill_id: str, reason: str, at: float) -> None:
    """Leave a 0.1 tombstone for ``spill_id``."""
    _write(
        root / session / f"{spill_id}.gone",
        json.dumps({"reason": reason, "removed_at": at}).encode(),
    )


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
