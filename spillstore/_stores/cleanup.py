"""Removing spills: ``delete``, ``clean`` and ``gc``, shared by every backend.

``gc`` lists the spills, lets the pure :func:`~spillstore._core.gc_plan.plan_gc` choose
what goes and why, and removes it through the backend's ``_remove``; leftovers of dead
writers come from the backend's ``_orphans`` hook. One cleaner runs at a time (the
``_cleaner_lock`` hook: a thread lock, plus a file lock or a bucket lease in the
backends). Each async twin sits right after its sync method.
"""

from __future__ import annotations

import builtins
import logging

from spillstore._core.gc_plan import (
    DEFAULT_GRACE_SECONDS,
    GcCandidate,
    GcEntry,
    GcReason,
    GcReport,
    freed_bytes,
    plan_gc,
    validate_gc_limits,
)
from spillstore._core.ids import validate_session, validate_spill_id
from spillstore._errors import SpillstoreError
from spillstore._stores.backend import Backend
from spillstore._stores.meta import SpillMeta
from spillstore._twins import method_twin

__all__ = ["CleanupOps"]

logger = logging.getLogger("spillstore")


class CleanupOps(Backend):
    """``delete``, ``clean`` and ``gc``, each with its async twin."""

    def delete(self, spill_id: str) -> bool:
        """Remove a spill; return whether this call removed it.

        Reading it afterwards raises :class:`SpillExpired`. Already gone is not an error.
        """
        validate_spill_id(spill_id)
        try:
            meta = self._stat(spill_id)
        except SpillstoreError as exc:
            if isinstance(exc, LookupError):
                return False
            raise
        removed = self._remove(meta, reason="delete", now=self._clock())
        if removed:
            logger.info("deleted spill %s", spill_id)
        return removed

    adelete = method_twin(delete)

    def clean(self, session: str, *, grace: float = DEFAULT_GRACE_SECONDS) -> GcReport:
        """Remove every spill of ``session`` (whatever its age).

        Orphan temp files of the session are removed too once older than ``grace`` (a
        younger one may belong to a writer still running).
        """
        validate_session(session)
        validate_gc_limits(max_age=None, max_total_bytes=None, max_files=None, grace=grace)
        now = self._clock()
        entries: builtins.list[GcEntry] = []
        with self._cleaner_lock():
            metas = self._list(session)
            shared = self._data_keys()
            removed = [_candidate(m, shared) for m in metas]
            freed = freed_bytes(removed, shared)
            for meta in metas:
                self._remove(meta, reason="session", now=now)
                entries.append(_entry(meta, "session", freed[meta.spill_id]))
            for entry, remove in self._orphans(session, now=now, grace=grace):
                if remove():
                    entries.append(entry)
        report = GcReport.of(entries, dry_run=False)
        logger.info(
            "cleaned session %s: %s entries, %s bytes", session, len(entries), report.bytes_freed
        )
        return report

    aclean = method_twin(clean)

    def gc(
        self,
        *,
        max_age: float | None = None,
        max_total_bytes: int | None = None,
        max_files: int | None = None,
        dry_run: bool = False,
        now: float | None = None,
        grace: float = DEFAULT_GRACE_SECONDS,
    ) -> GcReport:
        """Remove old spills and leftovers of dead writers; report what and why.

        Nothing younger than ``grace`` seconds is removed; oldest go first; only
        spillstore's own files are touched; one cleaner runs at a time. See
        :func:`spillstore._core.gc_plan.plan_gc` for the rules.

        Args:
            max_age: remove spills older than this many seconds.
            max_total_bytes: then remove the oldest until the stored bytes fit.
            max_files: then remove the oldest until this many spills remain.
            dry_run: remove nothing; report what would be removed.
            now: the time to judge ages by (default: the store's clock).
            grace: the minimum age of anything removed.
        """
        validate_gc_limits(
            max_age=max_age, max_total_bytes=max_total_bytes, max_files=max_files, grace=grace
        )
        if now is None:
            now = self._clock()
        entries: builtins.list[GcEntry] = []
        with self._cleaner_lock():
            metas = {m.spill_id: m for m in self._list(None)}
            shared = self._data_keys()
            plan = plan_gc(
                [_candidate(m, shared) for m in metas.values()],
                now=now,
                max_age=max_age,
                max_total_bytes=max_total_bytes,
                max_files=max_files,
                grace=grace,
            )
            freed = freed_bytes([candidate for candidate, _ in plan], shared)
            for candidate, reason in plan:
                meta = metas[candidate.spill_id]
                if not dry_run:
                    self._remove(meta, reason=reason, now=now)
                entries.append(_entry(meta, reason, freed[meta.spill_id]))
            for entry, remove in self._orphans(None, now=now, grace=grace):
                if dry_run or remove():
                    entries.append(entry)
            if not dry_run:
                self._after_gc(now=now)
        report = GcReport.of(entries, dry_run=dry_run)
        logger.info(
            "gc%s: %s entries, %s bytes",
            " (dry run)" if dry_run else "",
            len(entries),
            report.bytes_freed,
        )
        return report

    agc = method_twin(gc)


def _candidate(meta: SpillMeta, shared: dict[str, str]) -> GcCandidate:
    return GcCandidate(
        spill_id=meta.spill_id,
        session=meta.session,
        created_at=meta.created_at,
        stored_bytes=meta.stored_bytes,
        data_key=shared.get(meta.spill_id),
    )


def _entry(meta: SpillMeta, reason: GcReason, freed: int) -> GcEntry:
    return GcEntry(
        spill_id=meta.spill_id,
        session=meta.session,
        name=meta.spill_id,
        bytes=freed,
        reason=reason,
        created_at=meta.created_at,
    )
