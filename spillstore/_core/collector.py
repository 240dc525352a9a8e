"""Pausing Python's cycle collector while many acyclic objects are made.

A list of 100,000 spills, or the chunks of a 100 MB JSON listing, makes objects that
outlive a few young collections; they are promoted, and every few batches a full
collection walks every long-lived container of the process. Those objects hold no
cycles and are freed by reference counting, so pausing the collector while they are
made loses nothing and saves a large share of the time (measured in RESULTS.md: the
store's list, issue 14; the JSON shape, issue 16).

The toggle is process-wide: another thread's cyclic garbage waits for the next
collection after the pause. No I/O.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cycle collector (if it runs) for the block; resume it after, even on
    an error. A program that had paused it keeps it paused.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
