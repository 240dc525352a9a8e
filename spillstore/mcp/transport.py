"""A stdio transport for MCP clients that reads one huge JSON-RPC line in linear time.

The official SDK's stdio client joins its buffer with every new chunk and splits the
whole thing again, so one 40 MB result takes ~100 s (design.md §10). This transport
launches the server the same way (its own session, so the whole process tree can be
signalled; the pipes are private) but frames the output with :class:`LineSplitter`:
``find(b"\\n")`` runs over each new chunk only, and the bytes of a line grow in one
``bytearray`` (large reallocations are ``mremap``\\ ed by the allocator, so a 100 MB line
is never held twice while it is being read). A line is decoded, its bytes released, and
parsed by ``json.loads`` (``TypeAdapter.validate_json`` takes four times as long on long
strings, and parsing the bytes holds them, a decoded copy and the result at once), then
validated from Python objects, which keeps the parsed strings as they are. Peak memory
for one line is about twice its size. Lines over 1 MiB are parsed in a worker thread so
the event loop keeps serving other requests.

Two more things the proxy needs happen here, where the raw messages are visible:

- results of ``tools/call`` requests sent through this transport have content blocks of
  unknown types replaced by a visible ``[content dropped: ...]`` text block, so a server
  using a newer block type cannot make the whole result fail validation;
- :attr:`StdioTransport.exited` is set when the server's stdout ends, and
  :attr:`StdioTransport.returncode` then says how it ended.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import IO, Any, Final, Protocol

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from spillstore.mcp.launch import Launched, launch
from spillstore.mcp.pipes import Readable, write_all

__all__ = [
    "CLAIM_PREFIX",
    "KNOWN_BLOCK_TYPES",
    "THREAD_PARSE_BYTES",
    "Claim",
    "Claimed",
    "LineSplitter",
    "StdioTransport",
    "known_blocks_only",
    "load_tool_response",
    "parse_line",
]

log = logging.getLogger("spillstore")

THREAD_PARSE_BYTES: Final = 1 << 20
"""Lines longer than this are parsed in a worker thread."""

READ_CHUNK_BYTES: Final = 1 << 20
"""The most bytes asked for per read of the server's stdout."""

CLOSE_GRACE_SECONDS: Final = 2.0
"""After stdin is closed, how long the server has to exit before it is signalled."""

KILL_GRACE_SECONDS: Final = 2.0
"""After SIGTERM, how long the process group has before SIGKILL."""

KNOWN_BLOCK_TYPES: Final = frozenset({"text", "image", "audio", "resource", "resource_link"})
"""Content block types of ``tools/call`` results that pass unchanged."""

CLAIM_PREFIX: Final = "spillstore:"
"""Request ids the proxy sends without the SDK session start with this (see ``claims``)."""

_PIPE_BUF: Final[int] = getattr(select, "PIPE_BUF", 0) if sys.platform != "win32" else 0
"""Writes to a pipe up to this size are atomic (POSIX); 0: no write is taken as atomic."""

_CLAIMED_ID = re.compile(rb'"id"\s*:\s*"(spillstore:[0-9]+)"')
_ID_WINDOW = 512


class LineSplitter:
    """Split a byte stream into newline-terminated lines in linear time.

    Each byte is searched once (only the new chunk is scanned for ``\\n``), and a line
    longer than one chunk grows in a single ``bytearray``.
    """

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = bytearray()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line held so far."""
        return len(self._partial)

    def feed(self, chunk: bytes) -> list[bytes | bytearray]:
        """Add ``chunk`` and return the lines it completes, without their ``\\n``."""
        lines: list[bytes | bytearray] = []
        start = 0
        view = memoryview(chunk)
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            if self._partial:
                self._partial += view[start:newline]
                lines.append(self._partial)
                self._partial = bytearray()
            else:
                lines.append(chunk[start:newline])
            start = newline + 1
        if start < len(chunk):
            self._partial += view[start:]
        return lines

    def finish(self) -> bytes | bytearray | None:
        """Return the unterminated rest at end of stream, if any."""
        rest, self._partial = self._partial, bytearray()
        return rest or None


def _loads(box: list[bytes | bytearray]) -> Any:
    """Parse the line in ``box``, dropping the bytes before the parse allocates.

    Decoding to ``str`` first and releasing the bytes keeps the peak at the decoded text
    plus the parsed strings (2x the line) where parsing bytes holds the bytes, a copy
    and the parsed strings (3-4x).
    """
    data = box.pop()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("spillstore: the MCP server sent invalid UTF-8; decoding it with U+FFFD")
        text = data.decode("utf-8", "replace")
    del data
    return json.loads(text)


def _dropped_block(block: Any) -> dict[str, Any]:
    kind = block.get("type") if isinstance(block, dict) else None
    size = len(json.dumps(block, ensure_ascii=False).encode("utf-8", "replace"))
    label = repr(kind)[:80] if kind is not None else "without a type"
    return {
        "type": "text",
        "text": f"[content dropped: content block of unknown type {label}, {size} bytes of JSON]",
    }


def _sanitize_tool_result(result: Any) -> None:
    """Replace unknown content blocks of a ``tools/call`` result by text notices."""
    if not isinstance(result, dict):
        return
    content = result.get("content")
    if not isinstance(content, list):
        return
    for index, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") in KNOWN_BLOCK_TYPES):
            content[index] = _dropped_block(block)


Claimed = tuple[bytes | bytearray, tuple[int, int]]
"""A claimed response line, and the ``[start, end)`` span of its quoted id in it."""


class Claim(Protocol):
    """Who waits for the response to a request sent with :meth:`StdioTransport.send_raw`."""

    async def deliver(self, claimed: Claimed) -> None:
        """Take the response line, unparsed. Called by the transport's reader: it must
        not wait for long (a slow answer goes to a task of the claimant's own)."""

    def end(self) -> None:
        """No response will come: the server's stdout ended."""


def load_tool_response(box: list[bytes | bytearray]) -> Any:
    """Parse the ``tools/call`` response line in ``box`` (emptied, so the bytes are freed
    early), unknown content blocks made notices."""
    raw = _loads(box)
    if isinstance(raw, dict) and "result" in raw:
        _sanitize_tool_result(raw["result"])
    return raw


def known_blocks_only(result: Any) -> bool:
    """Whether every content block of a raw ``tools/call`` result has a known type."""
    content = result.get("content") if isinstance(result, dict) else None
    return isinstance(content, list) and all(
        isinstance(block, dict) and block.get("type") in KNOWN_BLOCK_TYPES for block in content
    )


def parse_line(
    line: bytes | bytearray | list[bytes | bytearray],
    tool_call_ids: set[Any] | None = None,
    *,
    peer: str = "the MCP server",
) -> SessionMessage | Exception:
    """Parse one JSON-RPC line; parse errors come back as values for the session.

    Args:
        line: the line without its newline, or a one-item list holding it (the list is
            emptied, so the caller keeps no reference and the bytes are freed early).
        tool_call_ids: ids of ``tools/call`` requests in flight; a response to one of
            them has unknown content blocks replaced by notices (the id is removed).
        peer: who sent the line, for the one-line warning an unreadable one gets.
    """
    box = line if isinstance(line, list) else [line]
    try:
        raw = _loads(box)
        if tool_call_ids and isinstance(raw, dict) and "result" in raw:
            request_id = raw.get("id")
            if isinstance(request_id, int | str) and request_id in tool_call_ids:
                tool_call_ids.discard(request_id)
                _sanitize_tool_result(raw["result"])
        message = types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except Exception as exc:
        first = str(exc).partition("\n")[0][:200]
        log.warning("spillstore: unreadable JSON-RPC line from %s (%s)", peer, first)
        return exc
    return SessionMessage(message)


class StdioTransport:
    """Launch an MCP server as a subprocess and talk JSON-RPC over its stdin/stdout.

    An async context manager yielding ``(read_stream, write_stream)`` as the SDK's
    transports do, so it plugs into ``mcp.Client(transport)`` or ``ClientSession``.
    On exit stdin is closed, then the process group gets SIGTERM and then SIGKILL
    if it does not exit in time.

    Args:
        command: the executable.
        args: its arguments.
        env: the environment (default: this process's environment, unfiltered: a
            proxy stands in for the server and passes it what it was given).
        cwd: the working directory.
        stderr: where the server's stderr goes (default: inherited). Never stdout.
        launched: a process already started with these arguments
            (:func:`~spillstore.mcp.launch.launch`), adopted by the first ``async
            with`` instead of starting one (so it can boot while the caller imports).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | IO[Any] | None = None,
        launched: Launched | None = None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.stderr = stderr
        self.exited = anyio.Event()
        self.returncode: int | None = None
        self.pid: int | None = None
        self._launched = launched
        self._process: Launched | None = None
        self.claims: dict[str, Claim] = {}
        """Responses to route around the session: request id -> who takes its raw line
        with the span of its quoted id (ids start with :data:`CLAIM_PREFIX`; see
        :meth:`send_raw`). Each is told when the server's stdout ends instead."""
        self._stdin_lock = anyio.Lock(fast_acquire=True)  # no yield when it is free
        self._tg: anyio.abc.TaskGroup | None = None
        self._tool_call_ids: set[Any] = set()
        self._streams: list[Any] = []
        self._stdout_fd: int | None = None
        self._readable: Readable | None = None

    def describe_exit(self) -> str:
        """A short phrase saying how the server ended, for error results."""
        code = self.returncode
        if code is None:
            return "closed its stdout"
        if code < 0:
            with suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited with code {code}"

    async def __aenter__(
        self,
    ) -> tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]:
        process, self._launched = self._launched, None
        if process is not None:
            process.adopted = True
        else:
            process = launch(
                self.command, self.args, env=self.env, cwd=self.cwd, stderr=self.stderr
            )
        self._process = process
        read_fd = self._stdout_fd = process.stdout_fd
        self.pid = process.pid
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        self._streams = [read_send, read_recv, write_send, write_recv]
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reader, process, read_fd, read_send)
        self._tg.start_soon(self._writer, process, write_recv, read_send)
        return read_recv, write_send

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._tg is not None and self._process is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._stop(self._process)
        finally:
            # The task group is left in the scope it was entered in (not the shield).
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            for stream in self._streams:
                stream.close()
            fd, self._stdout_fd = self._stdout_fd, None
            if self._readable is not None:
                self._readable.close()
            if fd is not None:
                os.close(fd)
            self.returncode = self._process.returncode
            self.exited.set()

    async def _reader(
        self,
        process: Launched,
        fd: int,
        send: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        splitter = LineSplitter()
        readable = self._readable = Readable(fd)
        try:
            async with send:
                while True:
                    try:
                        chunk = os.read(fd, READ_CHUNK_BYTES)
                    except BlockingIOError:
                        await readable.wait()
                        continue
                    except OSError:
                        break
                    if not chunk:
                        break
                    lines = splitter.feed(chunk)
                    del chunk
                    lines.reverse()
                    while lines:
                        line = lines.pop()
                        claimed = self._claimed(line) if self.claims else None
                        if claimed is not None:
                            claim, span = claimed
                            del claimed
                            await claim.deliver((line, span))
                            del line
                            continue
                        box = [line]
                        del line
                        if len(box[0]) > THREAD_PARSE_BYTES:
                            message = await anyio.to_thread.run_sync(
                                parse_line, box, self._tool_call_ids
                            )
                        else:
                            message = parse_line(box, self._tool_call_ids)
                        await send.send(message)
                        del message
                rest = splitter.finish()
                if rest is not None and rest.strip():
                    await send.send(parse_line(rest, self._tool_call_ids))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session went away; the process is stopped on exit
        finally:
            ended, self.claims = list(self.claims.values()), {}
            for claim in ended:
                claim.end()  # no answer will come
            await self._note_exit(process)

    def _claimed(self, line: bytes | bytearray) -> tuple[Claim, tuple[int, int]] | None:
        """The claimant of a response to a claimed id (no longer waiting in
        :attr:`claims`), and the span of the quoted id; the id is looked for near either
        end of the line, where JSON-RPC encoders put it."""
        found = _CLAIMED_ID.search(line, 0, _ID_WINDOW) or _CLAIMED_ID.search(
            line, max(len(line) - _ID_WINDOW, 0)
        )
        if found is None:
            return None
        claim = self.claims.pop(found.group(1).decode("ascii"), None)
        if claim is None:
            return None
        return claim, (found.start(1) - 1, found.end(1) + 1)

    def send_raw_nowait(self, data: bytes) -> bool:
        """Write one encoded JSON-RPC line to the server's stdin now, if the pipe takes it
        whole at once (a write of at most ``PIPE_BUF`` bytes is all or nothing) and no
        other line is being written; False: nothing was written.

        Raises:
            OSError: the server is gone.
        """
        assert self._process is not None and self._process.process.stdin is not None
        if len(data) > _PIPE_BUF or self._stdin_lock.locked():
            return False
        try:
            os.write(self._process.process.stdin.fileno(), data)
        except BlockingIOError:
            return False
        return True

    async def send_raw(self, data: bytes) -> None:
        """Write one encoded JSON-RPC line (with its newline) to the server's stdin.

        Raises:
            OSError: the server is gone.
        """
        assert self._process is not None and self._process.process.stdin is not None
        async with self._stdin_lock:
            await write_all(self._process.process.stdin.fileno(), data)

    async def _note_exit(self, process: Launched) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE_SECONDS):
            while process.returncode is None:
                await anyio.sleep(0.01)
        self.returncode = process.returncode
        self.exited.set()

    async def _writer(
        self,
        process: Launched,
        receive: MemoryObjectReceiveStream[SessionMessage],
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        stdin = process.process.stdin
        assert stdin is not None
        try:
            async with receive:
                async for item in receive:
                    message = item.message
                    if isinstance(message, types.JSONRPCRequest) and message.method == "tools/call":
                        self._tool_call_ids.add(message.id)
                    data = message.model_dump_json(by_alias=True, exclude_unset=True)
                    async with self._stdin_lock:
                        await write_all(stdin.fileno(), data.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading (it exited): end the session's read side
            # so a pending request fails instead of hanging.
            await read_send.aclose()

    async def _stop(self, process: Launched) -> None:
        """Close stdin, give the server a grace period, then signal its process group."""
        if process.process.stdin is not None:
            with suppress(Exception):
                process.process.stdin.close()
        with anyio.move_on_after(CLOSE_GRACE_SECONDS):
            while process.returncode is None:
                await anyio.sleep(0.01)
        if process.returncode is None:
            await _terminate(process)
        self.returncode = process.returncode


async def _terminate(process: Launched) -> None:
    """SIGTERM the process group, then SIGKILL what is left (POSIX); kill elsewhere."""
    if sys.platform == "win32":  # pragma: no cover - the proxy is tested on POSIX
        with suppress(ProcessLookupError):
            process.process.kill()
        return
    from mcp.os.posix.utilities import terminate_posix_process_tree  # noqa: PLC0415

    await terminate_posix_process_tree(process, KILL_GRACE_SECONDS)  # type: ignore[arg-type]
    with anyio.move_on_after(KILL_GRACE_SECONDS):
        while process.returncode is None:
            await anyio.sleep(0.01)
