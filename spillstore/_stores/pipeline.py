"""The writer's pipeline: hashing and writing a spill's bytes in two threads, in order.

:class:`~spillstore._stores.writer.SpillWriter` decides what is stored (and counts the
newlines) in the producer's thread; a :class:`Pipeline` takes every piece to hash and
every part to store. ``hashlib`` (on large buffers) and file writes release the GIL, so
hashing, writing and the producer's own work (reading a pipe, counting) overlap.

Hashing outlives a failed write: every piece submitted is hashed, also after the sink
failed or the pipeline was aborted, so the writer can hand its measure of the output
over (:class:`~spillstore._stores.tally.Tally`) instead of the caller hashing it again.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from spillstore._stores.tally import Hasher

__all__ = ["PIPELINE_BATCH_BYTES", "PIPELINE_MIN_BYTES", "PIPELINE_QUEUE_BATCHES", "Pipeline"]

PIPELINE_MIN_BYTES: Final = 1 << 20
"""Outputs larger than this hash and write in a second thread, overlapping the work."""

PIPELINE_BATCH_BYTES: Final = 256 * 1024
"""The pipeline hands pieces to its threads in batches of about this many bytes."""

PIPELINE_QUEUE_BATCHES: Final = 2
"""Batches waiting for each pipeline thread at most (the producer blocks beyond)."""


class _Worker:
    """One stage of the pipeline: a thread applying ``step`` to queued buffers, in order.

    It stops applying ``step`` after its own error, and also when ``halted()`` says so.
    """

    def __init__(self, step: Callable[[Any], object], halted: Callable[[], bool], name: str):
        self._step = step
        self._halted = halted
        self.error: BaseException | None = None
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=PIPELINE_QUEUE_BATCHES)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, item: object) -> None:
        self._queue.put(item)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if self.error is None and not self._halted():
                try:
                    self._step(item)
                except BaseException as exc:  # handed to the caller's thread
                    self.error = exc

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
    order is kept within each stage. Once drained (or aborted), the pipeline works in
    the caller's thread.

    Args:
        write: stores the next part, in order (a sink's ``write``); it may be called
            from the writing thread, never concurrently with itself.
    """

    def __init__(self, write: Callable[[bytes | memoryview], None]) -> None:
        self._write = write
        self._sha: Hasher = hashlib.sha256()
        self._inline = 0
        self._threaded = False
        self._hashing: _Worker | None = None
        self._writing: _Worker | None = None
        self._to_hash: list[bytes | memoryview] = []
        self._to_write: list[bytes | memoryview] = []
        self._batched = 0
        self._failed: BaseException | None = None
        self._aborted = False

    @property
    def error(self) -> BaseException | None:
        """The first failure of a stage (the sink's or the hash's), if any."""
        if self._failed is None:
            for worker in (self._writing, self._hashing):
                if worker is not None and worker.error is not None:
                    self._failed = worker.error
                    break
        return self._failed

    def submit(self, piece: bytes | memoryview, part: bytes | memoryview) -> None:
        """Hash ``piece`` and write ``part``; raise the first failure of either stage.

        ``piece`` is hashed even when the sink has failed, so the hash covers every
        piece submitted.
        """
        if not self._threaded:
            if self._hashing is not None or self._inline + len(piece) <= PIPELINE_MIN_BYTES:
                self._inline += len(piece)
                if piece:
                    self._sha.update(piece)
                if part and self.error is None and not self._aborted:
                    try:
                        self._write(part)
                    except BaseException as exc:
                        self._failed = exc
                        raise
                self._raise()
                return
            self._threaded = True
            self._hashing = _Worker(self._sha.update, lambda: False, "spillstore-hash")
            self._writing = _Worker(self._write, self._write_halted, "spillstore-write")
        if piece:
            self._to_hash.append(piece)
        if part:
            self._to_write.append(part)
        self._batched += max(len(piece), len(part))
        if self._batched >= PIPELINE_BATCH_BYTES:
            self._hand_over()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def _write_halted(self) -> bool:
        return self._aborted or self.error is not None

    def _hand_over(self) -> None:
        assert self._hashing is not None and self._writing is not None
        # One buffer a batch (a lone bytes piece is not copied): each call into hashlib or
        # the sink gives up the GIL and must take it back, which waits while the
        # producer's thread is busy counting.
        if self._to_hash:
            self._hashing.put(_joined(self._to_hash))
            self._to_hash = []
        if self._to_write:
            if self._write_halted():
                self._to_write = []
            else:
                self._writing.put(_joined(self._to_write))
                self._to_write = []
        self._batched = 0

    def _stop(self) -> None:
        """Hand over what is batched and wait for both threads to finish their queues."""
        if self._threaded:
            self._hand_over()
            self._threaded = False
            assert self._hashing is not None and self._writing is not None
            self._writing.stop()
            self._hashing.stop()

    def drain(self) -> None:
        """Hand over what is batched, wait for the workers; re-raise their error.

        Later submissions run inline (in the caller's thread).
        """
        self._stop()
        self._raise()

    def finish(self) -> str:
        """Drain; return the sha256 hex digest of every piece."""
        self.drain()
        return self._sha.hexdigest()

    def abort(self) -> None:
        """Stop writing, dropping the parts queued; every piece submitted is still hashed."""
        self._aborted = True
        self._to_write = []
        self._stop()

    @property
    def hasher(self) -> Hasher:
        """After :meth:`abort`: the sha256 of every piece submitted.

        Raises:
            BaseException: hashing itself failed (e.g. ``MemoryError``): no hash to give.
        """
        assert not self._threaded, "the pipeline is still running"
        if self._hashing is not None and self._hashing.error is not None:
            raise self._hashing.error
        return self._sha


def _joined(pieces: list[bytes | memoryview]) -> bytes | memoryview:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
