"""Non-blocking pipe I/O from the event loop: waiting until a descriptor is readable,
and writing all of a line.

:class:`Readable` exists for the proxy's per-call cost: ``anyio.wait_readable`` adds the
descriptor to the event loop's selector and removes it again on every wait (two
``epoll_ctl`` calls and the selector's bookkeeping per line read, on each of the proxy's
two pipes). On asyncio, :class:`Readable` keeps the descriptor registered between waits,
and takes it out only when it is readable while nobody waits (so a busy reader does not
make the loop spin) and on :meth:`Readable.close`. Elsewhere it is
``anyio.wait_readable``.
"""

from __future__ import annotations

import asyncio
import os
import sys

import anyio
import anyio.to_thread

__all__ = ["Readable", "write_all"]


class Readable:
    """Waits until the non-blocking descriptor ``fd`` is readable (one waiter at a time).

    Call :meth:`close` before the descriptor is closed.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._loop: asyncio.AbstractEventLoop | None = None
        self._registered = False
        self._waiter: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        """Return once ``fd`` is readable (or at its end)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not asyncio (trio)
            loop = None
        if loop is None or sys.platform == "win32":
            await anyio.wait_readable(self.fd)
            return
        if self._loop is not loop:
            self.close()
            self._loop = loop
        if not self._registered:
            loop.add_reader(self.fd, self._ready)
            self._registered = True
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)  # it stays registered for the next wait
        else:  # readable with nobody waiting: stop polling it until someone waits
            self.close()

    def close(self) -> None:
        """Take the descriptor out of the event loop (it is registered again on a wait)."""
        loop, registered = self._loop, self._registered
        self._registered = False
        if registered and loop is not None and not loop.is_closed():
            loop.remove_reader(self.fd)


async def write_all(fd: int, data: bytes, *, pollable: bool = True) -> None:
    """Write ``data`` to ``fd``: non-blocking, waiting while a pipe is full, or (a regular
    file, which cannot be polled: ``pollable=False``) in a worker thread."""
    view = memoryview(data)
    while view:
        if not pollable:
            written = await anyio.to_thread.run_sync(os.write, fd, view)
        else:
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                await anyio.wait_writable(fd)
                continue
        view = view[written:]
