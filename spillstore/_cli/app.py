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
    spillstore check [--fix]
    spillstore demo
    spillstore install CLIENT (--server NAME ... | --all) [--scope S] [--dry-run]
    spillstore uninstall CLIENT (--server NAME ... | --all) [--scope S] [--dry-run]
    spillstore status [CLIENT] [--scope S]
    spillstore add CLIENT NAME [--scope S] (-- CMD [ARGS...] | --url URL)

Every command takes ``--dir`` (else ``SPILLSTORE_DIR``, else the user cache dir) and
``--session`` (else ``SPILLSTORE_SESSION``, else ``default``), before or after the command
name; ``run``, ``ls``, ``show``, ``rm``, ``gc`` and ``clean`` take ``--json`` (also
accepted before the command name; ``read``, ``grep`` and ``demo`` print text only and
refuse it).

``run`` starts the command without a shell, with stdout and stderr on **one pipe**, so
the saved output holds both, merged in exactly the order the command wrote them. It reads
the pipe up to 256 KiB at a time into the service's :class:`~spillstore.OutputAccumulator`
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

Layout: this module holds the ``spillstore`` application, its root options and the
command table; each command lives in the module the table names and is imported only
when it runs (``spillstore --help`` lists the commands from the table), so start-up
imports little more than ``typer``. :mod:`~spillstore._cli.options` declares the global
options, :mod:`~spillstore._cli.output` prints, :mod:`~spillstore._cli.errors` turns
failures into one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Annotated, Any

import typer
import typer.core
import typer.main

from spillstore._cli.errors import fail, run_app
from spillstore._cli.options import command_app, takes_global_options
from spillstore._cli.output import write

__all__ = ["COMMANDS", "app", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("spillstore._cli.run", "Run a command; print what the model would see."),
    "read": ("spillstore._cli.recover", "Show a page of a spill."),
    "grep": ("spillstore._cli.recover", "Search one spill or the whole session."),
    "ls": ("spillstore._cli.spills", "List the spills of the session."),
    "show": ("spillstore._cli.spills", "Show a spill's metadata."),
    "rm": ("spillstore._cli.spills", "Delete spills."),
    "gc": ("spillstore._cli.spills", "Remove old spills and crash leftovers."),
    "clean": ("spillstore._cli.spills", "Remove every spill of a session."),
    "check": ("spillstore._cli.check", "Find and repair problems in the store (--fix)."),
    "demo": ("spillstore._cli.demo", "See the whole idea in one command."),
    "install": ("spillstore._cli.clients", "Put an MCP client's servers behind the cap."),
    "uninstall": ("spillstore._cli.clients", "Give an MCP client's servers back as they were."),
    "status": ("spillstore._cli.clients", "Show which MCP client servers are wrapped."),
    "add": ("spillstore._cli.clients", "Add an MCP server to a client, behind the cap."),
    "mcp": (
        "spillstore._cli.mcp",
        "MCP: serve the spill tools, or put any stdio MCP server behind the cap.",
    ),
}
"""Every command: the module whose typer ``app`` holds it (or, for ``mcp``, is it), and
the one-line help ``spillstore --help`` shows."""


class _Deferred(typer.core.TyperCommand):
    """A command of :data:`COMMANDS` whose module is not imported yet."""

    def __init__(self, name: str, module: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help)
        self.module = module

    def load(self) -> Any:
        """The real command: its module's ``app``'s command of this name, or that app."""
        try:
            module = importlib.import_module(self.module)
        except ImportError as exc:  # an optional dependency (the MCP SDK) is missing
            fail(f"{self.name}: {exc}")
        group = typer.main.get_group(module.app)
        return group.commands.get(str(self.name), group)


class _Commands(typer.core.TyperGroup):
    """The root group: lists :data:`COMMANDS`, imports one only when it runs."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, (module, short_help) in COMMANDS.items():
            self.commands[name] = _Deferred(name, module, short_help)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if isinstance(command, _Deferred) and name is not None:
            command = self.commands[name] = command.load()
        return name, command, rest


app = command_app(
    name="spillstore",
    cls=_Commands,
    help=(
        "Keep oversized tool output out of an LLM's context without losing it: run a "
        "command and print what the model would see, then read, search and clean the "
        "saved output. Start with: spillstore demo"
    ),
)


@app.callback(invoke_without_command=True)
@takes_global_options("dir", "session", "json", "force_root", first=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    """Keep oversized tool output out of an LLM's context without losing it."""
    if version:
        from spillstore._version import __version__  # noqa: PLC0415 - start-up stays cheap

        write(f"spillstore {__version__}\n")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        write(ctx.get_help() + "\n")
        raise typer.Exit(0)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit with its status; errors are one line on stderr."""
    run_app(app, argv, "spillstore")
