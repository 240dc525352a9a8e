"""How the command line fails: one line on stderr and an exit status, never a traceback.

Exit status: 0 on success, 1 when the request failed (:data:`EXIT_FAILED`), 2 for a bad
command line (:data:`EXIT_USAGE`), 126/127 when ``run`` cannot start its command.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import NoReturn

import typer

from spillstore._cli.output import describe, one_line, quiet_stdout, write
from spillstore._errors import (
    ConfigError,
    InvalidSpillId,
    PathOutsideStore,
    SpillExpired,
    SpillNotFound,
    SpillstoreError,
)

__all__ = [
    "EXIT_CANNOT_EXECUTE",
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_USAGE",
    "CliError",
    "fail",
    "run_app",
    "store_errors",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127


class CliError(SpillstoreError):
    """A failure reported as one line on stderr, with an exit status.

    Attributes:
        exit_code: the status the command line exits with.
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, exit_code: int = EXIT_FAILED) -> NoReturn:
    """Stop the command with ``message`` as its one error line."""
    raise CliError(message, exit_code)


@contextmanager
def store_errors() -> Iterator[None]:
    """Turn the store's exceptions into one-line CLI errors that say what to do next."""
    try:
        yield
    except CliError:
        raise
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
        raise CliError(describe(exc)) from exc


def run_app(app: typer.Typer, argv: Sequence[str] | None, prog_name: str) -> None:
    """Run ``app`` and exit with its status; every error is one line on stderr.

    Args:
        app: the typer application (``spillstore``, or its ``mcp`` sub-app on its own).
        argv: the arguments (default: ``sys.argv[1:]``).
        prog_name: the program name in usage lines and error hints.
    """
    try:
        status = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except CliError as exc:
        _error_line(describe(exc))
        sys.exit(exc.exit_code)
    except SpillstoreError as exc:  # a store or settings error no command translated
        _error_line(describe(exc))
        sys.exit(EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED)
    except typer.TyperException as exc:  # the command line itself: unknown option, bad value
        where = getattr(getattr(exc, "ctx", None), "command_path", None) or prog_name
        _error_line(f"{exc.format_message()} (see '{where} --help')")
        sys.exit(exc.exit_code)
    except typer.Abort:
        _error_line("aborted")
        sys.exit(EXIT_FAILED)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_FAILED)
    except OSError as exc:
        _error_line(describe(exc))
        sys.exit(EXIT_FAILED)
    sys.exit(status if isinstance(status, int) else 0)


def _error_line(message: str) -> None:
    with suppress(OSError):
        write(f"spillstore: {one_line(message)}\n", err=True)
