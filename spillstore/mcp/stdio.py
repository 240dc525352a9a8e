"""Serve MCP over this process's stdin/stdout without a worker thread per message.

The SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``: every line read,
every write and every flush is a hop to a worker thread, three per request, which is most
of a proxy's per-call overhead on small results. This transport reads and writes the
descriptors directly, non-blocking, from the event loop (falling back to a worker thread
for regular files, which cannot be polled), frames lines with the linear
:class:`~spillstore.mcp.transport.LineSplitter`, and takes the standard descriptors the
way the SDK does: while it serves, fd 0 reads ``/dev/null`` and fd 1 writes to stderr, so
a stray ``print`` or a child process cannot corrupt the protocol stream; both are restored
on exit, with their original blocking modes. A line that is not a readable JSON-RPC
message is answered here (:func:`unreadable_answer`: ``-32700`` or ``-32600``), as the
spec asks, instead of being dropped silently. A client that closes its end of stdout is
gone: an answer that meets the closed pipe ends serving quietly.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from spillstore.mcp.pipes import Readable, write_all
from spillstore.mcp.transport import LineSplitter, parse_line

__all__ = ["Intercept", "Reply", "stdio_streams", "unreadable_answer"]

READ_BYTES = 1 << 16
"""The most bytes read from stdin at a time."""

FLUSH_SECONDS = 5.0
"""On exit, how long queued responses may take to be written."""


def _pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _read(fd: int, readable: Readable | None) -> bytes:
    """Read a chunk of ``fd``: from the event loop when it can be polled (``readable``),
    else in a worker thread."""
    if readable is None:
        return await anyio.to_thread.run_sync(os.read, fd, READ_BYTES)
    while True:
        try:
            return os.read(fd, READ_BYTES)
        except BlockingIOError:
            await readable.wait()


def unreadable_answer(line: bytes | bytearray, error: Exception) -> SessionMessage | None:
    """The JSON-RPC error for a line that is not a readable message, if it needs one.

    A line that is not JSON (or nests too deeply to parse) gets ``-32700`` (parse error)
    with a null id; JSON that is
    not a valid message gets ``-32600`` (invalid request), with its id when it has a
    usable one. A broken notification or response (no id) gets no answer, as JSON-RPC
    asks.
    """
    if isinstance(error, RecursionError) or (
        isinstance(error, ValueError) and not isinstance(error, ValidationError)
    ):
        code, text, request_id = types.PARSE_ERROR, "Parse error", None
    else:
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError):
            return None
        request_id = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(raw, dict) and "id" in raw and "method" not in raw:
            return None  # a broken response: never answer one
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            request_id = None
        code, text = types.INVALID_REQUEST, "Invalid request"
    detail = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    error_data = types.ErrorData(code=code, message=f"{text}: {detail}")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error_data))


def _has_id(line: bytes | bytearray) -> bool:
    """Whether a line read as a notification has an ``id`` member after all: a request
    whose id is not a string or an integer (null, 1.5, true, ...), which the models take
    for a notification."""
    if b'"id"' not in line:
        return False
    try:
        raw = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(raw, dict) and "id" in raw


def _bad_id_answer() -> SessionMessage:
    """The ``-32600`` answer to a request whose id is not a string or an integer (MCP:
    never null); the id cannot be echoed, so it is null."""
    error = types.ErrorData(
        code=types.INVALID_REQUEST, message="Invalid request: id must be a string or an integer"
    )
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


Reply = Callable[[bytes], Awaitable[None]]
"""Writes one encoded JSON-RPC line (with its newline) to stdout, whole, from the calling
task (raises ``anyio.ClosedResourceError`` once serving ends)."""


def _encode(item: SessionMessage) -> bytes:
    return item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


Intercept = Callable[[bytes | bytearray, Reply], Awaitable[bool]]
"""Sees each stdin line before it is parsed; returns True when it took the line over."""


@asynccontextmanager
async def stdio_streams(
    intercept: Intercept | None = None,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Take fds 0 and 1 and yield ``(read_stream, write_stream)`` for ``Server.run``.

    Args:
        intercept: called with every non-blank line read, and a function writing raw
            lines to stdout; a line it takes over (returns True) is not parsed.
    """
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    in_poll, out_poll = _pollable(in_fd), _pollable(out_fd)
    readable = Readable(in_fd) if in_poll else None
    blocking = (os.get_blocking(in_fd), os.get_blocking(out_fd))
    if in_poll:
        os.set_blocking(in_fd, False)
    if out_poll:
        os.set_blocking(out_fd, False)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    out_lock = anyio.Lock(fast_acquire=True)  # one line at a time; no yield when free
    closing = False

    async def reply(data: bytes) -> None:
        """Write a line now, from the calling task (no hop through the writer task)."""
        if closing:
            raise anyio.ClosedResourceError
        async with out_lock:
            try:
                await write_all(out_fd, data, pollable=out_poll)
            except OSError as exc:  # EPIPE: the client closed its end, it is gone
                raise anyio.ClosedResourceError from exc

    async def reader() -> None:
        splitter = LineSplitter()

        async def take(line: bytes | bytearray) -> None:
            if intercept is not None and await intercept(line, reply):
                return
            message = parse_line(line, peer="the MCP client")
            if isinstance(message, Exception):
                answer = unreadable_answer(line, message)
                if answer is not None:
                    await reply(_encode(answer))
                    return
            elif isinstance(message.message, types.JSONRPCNotification) and _has_id(line):
                await reply(_encode(_bad_id_answer()))
                return
            await read_send.send(message)

        async with read_send:
            while chunk := await _read(in_fd, readable):
                for line in splitter.feed(chunk):
                    if line.strip():
                        await take(line)
            rest = splitter.finish()
            if rest is not None and rest.strip():
                await take(rest)

    written = anyio.Event()

    async def writer() -> None:
        nonlocal closing
        try:
            async with write_recv:
                async for item in write_recv:
                    data = _encode(item)
                    async with out_lock:
                        await write_all(out_fd, data, pollable=out_poll)
        except OSError:  # EPIPE: the client closed its end and is gone: serving ends
            closing = True
            tg.cancel_scope.cancel()
        finally:
            written.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            try:
                yield read_recv, write_send
            finally:
                # Let the last responses out before the descriptors are given back.
                closing = True
                write_send.close()
                with anyio.move_on_after(FLUSH_SECONDS, shield=True):
                    await written.wait()
                tg.cancel_scope.cancel()
    finally:
        if readable is not None:
            readable.close()
        for fd, was_blocking in ((in_fd, blocking[0]), (out_fd, blocking[1])):
            with suppress(OSError):
                os.set_blocking(fd, was_blocking)
            os.close(fd)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
