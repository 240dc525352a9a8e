"""The options several commands share, and what commands build from them.

The global options (``--dir``, ``--store``, ``--session``, ``--json``) are declared once,
in :func:`_declared`'s signature; a command that takes ``--dir`` takes ``--store`` too.
The root command takes them before the command name; :func:`takes_global_options` adds
the ones a command accepts after its name too, and records every one given into the root
context's :class:`GlobalOptions` (the command's own value wins over the root's;
``--json`` given either place counts). Commands read the result with
:func:`global_options`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, ParamSpec, TypeVar

import typer

from spillstore._cli.errors import EXIT_USAGE, CliError, fail
from spillstore._errors import ConfigError

if TYPE_CHECKING:
    from spillstore._settings import Settings
    from spillstore._stores.base import Store

__all__ = [
    "BudgetOption",
    "CommandArgument",
    "GlobalOptions",
    "command_app",
    "duration_option",
    "env_sets",
    "global_options",
    "open_store",
    "optional",
    "refuse_json",
    "settings",
    "size_option",
    "takes_global_options",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

GlobalName = Literal["dir", "store", "session", "json", "force_root"]


def optional(*flags: str, **details: Any) -> Any:
    """A ``typer.Option`` that is None unless given (so the help shows no default)."""
    return typer.Option(*flags, show_default=False, **details)


CommandArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="CMD", help="The command and its arguments (after --), run without a shell."
    ),
]
"""A command line to run (``run``'s command, ``mcp proxy``'s upstream server)."""

UrlOption = Annotated[
    str | None,
    optional("--url", metavar="URL", help="A remote MCP server instead of CMD."),
]
"""A remote MCP server's URL (``mcp proxy``'s upstream, ``add``'s new server)."""

SseOption = Annotated[
    bool, typer.Option("--sse", help="The --url server speaks SSE, not streamable HTTP.")
]
"""The ``--url`` server speaks the HTTP+SSE transport."""

HeaderOption = Annotated[
    list[str] | None,
    optional(
        "--header", metavar="NAME=VALUE", help="An HTTP header for the --url server (repeatable)."
    ),
]
"""HTTP headers for a remote MCP server, as given."""

BudgetOption = Annotated[
    str | None,
    optional(
        "--max-bytes",
        metavar="SIZE",
        help="Inline budget: the most bytes the model sees, pointer included "
        "(e.g. 50000, 50KB, 64KiB). Default: $SPILLSTORE_MAX_BYTES, else 50000.",
    ),
]
"""The inline budget as given (a size in bytes or a human size), None when not given."""


def _declared(
    dir_: Annotated[
        str | None,
        optional(
            "--dir",
            metavar="PATH",
            help="Store root. Default: $SPILLSTORE_DIR, else the user cache dir.",
        ),
    ] = None,
    store: Annotated[
        str | None,
        optional(
            "--store",
            metavar="URL",
            help="Store as a URL instead of --dir: PATH, file://PATH, s3://BUCKET/PREFIX "
            "or memory://. Default: $SPILLSTORE_STORE, else the --dir default.",
        ),
    ] = None,
    session: Annotated[
        str | None,
        optional(
            "--session",
            metavar="NAME",
            help="Session. Default: $SPILLSTORE_SESSION, else 'default'.",
        ),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (schema: see the docs).")
    ] = False,
    force_root: Annotated[
        bool,
        typer.Option(
            "--force-root",
            help="Use a store root spillstore would refuse: /, your home directory, or a "
            "non-empty directory that is not a store (it is then marked as one).",
        ),
    ] = False,
) -> None:
    """The global options: the one place they are declared (see the module docstring)."""


_PARAMETERS: dict[str, inspect.Parameter] = {
    name.rstrip("_"): parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
    for name, parameter in inspect.signature(_declared, eval_str=True).parameters.items()
}


@dataclass
class GlobalOptions:
    """The global options given, before or after the command name (None: not given)."""

    dir: str | None = None
    store: str | None = None
    session: str | None = None
    json: bool = False
    force_root: bool = False


def global_options(ctx: typer.Context) -> GlobalOptions:
    """The global options of this invocation (kept on the root context)."""
    root = ctx.find_root()
    if not isinstance(root.obj, GlobalOptions):
        root.obj = GlobalOptions()
    return root.obj


def takes_global_options(
    *names: GlobalName, first: bool = False
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Let a typer command (or callback) take the named global options.

    The command must take ``ctx: typer.Context``; it does not see the options as
    arguments, it reads them with :func:`global_options`. Typer reads the wrapper's
    signature: the command's parameters plus the options (their help lines after the
    command's own options, or before them with ``first``); the wrapper records the
    values given and calls the command without them.
    """
    if "dir" in names and "store" not in names:  # wherever a store is chosen
        at = names.index("dir") + 1
        names = (*names[:at], "store", *names[at:])
    extra = [_PARAMETERS[name] for name in names]

    def decorate(command: Callable[_P, _R]) -> Callable[_P, _R]:
        signature = inspect.signature(command, eval_str=True)
        own = list(signature.parameters.values())
        if first:
            own = [
                parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                if parameter.name != "ctx"
                else parameter
                for parameter in own
            ]

        @functools.wraps(command)
        def with_options(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            found = global_options(kwargs["ctx"])  # type: ignore[arg-type]
            for name, parameter in zip(names, extra, strict=True):
                value = kwargs.pop(parameter.name)
                if value is not None and value is not False:
                    setattr(found, name, value)
            return command(*args, **kwargs)

        ordered = [*own[:1], *extra, *own[1:]] if first else [*own, *extra]
        with_options.__signature__ = signature.replace(parameters=ordered)  # type: ignore[attr-defined]
        return with_options

    return decorate


def command_app(**settings: Any) -> typer.Typer:
    """A typer application with the command line's common settings (plain help, no
    completion, errors left to :func:`~spillstore._cli.errors.run_app`)."""
    return typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
        **settings,
    )


def refuse_json(ctx: typer.Context) -> None:
    """Refuse a global ``--json`` on a command that only prints text."""
    if global_options(ctx).json:
        fail(f"{ctx.command_path} prints text only; it has no --json form", EXIT_USAGE)


def settings(ctx: typer.Context, **overrides: object) -> Settings:
    """Settings from ``overrides``, the global options, the environment and the defaults.

    A bad ``--dir``, ``--store`` or ``--session`` is reported under the option's name.
    ``--dir`` and ``--store`` together are refused; ``--dir`` alone beats
    ``$SPILLSTORE_STORE`` (a command-line option beats the environment).
    """
    from spillstore._settings import Settings, field_label  # noqa: PLC0415 - cheap start-up

    given = global_options(ctx)
    if given.dir is not None and given.store is not None:
        fail("give the store as --dir PATH or as --store URL, not both", EXIT_USAGE)
    flags = {"dir": given.dir, "store": given.store, "session": given.session}
    values: dict[str, object] = dict(overrides)
    values.update({field: value for field, value in flags.items() if value is not None})
    if given.dir is not None:
        values["store"] = None
    try:
        return Settings(**values)
    except ConfigError as exc:
        flag = flags.get(exc.field or "")
        label = f"{field_label(exc.field or '')}: "
        if flag is not None and str(exc).startswith(label):  # say which option was wrong
            raise CliError(f"--{exc.field}: {str(exc)[len(label) :]}", EXIT_USAGE) from exc
        raise


def open_store(chosen: Settings, ctx: typer.Context | None = None) -> Store:
    """The store the settings name: ``--store``/``$SPILLSTORE_STORE``, else a local store
    at ``--dir``/``$SPILLSTORE_DIR``, else at the user cache dir (``--force-root`` from
    ``ctx``'s options).

    The store's warnings (an entry it skipped, say) go to stderr as ``spillstore:
    warning: ...`` lines.

    Raises:
        ConfigError: a bad store URL (a usage error, exit status 2).
    """
    from spillstore._stores.url import store_for  # noqa: PLC0415

    _warnings_to_stderr()
    force = ctx is not None and global_options(ctx).force_root
    return store_for(chosen, force_root=force)


class _StderrHandler(logging.Handler):
    """Writes a log record as one ``spillstore: warning:`` line to the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        from spillstore._cli.output import one_line, write  # noqa: PLC0415

        with contextlib.suppress(OSError):
            write(f"spillstore: warning: {one_line(record.getMessage())}\n", err=True)


def _warnings_to_stderr() -> None:
    logger = logging.getLogger("spillstore")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        handler = _StderrHandler(logging.WARNING)
        logger.addHandler(handler)


def size_option(name: str, value: str, *, allow_off: bool = False) -> int | None:
    """A size option (``50000``, ``50KB``, ``64KiB``; ``off`` with ``allow_off``) in bytes."""
    from spillstore._settings import parse_size  # noqa: PLC0415

    try:
        return parse_size(value, allow_off=allow_off)
    except ConfigError as exc:
        fail(f"{name}: {exc}", EXIT_USAGE)


def duration_option(name: str, value: str, *, allow_zero: bool = False) -> float:
    """A duration option (``90s``, ``30m``, ``12h``, ``7d``; ``0`` with ``allow_zero``)."""
    from spillstore._settings import parse_duration  # noqa: PLC0415

    if allow_zero and value.strip() in {"0", "0s"}:
        return 0.0
    try:
        return parse_duration(value)
    except ConfigError as exc:
        fail(f"{name}: {exc}", EXIT_USAGE)


def env_sets(field: str) -> bool:
    """Whether ``SPILLSTORE_<FIELD>`` is set (pydantic-settings ignores case)."""
    from spillstore._settings import env_var_name  # noqa: PLC0415 - start-up stays cheap

    wanted = env_var_name(field).upper()
    return any(key.upper() == wanted for key in os.environ)
