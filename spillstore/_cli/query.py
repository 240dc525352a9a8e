"""``query``: the model's Query tool (``query_spill``) on the command line.

It prints the tool's text (one compact JSON result per line, with byte ranges), and its
errors as one line (exit 1). Its defaults and help come from
:class:`~spillstore._tools.args.QueryArgs`, so the tool and the command cannot drift.
"""

from __future__ import annotations

from typing import Annotated

import typer

from spillstore._cli.errors import fail, store_errors
from spillstore._cli.options import (
    command_app,
    open_store,
    refuse_json,
    settings,
    takes_global_options,
)
from spillstore._cli.output import tool_text, write
from spillstore._tools.args import QueryArgs

__all__ = ["app"]

app = command_app()


@app.command()
@takes_global_options("dir", "session")
def query(
    ctx: typer.Context,
    *,
    spill: Annotated[str, typer.Argument(metavar="SPILL", help="A spill id or its path.")],
    expression: Annotated[
        str,
        typer.Argument(metavar="EXPR", help=str(QueryArgs.model_fields["expression"].description)),
    ],
    offset: Annotated[
        int,
        typer.Option(
            "--offset", metavar="N", help=str(QueryArgs.model_fields["offset"].description)
        ),
    ] = QueryArgs.model_fields["offset"].default,
    limit: Annotated[
        int,
        typer.Option(
            "--limit", "-n", metavar="N", help=str(QueryArgs.model_fields["limit"].description)
        ),
    ] = QueryArgs.model_fields["limit"].default,
) -> None:
    """Query a JSON or JSON Lines spill with jq: results with their byte ranges."""
    from spillstore._tools.spill_tools import SpillTools  # noqa: PLC0415 - start-up stays cheap

    refuse_json(ctx)
    with store_errors():
        chosen = settings(ctx)
        tools = SpillTools(open_store(chosen), session=chosen.session, cross_session=True)
    try:
        result = tools.query(spill, expression, offset=offset, limit=limit)
    finally:
        tools.close()
    text = tool_text(result)
    if result.is_error:
        fail(text.replace(f"call {tools.names.list} to see", "run 'spillstore ls' to see"))
    write(text if text.endswith("\n") else text + "\n")
