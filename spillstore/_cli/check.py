"""``spillstore check [--fix]``: list what is wrong in the store, and repair what can be.

It lists leftovers of crashed writers, torn spills, entries that are not private regular
files, loose permissions and names spillstore never makes (see
:mod:`spillstore._stores.local_check`); ``--fix`` repairs all but the foreign names,
which are never touched. Exit status: 0 when nothing is left to repair, 1 otherwise.
JSON: ``{"version", "fix", "ok", "problems": [{"kind", "where", "detail", "fixed"}]}``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from spillstore._cli.errors import EXIT_FAILED, EXIT_USAGE, fail, store_errors
from spillstore._cli.options import (
    command_app,
    global_options,
    open_store,
    settings,
    takes_global_options,
)
from spillstore._cli.output import emit_json, table, write
from spillstore._stores.local import LocalStore
from spillstore._stores.local_rebuild import repairing

__all__ = ["app"]

app = command_app()


@app.command()
@takes_global_options("dir", "json")
def check(
    ctx: typer.Context,
    fix: Annotated[
        bool, typer.Option("--fix", help="Repair what can be repaired (never foreign files).")
    ] = False,
) -> None:
    """List orphans, torn spills, bad entries and loose permissions; --fix repairs them."""
    with store_errors():
        with repairing():  # a damaged catalog opens here, to be reported and repaired
            store = open_store(settings(ctx), ctx)
        if not isinstance(store, LocalStore):
            fail(
                f"check works on a local store (--dir PATH); this is a {type(store).__name__}",
                EXIT_USAGE,
            )
        report = store.check(fix=fix)
    if global_options(ctx).json:
        emit_json(
            {
                "fix": fix,
                "ok": report.ok,
                "problems": [
                    {"kind": p.kind, "where": p.where, "detail": p.detail, "fixed": p.fixed}
                    for p in report.problems
                ],
            }
        )
    elif not report.problems:
        write(f"store {store.root}: no problems found\n")
    else:
        rows = [[p.kind, p.where, p.detail, "fixed" if p.fixed else "-"] for p in report.problems]
        write(table(rows, header=["PROBLEM", "WHERE", "DETAIL", "FIXED"], right=frozenset()))
        if not report.ok and not fix:
            write("run 'spillstore check --fix' to repair them\n", err=True)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)
