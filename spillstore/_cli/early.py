"""Start ``proxy``'s upstream server before the command line is even parsed.

An MCP client starts every configured server when it launches, and once ``spillstore
install`` has wrapped them, each one's start goes through ``spillstore mcp proxy``: its
cold start is the upstream's boot plus whatever the proxy does first. Parsing the command
line (typer, which loads pydantic) takes about 200 ms, so :func:`launch_early` looks at
the raw arguments first, with the standard library only, and when they say ``... mcp
proxy ... -- CMD ARGS`` it starts ``CMD ARGS`` at once (:func:`~spillstore.mcp.launch.
launch`). The command line then parses as usual, and ``proxy`` adopts the running
process through :func:`take_early` when its parsed command is exactly that one;
otherwise (a usage error, ``--help``, another command) the early process is stopped
again, at the latest when this process exits.
"""

from __future__ import annotations

import atexit
from collections.abc import Sequence

from spillstore.mcp.launch import Launched, launch

__all__ = ["launch_early", "take_early"]

_SKIP = frozenset({"--url", "--sse", "--help", "-h", "--install-completion", "--show-completion"})
"""Options before ``--`` that mean no upstream command is started (or none is needed)."""

_started: list[Launched] = []
"""The process :func:`launch_early` started, until :func:`take_early` takes it."""


def upstream_command(argv: Sequence[str], words: Sequence[str]) -> list[str] | None:
    """The upstream command in ``argv`` if it runs the proxy, else None.

    ``words`` are the words that name the proxy command (``("mcp", "proxy")`` for the
    ``spillstore`` command, ``("proxy",)`` for ``python -m spillstore.mcp``): they must
    come, in a row, before the first ``--``, with no option from :data:`_SKIP`, and the
    command after ``--`` must not be empty. This is a guess made before parsing, checked
    against the parsed command by :func:`take_early`.
    """
    try:
        end = list(argv).index("--")
    except ValueError:
        return None
    before, command = list(argv[:end]), list(argv[end + 1 :])
    if not command or _SKIP.intersection(arg.split("=", 1)[0] for arg in before):
        return None
    size = len(words)
    if not any(before[i : i + size] == list(words) for i in range(len(before) - size + 1)):
        return None
    return command


def launch_early(argv: Sequence[str], words: Sequence[str]) -> None:
    """Start the proxy's upstream now if ``argv`` runs the proxy (see the module docstring).

    A command that cannot be started is left for ``proxy`` to report after parsing.
    """
    command = upstream_command(argv, words)
    if command is None or _started:
        return
    try:
        _started.append(launch(command[0], command[1:]))
    except OSError:
        return
    atexit.register(_discard_unclaimed)


def take_early(command: Sequence[str]) -> Launched | None:
    """The process :func:`launch_early` started for exactly ``command``, else None.

    A process started for another command is stopped.
    """
    if not _started:
        return None
    launched = _started.pop()
    if launched.process.args == list(command):
        return launched  # even if it has ended: proxy reports that as it would have
    launched.discard()
    return None


def _discard_unclaimed() -> None:
    while _started:
        _started.pop().discard()
