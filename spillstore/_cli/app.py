"""The ``spillstore`` command line: run a command the way a model would see it, then page,
search and clean up what was spilled.

Commands (``spillstore COMMAND --help`` for every option)::

    spillstore run [--max-bytes SIZE] [--retain SIZE] -- CMD [ARGS...]
    spillstore read SPILL [--offset N] [--limit N] [--byte-offset N --max-bytes N]
    spillstore grep PATTERN [SPILL] [-i] [-F] [-C N] [-A N] [-B N] [--count | --spills]
    spillstore ls [--all-sessions]
    spillstore show SPILL
    spillstore rm SPILL...
    spillstore gc [--max-age 7d] [--max-total 1GB] [--max-files N] [--grace 10m] [--dry-run]
    spillstore clean [--session S] [--yes]
    spillstore demo

Every command takes ``--dir`` (else ``SPILLSTORE_DIR``, else the user cache dir) and
``--session`` (else ``SPILLSTORE_SESSION``, else ``default``), before or after the command
name; ``run``, ``ls``, ``show``, ``rm``, ``gc`` and ``clean`` take ``--json`` (also
accepted before the command name; ``read``, ``grep`` and ``demo`` print text only and
refuse it).

``run`` starts the command without a shell, with stdout and stderr on **one pipe**, so
the saved output holds both, merged in exactly the order the command wrote them. It reads
the pipe in 64 KiB chunks into the service's :class:`~spillstore.OutputAccumulator`
(memory stays flat whatever the output size), prints exactly the text the model would
see (its parts joined by a newline, then a final newline), and exits with the command's
status, which also goes into the suffix: ``exit code N``, or ``killed by signal NAME``
(then the exit status is 128 + the signal number, as shells report it). A command that
cannot be started prints one line on stderr and exits 127 (not found) or 126 (found but
not executable). A first Ctrl-C is left to the command (the terminal sends it to both);
a second one kills it.

Exit status of the other commands: 0 on success, 1 when the request failed (unknown or
expired spill, a path outside the store, an invalid pattern, a refused ``clean``, a store
error), 2 for a bad command line (unknown option, bad size, duration or number). Every
error is ONE line on stderr, never a traceback.

JSON (``--json``) is one object with ``"version": 1``; fields are only ever added:

- ``ls``: ``{"version", "session" (null with --all-sessions), "spills": [SPILL, ...]}``
- ``show``: ``{"version", "spill": SPILL}``
- ``gc``/``clean``: ``{"version", "command", "dry_run", "count", "bytes_freed",
  "entries": [{"spill_id" (null for an orphan file), "session", "name", "bytes",
  "reason", "created_at", "created"}]}``, entries oldest first; ``reason`` is one of
  ``age``, ``total_bytes``, ``max_files``, ``orphan_temp``, ``session``.
- ``rm``: ``{"version", "results": [{"spill_id", "removed"}, ...]}``
- ``run``: ``{"version", "exit_code", "is_error", "text" (what the model sees),
  "spill": null | {"mode", "saved", "spill_id", "path", "total_bytes", "total_lines",
  "sha256", "stored_ranges", "elided_bytes", "elided_lines", "error", "invalid_utf8"}}``
- SPILL: ``{"spill_id", "session", "tool_name", "tool_call_id", "created_at" (epoch
  seconds), "created" (UTC ISO 8601), "total_bytes", "total_lines", "stored_bytes",
  "complete", "stored_ranges" ([[start, end), ...] in original bytes), "sha256",
  "suffix", "media_notes", "invalid_utf8", "path"}``

Only ``typer`` is imported at start-up; the store, the service, the tools and rich are
imported inside the commands that use them, so ``spillstore --help`` stays cheap.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn

import typer

if TYPE_CHECKING:
    import subprocess
    import types

    from rich.live import Live

    from spillstore._content import SpillInfo, ToolResult
    from spillstore._core.gc_plan import GcReport
    from spillstore._service.accumulator import OutputAccumulator
    from spillstore._settings import Settings
    from spillstore._stores.local import LocalStore
    from spillstore._stores.meta import SpillMeta
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["JSON_VERSION", "READ_CHUNK_BYTES", "app", "main"]

JSON_VERSION = 1
"""The version of every ``--json`` document; fields are only ever added within it."""

READ_CHUNK_BYTES = 64 * 1024
"""``run`` reads the command's pipe this many bytes at a time."""

PROGRESS_INTERVAL_SECONDS = 0.1
"""The live progress line on a terminal is redrawn at most this often."""

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127

_READ_HINT_KEYS = frozenset({"spill", "offset", "limit", "byte_offset", "max_bytes"})


class CliError(Exception):
    """A failure reported as one line on stderr, with an exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class _Globals:
    """Options given before the command name."""

    dir: str | None = None
    session: str | None = None
    json: bool = False


# --------------------------------------------------------------------------- options

DirOption = Annotated[
    str | None,
    typer.Option(
        "--dir",
        metavar="PATH",
        help="Store root. Default: $SPILLSTORE_DIR, else the user cache dir.",
        show_default=False,
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        metavar="NAME",
        help="Session. Default: $SPILLSTORE_SESSION, else 'default'.",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON object (schema: see the docs).")
]

app = typer.Typer(
    name="spillstore",
    help=(
        "Keep oversized tool output out of an LLM's context without losing it: run a "
        "command and print what the model would see, then read, search and clean the "
        "saved output. Start with: spillstore demo"
    ),
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    """Keep oversized tool output out of an LLM's context without losing it."""
    ctx.obj = _Globals(dir=dir_, session=session, json=json_)
    if version:
        from spillstore import __version__  # noqa: PLC0415 - start-up stays cheap

        _write(f"spillstore {__version__}\n")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        _write(ctx.get_help() + "\n")
        raise typer.Exit(0)


def _globals(ctx: typer.Context) -> _Globals:
    root = ctx.find_root().obj
    return root if isinstance(root, _Globals) else _Globals()


def _text_only(ctx: typer.Context) -> None:
    """Refuse a global ``--json`` on a command that only prints text."""
    if _globals(ctx).json:
        _fail(f"{ctx.command_path} prints text only; it has no --json form", EXIT_USAGE)


# --------------------------------------------------------------------------- helpers


def _write(text: str, *, err: bool = False) -> None:
    """Write text as UTF-8 (lone surrogates as U+FFFD), whatever the locale says."""
    from spillstore._core.utf8 import encode  # noqa: PLC0415

    stream = sys.stderr if err else sys.stdout
    data = encode(text)
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(data)
        buffer.flush()
    else:  # a test harness's text stream
        stream.write(data.decode("utf-8"))
        stream.flush()


def _one_line(message: str) -> str:
    """Fold a message onto one line."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def _describe(exc: BaseException) -> str:
    """An exception's message, without the ``[Errno N]`` prefix of an ``OSError``."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def _fail(message: str, exit_code: int = EXIT_FAILED) -> NoReturn:
    raise CliError(message, exit_code)


def _emit_json(document: dict[str, Any]) -> None:
    import json  # noqa: PLC0415

    _write(json.dumps({"version": JSON_VERSION, **document}, indent=2, ensure_ascii=False) + "\n")


def _settings(
    ctx: typer.Context, dir_: str | None, session: str | None, **overrides: object
) -> Settings:
    """Settings from the options (command's, then the global ones), env and defaults."""
    from spillstore._errors import ConfigError  # noqa: PLC0415
    from spillstore._settings import Settings  # noqa: PLC0415

    base = _globals(ctx)
    values: dict[str, object] = dict(overrides)
    chosen_dir = dir_ if dir_ is not None else base.dir
    chosen_session = session if session is not None else base.session
    if chosen_dir is not None:
        values["dir"] = chosen_dir
    if chosen_session is not None:
        values["session"] = chosen_session
    try:
        return Settings(**values)
    except ConfigError as exc:
        flag = {"dir": chosen_dir, "session": chosen_session}.get(exc.field or "")
        label = f"{exc.field} (env {exc.env_var}): "
        if flag is not None and str(exc).startswith(label):  # say which option was wrong
            raise CliError(f"--{exc.field}: {str(exc)[len(label) :]}", EXIT_USAGE) from exc
        raise


def _store(settings: Settings) -> LocalStore:
    from spillstore._stores.local import LocalStore  # noqa: PLC0415

    return LocalStore(settings.dir)


def _size_option(name: str, value: str, *, allow_off: bool = False) -> int | None:
    from spillstore._errors import ConfigError  # noqa: PLC0415
    from spillstore._settings import parse_size  # noqa: PLC0415

    try:
        return parse_size(value, allow_off=allow_off)
    except ConfigError as exc:
        _fail(f"{name}: {exc}", EXIT_USAGE)


def _duration_option(name: str, value: str, *, allow_zero: bool = False) -> float:
    from spillstore._errors import ConfigError  # noqa: PLC0415
    from spillstore._settings import parse_duration  # noqa: PLC0415

    if allow_zero and value.strip() in {"0", "0s"}:
        return 0.0
    try:
        return parse_duration(value)
    except ConfigError as exc:
        _fail(f"{name}: {exc}", EXIT_USAGE)


def _env_sets(field: str) -> bool:
    """Whether ``SPILLSTORE_<FIELD>`` is set (pydantic-settings ignores case)."""
    wanted = f"SPILLSTORE_{field}".upper()
    return any(key.upper() == wanted for key in os.environ)


def _iso(epoch: float) -> str:
    import datetime  # noqa: PLC0415

    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _bytes(count: int) -> str:
    return f"{count:,} bytes"


def _human(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def _ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    return " and ".join(f"[{start}, {end})" for start, end in ranges) or "none"


@contextmanager
def _store_errors() -> Iterator[None]:
    """Turn the store's exceptions into one-line CLI errors."""
    from spillstore._errors import (  # noqa: PLC0415
        ConfigError,
        InvalidSpillId,
        PathOutsideStore,
        SpillExpired,
        SpillNotFound,
        SpillstoreError,
    )

    try:
        yield
    except SpillExpired as exc:
        raise CliError(f"{exc}; rerun the command to get its output again") from exc
    except SpillNotFound as exc:
        raise CliError(f"no spill {exc.spill_id}; 'spillstore ls' lists the spills") from exc
    except InvalidSpillId as exc:
        raise CliError(
            f"{exc.spill_id!r} is not a spill id or a spill path; 'spillstore ls' lists the spills"
        ) from exc
    except PathOutsideStore as exc:
        raise CliError(
            f"refused: {exc.path!r} is not a spill file inside the store (only spill ids, "
            "or paths of spill files in the store, can be read)"
        ) from exc
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except SpillstoreError as exc:
        raise CliError(_describe(exc)) from exc


def _tool_text(result: ToolResult) -> str:
    """The text the model sees: the text parts, joined by a newline."""
    from spillstore._content import EmbeddedText, TextPart  # noqa: PLC0415
    from spillstore._core.cap import PART_SEPARATOR  # noqa: PLC0415

    return PART_SEPARATOR.join(
        part.text for part in result.content if isinstance(part, TextPart | EmbeddedText)
    )


def _print_tool_result(result: ToolResult, list_name: str = "list_spills") -> None:
    """Print a recovery tool's text to stdout, or its error as one line (exit 1)."""
    text = _tool_text(result)
    if result.is_error:
        _fail(text.replace(f"call {list_name} to see", "run 'spillstore ls' to see"))
    _write(text if text.endswith("\n") else text + "\n")


# --------------------------------------------------------------------------- run


@dataclass
class _RunOutcome:
    """What ``run`` produced: the model-facing result and the exit status to return."""

    result: ToolResult
    exit_code: int


class _Progress:
    """A live line on a terminal's stderr while a large output streams; nothing otherwise."""

    def __init__(self, accumulator: OutputAccumulator, retention_bytes: int | None) -> None:
        self._accumulator = accumulator
        self._retention_bytes = retention_bytes
        self._enabled = _is_tty(sys.stderr)
        self._live: Live | None = None
        self._last = 0.0
        self._started = 0.0

    def update(self) -> None:
        """Redraw the line (at most every 0.1 s) once the output spills; cheap otherwise."""
        if not self._enabled or not self._accumulator.spilling:
            return
        now = time.monotonic()
        if self._live is None:
            from rich.console import Console  # noqa: PLC0415
            from rich.live import Live  # noqa: PLC0415

            self._started = now
            self._live = Live(
                console=Console(stderr=True, highlight=False),
                auto_refresh=False,
                transient=True,
            )
            self._live.start()
        elif now - self._last < PROGRESS_INTERVAL_SECONDS:
            return
        self._last = now
        from rich.text import Text  # noqa: PLC0415

        line = Text(self._line(now - self._started), no_wrap=True, overflow="ellipsis")
        self._live.update(line, refresh=True)

    def _line(self, elapsed: float) -> str:
        seen = self._accumulator.total_bytes
        cap = self._retention_bytes
        kept = seen if cap is None else min(seen, cap)
        capped = " (retention cap)" if cap is not None and seen > cap else ""
        return f"spillstore: {_human(seen)} seen, {_human(kept)} spilled{capped}, {elapsed:.1f} s"

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _is_tty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


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


@contextmanager
def _signals_to(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """While the command runs: leave Ctrl-C to it, forward TERM/HUP, kill on a 2nd Ctrl-C.

    The terminal sends Ctrl-C to the whole foreground group, so the command already has
    it; spillstore keeps reading so that what the command printed is still saved.
    """
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupts = 0

    def on_signal(signum: int, frame: types.FrameType | None) -> None:
        nonlocal interrupts
        if proc.poll() is not None:
            return
        if signum == signal.SIGINT:
            interrupts += 1
            if interrupts >= 2:
                proc.kill()
        else:
            proc.send_signal(signum)

    watched = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, on_signal) for signum in watched}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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


def _run_settings(
    ctx: typer.Context,
    dir_: str | None,
    session: str | None,
    max_bytes: str | None,
    retain: str | None,
) -> Settings:
    """Settings for ``run``: the options, with previews and tail fitted to them.

    ``--max-bytes`` below the default previews shrinks the head and tail previews to
    fit (unless they are set in the environment); ``--retain R`` keeps the last
    ``min(1 MiB, R / 10)`` bytes past the cap (unless that is set in the environment).
    """
    from spillstore._settings import (  # noqa: PLC0415
        MIN_BUDGET_BYTES,
        MIN_RETENTION_BYTES,
        POINTER_RESERVE_BYTES,
        Settings,
    )

    overrides: dict[str, object] = {}
    defaults = Settings.model_fields
    if max_bytes is not None:
        budget = _size_option("--max-bytes", max_bytes)
        assert budget is not None
        if budget < MIN_BUDGET_BYTES:
            _fail(
                f"--max-bytes: must be at least {MIN_BUDGET_BYTES} bytes so the pointer "
                f"fits; got {budget}",
                EXIT_USAGE,
            )
        overrides["max_bytes"] = budget
        head: int = defaults["head_bytes"].default
        tail: int = defaults["tail_bytes"].default
        room = budget - POINTER_RESERVE_BYTES
        if head + tail > room and not (_env_sets("head_bytes") or _env_sets("tail_bytes")):
            overrides["head_bytes"] = max(1, room * head // (head + tail))
            overrides["tail_bytes"] = max(1, room - overrides["head_bytes"])  # type: ignore[operator]
    if retain is not None:
        cap = _size_option("--retain", retain, allow_off=True)
        if cap is not None and cap < MIN_RETENTION_BYTES:
            _fail(
                f'--retain: must be at least {MIN_RETENTION_BYTES} bytes, or "off"; got {cap}',
                EXIT_USAGE,
            )
        overrides["retention_bytes"] = cap
        if cap is not None and not _env_sets("retained_tail_bytes"):
            overrides["retained_tail_bytes"] = min(
                defaults["retained_tail_bytes"].default, cap // 10
            )
    return _settings(ctx, dir_, session, **overrides)


def _stream(
    argv: list[str],
    settings: Settings,
    store: LocalStore,
    *,
    tool_name: str,
    tool_call_id: str,
    progress: bool = True,
) -> _RunOutcome:
    """Run ``argv`` and stream its merged output through the service's accumulator."""
    from spillstore._service.service import TruncationService  # noqa: PLC0415

    service = TruncationService(store, settings)
    accumulator = service.accumulator(tool_name=tool_name, tool_call_id=tool_call_id)
    proc = _start(argv)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    meter = _Progress(accumulator, settings.retention_bytes) if progress else None
    try:
        with _signals_to(proc):
            while chunk := os.read(fd, READ_CHUNK_BYTES):
                accumulator.write(chunk)
                if meter is not None:
                    meter.update()
            returncode = proc.wait()
    finally:
        if meter is not None:
            meter.close()
        proc.stdout.close()
        if proc.poll() is None:  # only after an unexpected error: do not leave it running
            proc.kill()
            proc.wait()
    suffix, exit_code = _status(returncode)
    result = accumulator.ok(suffix) if returncode == 0 else accumulator.error(suffix)
    return _RunOutcome(result=result, exit_code=exit_code)


def _spill_info_json(info: SpillInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {
        "mode": info.mode,
        "saved": info.saved,
        "spill_id": info.spill_id,
        "path": info.path,
        "total_bytes": info.total_bytes,
        "total_lines": info.total_lines,
        "sha256": info.sha256,
        "stored_ranges": [list(r) for r in info.stored_ranges],
        "elided_bytes": [list(r) for r in info.elided_bytes],
        "elided_lines": [list(r) for r in info.elided_lines],
        "error": info.error,
        "invalid_utf8": info.invalid_utf8,
    }


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    short_help="Run a command; print what the model would see.",
)
def run(
    ctx: typer.Context,
    *,
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="CMD", help="The command and its arguments (after --), run without a shell."
        ),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes",
            metavar="SIZE",
            help="Inline budget: the most bytes the model sees, pointer included "
            "(e.g. 50000, 50KB, 64KiB). Default: $SPILLSTORE_MAX_BYTES, else 50000.",
            show_default=False,
        ),
    ] = None,
    retain: Annotated[
        str | None,
        typer.Option(
            "--retain",
            metavar="SIZE",
            help='Retention cap: the most bytes saved (first and last ones), or "off". '
            "Default: $SPILLSTORE_RETENTION_BYTES, else 10MiB.",
            show_default=False,
        ),
    ] = None,
    tool_name: Annotated[
        str | None,
        typer.Option(
            "--tool-name",
            metavar="NAME",
            help="Tool name in the pointer. Default: the command's file name.",
            show_default=False,
        ),
    ] = None,
    call_id: Annotated[
        str, typer.Option("--call-id", metavar="ID", help="Tool call id in the pointer.")
    ] = "run",
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """Run CMD, save its output, print what the model would see, exit with its status.

    stdout and stderr go through one pipe (merged in the order CMD wrote them), are read
    64 KiB at a time with bounded memory, and the exit status is appended as the suffix
    ("exit code N"). On a terminal, a progress line shows on stderr while a large output
    streams.
    """
    argv = list(command or [])
    if not argv:
        _fail("run: no command given; usage: spillstore run [OPTIONS] -- CMD [ARGS]...", EXIT_USAGE)
    with _store_errors():
        settings = _run_settings(ctx, dir_, session, max_bytes, retain)
        store = _store(settings)
    name = tool_name if tool_name is not None else os.path.basename(argv[0]) or "run"
    outcome = _stream(argv, settings, store, tool_name=name, tool_call_id=call_id)
    try:
        _print_run(outcome, as_json=json_ or _globals(ctx).json)
    except BrokenPipeError:  # a reader that stopped early still gets the command's status
        _quiet_stdout()
    raise typer.Exit(outcome.exit_code)


def _print_run(outcome: _RunOutcome, *, as_json: bool) -> None:
    if as_json:
        _emit_json(
            {
                "exit_code": outcome.exit_code,
                "is_error": outcome.result.is_error,
                "text": _tool_text(outcome.result),
                "spill": _spill_info_json(outcome.result.spill),
            }
        )
    else:
        text = _tool_text(outcome.result)
        _write(text if text.endswith("\n") else text + "\n")


# --------------------------------------------------------------------------- read / grep


def _parse_read_hint(text: str) -> dict[str, Any] | None:
    """Parse a pasted ``read_spill(spill="...", offset=N, limit=N)`` call, if it is one.

    Only keyword arguments with literal values are accepted (parsed with
    :func:`ast.literal_eval`, never evaluated).
    """
    import re  # noqa: PLC0415

    if re.fullmatch(r"\s*[A-Za-z_]\w*\s*\(.*\)\s*", text, re.DOTALL) is None:
        return None
    import ast  # noqa: PLC0415

    bad = f'{text.strip()[:120]!r} is not a read call such as read_spill(spill="ID", offset=1)'
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        _fail(bad, EXIT_USAGE)
    if not isinstance(node, ast.Call) or node.args:
        _fail(bad, EXIT_USAGE)
    values: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg not in _READ_HINT_KEYS:
            _fail(f"{bad}: unknown argument {keyword.arg!r}", EXIT_USAGE)
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            _fail(f"{bad}: {keyword.arg} is not a literal", EXIT_USAGE)
        wanted: type = str if keyword.arg == "spill" else int
        if type(value) is not wanted:
            _fail(f"{bad}: {keyword.arg} must be a {wanted.__name__}", EXIT_USAGE)
        values[keyword.arg] = value
    if "spill" not in values:
        _fail(f"{bad}: it names no spill", EXIT_USAGE)
    return values


def _tools(ctx: typer.Context, dir_: str | None, session: str | None) -> SpillTools:
    from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415

    with _store_errors():
        settings = _settings(ctx, dir_, session)
        return SpillTools(_store(settings), session=settings.session, cross_session=True)


@app.command(short_help="Show a page of a spill.")
def read(
    ctx: typer.Context,
    *,
    spill: Annotated[
        str,
        typer.Argument(
            metavar="SPILL",
            help='Spill id, spill file path, or a pasted hint: read_spill(spill="ID", '
            "offset=N, limit=N).",
        ),
    ],
    offset: Annotated[
        int | None,
        typer.Option(
            "--offset",
            help="First line, 1-based; negative counts from the end.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="Lines to show (1-2000). Default: 200.", show_default=False),
    ] = None,
    byte_offset: Annotated[
        int | None,
        typer.Option(
            "--byte-offset",
            help="Read by bytes from this 0-based offset instead.",
            show_default=False,
        ),
    ] = None,
    max_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-bytes",
            help="With --byte-offset: bytes to show (default 4096); with lines: a byte cap.",
            show_default=False,
        ),
    ] = None,
    dir_: DirOption = None,
    session: SessionOption = None,
) -> None:
    """Show a page of a spill: numbered lines, the exact range, and the next call."""
    _text_only(ctx)
    args: dict[str, Any] = _parse_read_hint(spill) or {"spill": spill}
    options = {"offset": offset, "limit": limit, "byte_offset": byte_offset, "max_bytes": max_bytes}
    args.update({key: value for key, value in options.items() if value is not None})
    tools = _tools(ctx, dir_, session)
    _print_tool_result(tools.read(**args), tools.names.list)


@app.command(short_help="Search one spill or the whole session.")
def grep(
    ctx: typer.Context,
    *,
    pattern: Annotated[
        str, typer.Argument(metavar="PATTERN", help="RE2 regular expression (literal with -F).")
    ],
    spill: Annotated[
        str | None,
        typer.Argument(
            metavar="[SPILL]", help="Search only this spill. Default: every spill of the session."
        ),
    ] = None,
    ignore_case: Annotated[
        bool, typer.Option("--ignore-case", "-i", help="Match case-insensitively.")
    ] = False,
    fixed_strings: Annotated[
        bool, typer.Option("--fixed-strings", "-F", help="PATTERN is a literal string.")
    ] = False,
    context: Annotated[
        int, typer.Option("--context", "-C", metavar="N", help="Lines of context (0-50).")
    ] = 0,
    before: Annotated[
        int | None,
        typer.Option("--before", "-B", metavar="N", help="Lines before.", show_default=False),
    ] = None,
    after: Annotated[
        int | None,
        typer.Option("--after", "-A", metavar="N", help="Lines after.", show_default=False),
    ] = None,
    count: Annotated[
        bool, typer.Option("--count", "-c", help="Count matching lines per spill.")
    ] = False,
    spills: Annotated[
        bool, typer.Option("--spills", "-l", help="List the spills that match.")
    ] = False,
    head_limit: Annotated[
        int,
        typer.Option("--head-limit", "-m", metavar="N", help="Results per page; 0: no limit."),
    ] = 100,
    offset: Annotated[
        int, typer.Option("--offset", metavar="N", help="Skip this many results (paging).")
    ] = 0,
    dir_: DirOption = None,
    session: SessionOption = None,
) -> None:
    """Search spills with RE2 (linear time): matching lines, counts or spills."""
    _text_only(ctx)
    if count and spills:
        _fail("grep: --count and --spills cannot be combined", EXIT_USAGE)
    mode: Literal["content", "spills", "count"] = (
        "count" if count else "spills" if spills else "content"
    )
    tools = _tools(ctx, dir_, session)
    _print_tool_result(
        tools.grep(
            pattern,
            spill,
            ignore_case=ignore_case,
            context=context,
            before=before,
            after=after,
            output_mode=mode,
            head_limit=head_limit,
            offset=offset,
            literal=fixed_strings,
        ),
        tools.names.list,
    )


# --------------------------------------------------------------------------- ls / show / rm


def _spill_json(meta: SpillMeta) -> dict[str, Any]:
    return {
        "spill_id": meta.spill_id,
        "session": meta.session,
        "tool_name": meta.tool_name,
        "tool_call_id": meta.tool_call_id,
        "created_at": meta.created_at,
        "created": _iso(meta.created_at),
        "total_bytes": meta.total_bytes,
        "total_lines": meta.total_lines,
        "stored_bytes": meta.stored_bytes,
        "complete": meta.complete,
        "stored_ranges": [list(r) for r in meta.stored_ranges],
        "sha256": meta.sha256,
        "suffix": meta.suffix,
        "media_notes": list(meta.media_notes),
        "invalid_utf8": meta.invalid_utf8,
        "path": meta.path,
    }


def _table(rows: list[list[str]], right: frozenset[int]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


@app.command("ls", short_help="List the spills of the session.")
def list_spills(
    ctx: typer.Context,
    all_sessions: Annotated[
        bool, typer.Option("--all-sessions", "-a", help="List the spills of every session.")
    ] = False,
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """List the spills of the session, oldest first."""
    with _store_errors():
        settings = _settings(ctx, dir_, session)
        scope = None if all_sessions else settings.session
        metas = _store(settings).list(scope)
    if json_ or _globals(ctx).json:
        _emit_json({"session": scope, "spills": [_spill_json(m) for m in metas]})
        return
    if not metas:
        where = "any session" if scope is None else f"session {scope!r}"
        _write(f"no spills in {where}\n")
        return
    rows = [["SPILL", "SESSION", "TOOL", "BYTES", "LINES", "SAVED", "CREATED (UTC)"]]
    rows += [
        [
            m.spill_id,
            m.session,
            m.tool_name[:40],
            f"{m.total_bytes:,}",
            f"{m.total_lines:,}",
            "full" if m.complete else f"part ({m.stored_bytes:,})",
            _iso(m.created_at),
        ]
        for m in metas
    ]
    _write(_table(rows, right=frozenset({3, 4})))


@app.command(short_help="Show a spill's metadata.")
def show(
    ctx: typer.Context,
    spill: Annotated[str, typer.Argument(metavar="SPILL", help="Spill id or spill file path.")],
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """Show a spill's metadata: sizes, stored ranges, sha256, suffix, path."""
    with _store_errors():
        store = _store(_settings(ctx, dir_, session))
        meta = store.stat(store.resolve(spill))
    if json_ or _globals(ctx).json:
        _emit_json({"spill": _spill_json(meta)})
        return
    if meta.complete:
        stored = f"in full, {_ranges(meta.stored_ranges)}"
    else:
        stored = (
            f"in part: {_bytes(meta.stored_bytes)} of {meta.total_bytes:,}, "
            f"{_ranges(meta.stored_ranges)}; not kept: {_ranges(meta.gaps)}"
        )
    rows = [
        ("spill", meta.spill_id),
        ("session", meta.session),
        ("tool", f"{meta.tool_name} (call {meta.tool_call_id})"),
        ("created", _iso(meta.created_at)),
        ("size", f"{_bytes(meta.total_bytes)}, {meta.total_lines:,} lines"),
        ("stored", stored),
        ("sha256", meta.sha256),
        ("suffix", meta.suffix if meta.suffix is not None else "-"),
        ("path", meta.path or "-"),
    ]
    if meta.invalid_utf8:
        rows.append(("utf-8", "the output was not valid UTF-8"))
    rows += [("media", note) for note in meta.media_notes]
    rows.append(("read", f"spillstore read {meta.spill_id}"))
    rows.append(("search", f"spillstore grep PATTERN {meta.spill_id}"))
    _write("".join(f"{key:<8} {_one_line(value)}\n" for key, value in rows))


@app.command("rm", short_help="Delete spills.")
def remove(
    ctx: typer.Context,
    spills: Annotated[list[str], typer.Argument(metavar="SPILL...", help="Spill ids or paths.")],
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """Delete spills (one already gone is not an error)."""
    from spillstore._errors import SpillNotFound  # noqa: PLC0415

    results: list[dict[str, Any]] = []
    with _store_errors():
        store = _store(_settings(ctx, dir_, session))
        for spill in spills:
            try:
                spill_id = store.resolve(spill)
            except SpillNotFound as exc:  # expired or never existed: nothing to remove
                results.append({"spill_id": exc.spill_id, "removed": False})
                continue
            results.append({"spill_id": spill_id, "removed": store.delete(spill_id)})
    if json_ or _globals(ctx).json:
        _emit_json({"results": results})
        return
    _write(
        "".join(
            f"{'removed' if r['removed'] else 'already gone'}  {r['spill_id']}\n" for r in results
        )
    )


# --------------------------------------------------------------------------- gc / clean


def _report(report: GcReport, command: str, as_json: bool) -> None:
    if as_json:
        _emit_json(
            {
                "command": command,
                "dry_run": report.dry_run,
                "count": len(report.entries),
                "bytes_freed": report.bytes_freed,
                "entries": [
                    {
                        "spill_id": e.spill_id,
                        "session": e.session,
                        "name": e.name,
                        "bytes": e.bytes,
                        "reason": e.reason,
                        "created_at": e.created_at,
                        "created": _iso(e.created_at),
                    }
                    for e in report.entries
                ],
            }
        )
        return
    if not report.entries:
        _write(f"{command}: nothing to remove\n")
        return
    verb = "would remove" if report.dry_run else "removed"
    tail = " (dry run: nothing was removed)" if report.dry_run else ""
    lines = [
        f"{command}: {verb} {len(report.entries)} entr{'y' if len(report.entries) == 1 else 'ies'}"
        f", {_bytes(report.bytes_freed)}{tail}\n"
    ]
    rows = [
        [_iso(e.created_at), e.session, e.name, f"{e.bytes:,}", e.reason] for e in report.entries
    ]
    lines += ["  " + line + "\n" for line in _table(rows, frozenset({3})).splitlines()]
    _write("".join(lines))


@app.command(short_help="Remove old spills and crash leftovers.")
def gc(
    ctx: typer.Context,
    *,
    max_age: Annotated[
        str | None,
        typer.Option(
            "--max-age",
            metavar="DURATION",
            help="Remove spills older than this (e.g. 90s, 30m, 12h, 7d).",
            show_default=False,
        ),
    ] = None,
    max_total: Annotated[
        str | None,
        typer.Option(
            "--max-total",
            metavar="SIZE",
            help="Then remove the oldest until the stored bytes fit (e.g. 1GB, 500MiB).",
            show_default=False,
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option(
            "--max-files",
            metavar="N",
            min=0,
            help="Then remove the oldest until N spills remain.",
            show_default=False,
        ),
    ] = None,
    grace: Annotated[
        str,
        typer.Option(
            "--grace",
            metavar="DURATION",
            help="Never remove anything younger than this (0 allowed).",
        ),
    ] = "10m",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", "-n", help="Report what would be removed; remove nothing.")
    ] = False,
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """Remove old spills (every session) and leftovers of crashed writers, oldest first.

    With no limit given, only leftovers of crashed writers are removed.
    """
    age = None if max_age is None else _duration_option("--max-age", max_age)
    total = None if max_total is None else _size_option("--max-total", max_total)
    grace_seconds = _duration_option("--grace", grace, allow_zero=True)
    with _store_errors():
        store = _store(_settings(ctx, dir_, session))
        report = store.gc(
            max_age=age,
            max_total_bytes=total,
            max_files=max_files,
            dry_run=dry_run,
            grace=grace_seconds,
        )
    _report(report, "gc", json_ or _globals(ctx).json)


@app.command(short_help="Remove every spill of a session.")
def clean(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dir_: DirOption = None,
    session: SessionOption = None,
    json_: JsonOption = False,
) -> None:
    """Remove EVERY spill of one session, whatever its age (asks first unless --yes)."""
    with _store_errors():
        settings = _settings(ctx, dir_, session)
        store = _store(settings)
        metas = store.list(settings.session)
    name = settings.session
    if metas and not yes:
        what = (
            f"{len(metas)} spill(s), {_bytes(sum(m.stored_bytes for m in metas))}, of session "
            f"{name!r} in {store.root}"
        )
        if not _is_tty(sys.stdin):
            _fail(f"clean: refusing to remove {what} without confirmation: pass --yes")
        if not typer.confirm(f"Remove {what}?", default=False, err=True):
            _fail("clean: nothing removed")
    with _store_errors():
        report = store.clean(name)
    _report(report, "clean", json_ or _globals(ctx).json)


# --------------------------------------------------------------------------- demo

_DEMO_LINES = 60_000
_DEMO_NEEDLE_LINE = 37_411
_DEMO_GENERATOR = f"""
import sys
out = sys.stdout
for i in range(1, {_DEMO_LINES} + 1):
    if i == {_DEMO_NEEDLE_LINE}:
        out.write("tests/test_checkout.py::test_refund_after_partial_capture FAILED\\n")
        out.write("E   AssertionError: refund of 19.99 EUR sent twice (idempotency key reused)\\n")
    else:
        percent = i * 100 // {_DEMO_LINES}
        test = f"tests/test_suite_{{i % 97:02d}}.py::test_case_{{i:05d}}"
        out.write(f"{{test}} PASSED [{{percent:3d}}%]\\n")
out.write("==== 1 failed, {_DEMO_LINES - 1} passed in 61.02s ====\\n")
sys.exit(1)
"""


@app.command(short_help="See the whole idea in one command.")
def demo(ctx: typer.Context) -> None:
    """Walk through the whole idea on a temporary store (removed afterwards)."""
    _text_only(ctx)
    import re  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415

    from spillstore._settings import Settings  # noqa: PLC0415
    from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415

    console = Console(highlight=False, soft_wrap=True)

    def say(text: str) -> None:
        console.out(text, highlight=False)

    def call(text: str) -> None:
        console.print(f"> {text}", style="bold cyan", markup=False, highlight=False)

    root = tempfile.mkdtemp(prefix="spillstore-demo-")
    try:
        from spillstore._stores.local import LocalStore  # noqa: PLC0415

        store = LocalStore(root)
        settings = Settings(dir=root, session="demo", head_bytes=600, tail_bytes=300)
        console.rule("spillstore demo")
        say(
            "A tool runs a test suite and prints 60,000 lines; one test failed in the\n"
            "middle. The model may take 50,000 bytes per tool result, so spillstore saves\n"
            "the whole output and hands the model a pointer instead.\n"
            f"(Temporary store: {root}, removed at the end.)\n"
        )
        call("spillstore run -- python -c '<print 60,000 lines of test log, exit 1>'")
        outcome = _stream(
            [sys.executable, "-c", _DEMO_GENERATOR],
            settings,
            store,
            tool_name="pytest",
            tool_call_id="call_1",
            progress=False,
        )
        info = outcome.result.spill
        assert info is not None and info.spill_id is not None
        spill_id = info.spill_id
        pointer = _tool_text(outcome.result)
        console.rule(
            f"1. what the model sees: {len(pointer.encode()):,} bytes instead of "
            f"{info.total_bytes:,}"
        )
        say(pointer + "\n")
        say(
            "(This demo shows a 600-byte head and a 300-byte tail; the defaults are 4,096 "
            "and 1,024.)\n"
        )
        tools = SpillTools(store, session="demo")
        console.rule("2. the model searches the saved output with Grep")
        call(f'grep_spill(pattern="FAILED|Error", spill="{spill_id}")')
        found = _tool_text(tools.grep("FAILED|Error", spill_id))
        say(found + "\n")
        hit = re.search(r"^(\d+):", found, re.MULTILINE)
        line = int(hit.group(1)) if hit else _DEMO_NEEDLE_LINE
        console.rule("3. ... and reads around the match with Read")
        call(f'read_spill(spill="{spill_id}", offset={line - 2}, limit=6)')
        say(_tool_text(tools.read(spill_id, offset=line - 2, limit=6)) + "\n")
        console.rule("the same from a shell")
        say(
            "spillstore run -- pytest -x            # print the pointer, save the output, "
            "keep the exit status\n"
            "spillstore grep 'FAILED|Error' SPILL   # search one spill (or the whole "
            "session without SPILL)\n"
            f"spillstore read SPILL --offset {line - 2} --limit 6\n"
            "spillstore read 'read_spill(spill=\"SPILL\", offset=70, limit=200)'   "
            "# a pointer's hint works as is\n"
            "spillstore ls                          # the spills of the session\n"
            "spillstore show SPILL                  # sizes, stored ranges, sha256, path\n"
            "spillstore gc --max-age 7d             # or: spillstore clean --session NAME\n"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@app.command(
    "mcp",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    add_help_option=False,
    short_help="MCP: serve the spill tools, or put any stdio MCP server behind the cap.",
)
def mcp_command(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(metavar="serve|proxy [OPTIONS] [-- CMD ARGS...]"),
    ] = None,
) -> int:
    """Run ``spillstore mcp serve ...`` or ``spillstore mcp proxy ... -- CMD ARGS``.

    Everything after ``mcp`` goes to :func:`spillstore.mcp.main` (``spillstore mcp
    --help`` lists its options); a global ``--dir``/``--session`` is passed on too.
    """
    from spillstore.mcp import main as mcp_main  # noqa: PLC0415 - mcp is heavy and optional

    argv = list(args or [])
    if argv and argv[0] in {"serve", "proxy"}:
        found = _globals(ctx)
        inherited = [*(["--dir", str(found.dir)] if found.dir else [])]
        inherited += ["--session", found.session] if found.session else []
        argv = [argv[0], *inherited, *argv[1:]]
    return mcp_main(argv)


# --------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> None:
    """Run the command line and exit with its status; errors are one line on stderr."""
    from typer._click.exceptions import ClickException  # noqa: PLC0415

    from spillstore._errors import ConfigError, SpillstoreError  # noqa: PLC0415

    try:
        status = app(args=argv, prog_name="spillstore", standalone_mode=False)
    except CliError as exc:
        _error_line(_describe(exc))
        sys.exit(exc.exit_code)
    except SpillstoreError as exc:  # a store or settings error no command translated
        _error_line(_describe(exc))
        sys.exit(EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED)
    except ClickException as exc:
        where = getattr(getattr(exc, "ctx", None), "command_path", None) or "spillstore"
        _error_line(f"{exc.format_message()} (see '{where} --help')")
        sys.exit(exc.exit_code)
    except typer.Abort:
        _error_line("aborted")
        sys.exit(EXIT_FAILED)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(EXIT_FAILED)
    except OSError as exc:
        _error_line(_describe(exc))
        sys.exit(EXIT_FAILED)
    sys.exit(status if isinstance(status, int) else 0)


def _error_line(message: str) -> None:
    with suppress(OSError):
        _write(f"spillstore: {_one_line(message)}\n", err=True)


def _quiet_stdout() -> None:
    """After a reader closed the pipe, send what is left to /dev/null (no error at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    main()
