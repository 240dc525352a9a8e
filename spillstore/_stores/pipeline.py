"""The writer's pipeline: hashing and writing a spill's bytes in two threads, in order.

:class:`~spillstore._stores.writer.SpillWriter` decides what is stored (and counts the
newlines) in the producer's thread; a :class:`Pipeline` takes every piece to hash and
every part to store. ``hashlib`` (on large buffers) and file writes release the GIL, so
hashing, writing and the producer's own work (reading a pipe, counting) overlap.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from spillstore._stores.writer import Sink

__all__ = ["PIPELINE_BATCH_BYTES", "PIPELINE_MIN_BYTES", "PIPELINE_QUEUE_BATCHES", "Pipeline"]

PIPELINE_MIN_BYTES: Final = 1 << 20
"""Outputs larger than this hash and write in a second thread, overlapping the work."""

PIPELINE_BATCH_BYTES: Final = 256 * 1024
"""The pipeline hands pieces to its threads in batches of about this many bytes."""

PIPELINE_QUEUE_BATCHES: Final = 2
"""Batches waiting for each pipeline thread at most (the producer blocks beyond)."""


class _Worker:
    """One stage of the pipeline: a thread applying ``step`` to queued buffers, in order."""

    def __init__(self, step: Callable[[Any], object], pipeline: Pipeline, name: str) -> None:
        self._step = step
        self._pipeline = pipeline
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PIPELINE_QUEUE_BATCHES)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: object) -> None:
        self._queue.put(item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self._pipeline.error is None and not self._pipeline.aborted:
                try:
                    self._step(item)
                except BaseException as exc:  # handed to the caller's thread
                    self._pipeline.error = exc

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()


class Pipeline:
    """Hashes every piece and writes the stored part; in two threads once large.

    ``hashlib`` (on large buffers) and file writes both release the GIL, so hashing
    batch *i*, writing batch *i* and the caller counting the pieces of batch *i+1* run at
    the same time. Pieces are handed over as one buffer per batch of about
    :data:`PIPELINE_BATCH_BYTES`: a queue hand-over can wake a thread, and every return
    from hashlib or the sink must take the GIL back, which waits while the caller's
    thread is busy, so one hand-over per 64 KiB piece was measurable. Bounded queues keep
    memory flat (at most ``PIPELINE_QUEUE_BATCHES + 2`` batches in flight per stage);
    order is kept within each stage.
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._sha = hashlib.sha256()
        self._inline = 0
        self._workers: tuple[_Worker, _Worker] | None = None
        self._to_hash: list[bytes | memoryview] = []
        self._to_write: list[bytes | memoryview] = []
        self._batched = 0
        self.error: BaseException | None = None
        self.aborted = False

    def submit(self, piece: bytes | memoryview, part: bytes | memoryview) -> None:
        if self.error is not None:
            raise self.error
        if self._workers is None:
            if self._inline + len(piece) <= PIPELINE_MIN_BYTES:
                self._inline += len(piece)
                if piece:
                    self._sha.update(piece)
                if part:
                    self._sink.write(part)
                return
            self._workers = (
                _Worker(self._sha.update, self, "spillstore-hash"),
                _Worker(self._sink.write, self, "spillstore-write"),
            )
        if piece:
            self._to_hash.append(piece)
        if part:
            self._to_write.append(part)
        self._batched += max(len(piece), len(part))
        if self._batched >= PIPELINE_BATCH_BYTES:
            self._hand_over()

    def _hand_over(self) -> None:
        assert self._workers is not None
        # One buffer a batch (a lone bytes piece is not copied): each call into hashlib or
        # the sink gives up the GIL and must take it back, which waits while the
        # producer's thread is busy counting.
        if self._to_hash:
            self._workers[0].put(_joined(self._to_hash))
            self._to_hash = []
        if self._to_write:
            self._workers[1].put(_joined(self._to_write))
            self._to_write = []
        self._batched = 0

    def _stop(self) -> None:
        if self._workers is not None:
            for worker in self._workers:
                worker.stop()
            self._workers = None

    def drain(self) -> None:
        """Hand over what is batched, wait for the workers; re-raise their error.

        Later submissions run inline (in the caller's thread).
        """
        if self._workers is not None:
            self._hand_over()
        self._stop()
        if self.error is not None:
            raise self.error

    def finish(self) -> str:
        """Drain; return the sha256 hex digest of every piece."""
        self.drain()
        return self._sha.hexdigest()

    def abort(self) -> None:
        """Stop the workers, dropping whatever is queued."""
        self._to_hash, self._to_write = [], []
        self.aborted = True
        self._stop()


def _joined(pieces: list[bytes | memoryview]) -> bytes | memoryview:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
