"""The query worker's own bounds: CPU time per query, parses paid apart, address space.

Runs in the child process only (:mod:`~spillstore._tools.query_worker`). A query may use
``max_seconds`` of CPU time for itself. Parsing the document is not the query's doing,
so each parse gets an allowance of its own (:func:`parse_seconds`: a second per
:data:`PARSE_BYTES_PER_SECOND` bytes), granted just before it starts and taken back when
it ends: only the CPU time the parse really took is added to the query's limit. What
counts as a parse: the first load of a document, a kept-lazy document parsed whole or a
chunk at a time, jq parsing the text (jq's parse and its run are one call, so a jq
program gets what the parse left of the allowance on top of its own time), and finding
or writing out a value of the document (indexing its containers, dumping it).

The limit is a profiling timer (``ITIMER_PROF``, the process's user + system time,
exact to the microsecond): when it expires the kernel sends ``SIGPROF``, whose default
action ends the process, wherever it is (inside jq's C code too: nothing here installs a
handler). The parent reads the exit status (``-SIGPROF``) as "its CPU time ran out".
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

__all__ = [
    "MEMORY_FLOOR",
    "MEMORY_PER_BYTE",
    "PARSE_BYTES_PER_SECOND",
    "CpuBudget",
    "Parsing",
    "bound_memory",
    "no_parse_allowance",
    "parse_seconds",
]

PARSE_BYTES_PER_SECOND = 4_000_000
"""A parse of ``n`` bytes may take ``n`` / this many seconds of CPU time (the slowest
parse here, jq's, takes 0.4-0.6 s for 6.3 MB; orjson a chunk at a time ~0.1 s)."""

MEMORY_FLOOR = 512 * 1024 * 1024
"""The least address space a query may add to the worker."""

MEMORY_PER_BYTE = 16
"""A query may add this many bytes of address space per document byte: jq holds a parsed
document in about 8-14 times its size (the jq 1.6 command line peaks at 8.4x on a
100 MB listing)."""

Parsing = Callable[[int], AbstractContextManager[None]]
"""``parsing(size)``: a context in which a parse of ``size`` bytes runs on its own
allowance, not the query's time."""

_TIMER = getattr(signal, "ITIMER_PROF", None)
"""None where there is no profiling timer (not POSIX): the parent's wall-time kill is
then the only bound."""


def parse_seconds(size: int) -> float:
    """The CPU seconds a parse of ``size`` bytes may take."""
    return size / PARSE_BYTES_PER_SECOND


@contextmanager
def no_parse_allowance(size: int) -> Iterator[None]:
    """A :data:`Parsing` that grants nothing (outside the worker: tests, benchmarks)."""
    del size
    yield


class CpuBudget:
    """The CPU time this process may still use for the current exchange.

    :meth:`start` sets the query's own time; :meth:`parsing` lends a parse its
    allowance; :meth:`stop` disarms the timer between exchanges.
    """

    def __init__(self) -> None:
        self._end = 0.0  # the process CPU time at which the query's own time runs out
        self._depth = 0  # parses under way (one inside another is the outer one's)

    def start(self, seconds: float) -> None:
        """Give the exchange that starts now ``seconds`` of CPU time."""
        self._end = time.process_time() + seconds
        _arm(seconds)

    def stop(self) -> None:
        """No limit until the next :meth:`start` (the worker waits for a message)."""
        if _TIMER is not None:
            signal.setitimer(_TIMER, 0)

    @contextmanager
    def parsing(self, size: int) -> Iterator[None]:
        """Run a parse of ``size`` bytes on its own allowance: the limit is raised by
        :func:`parse_seconds` while it runs, then by what the parse really took (at most
        the allowance; anything past it was the query's own time). Inside another
        parse, it is part of that one."""
        if self._depth:
            yield
            return
        allowance = parse_seconds(size)
        began = time.process_time()
        _arm(self._end + allowance - began)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            ended = time.process_time()
            self._end += min(ended - began, allowance)
            _arm(self._end - ended)


def _arm(seconds: float) -> None:
    """End this process (``SIGPROF``) after ``seconds`` more of its CPU time."""
    if _TIMER is not None:
        # At least a microsecond: 0 would disarm the timer instead of firing it.
        signal.setitimer(_TIMER, max(seconds, 1e-6))


def bound_memory(doc_bytes: int) -> None:
    """Limit this process's address space to what it holds now, plus what a query on
    a document of ``doc_bytes`` bytes may add (:data:`MEMORY_PER_BYTE`, at least
    :data:`MEMORY_FLOOR`)."""
    try:
        import resource  # noqa: PLC0415 - POSIX only
    except ImportError:  # pragma: no cover - the parent's wall-time kill is the bound
        return
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - no /proc: no address-space limit
        return
    allowed = current + max(MEMORY_FLOOR, MEMORY_PER_BYTE * doc_bytes)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        allowed = min(allowed, hard)
    resource.setrlimit(resource.RLIMIT_AS, (allowed, hard))
