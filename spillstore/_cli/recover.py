"""``read`` and ``grep``: the model's Read and Grep tools on the command line.

They print the tool's text, and its errors as one line (exit 1). ``grep`` takes its
defaults and help texts from :class:`~spillstore._tools.args.GrepArgs` and ``read`` its
limits from the same module, so the tools and the commands cannot drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from spillstore._cli.errors import EXIT_USAGE, fail, store_errors
from spillstore._cli.options import (
    command_app,
    open_store,
    optional,
    refuse_json,
    settings,
    takes_global_options,
)
from spillstore._cli.output import (
    tool_text,
    write,
)
from spillstore._tools.args import (
    DEFAULT_BYTE_PAGE,
    DEFAULT_READ_LIMIT,
    MAX_READ_LIMIT,
    MAX_SAFE_INT,
    GrepArgs,
    ReadArgs,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from spillstore._content import ToolResult
    from spillstore._tools.spill_tools import SpillTools

__all__ = ["app"]

app = command_app()

_READ_HINT_KEYS = frozenset(ReadArgs.model_fields)


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
        return SpillTools(open_store(chosen, ctx), session=chosen.session, cross_session=True)


def _print_tool_result(result: ToolResult, list_name: str) -> None:
    """Print a recovery tool's text to stdout, or its error as one line (exit 1)."""
    text = tool_text(result)
    if result.is_error:
        fail(text.replace(f"call {list_name} to see", "run 'spillstore ls' to see"))
    write(text if text.endswith("\n") else text + "\n")


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
        optional(
            "--limit",
            help=f"Lines to show (1-{MAX_READ_LIMIT}). Default: {DEFAULT_READ_LIMIT}.",
        ),
    ] = None,
    byte_offset: Annotated[
        int | None,
        optional("--byte-offset", help="Read by bytes from this 0-based offset instead."),
    ] = None,
    max_bytes: Annotated[
        int | None,
        optional(
            "--max-bytes",
            help=f"With --byte-offset: bytes to show (default {DEFAULT_BYTE_PAGE}); "
            "with lines: a byte cap.",
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
