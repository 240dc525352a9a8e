"""Defects the oracle found that are not fixed yet: each narrowly named, each reproduced.

The oracle's random tests skip (``assume``) exactly the inputs that trigger an entry
here, so they stay green and keep finding *new* defects; ``test_known_defects.py`` runs
each entry's reproduction through the same checks under ``xfail(strict=True)``, so the
day a fix lands the reproduction passes, the strict marker fails, and the entry (and its
skip) must be deleted. No check is weakened: only the named inputs are routed to the
reproduction. Findings are described in ``/work/tools/findings13.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from spillstore import Part, Settings
from tests.oracle.strategies import StoreChoice

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Inputs:
    """What a random case is about to run, as the predicates see it."""

    config: Settings
    outputs: Sequence[str | bytes]
    suffix: str | None = None
    raw: bytes | None = None
    streamed: bool = False
    parts: Sequence[Part] = ()
    store: StoreChoice | None = None


@dataclass(frozen=True)
class Known:
    """One unfixed defect: its name, where it is described, and the inputs that trigger it."""

    name: str
    reference: str
    triggered: Callable[[Inputs], bool]


KNOWN: tuple[Known, ...] = ()
"""Inputs routed to reproductions (all fixed so far: lone surrogates in the suffix, large
suffixes, an empty last part, invalid UTF-8 within the budget, blobs, dead-store files,
the line count of an invalid stream within the budget on a dead store, a file-backed
output whose retained tail is shorter than its tail preview)."""


KNOWN_CHECKS: dict[str, str] = {}
"""Checks skipped, for the named situation only, until the defect is fixed."""

_ENFORCING: list[bool] = []


@contextmanager
def enforcing_all() -> Iterator[None]:
    """Run every check, known defects included (for the reproductions)."""
    _ENFORCING.append(True)
    try:
        yield
    finally:
        _ENFORCING.pop()


def skip_check(name: str) -> bool:
    """Whether the check ``name`` is skipped (its defect is listed as unfixed)."""
    assert name in KNOWN_CHECKS, f"{name!r} is not listed: its defect was fixed, drop the skip"
    return name in KNOWN_CHECKS and not _ENFORCING


def unfixed(
    config: Settings,
    outputs: Sequence[str | bytes],
    *,
    suffix: str | None = None,
    raw: bytes | None = None,
    streamed: bool = False,
    parts: Sequence[Part] = (),
    store: StoreChoice | None = None,
) -> list[str]:
    """The names of the unfixed defects these inputs trigger (empty: check everything)."""
    inputs = Inputs(config, outputs, suffix, raw, streamed, parts, store)
    if _ENFORCING:
        return []
    return [known.name for known in KNOWN if known.triggered(inputs)]


__all__ = ["KNOWN", "KNOWN_CHECKS", "Inputs", "Known", "enforcing_all", "skip_check", "unfixed"]
