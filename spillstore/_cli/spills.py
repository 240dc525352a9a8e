"""The commands over saved spills: ``read``, ``grep``, ``ls``, ``show``, ``rm``, ``gc``, ``clean``.

``read`` and ``grep`` are the model's Read and Grep tools (their text, their errors as
one line); ``grep`` takes its defaults and help texts from
:class:`~spillstore._tools.args.GrepArgs`, so the tool and the command cannot drift.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from spillstore._cli.errors import EXIT_USAGE, fail, store_errors
from spillstore._cli.options import (
    command_app,
    duration_option,
    global_options,
    open_store,
    optional,
    refuse_json,
    settings,
    size_option,
    takes_global_options,
)
from spillstore._cli.output import (
    SPILL_FIELDS,
    byte_count,
    emit_json,
    is_tty,
    iso,
    one_line,
    print_report,
    record,
    table,
    tool_text,
    write,
)
from spillstore._core.ranges import format_ranges
from spillstore._tools.args import MAX_SAFE_INT, GrepArgs

if TYPE_CHECKING:
    from pydantic import BaseModel

    from spillstore._content import ToolResult
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["app"]

app = command_app()

_READ_HINT_KEYS = frozenset({"spill", "offset", "limit", "byte_offset", "max_bytes"})


def _about(model: type[BaseModel], name: str) -> str:
    """A field's description, with its bounds when they are small enough to say."""
    field = model.model_fields[name]
    low = next((bound.ge for bound in field.metadata if hasattr(bound, "ge")), None)
    high = next((bound.le for bound in field.metadata if hasattr(bound, "le")), None)
    text = str(field.description)
    if low is None or high is None or high >= MAX_SAFE_INT:
        return text
    return f"{text.removesuffix('.')} ({low}-{high})."


def _default(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].default


def _tools(ctx: typer.Context) -> SpillTools:
    from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415

    with store_errors():
        chosen = settings(ctx)
        return SpillTools(open_store(chosen), session=chosen.session, cross_session=True)


def _print_tool_result(result: ToolResult, list_name: str) -> None:
    """Print a recovery tool's text to stdout, or its error as one line (exit 1)."""
    text = tool_text(result)
    if result.is_error:
        fail(text.replace(f"call {list_name} to see", "run 'spillstore ls' to see"))
    write(text if text.endswith("\n") else text + "\n")


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
        fail(bad, EXIT_USAGE)
    if not isinstance(node, ast.Call) or node.args:
        fail(bad, EXIT_USAGE)
    values: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg not in _READ_HINT_KEYS:
            fail(f"{bad}: unknown argument {keyword.arg!r}", EXIT_USAGE)
        try:
            value = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            fail(f"{bad}: {keyword.arg} is not a literal", EXIT_USAGE)
        wanted: type = str if keyword.arg == "spill" else int
        if type(value) is not wanted:
            fail(f"{bad}: {keyword.arg} must be a {wanted.__name__}", EXIT_USAGE)
        values[keyword.arg] = value
    if "spill" not in values:
        fail(f"{bad}: it names no spill", EXIT_USAGE)
    return values


@app.command()
@takes_global_options("dir", "session")
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
        optional("--offset", help="First line, 1-based; negative counts from the end."),
    ] = None,
    limit: Annotated[
        int | None,
        optional("--limit", help="Lines to show (1-2000). Default: 200."),
    ] = None,
    byte_offset: Annotated[
        int | None,
        optional("--byte-offset", help="Read by bytes from this 0-based offset instead."),
    ] = None,
    max_bytes: Annotated[
        int | None,
        optional(
            "--max-bytes",
            help="With --byte-offset: bytes to show (default 4096); with lines: a byte cap.",
        ),
    ] = None,
) -> None:
    """Show a page of a spill: numbered lines, the exact range, and the next call."""
    refuse_json(ctx)
    args: dict[str, Any] = _parse_read_hint(spill) or {"spill": spill}
    options = {"offset": offset, "limit": limit, "byte_offset": byte_offset, "max_bytes": max_bytes}
    args.update({key: value for key, value in options.items() if value is not None})
    tools = _tools(ctx)
    _print_tool_result(tools.read(**args), tools.names.list)


@app.command()
@takes_global_options("dir", "session")
def grep(
    ctx: typer.Context,
    *,
    pattern: Annotated[
        str, typer.Argument(metavar="PATTERN", help="RE2 regular expression (literal with -F).")
    ],
    spill: Annotated[
        str | None, typer.Argument(metavar="[SPILL]", help=_about(GrepArgs, "spill"))
    ] = _default(GrepArgs, "spill"),
    ignore_case: Annotated[
        bool, typer.Option("--ignore-case", "-i", help=_about(GrepArgs, "ignore_case"))
    ] = _default(GrepArgs, "ignore_case"),
    literal: Annotated[
        bool, typer.Option("--fixed-strings", "-F", help=_about(GrepArgs, "literal"))
    ] = _default(GrepArgs, "literal"),
    context: Annotated[
        int, typer.Option("--context", "-C", metavar="N", help=_about(GrepArgs, "context"))
    ] = _default(GrepArgs, "context"),
    before: Annotated[
        int | None,
        typer.Option("--before", "-B", metavar="N", help=_about(GrepArgs, "before")),
    ] = _default(GrepArgs, "before"),
    after: Annotated[
        int | None,
        typer.Option("--after", "-A", metavar="N", help=_about(GrepArgs, "after")),
    ] = _default(GrepArgs, "after"),
    count: Annotated[
        bool, typer.Option("--count", "-c", help="Count matching lines per spill.")
    ] = False,
    spills: Annotated[
        bool, typer.Option("--spills", "-l", help="List the spills that match.")
    ] = False,
    head_limit: Annotated[
        int,
        typer.Option("--head-limit", "-m", metavar="N", help=_about(GrepArgs, "head_limit")),
    ] = _default(GrepArgs, "head_limit"),
    offset: Annotated[
        int, typer.Option("--offset", metavar="N", help=_about(GrepArgs, "offset"))
    ] = _default(GrepArgs, "offset"),
) -> None:
    """Search spills with RE2 (linear time): matching lines, counts or spills."""
    refuse_json(ctx)
    if count and spills:
        fail("grep: --count and --spills cannot be combined", EXIT_USAGE)
    mode: Literal["content", "spills", "count"] = (
        "count" if count else "spills" if spills else "content"
    )
    tools = _tools(ctx)
    found = tools.grep(
        pattern,
        spill,
        ignore_case=ignore_case,
        context=context,
        before=before,
        after=after,
        output_mode=mode,
        head_limit=head_limit,
        offset=offset,
        literal=literal,
    )
    _print_tool_result(found, tools.names.list)


# --------------------------------------------------------------------------- ls / show / rm


@app.command("ls")
@takes_global_options("dir", "session", "json")
def list_spills(
    ctx: typer.Context,
    all_sessions: Annotated[
        bool, typer.Option("--all-sessions", "-a", help="List the spills of every session.")
    ] = False,
) -> None:
    """List the spills of the session, oldest first."""
    with store_errors():
        chosen = settings(ctx)
        scope = None if all_sessions else chosen.session
        metas = open_store(chosen).list(scope)
    if global_options(ctx).json:
        emit_json({"session": scope, "spills": [record(m, SPILL_FIELDS) for m in metas]})
        return
    if not metas:
        where = "any session" if scope is None else f"session {scope!r}"
        write(f"no spills in {where}\n")
        return
    rows = [
        [
            m.spill_id,
            m.session,
            m.tool_name[:40],
            f"{m.total_bytes:,}",
            f"{m.total_lines:,}",
            "full" if m.complete else f"part ({m.stored_bytes:,})",
            iso(m.created_at),
        ]
        for m in metas
    ]
    header = ["SPILL", "SESSION", "TOOL", "BYTES", "LINES", "SAVED", "CREATED (UTC)"]
    write(table(rows, header=header, right=frozenset({3, 4})))


@app.command()
@takes_global_options("dir", "session", "json")
def show(
    ctx: typer.Context,
    spill: Annotated[str, typer.Argument(metavar="SPILL", help="Spill id or spill file path.")],
) -> None:
    """Show a spill's metadata: sizes, stored ranges, sha256, suffix, path."""
    with store_errors():
        store = open_store(settings(ctx))
        meta = store.stat(store.resolve(spill))
    if global_options(ctx).json:
        emit_json({"spill": record(meta, SPILL_FIELDS)})
        return
    if meta.complete:
        stored = f"in full, {format_ranges(meta.stored_ranges)}"
    else:
        stored = (
            f"in part: {byte_count(meta.stored_bytes)} of {meta.total_bytes:,}, "
            f"{format_ranges(meta.stored_ranges)}; not kept: {format_ranges(meta.gaps)}"
        )
    rows = [
        ("spill", meta.spill_id),
        ("session", meta.session),
        ("tool", f"{meta.tool_name} (call {meta.tool_call_id})"),
        ("created", iso(meta.created_at)),
        ("size", f"{byte_count(meta.total_bytes)}, {meta.total_lines:,} lines"),
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
    write("".join(f"{key:<8} {one_line(value)}\n" for key, value in rows))


@app.command("rm")
@takes_global_options("dir", "session", "json")
def remove(
    ctx: typer.Context,
    spills: Annotated[list[str], typer.Argument(metavar="SPILL...", help="Spill ids or paths.")],
) -> None:
    """Delete spills (one already gone is not an error)."""
    from spillstore._errors import SpillNotFound  # noqa: PLC0415

    results: list[dict[str, Any]] = []
    with store_errors():
        store = open_store(settings(ctx))
        for spill in spills:
            try:
                spill_id = store.resolve(spill)
            except SpillNotFound as exc:  # expired or never existed: nothing to remove
                results.append({"spill_id": exc.spill_id, "removed": False})
                continue
            results.append({"spill_id": spill_id, "removed": store.delete(spill_id)})
    if global_options(ctx).json:
        emit_json({"results": results})
        return
    write(
        "".join(
            f"{'removed' if r['removed'] else 'already gone'}  {r['spill_id']}\n" for r in results
        )
    )


# --------------------------------------------------------------------------- gc / clean


@app.command()
@takes_global_options("dir", "session", "json")
def gc(
    ctx: typer.Context,
    *,
    max_age: Annotated[
        str | None,
        optional(
            "--max-age",
            metavar="DURATION",
            help="Remove spills older than this (e.g. 90s, 30m, 12h, 7d).",
        ),
    ] = None,
    max_total: Annotated[
        str | None,
        optional(
            "--max-total",
            metavar="SIZE",
            help="Then remove the oldest until the stored bytes fit (e.g. 1GB, 500MiB).",
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        optional(
            "--max-files", metavar="N", min=0, help="Then remove the oldest until N spills remain."
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
) -> None:
    """Remove old spills (every session) and leftovers of crashed writers, oldest first.

    With no limit given, only leftovers of crashed writers are removed.
    """
    age = None if max_age is None else duration_option("--max-age", max_age)
    total = None if max_total is None else size_option("--max-total", max_total)
    grace_seconds = duration_option("--grace", grace, allow_zero=True)
    with store_errors():
        store = open_store(settings(ctx))
        report = store.gc(
            max_age=age,
            max_total_bytes=total,
            max_files=max_files,
            dry_run=dry_run,
            grace=grace_seconds,
        )
    print_report(report, "gc", as_json=global_options(ctx).json)


@app.command()
@takes_global_options("dir", "session", "json")
def clean(
    ctx: typer.Context,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Remove EVERY spill of one session, whatever its age (asks first unless --yes)."""
    with store_errors():
        chosen = settings(ctx)
        store = open_store(chosen)
        metas = store.list(chosen.session)
    name = chosen.session
    if metas and not yes:
        what = (
            f"{len(metas)} spill(s), {byte_count(sum(m.stored_bytes for m in metas))}, of "
            f"session {name!r} in {store.root}"
        )
        if not is_tty(sys.stdin):
            fail(f"clean: refusing to remove {what} without confirmation: pass --yes")
        if not typer.confirm(f"Remove {what}?", default=False, err=True):
            fail("clean: nothing removed")
    with store_errors():
        report = store.clean(name)
    print_report(report, "clean", as_json=global_options(ctx).json)
