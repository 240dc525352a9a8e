"""What the command line prints: UTF-8 text, JSON documents, tables and one-line errors.

Every ``--json`` document is one object with ``"version": 1`` (:data:`JSON_VERSION`);
its records list their fields in the order of the ``*_FIELDS`` tuples here, and fields
are only ever added. The schemas are documented in :mod:`spillstore._cli.app`.
"""

from __future__ import annotations

import os
import re
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
    "printable",
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


_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str, *, keep: str = "") -> str:
    """``text`` safe to print on a terminal: control characters (C0, DEL, C1), line and
    paragraph separators and bidirectional overrides written as ``\\xNN``/``\\uNNNN``
    (except those in ``keep``), so a hostile config cannot forge lines, retitle the
    terminal or reorder what is shown."""

    def escaped(found: re.Match[str]) -> str:
        char = found.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROLS.sub(escaped, text)


def one_line(message: str) -> str:
    """Fold a message onto one line, printable (:func:`printable`)."""
    return printable("; ".join(part.strip() for part in message.splitlines() if part.strip()))


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

    Widths are terminal cells as rich measures them (``rich.cells.cell_len``: a wide
    character takes two), and each line is stripped on the right. rich's ``Table`` draws
    the same columns but spends about 0.55 ms a row (benchmarks/RESULTS.md, "Layout"),
    which made ``ls`` of 3,000 spills 5x slower; this costs microseconds a row. Cells
    are made :func:`printable` (a tool name or first line may hold escape sequences).
    """
    from rich.cells import cell_len  # noqa: PLC0415 - only the commands that print tables

    lines = ([list(header)] if header is not None else []) + [
        [printable(cell) for cell in row] for row in rows
    ]
    if not lines:
        return ""
    sizes = [[cell_len(cell) for cell in line] for line in lines]
    widths: list[int] = [max(column) for column in zip(*sizes, strict=True)]
    out = []
    for line, line_sizes in zip(lines, sizes, strict=True):
        cells = []
        for index, (cell, size) in enumerate(zip(line, line_sizes, strict=True)):
            fill = " " * (widths[index] - size)
            cells.append(fill + cell if index in right else cell + fill)
        out.append("  ".join(cells).rstrip() + "\n")
    return "".join(out)


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
