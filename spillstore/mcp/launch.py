"""Start an MCP server subprocess, with the standard library only.

:func:`launch` is how :class:`~spillstore.mcp.transport.StdioTransport` starts the
upstream, and it imports nothing but the standard library, so the command line can call
it *before* it imports the MCP SDK: the upstream boots while the proxy imports the rest
(``spillstore mcp proxy`` pays for the slower of the two, not for both), and the
transport then adopts the running process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import suppress

TYPE_CHECKING = False  # no typing or dataclasses: this runs before the upstream starts
if TYPE_CHECKING:
    from typing import IO, Any, Final

__all__ = ["PIPE_BYTES", "Launched", "launch"]

if sys.platform != "win32":
    import fcntl

    _SETPIPE_SZ: int | None = getattr(fcntl, "F_SETPIPE_SZ", None)
else:  # pragma: no cover
    _SETPIPE_SZ = None

PIPE_BYTES: Final = 1 << 20
"""Pipe buffer size asked for (Linux ``F_SETPIPE_SZ``): fewer wake-ups on big results."""


class Launched:
    """A started server: the process, and the non-blocking read end of its stdout.

    Attributes:
        process: the ``Popen`` (stdin is a pipe; stdout goes to ``stdout_fd``'s pipe).
        stdout_fd: the read end of the server's stdout (non-blocking, not inherited);
            whoever adopts the process owns it and closes it.
        adopted: set by the transport that took it over (which then stops it and closes
            its pipes).

    A plain class, not a dataclass: ``dataclasses`` imports ``inspect`` (about 14 ms),
    and this module runs before the upstream starts.
    """

    def __init__(
        self, process: subprocess.Popen[bytes], stdout_fd: int, adopted: bool = False
    ) -> None:
        self.process = process
        self.stdout_fd = stdout_fd
        self.adopted = adopted

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended (reaping it), else None."""
        return self.process.poll()

    def discard(self) -> None:
        """Kill a process that will never be adopted, and close its pipes."""
        with suppress(OSError):
            if self.process.poll() is None:
                if sys.platform != "win32":
                    with suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.process.pid, 9)
                self.process.kill()
            self.process.wait(timeout=5)
        if self.process.stdin is not None:
            with suppress(OSError):
                self.process.stdin.close()
        with suppress(OSError):
            os.close(self.stdout_fd)


def _open_pipe() -> tuple[int, int]:
    """A pipe for the server's stdout: non-blocking read end, a 1 MiB buffer if allowed."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_inheritable(read_fd, False)
    if _SETPIPE_SZ is not None:
        with suppress(OSError):
            fcntl.fcntl(write_fd, _SETPIPE_SZ, PIPE_BYTES)
    return read_fd, write_fd


def launch(
    command: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr: int | IO[Any] | None = None,
) -> Launched:
    """Start ``command args`` in a new session (its own process group on POSIX).

    stdin is a pipe (non-blocking on POSIX, for the event loop), stdout a pipe whose read
    end is returned, stderr as given (default: inherited; never stdout).

    Raises:
        OSError: the command could not be started (not found, not executable, ...).
    """
    read_fd, write_fd = _open_pipe()
    try:
        process = subprocess.Popen(  # noqa: S603 - starting the user's server is the point
            [command, *args],
            stdin=subprocess.PIPE,
            stdout=write_fd,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=sys.platform != "win32",
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    if process.stdin is not None and sys.platform != "win32":
        os.set_blocking(process.stdin.fileno(), False)
    return Launched(process=process, stdout_fd=read_fd)
