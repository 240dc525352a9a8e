"""Garbage-collection planning: which spills to remove, and why. Pure: no I/O, no clock.

The store lists its spills, this module decides, the store deletes. Keeping the
decision free of I/O means the policy (grace, oldest first, the three limits) is
property-tested without touching a disk, and every backend applies the same one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spillstore._core.checks import check_int, check_number

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "GcCandidate",
    "GcEntry",
    "GcReason",
    "GcReport",
    "freed_bytes",
    "plan_gc",
    "validate_gc_limits",
]

DEFAULT_GRACE_SECONDS = 600.0
"""Nothing younger than this is removed by ``gc`` (design.md §6: ten minutes)."""

GcReason = Literal["age", "total_bytes", "max_files", "orphan_temp", "session"]
"""Why an entry was removed:

- ``age``: older than ``max_age``;
- ``total_bytes``: the oldest spills over ``max_total_bytes``;
- ``max_files``: the oldest spills over ``max_files``;
- ``orphan_temp``: leftovers of a writer that died (temp files, or data with no sidecar);
- ``session``: removed by ``clean(session)``.
"""


class GcCandidate(BaseModel):
    """One spill as the planner sees it.

    Attributes:
        spill_id: the id.
        session: its session.
        created_at: epoch seconds.
        stored_bytes: bytes it holds in the store.
        data_key: names the data it holds when spills may share it (identical bytes
            stored once): candidates with the same key count their bytes once. None: its
            own.
    """

    model_config = ConfigDict(frozen=True)

    spill_id: str
    session: str
    created_at: float
    stored_bytes: int
    data_key: str | None = None


class GcEntry(BaseModel):
    """One thing ``gc``/``clean`` removed (or would remove, in a dry run).

    Attributes:
        spill_id: the spill's id; None for an orphan file that never became a spill.
        session: the session directory it was in.
        name: the spill id, or the orphan's file name.
        bytes: stored bytes freed (for a spill: its data bytes; for an orphan: its size).
        reason: why it was removed.
        created_at: when the spill was made (for an orphan: its mtime).
    """

    model_config = ConfigDict(frozen=True)

    spill_id: str | None
    session: str
    name: str
    bytes: int = Field(ge=0)
    reason: GcReason
    created_at: float


class GcReport(BaseModel):
    """What a ``gc`` or ``clean`` removed, or would remove when ``dry_run``.

    Attributes:
        entries: oldest first.
        bytes_freed: the sum of the entries' bytes.
        dry_run: nothing was removed; ``entries`` is what would have been.
    """

    model_config = ConfigDict(frozen=True)

    entries: tuple[GcEntry, ...] = ()
    bytes_freed: int = 0
    dry_run: bool = False

    @classmethod
    def of(cls, entries: Iterable[GcEntry], *, dry_run: bool) -> GcReport:
        """Build a report, ordering the entries oldest first."""
        ordered = tuple(sorted(entries, key=lambda e: (e.created_at, e.name)))
        return cls(entries=ordered, bytes_freed=sum(e.bytes for e in ordered), dry_run=dry_run)

    @property
    def spill_ids(self) -> tuple[str, ...]:
        """The ids of the spills in the report (orphans left out)."""
        return tuple(e.spill_id for e in self.entries if e.spill_id is not None)


def validate_gc_limits(
    *,
    max_age: float | None,
    max_total_bytes: int | None,
    max_files: int | None,
    grace: float,
) -> None:
    """Check ``gc`` arguments.

    Raises:
        ConfigError: a limit is negative, NaN, a bool, or (for byte and file counts) not
            an int; ``grace`` is None.
    """
    if max_age is not None:
        check_number("max_age", max_age)
    check_int("max_total_bytes", max_total_bytes, allow_none=True)
    check_int("max_files", max_files, allow_none=True)
    check_number("grace", grace)


def plan_gc(
    candidates: Sequence[GcCandidate],
    *,
    now: float,
    max_age: float | None = None,
    max_total_bytes: int | None = None,
    max_files: int | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> list[tuple[GcCandidate, GcReason]]:
    """Choose the spills to remove, oldest first, each with its reason.

    Rules, in order:

    1. A spill younger than ``grace`` (``now - created_at < grace``) is never chosen,
       but it still counts toward the totals.
    2. ``max_age``: every other spill older than ``max_age`` is chosen (``"age"``).
    3. ``max_total_bytes``: while the remaining spills hold more than this, the oldest
       remaining one outside the grace period is chosen (``"total_bytes"``).
    4. ``max_files``: likewise while more than this many remain (``"max_files"``).

    Ties in ``created_at`` are broken by spill id, so the plan is deterministic.
    """
    validate_gc_limits(
        max_age=max_age, max_total_bytes=max_total_bytes, max_files=max_files, grace=grace
    )
    ordered = sorted(candidates, key=lambda c: (c.created_at, c.spill_id))
    chosen: dict[str, GcReason] = {}
    removable = [c for c in ordered if now - c.created_at >= grace]
    if max_age is not None:
        for c in removable:
            if now - c.created_at > max_age:
                chosen[c.spill_id] = "age"
    limits: tuple[tuple[GcReason, int | None], ...] = (
        ("total_bytes", max_total_bytes),
        ("max_files", max_files),
    )
    for reason, limit in limits:
        if limit is None:
            continue
        remaining = [c for c in ordered if c.spill_id not in chosen]
        holders = _holders(remaining)
        measure = (
            sum(c.stored_bytes for c in _distinct(remaining))
            if reason == "total_bytes"
            else len(remaining)
        )
        for c in removable:
            if measure <= limit:
                break
            if c.spill_id in chosen:
                continue
            chosen[c.spill_id] = reason
            key = _key(c)
            holders[key] -= 1
            if reason == "max_files":
                measure -= 1
            elif holders[key] == 0:  # the last spill holding these bytes: they go
                measure -= c.stored_bytes
    return [(c, chosen[c.spill_id]) for c in ordered if c.spill_id in chosen]


def _key(c: GcCandidate) -> str:
    return c.data_key if c.data_key is not None else "\x00" + c.spill_id


def _holders(candidates: Iterable[GcCandidate]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for c in candidates:
        counts[_key(c)] = counts.get(_key(c), 0) + 1
    return counts


def _distinct(candidates: Iterable[GcCandidate]) -> list[GcCandidate]:
    return list({_key(c): c for c in candidates}.values())


def freed_bytes(removed: Sequence[GcCandidate], shared: Mapping[str, str]) -> dict[str, int]:
    """The bytes each of ``removed`` frees, in order: its stored bytes if no other spill
    of the store still holds its data, else 0 (shared bytes are counted once, freed with
    their last holder). ``shared`` maps every spill of the store that may share its data
    to its data key; a candidate without a key holds its own."""
    holders: dict[str, int] = {}
    for value in shared.values():
        holders[value] = holders.get(value, 0) + 1
    freed: dict[str, int] = {}
    for c in removed:
        key = c.data_key
        if key is None:
            freed[c.spill_id] = c.stored_bytes
            continue
        holders[key] = holders.get(key, 1) - 1
        freed[c.spill_id] = c.stored_bytes if holders[key] <= 0 else 0
    return freed
