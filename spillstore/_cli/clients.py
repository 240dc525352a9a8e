"""``spillstore install | uninstall | status | add``: put MCP clients' servers behind the cap.

::

    spillstore install CLIENT (--server NAME ... | --all) [--scope S] [--dry-run]
                              [--max-bytes SIZE] [--store URL] [--config PATH]
    spillstore uninstall CLIENT (--server NAME ... | --all) [--scope S] [--dry-run]
    spillstore status [CLIENT] [--scope S]
    spillstore add CLIENT NAME [--scope S] (-- CMD [ARGS...] | --url URL [--sse]
                                            [--header NAME=VALUE ...])

CLIENT is one of :data:`~spillstore._clients.registry.CLIENTS` (``claude-code``,
``claude-desktop``, ``cursor``, ``windsurf``, ``vscode``, ``gemini``, ``codex``, ``zed``,
``opencode``, ``goose``). ``--scope`` defaults to the client's first scope (``user``); ``status``
without ``--scope`` shows every scope. ``--config`` edits that file instead of the
client's own (same format). ``--launcher`` is how the client should run spillstore
(default: the absolute path of this ``spillstore``, since GUI clients start servers with
a bare ``PATH``; else ``python -m spillstore._cli`` with this interpreter).

Each file is printed with what happened to each server (``wrapped``, ``restored``,
``added``, ``skipped`` with the reason); ``--json`` prints ``{"version": 1, "command",
"dry_run", "files": [{"client", "scope", "path", "exists", "changed", "diff" (dry run
only), "servers": [{"name", "action", "detail"}]}]}``. A malformed config, or one that
changed while being edited, is one error line (exit 1) and is left as it was; ``status``
still shows the other files first.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from spillstore._cli.errors import EXIT_USAGE, fail
from spillstore._cli.options import (
    BudgetOption,
    CommandArgument,
    HeaderOption,
    SseOption,
    UrlOption,
    command_app,
    global_options,
    optional,
    takes_global_options,
)
from spillstore._cli.output import emit_json, printable, write
from spillstore._clients import files, ops
from spillstore._clients.errors import ClientConfigError
from spillstore._clients.formats import Format
from spillstore._clients.registry import CLIENTS, Client, Place, backup_dir
from spillstore._clients.wrap import ProxyOptions, Remote, check_launcher
from spillstore._core.checks import split_header
from spillstore._errors import ConfigError

__all__ = ["app"]

app = command_app()

ClientArgument = Annotated[
    str, typer.Argument(metavar="CLIENT", help=f"One of: {', '.join(CLIENTS)}.")
]
ServerOption = Annotated[
    list[str] | None,
    optional("--server", "-s", metavar="NAME", help="A server to act on (repeatable)."),
]
AllOption = Annotated[bool, typer.Option("--all", help="Act on every server of the file.")]
ScopeOption = Annotated[
    str | None,
    optional("--scope", metavar="SCOPE", help="user, project or local (default: user)."),
]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print the diff; change nothing.")]
ConfigOption = Annotated[
    str | None,
    optional("--config", metavar="PATH", help="Edit this file instead of the client's own."),
]
StoreOption = Annotated[
    str | None,
    optional("--store", metavar="URL", help="The store the proxy saves spills in."),
]
LauncherOption = Annotated[
    str | None,
    optional(
        "--launcher",
        metavar="CMD",
        help="How the client runs spillstore, a command line "
        "(default: this spillstore's absolute path).",
    ),
]


@dataclass(frozen=True)
class _Target:
    client: Client
    scope: str
    path: Path
    fmt: Format

    def config(self, snapshot: files.Snapshot) -> ops.Config:
        return ops.Config(self.fmt, self.client.flavor, snapshot.text, str(self.path))


def _place() -> Place:
    system = {"darwin": "darwin", "win32": "windows"}.get(sys.platform, "linux")
    return Place(home=Path.home(), system=system, env=dict(os.environ), cwd=Path.cwd())


def _client(name: str) -> Client:
    if name not in CLIENTS:
        fail(f"no client {name!r}; one of: {', '.join(CLIENTS)}", EXIT_USAGE)
    return CLIENTS[name]


def _targets(place: Place, client: Client, scope: str | None, config: str | None) -> list[_Target]:
    if scope is not None and scope not in client.scopes:
        fail(
            f"{client.name} has no scope {scope!r}; one of: {', '.join(client.scopes)}", EXIT_USAGE
        )
    if scope is None and config is not None:  # one file: read it as the default scope's
        scope = client.scopes[0]
    scopes = [scope] if scope is not None else list(client.scopes)
    found = []
    for each in scopes:
        path, fmt = client.locate(place, each, lambda p: p.is_file())
        found.append(_Target(client, each, Path(config) if config else path, fmt))
    return found


def _open(
    client: str, scope: str | None, config: str | None, *, must_exist: bool
) -> tuple[Place, _Target, files.Snapshot]:
    """The place, the one file a command edits (the client's first scope by default), and
    that file as read."""
    chosen = _client(client)
    place = _place()
    target = _targets(place, chosen, scope or chosen.scopes[0], config)[0]
    snapshot = files.read(target.path)
    if must_exist and snapshot.data is None:
        fail(f"{target.path}: no such file ({chosen.title}, {target.scope} scope)")
    return place, target, snapshot


def _names(servers: list[str] | None, every: bool) -> list[str] | None:
    if bool(servers) == every:
        fail("say which servers: --server NAME (repeatable) or --all", EXIT_USAGE)
    return None if every else list(servers or [])


def _proxy_options(max_bytes: str | None, store: str | None) -> ProxyOptions:
    """The proxy's options to write into entries, checked now as the proxy will check
    them: a bad one would otherwise show only when the client starts the server, as a
    server that fails to start. A store path is not opened here (that would make it); a
    relative one is made absolute (``~`` is left for the proxy to expand)."""
    from spillstore._settings import Settings  # noqa: PLC0415 - cheap start-up
    from spillstore._stores.url import open_store_url  # noqa: PLC0415

    try:
        if max_bytes is not None:
            Settings(max_bytes=max_bytes)
    except ConfigError as exc:
        fail(f"--max-bytes {max_bytes}: {exc}", EXIT_USAGE)
    scheme, sep, _ = (store or "").partition("://")
    try:
        if store is not None and (not store.strip() or (sep and scheme.lower() != "file")):
            open_store_url(store)
    except ConfigError as exc:
        fail(f"--store {store}: {exc}", EXIT_USAGE)
    if store is not None and not sep and not store.startswith("~"):
        store = os.path.abspath(store)  # the client starts the server in a cwd of its own
    return ProxyOptions(max_bytes=max_bytes, store=store)


def _launcher(given: str | None) -> list[str]:
    if given:
        words = shlex.split(given, posix=sys.platform != "win32")
        try:
            check_launcher(words)
        except ClientConfigError as exc:
            fail(f"--launcher: {exc}", EXIT_USAGE)
        return words
    program = Path(sys.argv[0])
    if program.name.removesuffix(".exe") == "spillstore" and program.is_file():
        return [os.path.abspath(program)]  # a link (pipx) survives upgrades
    found = shutil.which("spillstore")
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "spillstore._cli"]  # run as a module: the same interpreter


def _report(ctx: typer.Context, command: str, dry_run: bool, rows: list[dict[str, Any]]) -> None:
    if global_options(ctx).json:
        emit_json({"command": command, "dry_run": dry_run, "files": rows})
        return
    for row in rows:  # names, commands and paths come from the file: printable only
        write(f"{row['client']} ({row['scope']}): {printable(str(row['path']))}\n")
        if not row["exists"] and not row["servers"]:
            write("  no such file\n")
        elif not row["servers"]:  # uninstall lists only the servers it acts on
            write(
                "  no servers wrapped by spillstore\n"
                if command == "uninstall"
                else "  no servers\n"
            )
        for server in row["servers"]:
            name = printable(server["name"])
            if server["action"] == "seen":
                write(f"  {name}: {printable(server['detail'])}\n")
            else:
                detail = f" - {printable(server['detail'])}" if server["detail"] else ""
                write(f"  {name}: {server['action']}{detail}\n")
        if row.get("diff"):
            write(printable(row["diff"], keep="\t\n"))


def _row(target: _Target, snapshot: files.Snapshot, changes: list[ops.Change]) -> dict[str, Any]:
    return {
        "client": target.client.name,
        "scope": target.scope,
        "path": str(target.path),
        "exists": snapshot.data is not None,
        "changed": False,
        "servers": [
            {"name": change.name, "action": change.action, "detail": change.detail}
            for change in changes
        ],
    }


def _finish(row: dict[str, Any], snapshot: files.Snapshot, text: str, dry_run: bool) -> None:
    if dry_run:
        row["diff"] = files.diff(snapshot, text)
        row["changed"] = bool(row["diff"])
    else:
        row["changed"] = files.write(snapshot, text)


@app.command("install")
@takes_global_options("json")
def install_command(
    ctx: typer.Context,
    client: ClientArgument,
    *,
    server: ServerOption = None,
    every: AllOption = False,
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    max_bytes: BudgetOption = None,
    store: StoreOption = None,
    config: ConfigOption = None,
    launcher: LauncherOption = None,
) -> None:
    """Put a client's MCP servers behind the cap (spillstore mcp proxy)."""
    names = _names(server, every)
    options = _proxy_options(max_bytes, store)
    place, target, snapshot = _open(client, scope, config, must_exist=True)
    text, changes, backups = ops.install(
        target.config(snapshot), names, launcher=_launcher(launcher), options=options
    )
    row = _row(target, snapshot, changes)
    if not dry_run:
        for backup in backups:  # kept before the file changes, or the file does not
            files.save_backup(backup_dir(place), backup, client=client, path=target.path)
    _finish(row, snapshot, text, dry_run)
    _report(ctx, "install", dry_run, [row])


@app.command("uninstall")
@takes_global_options("json")
def uninstall_command(
    ctx: typer.Context,
    client: ClientArgument,
    *,
    server: ServerOption = None,
    every: AllOption = False,
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    config: ConfigOption = None,
) -> None:
    """Give a client's servers back as they were before install."""
    names = _names(server, every)
    place, target, snapshot = _open(client, scope, config, must_exist=True)
    folder = backup_dir(place)
    text, changes = ops.uninstall(
        target.config(snapshot),
        names,
        backup=lambda key: files.load_backup(folder, key, path=target.path),
    )
    row = _row(target, snapshot, changes)
    _finish(row, snapshot, text, dry_run)
    _report(ctx, "uninstall", dry_run, [row])


@app.command("status")
@takes_global_options("json")
def status_command(
    ctx: typer.Context,
    client: Annotated[
        str | None, typer.Argument(metavar="[CLIENT]", help="One client (default: all).")
    ] = None,
    *,
    scope: ScopeOption = None,
    config: ConfigOption = None,
) -> None:
    """Show which servers are wrapped, per client and scope, and with which options."""
    place = _place()
    chosen = [_client(client)] if client else list(CLIENTS.values())
    rows: list[dict[str, Any]] = []
    errors: list[str] = []
    for each in chosen:
        if scope is not None and scope not in each.scopes and client is None:
            continue
        for target in _targets(place, each, scope, config):
            try:  # one broken file is reported; the others are still shown
                snapshot = files.read(target.path)
                found = ops.status(target.config(snapshot)) if snapshot.data is not None else []
            except ClientConfigError as exc:
                errors.append(str(exc))
                continue
            if snapshot.data is not None or client is not None:
                rows.append(_row(target, snapshot, found))
    _report(ctx, "status", False, rows)
    if errors:
        fail("; ".join(errors))


@app.command("add")
@takes_global_options("json")
def add_command(
    ctx: typer.Context,
    client: ClientArgument,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The new server's name.")],
    *,
    upstream: CommandArgument = None,
    url: UrlOption = None,
    sse: SseOption = False,
    header: HeaderOption = None,
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    max_bytes: BudgetOption = None,
    store: StoreOption = None,
    config: ConfigOption = None,
    launcher: LauncherOption = None,
) -> None:
    """Add a server that runs behind the cap: add CLIENT NAME -- CMD [ARGS...], or
    add CLIENT NAME --url URL [--sse] [--header NAME=VALUE ...] (each header's value is
    kept in the entry's env, out of the process list)."""
    command = list(upstream or [])
    if command[:1] and command[0].startswith("-"):
        fail(f"no such option: {command[0]} (the server's command goes after --)", EXIT_USAGE)
    if bool(command) == bool(url):
        fail("give the server as -- CMD [ARGS...] or as --url URL", EXIT_USAGE)
    if not url and (sse or header):
        fail("--sse and --header go with --url", EXIT_USAGE)
    if not name.strip() or printable(name) != name:
        fail(
            f"NAME: a server name must be visible text, without control characters or line"
            f" breaks; got {printable(name)!r}",
            EXIT_USAGE,
        )
    try:
        headers = dict(split_header(text) for text in header or [])
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    options = _proxy_options(max_bytes, store)
    _, target, snapshot = _open(client, scope, config, must_exist=False)
    text, change = ops.add(
        target.config(snapshot),
        name,
        launcher=_launcher(launcher),
        options=options,
        upstream=Remote(url, sse, headers) if url else command,
    )
    row = _row(target, snapshot, [change])
    _finish(row, snapshot, text, dry_run)
    _report(ctx, "add", dry_run, [row])
