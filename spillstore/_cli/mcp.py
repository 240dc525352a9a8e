"""``spillstore mcp serve|proxy`` (also ``python -m spillstore.mcp``): the MCP command line.

``serve`` runs the spill server (:func:`spillstore.mcp.serve`), ``proxy`` puts any MCP
server behind the cap (:func:`spillstore.mcp.run_proxy`). Both speak MCP on stdout and
log to stderr only. ``--dir`` (or ``--store URL``) and ``--session`` are the global
options: given after ``serve``/``proxy``, or before ``mcp`` on the ``spillstore``
command line.

The root command line loads this module only when ``mcp`` runs, and this module imports
the MCP SDK only once a command runs: ``proxy`` first starts the upstream server
(:func:`spillstore.mcp.launch.launch`, standard library only; usually before the command
line was parsed, by :mod:`spillstore._cli.early`), then reads its settings
(pydantic) and imports the SDK while the upstream boots, and the proxy adopts the
running process (a bad setting stops it again).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated

import typer

from spillstore._cli.errors import EXIT_USAGE, fail, run_app
from spillstore._cli.options import (
    BudgetOption,
    CommandArgument,
    HeaderOption,
    SseOption,
    UrlOption,
    command_app,
    global_options,
    optional,
    settings,
    takes_global_options,
)
from spillstore._core.checks import header_problem, split_header
from spillstore._errors import ConfigError
from spillstore.mcp.defaults import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_MAX_RESTARTS,
    DEFAULT_PREFIX,
    SPILL_TOOL_NAMES,
)

__all__ = ["app", "main"]

app = command_app(name="mcp")


@app.callback()
def _mcp(
    verbose: Annotated[
        int,
        optional("--verbose", "-v", count=True, help="Log more (stderr)."),
    ] = 0,
) -> None:
    """spillstore MCP tools: a spill server, and a capping proxy."""
    logging.basicConfig(
        level=logging.WARNING - 10 * min(verbose, 2),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )


@app.command("serve")
@takes_global_options("dir", "session")
def serve_command(
    ctx: typer.Context,
    *,
    read_name: Annotated[
        str, typer.Option("--read-name", metavar="NAME", help="Name of the Read tool.")
    ] = SPILL_TOOL_NAMES[0],
    grep_name: Annotated[
        str, typer.Option("--grep-name", metavar="NAME", help="Name of the Grep tool.")
    ] = SPILL_TOOL_NAMES[1],
    list_name: Annotated[
        str, typer.Option("--list-name", metavar="NAME", help="Name of the List tool.")
    ] = SPILL_TOOL_NAMES[2],
    query_name: Annotated[
        str, typer.Option("--query-name", metavar="NAME", help="Name of the Query tool.")
    ] = SPILL_TOOL_NAMES[3],
    cross_session: Annotated[
        bool, typer.Option("--cross-session", help="Allow reading other sessions' spills.")
    ] = False,
) -> None:
    """Serve read_spill/grep_spill/list_spills/query_spill over stdio."""
    from spillstore.mcp import serve  # noqa: PLC0415 - the SDK loads when a command runs

    given = global_options(ctx)
    serve(
        dir=given.dir,
        store_url=given.store,
        session=given.session,
        read_name=read_name,
        grep_name=grep_name,
        list_name=list_name,
        query_name=query_name,
        cross_session=cross_session,
    )


@app.command(
    "proxy",
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
)
@takes_global_options("dir", "session")
def proxy_command(
    ctx: typer.Context,
    *,
    upstream: CommandArgument = None,
    max_bytes: BudgetOption = None,
    url: UrlOption = None,
    sse: SseOption = False,
    header: HeaderOption = None,
    header_env: Annotated[
        list[str] | None,
        optional(
            "--header-env",
            metavar="NAME=VAR",
            help="An HTTP header whose value is in the environment variable VAR "
            "(repeatable; unlike --header, it keeps a secret out of the process list).",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", metavar="SECONDS", help="Seconds an upstream tool call may take."
        ),
    ] = DEFAULT_CALL_TIMEOUT,
    max_restarts: Annotated[
        int, typer.Option("--max-restarts", metavar="N", help="Restarts of a crashed upstream.")
    ] = DEFAULT_MAX_RESTARTS,
    prefix: Annotated[
        str,
        typer.Option("--prefix", metavar="PREFIX", help="Spill tool name prefix on a name clash."),
    ] = DEFAULT_PREFIX,
) -> None:
    """Run an MCP server behind the cap: proxy [OPTIONS] -- CMD [ARGS...], or
    proxy [OPTIONS] --url URL [--sse] [--header NAME=VALUE | --header-env NAME=VAR ...]."""
    command = list(upstream or [])
    if command[:1] and command[0].startswith("-"):  # an unknown option, not a program
        fail(f"no such option: {command[0]} (the upstream command goes after --)", EXIT_USAGE)
    if bool(command) == bool(url):
        fail("give the upstream server as -- CMD [ARGS...] or as --url URL", EXIT_USAGE)
    if not url and (sse or header or header_env):
        fail("--sse, --header and --header-env go with --url", EXIT_USAGE)
    try:
        headers = _headers(header or [], header_env or [], os.environ)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    launched = None
    if command:  # started before parsing (early), else now: it boots while we import
        from spillstore._cli.early import take_early  # noqa: PLC0415 - standard library only
        from spillstore.mcp.launch import launch  # noqa: PLC0415

        try:
            launched = take_early(command) or launch(command[0], command[1:])
        except OSError as exc:
            fail(f"proxy: cannot start the upstream server {command[0]!r}: {exc}")
    try:  # a bad setting stops it again (finally)
        chosen = settings(ctx, **({"max_bytes": max_bytes} if max_bytes is not None else {}))
        from spillstore.mcp import run_proxy  # noqa: PLC0415 - the SDK, while it boots

        run_proxy(
            command or None,
            url=url,
            headers=headers,
            sse=sse,
            settings=chosen,
            call_timeout=timeout,
            max_restarts=max_restarts,
            prefix=prefix,
            launched=launched,
        )
    finally:
        if launched is not None and not launched.adopted:
            launched.discard()


def _headers(
    given: Iterable[str], from_env: Iterable[str], environ: Mapping[str, str]
) -> dict[str, str]:
    """The headers of ``--header NAME=VALUE`` and ``--header-env NAME=VAR`` options.

    ``--header`` carries its value on the command line (which other local users can see
    in the process list); ``--header-env`` names the environment variable that holds it,
    which is how ``spillstore install`` writes a client's headers.

    Raises:
        ConfigError: a malformed option, a variable that is not set, or a value with a
            line break or NUL (which HTTP cannot carry).
    """
    found: dict[str, str] = {}
    for text in given:
        name, value = split_header(text)
        found[name] = value
    for text in from_env:
        name, variable = split_header(text, "--header-env")
        if variable not in environ:
            raise ConfigError(
                f"--header-env {name}={variable}: the environment variable {variable} is not set"
            )
        found[name] = environ[variable]
    for name, value in found.items():
        problem = header_problem(name, value)
        if problem is not None:
            raise ConfigError(problem)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m spillstore.mcp``: this command group on its own; exits with its status."""
    run_app(app, argv, "python -m spillstore.mcp")
