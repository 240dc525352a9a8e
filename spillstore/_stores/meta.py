"""The records a store keeps about each spill: its metadata sidecar and its tombstone.

:class:`SpillMeta` is the record every backend writes last (a sidecar object in S3, a
catalog row in the local store): its presence makes a spill visible, and every read
checks it. A tombstone records why and when a spill was removed,
so a later read says "expired" (with the reason) rather than "not found".
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from spillstore._core.ids import validate_session, validate_spill_id
from spillstore._core.ranges import gaps

__all__ = [
    "MAX_INDEX_BYTES",
    "MAX_SIDECAR_BYTES",
    "META_FORMAT_VERSION",
    "TOMBSTONE_MAX_BYTES",
    "ByteRange",
    "SpillMeta",
    "parse_tombstone",
    "tombstone_record",
]

META_FORMAT_VERSION = 1

TOMBSTONE_MAX_BYTES = 4096
"""A tombstone larger than this is not one of ours (it is not read)."""

MAX_SIDECAR_BYTES = 16 << 20
"""A sidecar larger than this is not one of ours (it is not read)."""

MAX_INDEX_BYTES = 1 << 30
"""A line index larger than this is not one of ours (it is not read)."""


ByteRange = tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]


class SpillMeta(BaseModel):
    """The metadata sidecar of one spill (JSON on disk).

    Attributes:
        spill_id: the id (``<stem>-<digest>``), validated on every read.
        session: the session the spill belongs to.
        tool_name: the tool that produced the output, as given.
        tool_call_id: the call id, as given.
        total_bytes: size of the original output in UTF-8 bytes.
        total_lines: its line count (see :mod:`spillstore._core.index`).
        stored_ranges: the original byte ranges that were stored, ``((0, T),)`` when the
            whole output was kept, ``((0, h), (t, T))`` when the retention cap cut it,
            ``()`` for an empty output.
        sha256: hex digest of *all* original bytes, stored or not.
        created_at: epoch seconds from the store's clock.
        suffix: text that had to reach the model whatever happened.
        media_notes: one line per media part that was not stored with the text.
        invalid_utf8: the original bytes were not valid UTF-8.
        path: absolute path of the data file (local store), else None.
        adopted_inode: ``(st_dev, st_ino, st_size, st_mtime_ns)`` of a data file that was
            adopted without a copy (hard link or move); reads refuse the file if it no
            longer matches. None when the store wrote the file itself.
        format_version: sidecar format.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spill_id: str
    session: str
    tool_name: str
    tool_call_id: str
    total_bytes: int = Field(ge=0)
    total_lines: int = Field(ge=0)
    stored_ranges: tuple[ByteRange, ...]
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    created_at: float
    suffix: str | None = None
    media_notes: tuple[str, ...] = ()
    invalid_utf8: bool = False
    path: str | None = None
    adopted_inode: tuple[int, int, int, int] | None = None
    format_version: int = META_FORMAT_VERSION

    @field_validator("spill_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return validate_spill_id(value)

    @field_validator("session")
    @classmethod
    def _check_session(cls, value: str) -> str:
        return validate_session(value)

    @model_validator(mode="after")
    def _check_ranges(self) -> SpillMeta:
        previous_end = 0
        for start, end in self.stored_ranges:
            if not previous_end <= start < end <= self.total_bytes:
                raise ValueError(
                    f"stored_ranges must be sorted, non-empty, disjoint and within "
                    f"[0, {self.total_bytes}]; got {self.stored_ranges}"
                )
            previous_end = end
        return self

    @cached_property
    def stored_bytes(self) -> int:
        """Bytes actually stored (the size of the data file).

        Computed once per object (a search over a session asks several times per spill);
        a copy made with ``model_copy(update=...)`` keeps it, so never update
        ``stored_ranges`` that way.
        """
        return sum(end - start for start, end in self.stored_ranges)

    @property
    def complete(self) -> bool:
        """Whether every byte of the output was stored."""
        return self.stored_bytes == self.total_bytes

    @property
    def gaps(self) -> tuple[tuple[int, int], ...]:
        """The original byte ranges that were *not* stored."""
        return gaps(self.stored_ranges, self.total_bytes)


def tombstone_record(reason: str, removed_at: float) -> bytes:
    """The bytes of a tombstone: why (``"delete"``, a gc reason, ``"session"``) and when."""
    return json.dumps({"reason": reason, "removed_at": removed_at}).encode()


def parse_tombstone(raw: bytes) -> tuple[str | None, float | None]:
    """Return a tombstone's ``(reason, removed_at)``; ``(None, None)`` if it is unreadable."""
    try:
        record = json.loads(raw)
        return str(record["reason"]), float(record["removed_at"])
    except (ValueError, KeyError, TypeError):
        return None, None
