"""The commands that manage saved spills: ``ls``, ``show``, ``rm``, ``gc``, ``clean``.

``read`` and ``grep``, the model's own tools, are in :mod:`spillstore._cli.recover`: they
load the tools' argument models, which these commands never need.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from spillstore._cli.errors import fail, store_errors
from spillstore._cli.options import (
    command_app,
    duration_option,
    global_options,
    open_store,
    optional,
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
    write,
)
from spillstore._core.ranges import format_ranges

if TYPE_CHECKING:
    pass

__all__ = ["app"]

app = command_app()

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
        metas = open_store(chosen, ctx).list(scope)
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
        store = open_store(settings(ctx), ctx)
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
        store = open_store(settings(ctx), ctx)
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
        store = open_store(settings(ctx), ctx)
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
        store = open_store(chosen, ctx)
        metas = store.list(chosen.session)
    name = chosen.session
    if metas and not yes:
        what = (
            f"{len(metas)} spill(s), {byte_count(sum(m.stored_bytes for m in metas))}, of "
            f"session {name!r} in {getattr(store, 'root', None) or chosen.store}"
        )
        if not is_tty(sys.stdin):
            fail(f"clean: refusing to remove {what} without confirmation: pass --yes")
        if not typer.confirm(f"Remove {what}?", default=False, err=True):
            fail("clean: nothing removed")
    with store_errors():
        report = store.clean(name)
    print_report(report, "clean", as_json=global_options(ctx).json)
