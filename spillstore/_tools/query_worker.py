"""The query worker: a child process that runs model-written jq programs, and can be killed.

A program runs natively on the values the child kept (:mod:`~spillstore._core.json_eval`,
through :func:`~spillstore._tools.query_run.run_query`) or, outside that subset, with the
jq binding. Neither can be trusted to return (``repeat(.)``, ``def f: f; f``,
``last(range(1e12))``; the jq binding cannot even be interrupted), so programs run in a
separate process, under the same bounds whichever engine answers. Before each
query the child limits its own CPU time: ``max_seconds`` (2 s) for the query itself,
each parse of the document on an allowance of its own, granted only while it runs
(:mod:`~spillstore._tools.query_limits`; the kernel ends the child when the time runs
out), and its address space (``RLIMIT_AS``: a program that builds a huge value fails
inside the child instead of growing it without bound). The parent also kills it when an
exchange overruns its wall time, :data:`WALL_FACTOR` times the CPU time it may take (a
busy machine shares its cores), plus :data:`START_SECONDS` for an exchange that starts
the child, and says which bound stopped the query. The child starts with an empty
environment (jq's ``env`` and ``$ENV`` show nothing of the host) in ``/``.

The child keeps the documents it was sent (:class:`~spillstore._core.json_doc.JsonDoc`:
the decoded text, its kind, the parsed values and the member index of every container a
path walked through), least recently used first out, up to :data:`CACHE_BYTES`; a second
query on a spill sends only the expression, and a native one parses nothing.

Messages are pickles with an 8-byte length, both ways, between this module's two halves
(:class:`QueryWorker` in the parent, :func:`main` in the child); a document follows its
``load`` message as raw bytes (not pickled: no copy on either side).
"""

from __future__ import annotations

import collections
import gc
import importlib.util
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from spillstore._core.json_doc import JsonDoc, NotJson, parse_doc
from spillstore._core.json_lazy import LazyDoc, lazy_doc, parse_chunked
from spillstore._errors import SpillstoreError
from spillstore._tools.query_limits import CpuBudget, bound_memory, parse_seconds
from spillstore._tools.query_run import Ask, run_query

__all__ = ["CACHE_BYTES", "Found", "QueryFailed", "QueryWorker", "Results", "main"]

CACHE_BYTES = 512 * 1024 * 1024
"""The most document bytes the worker keeps parsed between queries."""

CACHE_ENTRIES = 16
"""The most documents the worker keeps."""

LAZY_BYTES = 16 * 1024 * 1024
"""From this size on, a document of the common shapes (an array, or an object whose
last member is an array) keeps its array as bytes, parsed a chunk at a time by each
query (:mod:`~spillstore._core.json_lazy`): parsed whole, it would take 5-8 times its
size. Smaller documents are parsed once and kept, so later queries parse nothing."""

CHUNKED_BYTES = 1024 * 1024
"""From this size on (below :data:`LAZY_BYTES`), a document of those shapes is parsed
a chunk at a time: orjson's parse of a whole document holds three times its size
beside the result while it runs."""

WALL_FACTOR = 4
"""The wall time an exchange may take, in multiples of the CPU time it may use: a busy
machine shares its cores, so a query that is not hostile may wait its turn."""

START_SECONDS = 10.0
"""More wall time for an exchange that starts the child (an interpreter start; jq is
imported only when a query needs it)."""

_HEADER = struct.Struct("<Q")

_TOO_DEEP = "nested too deeply to be followed here (about 1,000 levels or more)"
"""Why a document (or the part a query reached) cannot be walked: the parsers and the
evaluator recurse once per level of nesting."""


@dataclass(frozen=True, slots=True)
class Found:
    """One query result: compact JSON (cut to a cap), its size, where it came from.

    Attributes:
        text: the value as compact JSON, at most the result cap (cut at a character).
        size: the UTF-8 size of the whole compact JSON.
        byte_range: the value's ``[start, end)`` in the spill, for a value that is
            in the document (a path expression), else ``None``.
        line: the value's 1-based line for JSON Lines, else ``None``.
    """

    text: str
    size: int
    byte_range: tuple[int, int] | None
    line: int | None


@dataclass(frozen=True, slots=True)
class Results:
    """A page of results; ``more``: the program had results past this page; ``paths``:
    the expression is a path expression (results carry byte ranges); ``skipped_lines``:
    lines of a JSON Lines spill that hold no JSON object or array."""

    found: list[Found]
    more: bool
    kind: str
    paths: bool
    skipped_lines: int


class QueryFailed(SpillstoreError):
    """A query ended without results: ``kind`` is syntax, runtime, notjson, time, memory
    or depth."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind, message)
        self.kind = kind
        self.message = message


# --------------------------------------------------------------------------- the parent


class QueryWorker:
    """The parent's handle on one worker process (started on first use, restarted after
    a kill). One query at a time; thread-safe."""

    def __init__(self, *, max_seconds: float = 2.0) -> None:
        self.max_seconds = max_seconds
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[Any, QueryWorker] | None = None

    @staticmethod
    def available() -> bool:
        """Whether the jq package is installed."""
        return importlib.util.find_spec("jq") is not None

    def close(self) -> None:
        """Stop the worker (it is started again on the next query)."""
        with self._lock:
            self._stop()

    def query(
        self,
        key: str,
        size: int,
        load: Any,
        expression: str,
        *,
        skip: int,
        limit: int,
        max_result_bytes: int,
        max_total_bytes: int,
    ) -> Results:
        """Run ``expression`` on the document ``key`` of ``size`` bytes.

        ``load()`` gives the document's bytes when the worker does not hold it. The
        query may take ``max_seconds`` of CPU time, plus what each parse of the
        document takes, up to its allowance (:mod:`~spillstore._tools.query_limits`);
        in wall time, :data:`WALL_FACTOR` times the query's time and two parses (jq
        parses again when the program is not a path expression).

        Raises:
            QueryFailed: the query ended without results (the reason is in it).
        """
        seconds = self.max_seconds
        parse = parse_seconds(size)
        request = (
            "query",
            key,
            expression,
            skip,
            limit,
            max_result_bytes,
            max_total_bytes,
            seconds,
        )
        wall = WALL_FACTOR * (seconds + 2 * parse)
        ran_out = (
            f"the query used up the {seconds:g} s of CPU time it may take (its parses of"
            " the document not counted) and was stopped"
        )
        with self._lock:
            reply = self._exchange(request, wall, ran_out)
            if reply[0] == "missing":
                data = load()
                load_message = ("load", key, len(data), seconds)
                too_long = (
                    f"parsing the document took more than its {parse + seconds:.1f} s of"
                    " CPU time and was stopped"
                )
                reply = self._exchange(
                    load_message, WALL_FACTOR * (seconds + parse), too_long, data
                )
                del data
                if reply[0] == "error":
                    raise QueryFailed(reply[1], reply[2])
                reply = self._exchange(request, wall, ran_out)
        if reply[0] == "error":
            raise QueryFailed(reply[1], reply[2])
        _, found, more, kind, paths, skipped = reply
        return Results([Found(*item) for item in found], more, kind, paths, skipped)

    def _start(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        here = os.path.abspath(__file__)  # .../spillstore/_tools/query_worker.py
        root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "spillstore._tools.query_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": root},
            cwd="/",
            close_fds=True,
        )
        self._proc = proc
        self._finalizer = weakref.finalize(self, _kill, proc)
        return proc

    def _stop(self) -> None:
        if self._proc is not None:
            _kill(self._proc)
            self._proc = None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def _exchange(
        self, message: tuple[Any, ...], seconds: float, ran_out: str, blob: bytes = b""
    ) -> Any:
        """Send ``message`` (and ``blob``, raw, after it) and read the reply within
        ``seconds`` of wall time (the child is killed past it); ``ran_out`` says what
        happened when the child's CPU time ran out instead."""
        starting = self._proc is None or self._proc.poll() is not None
        proc = self._start()
        assert proc.stdin is not None and proc.stdout is not None
        started = time.monotonic()
        deadline = started + seconds + (START_SECONDS if starting else 0.0)
        try:
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.write(_HEADER.pack(len(payload)))
            proc.stdin.write(payload)
            if blob:
                proc.stdin.write(blob)
            proc.stdin.flush()
            del payload
            header = _read_exactly(proc.stdout.fileno(), _HEADER.size, deadline)
            (size,) = _HEADER.unpack(header)
            return pickle.loads(_read_exactly(proc.stdout.fileno(), size, deadline))  # noqa: S301 - our child
        except TimeoutError:
            self._stop()
            raise QueryFailed(
                "time",
                f"the query took longer than {deadline - started:.1f} s of wall time (the"
                " machine may be busy) and was stopped",
            ) from None
        except (OSError, EOFError, struct.error, pickle.UnpicklingError):
            code = proc.wait()
            self._stop()
            if code in (-signal.SIGPROF, -signal.SIGXCPU):
                raise QueryFailed("time", ran_out) from None
            raise QueryFailed(
                "memory",
                "the query needed more memory than it may use (or crashed the jq worker"
                f"{'' if code is None else f', exit status {code}'})",
            ) from None


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks: list[bytes] = []
    while size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


# --------------------------------------------------------------------------- the child


class _Child:
    """The worker's state: the documents it holds, least recently used first."""

    def __init__(self) -> None:
        self.docs: collections.OrderedDict[str, JsonDoc | LazyDoc] = collections.OrderedDict()
        self.budget = CpuBudget()

    def handle(self, message: tuple[Any, ...], data: bytes = b"") -> tuple[Any, ...]:
        """Answer one message, within the CPU time it may take (disarmed after)."""
        try:
            return self._handle(message, data)
        finally:
            self.budget.stop()

    def _handle(self, message: tuple[Any, ...], data: bytes) -> tuple[Any, ...]:
        if message[0] == "load":
            _, key, size, seconds = message
            bound_memory(size)  # the parse gets a query's bounds, not the last query's
            self.budget.start(seconds)
            try:
                with self.budget.parsing(size):
                    doc = _parse(data)
            except RecursionError:
                doc = NotJson(_TOO_DEEP)
            del data
            if isinstance(doc, NotJson):
                return ("error", "notjson", doc.reason)
            self.docs[key] = doc
            while len(self.docs) > 1 and (
                len(self.docs) > CACHE_ENTRIES
                or sum(d.total_bytes for d in self.docs.values()) > CACHE_BYTES
            ):
                self.docs.popitem(last=False)
            return ("loaded",)
        _, key, expression, skip, limit, max_result, max_total, seconds = message
        found = self.docs.get(key)
        if found is None:
            return ("missing",)
        self.docs.move_to_end(key)
        bound_memory(found.total_bytes)
        self.budget.start(seconds)
        ask = Ask(expression, skip, limit, max_result, max_total)
        try:
            return run_query(found, ask, self.budget.parsing)
        except MemoryError:
            return ("error", "memory", "the query needed more memory than it may use")
        except RecursionError:
            return ("error", "depth", f"the values it reached are {_TOO_DEEP}")


def _parse(data: bytes) -> JsonDoc | LazyDoc | NotJson:
    """:func:`parse_doc` (or, for a document of the shapes :func:`lazy_doc` takes, from
    :data:`CHUNKED_BYTES` on :func:`parse_chunked`, from :data:`LAZY_BYTES` on
    :func:`lazy_doc`) with the cycle collector paused, then the parse frozen.

    A parse allocates a container per object and array, and each allocation counts
    towards a collection that would walk every container made so far (a third of the
    parse's time on a large listing); parsed JSON holds no cycles, so nothing is lost.
    Frozen (``gc.freeze``), the kept values are left out of later collections too;
    refcounting still frees them when the document leaves the cache.
    """
    gc.disable()
    try:
        found: JsonDoc | LazyDoc | None = None
        if len(data) >= LAZY_BYTES:
            found = lazy_doc(data)
        elif len(data) >= CHUNKED_BYTES:
            found = parse_chunked(data)
        return parse_doc(data) if found is None else found
    finally:
        gc.freeze()
        gc.enable()


def main() -> None:
    """The child's loop: read a message, answer it, until stdin closes (then exit at
    once)."""
    child = _Child()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            # The parent closed the pipe: every reply is flushed, so skip the teardown
            # that would free each kept value one by one.
            os._exit(0)
        (size,) = _HEADER.unpack(header)
        message = pickle.loads(stdin.read(size))  # noqa: S301 - from our parent
        data = stdin.read(message[2]) if message[0] == "load" else b""
        try:
            reply = child.handle(message, data)
            del data
        except MemoryError:
            reply = ("error", "memory", "the query needed more memory than it may use")
        except Exception as exc:  # the parent reports it; the worker goes on
            reply = ("error", "runtime", f"{type(exc).__name__}: {exc}"[:300])
        payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.write(_HEADER.pack(len(payload)) + payload)
        stdout.flush()


if __name__ == "__main__":
    main()
