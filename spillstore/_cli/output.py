"""What the command line prints: UTF-8 text, JSON documents, tables and one-line errors.

Every ``--json`` document is one object with ``"version": 1`` (:data:`JSON_VERSION`);
its records list their fields in the order of the ``*_FIELDS`` tuples here, and fields
are only ever added. The schemas are documented in :mod:`spillstore._cli.app`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillstore._content import ToolResult
    from spillstore._core.gc_plan import GcReport

__all__ = [
    "GC_ENTRY_FIELDS",
    "JSON_VERSION",
    "SPILL_FIELDS",
    "SPILL_INFO_FIELDS",
    "byte_count",
    "describe",
    "emit_json",
    "is_tty",
    "iso",
    "one_line",
    "print_report",
    "quiet_stdout",
    "record",
    "table",
    "tool_text",
    "write",
]

JSON_VERSION = 1
"""The version of every ``--json`` document; fields are only ever added within it."""

SPILL_FIELDS = (
    "spill_id",
    "session",
    "tool_name",
    "tool_call_id",
    "created_at",
    "created",
    "total_bytes",
    "total_lines",
    "stored_bytes",
    "complete",
    "stored_ranges",
    "sha256",
    "suffix",
    "media_notes",
    "invalid_utf8",
    "path",
)
"""A spill's record (``ls``, ``show``), from its :class:`~spillstore.SpillMeta`."""

SPILL_INFO_FIELDS = (
    "mode",
    "saved",
    "spill_id",
    "path",
    "total_bytes",
    "total_lines",
    "sha256",
    "stored_ranges",
    "elided_bytes",
    "elided_lines",
    "error",
    "invalid_utf8",
)
"""What ``run`` did with the output (its ``spill``), from a :class:`~spillstore.SpillInfo`."""

GC_ENTRY_FIELDS = ("spill_id", "session", "name", "bytes", "reason", "created_at", "created")
"""One removed entry of a ``gc``/``clean`` report, from a :class:`~spillstore.GcEntry`."""


def write(text: str, *, err: bool = False) -> None:
    """Write text as UTF-8 (lone surrogates as U+FFFD), whatever the locale says."""
    from spillstore._core.utf8 import encode  # noqa: PLC0415 - start-up stays cheap

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


def quiet_stdout() -> None:
    """After a reader closed the pipe, send what is left to /dev/null (no error at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def is_tty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (False for anything that cannot say)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


def one_line(message: str) -> str:
    """Fold a message onto one line."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def describe(exc: BaseException) -> str:
    """An exception's message, without the ``[Errno N]`` prefix of an ``OSError``."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def iso(epoch: float) -> str:
    """Epoch seconds as UTC ISO 8601, to the second (``2026-11-29T12:03:04Z``)."""
    import datetime  # noqa: PLC0415

    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def byte_count(count: int) -> str:
    """An exact size: ``1,234,567 bytes``."""
    return f"{count:,} bytes"


def record(source: Any, fields: Sequence[str]) -> dict[str, Any]:
    """The named attributes of ``source`` as a JSON record, in the order of ``fields``.

    ``created`` is ``created_at`` in UTC ISO 8601 (:func:`iso`); tuples come out as
    JSON arrays.
    """
    return {
        name: iso(source.created_at) if name == "created" else getattr(source, name)
        for name in fields
    }


def emit_json(document: dict[str, Any]) -> None:
    """Print one ``--json`` document: ``version`` first, then ``document``'s fields."""
    import json  # noqa: PLC0415

    write(json.dumps({"version": JSON_VERSION, **document}, indent=2, ensure_ascii=False) + "\n")


def table(
    rows: Iterable[Sequence[str]], *, header: Sequence[str] | None = None, right: frozenset[int]
) -> str:
    """Columns of plain text, two spaces apart, the ``right`` ones right-aligned.

    Rendered by rich's :class:`~rich.table.Table` with no borders, no colour and no width
    limit (a line is as long as its cells need), each line stripped on the right.
    """
    import io  # noqa: PLC0415

    from rich.console import Console  # noqa: PLC0415 - only the commands that print tables
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    rows = [list(row) for row in rows]
    grid = Table(box=None, padding=(0, 1), pad_edge=False, show_header=header is not None)
    for index, title in enumerate(header if header is not None else [""] * len(rows[0])):
        grid.add_column(Text(title), justify="right" if index in right else "left", no_wrap=True)
    for row in rows:
        grid.add_row(*(Text(cell) for cell in row))
    sink = io.StringIO()
    console = Console(file=sink, width=1_000_000, color_system=None, highlight=False, emoji=False)
    console.print(grid)
    return "".join(line.rstrip() + "\n" for line in sink.getvalue().splitlines())


def tool_text(result: ToolResult) -> str:
    """The text the model sees: the text parts, joined by a newline."""
    from spillstore._content import EmbeddedText, TextPart  # noqa: PLC0415
    from spillstore._core.cap import PART_SEPARATOR  # noqa: PLC0415

    return PART_SEPARATOR.join(
        part.text for part in result.content if isinstance(part, TextPart | EmbeddedText)
    )


def print_report(report: GcReport, command: str, *, as_json: bool) -> None:
    """Print what ``gc`` or ``clean`` removed (or would remove), oldest first."""
    if as_json:
        emit_json(
            {
                "command": command,
                "dry_run": report.dry_run,
                "count": len(report.entries),
                "bytes_freed": report.bytes_freed,
                "entries": [record(entry, GC_ENTRY_FIELDS) for entry in report.entries],
            }
        )
        return
    if not report.entries:
        write(f"{command}: nothing to remove\n")
        return
    count = len(report.entries)
    verb = "would remove" if report.dry_run else "removed"
    tail = " (dry run: nothing was removed)" if report.dry_run else ""
    lines = [
        f"{command}: {verb} {count} entr{'y' if count == 1 else 'ies'}"
        f", {byte_count(report.bytes_freed)}{tail}\n"
    ]
    rows = [
        [iso(e.created_at), e.session, e.name, f"{e.bytes:,}", e.reason] for e in report.entries
    ]
    lines += ["  " + line + "\n" for line in table(rows, right=frozenset({3})).splitlines()]
    write("".join(lines))
