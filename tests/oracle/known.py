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

from spillstore import MediaPart, Part, Settings
from tests.oracle.model import is_valid_utf8, model_encode
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


def _surrogate_suffix(i: Inputs) -> bool:
    return bool(i.suffix) and _SURROGATE.search(i.suffix or "") is not None


def _large_suffix(i: Inputs) -> bool:
    return bool(i.suffix) and len(model_encode(i.suffix or "")) > i.config.max_bytes // 4


def _empty_last_part(i: Inputs) -> bool:
    return len(i.outputs) > 1 and i.outputs[-1] == ""


def _invalid_bytes_inline(i: Inputs) -> bool:
    raw, budget = i.raw, i.config.max_bytes
    return raw is not None and not is_valid_utf8(raw) and len(raw) <= budget


def _blobs(i: Inputs) -> bool:
    return any(isinstance(p, MediaPart) and p.kind == "blob" for p in i.parts)


def _dead_store_file(i: Inputs) -> bool:
    raw, store = i.raw, i.store
    if raw is None or i.streamed or store is None or store.kind != "failing":
        return False
    return store.fail_after < len(raw) and len(raw) > i.config.max_bytes


KNOWN: tuple[Known, ...] = (
    Known("a file-backed output on a dead store", "defect 6", _dead_store_file),
    Known("lone surrogate in the suffix", "F2, F3 (new)", _surrogate_suffix),
    Known("suffix over a quarter of the budget", "defect 5 (F6)", _large_suffix),
    Known("empty last text part", "F4 (new)", _empty_last_part),
    Known("invalid UTF-8 within the budget", "defect 8 (F5)", _invalid_bytes_inline),
    Known("blobs", "defects 3, 4", _blobs),
)


KNOWN_CHECKS: dict[str, str] = {
    "line pages across a retention gap": "defect 1 (F1)",
    "sha256 of a stream to a dead store": "defect 7",
    "byte pages from a stray continuation byte": "defect 9",
    "invalid_utf8 of an output not saved": "F7 (new)",
}
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
    assert name in KNOWN_CHECKS or name in _FIXED_CHECKS, name
    return name in KNOWN_CHECKS and not _ENFORCING


_FIXED_CHECKS: set[str] = set()
"""Names of checks whose defects were fixed (kept so a stale name still fails loudly)."""


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
