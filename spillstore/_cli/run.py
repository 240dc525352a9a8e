"""``spillstore run``: run a command, stream its output through the service, print the result.

The command starts without a shell, with stdout and stderr on **one pipe**; the pipe is
read :data:`READ_CHUNK_BYTES` at a time (at most) into the service's
:class:`~spillstore.OutputAccumulator` (memory stays flat whatever the output size). A
first Ctrl-C is left to the command (the terminal sends it to both); a second one kills
it; an interrupt sent to spillstore alone (no terminal's foreground group) is passed on.
On a terminal, rich's :class:`~rich.progress.Progress` shows a line on stderr while
a large output streams.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from spillstore._cli.errors import (
    EXIT_CANNOT_EXECUTE,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    CliError,
    fail,
    store_errors,
)
from spillstore._cli.options import (
    BudgetOption,
    CommandArgument,
    command_app,
    env_sets,
    global_options,
    open_store,
    optional,
    settings,
    size_option,
    takes_global_options,
)
from spillstore._cli.output import (
    SPILL_INFO_FIELDS,
    emit_json,
    is_tty,
    quiet_stdout,
    record,
    tool_text,
    write,
)

if TYPE_CHECKING:
    import subprocess
    import types

    from rich.progress import Progress, TaskID

    from spillstore._content import ToolResult
    from spillstore._service.accumulator import OutputAccumulator
    from spillstore._settings import Settings
    from spillstore._stores.base import Store

__all__ = [
    "PIPE_BYTES",
    "PROGRESS_REFRESH_PER_SECOND",
    "READ_CHUNK_BYTES",
    "RunOutcome",
    "app",
    "stream",
]

log = logging.getLogger("spillstore")

READ_CHUNK_BYTES = 256 * 1024
"""``run`` reads the command's pipe up to this many bytes at a time.

A fast command keeps the (widened) pipe full, so each read takes a large piece: the
per-read work of the accumulator and writer is paid about 4 times less often than for
64 KiB pieces. Larger reads measured no faster and cost memory (a 1 GiB output must peak
within 4 MiB of a 1 MiB one)."""

PIPE_BYTES = 1024 * 1024
"""The command's pipe is widened to this size where the system allows (Linux
``F_SETPIPE_SZ``, up to ``/proc/sys/fs/pipe-max-size``): the command can run further
ahead of spillstore before it waits, which matters on a busy machine. The buffer is the
kernel's, not spillstore's memory."""

PROGRESS_REFRESH_PER_SECOND = 10
"""The live progress line on a terminal is redrawn this often."""

app = command_app()


@dataclass
class RunOutcome:
    """What ``run`` produced: the model-facing result and the exit status to return."""

    result: ToolResult
    exit_code: int


@app.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@takes_global_options("dir", "session", "json")
def run(
    ctx: typer.Context,
    *,
    command: CommandArgument = None,
    max_bytes: BudgetOption = None,
    retain: Annotated[
        str | None,
        optional(
            "--retain",
            metavar="SIZE",
            help='Retention cap: the most bytes saved (first and last ones), or "off". '
            "Default: $SPILLSTORE_RETENTION_BYTES, else 256MiB.",
        ),
    ] = None,
    tool_name: Annotated[
        str | None,
        optional(
            "--tool-name",
            metavar="NAME",
            help="Tool name in the pointer. Default: the command's file name.",
        ),
    ] = None,
    call_id: Annotated[
        str, typer.Option("--call-id", metavar="ID", help="Tool call id in the pointer.")
    ] = "run",
) -> None:
    """Run CMD, save its output, print what the model would see, exit with its status.

    stdout and stderr go through one pipe (merged in the order CMD wrote them), are read
    up to 256 KiB at a time with bounded memory, and the exit status is appended as the suffix
    ("exit code N"). On a terminal, a progress line shows on stderr while a large output
    streams.
    """
    argv = list(command or [])
    if not argv:
        fail("run: no command given; usage: spillstore run [OPTIONS] -- CMD [ARGS]...", EXIT_USAGE)
    with store_errors():
        chosen = _run_settings(ctx, max_bytes, retain)
        # A store that fails to open (a full disk) still lets the command run: its
        # output then gets the "NOT saved" preview.
        from spillstore._stores.unavailable import unavailable_on_failure  # noqa: PLC0415

        store = unavailable_on_failure(lambda: open_store(chosen, ctx), log)
    name = tool_name if tool_name is not None else os.path.basename(argv[0]) or "run"
    outcome = stream(argv, chosen, store, tool_name=name, tool_call_id=call_id)
    try:
        _print_outcome(outcome, as_json=global_options(ctx).json)
    except BrokenPipeError:  # a reader that stopped early still gets the command's status
        quiet_stdout()
    raise typer.Exit(outcome.exit_code)


def _print_outcome(outcome: RunOutcome, *, as_json: bool) -> None:
    text = tool_text(outcome.result)
    if as_json:
        spill = outcome.result.spill
        emit_json(
            {
                "exit_code": outcome.exit_code,
                "is_error": outcome.result.is_error,
                "text": text,
                "spill": None if spill is None else record(spill, SPILL_INFO_FIELDS),
            }
        )
    else:
        write(text if text.endswith("\n") else text + "\n")


def _run_settings(ctx: typer.Context, max_bytes: str | None, retain: str | None) -> Settings:
    """Settings for ``run``: the options, with previews and tail fitted to them.

    ``--max-bytes`` below the default previews shrinks the head and tail previews to
    fit (unless they are set in the environment); ``--retain R`` keeps the last
    ``min(1 MiB, R / 10)`` bytes past the cap (unless that is set in the environment).
    """
    from spillstore._settings import (  # noqa: PLC0415 - start-up stays cheap
        MIN_BUDGET_BYTES,
        MIN_RETENTION_BYTES,
        POINTER_RESERVE_BYTES,
        Settings,
    )

    overrides: dict[str, object] = {}
    defaults = Settings.model_fields
    if max_bytes is not None:
        budget = size_option("--max-bytes", max_bytes)
        assert budget is not None
        if budget < MIN_BUDGET_BYTES:
            fail(
                f"--max-bytes: must be at least {MIN_BUDGET_BYTES} bytes so the pointer "
                f"fits; got {budget}",
                EXIT_USAGE,
            )
        overrides["max_bytes"] = budget
        head: int = defaults["head_bytes"].default
        tail: int = defaults["tail_bytes"].default
        room = budget - POINTER_RESERVE_BYTES
        if head + tail > room and not (env_sets("head_bytes") or env_sets("tail_bytes")):
            head_bytes = max(1, room * head // (head + tail))
            overrides["head_bytes"] = head_bytes
            overrides["tail_bytes"] = max(1, room - head_bytes)
    if retain is not None:
        cap = size_option("--retain", retain, allow_off=True)
        if cap is not None and cap < MIN_RETENTION_BYTES:
            fail(
                f'--retain: must be at least {MIN_RETENTION_BYTES} bytes, or "off"; got {cap}',
                EXIT_USAGE,
            )
        overrides["retention_bytes"] = cap
        if cap is not None and not env_sets("retained_tail_bytes"):
            overrides["retained_tail_bytes"] = min(
                defaults["retained_tail_bytes"].default, cap // 10
            )
    return settings(ctx, **overrides)


def stream(
    argv: list[str],
    chosen: Settings,
    store: Store,
    *,
    tool_name: str,
    tool_call_id: str,
    progress: bool = True,
) -> RunOutcome:
    """Run ``argv`` and stream its merged output through the service's accumulator.

    Args:
        argv: the command line, run without a shell.
        chosen: budgets and caps.
        store: where the output is spilled.
        tool_name, tool_call_id: what the pointer names.
        progress: show the progress line on a terminal's stderr.

    Raises:
        CliError: the command could not be started (exit 127 or 126).
    """
    from spillstore._service.service import TruncationService  # noqa: PLC0415

    service = TruncationService(store, chosen)
    accumulator = service.accumulator(tool_name=tool_name, tool_call_id=tool_call_id)
    meter = _Meter(accumulator, chosen.retention_bytes) if progress else None
    proc: subprocess.Popen[bytes] | None = None
    try:
        with _signals_to() as forward:  # before the start: no signal goes unhandled
            proc = forward.attach(_start(argv))
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            _widen_pipe(fd)
            while chunk := os.read(fd, READ_CHUNK_BYTES):
                accumulator.write(chunk)
                if meter is not None:
                    meter.update()
            returncode = proc.wait()
    finally:
        if meter is not None:
            meter.close()
        if proc is not None:
            if proc.stdout is not None:
                proc.stdout.close()
            if proc.poll() is None:  # only after an unexpected error: do not leave it running
                proc.kill()
                proc.wait()
    suffix, exit_code = _status(returncode)
    result = accumulator.ok(suffix) if returncode == 0 else accumulator.error(suffix)
    return RunOutcome(result=result, exit_code=exit_code)


class _Meter:
    """A rich progress line on a terminal's stderr once the output spills; nothing otherwise.

    ``spillstore: 12.3 MB seen, 10.5 MB spilled (retention cap), 1.2 s``: sizes in
    :func:`rich.filesize.decimal` units; rich redraws the line on its own clock.
    """

    def __init__(self, accumulator: OutputAccumulator, retention_bytes: int | None) -> None:
        self._accumulator = accumulator
        self._retention_bytes = retention_bytes
        self._enabled = is_tty(sys.stderr)
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def update(self) -> None:
        """Record the bytes seen so far; cheap until the output spills."""
        if not self._enabled or not self._accumulator.spilling:
            return
        from rich.filesize import decimal  # noqa: PLC0415 - only a large run on a terminal

        if self._progress is None or self._task is None:
            self._progress, self._task = self._start()
        seen = self._accumulator.total_bytes
        cap = self._retention_bytes
        capped = cap is not None and seen > cap
        kept = cap if capped and cap is not None else seen
        self._progress.update(
            self._task,
            seen=decimal(seen),
            kept=decimal(kept),
            capped=" (retention cap)" if capped else "",
        )

    def _start(self) -> tuple[Progress, TaskID]:
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import Progress, TextColumn  # noqa: PLC0415
        from rich.table import Column  # noqa: PLC0415

        line = TextColumn(
            "spillstore: {task.fields[seen]} seen, {task.fields[kept]} spilled"
            "{task.fields[capped]}, {task.elapsed:.1f} s",
            markup=False,
            table_column=Column(no_wrap=True, overflow="ellipsis"),
        )
        progress = Progress(
            line,
            console=Console(stderr=True, highlight=False),
            refresh_per_second=PROGRESS_REFRESH_PER_SECOND,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        task = progress.add_task("spill", total=None, seen="", kept="", capped="")
        progress.start()
        return progress, task

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _widen_pipe(fd: int) -> None:
    """Ask for a :data:`PIPE_BYTES` pipe; keep the default where that is refused."""
    import fcntl  # noqa: PLC0415

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if set_size is not None:
        with contextlib.suppress(OSError):  # above /proc/sys/fs/pipe-max-size: keep it
            fcntl.fcntl(fd, set_size, PIPE_BYTES)


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    import subprocess  # noqa: PLC0415

    try:
        return subprocess.Popen(  # noqa: S603 - running the user's command is the point
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0
        )
    except FileNotFoundError as exc:
        raise CliError(f"cannot run {argv[0]!r}: command not found", EXIT_NOT_FOUND) from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CliError(f"cannot run {argv[0]!r}: {reason}", EXIT_CANNOT_EXECUTE) from exc


class _Forwarder:
    """The signal handler of :func:`_signals_to`: Ctrl-C is left to the command, TERM/HUP
    forwarded, a second Ctrl-C kills it. A signal that comes before the command has
    started is kept and handled once it has (so none leaves the command running)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._pending: list[int] = []
        self._interrupts = 0

    def attach(self, proc: subprocess.Popen[bytes]) -> subprocess.Popen[bytes]:
        """Start forwarding to ``proc``, with what came before it started (a terminal's
        Ctrl-C then did not reach the command: it is passed on too)."""
        import signal  # noqa: PLC0415

        self._proc = proc
        pending, self._pending = self._pending, []
        self._interrupts = pending.count(signal.SIGINT)
        if self._interrupts >= 2:
            proc.kill()
            return proc
        for signum in dict.fromkeys(pending):
            proc.send_signal(signum)
        return proc

    def __call__(self, signum: int, frame: types.FrameType | None) -> None:
        import signal  # noqa: PLC0415

        proc = self._proc
        if proc is None:
            self._pending.append(signum)
            return
        if proc.poll() is not None:
            return
        if signum == signal.SIGINT:
            self._interrupts += 1
            if self._interrupts >= 2:
                proc.kill()
            elif not _in_terminal_foreground():
                proc.send_signal(signum)
        else:
            proc.send_signal(signum)


@contextmanager
def _signals_to() -> Iterator[_Forwarder]:
    """While the command runs: leave Ctrl-C to it, forward TERM/HUP, kill on a 2nd Ctrl-C.

    The terminal sends Ctrl-C to the whole foreground group, so the command already has
    it; spillstore keeps reading so that what the command printed is still saved. An
    interrupt that cannot have come from a terminal (spillstore is not in a terminal's
    foreground group: a harness or ``kill -INT`` sent it to spillstore alone) is passed
    on to the command.
    """
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    forward = _Forwarder()
    if threading.current_thread() is not threading.main_thread():
        yield forward
        return
    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, forward) for signum in watched}
    try:
        yield forward
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _in_terminal_foreground() -> bool:
    """Whether this process is in the foreground group of the terminal on fd 0, 1 or 2
    (where a terminal's Ctrl-C reaches the whole group)."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
    return False


def _status(returncode: int) -> tuple[str, int]:
    """The suffix for a finished command and the exit status spillstore returns."""
    if returncode >= 0:
        return f"exit code {returncode}", returncode
    import signal  # noqa: PLC0415

    signum = -returncode
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = str(signum)
    return f"killed by signal {name}", 128 + signum
