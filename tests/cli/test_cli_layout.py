"""How the command line is built: lazy commands, global options, derived grep options.

These run the typer application in-process (``typer.testing.CliRunner``) or in a small
subprocess; the behaviour of each command is pinned in ``test_cli.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from spillstore._cli import app as cli_app
from spillstore._cli import recover
from spillstore._tools.args import GrepArgs

CLI_DIR = Path(cli_app.__file__).parent
SPILL_COMMANDS = ("read", "grep", "ls", "show", "rm", "gc", "clean")
JSON_COMMANDS = ("run", "ls", "show", "rm", "gc", "clean")
CLIENT_COMMANDS = ("install", "uninstall", "status", "add")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SPILLSTORE_")}
    return {**env, **extra}


def test_help_imports_no_command_module() -> None:
    """``spillstore --help`` lists the commands from the table: no store, tools, rich or mcp."""
    code = (
        "import sys\n"
        "from spillstore._cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('pydantic', 'rich', 'mcp', 'spillstore._stores', 'spillstore._tools',\n"
        "         'spillstore._cli.spills', 'spillstore._cli.recover',\n"
        "         'spillstore._cli.run', 'spillstore._cli.mcp', 'spillstore._cli.clients',\n"
        "         'spillstore._clients', 'tomlkit')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=False
    )
    assert "  grep " in done.stdout
    assert done.stderr.strip() == "[]"


def test_every_command_is_in_the_table_and_in_its_module() -> None:
    """Each table entry names a module whose ``app`` holds that command (or is ``mcp``)."""
    assert list(cli_app.COMMANDS) == [*("run", *SPILL_COMMANDS), "demo", *CLIENT_COMMANDS, "mcp"]
    for name, (module, short_help) in cli_app.COMMANDS.items():
        group = typer.main.get_group(__import__(module, fromlist=["app"]).app)
        assert name in group.commands or name == "mcp", name
        assert short_help.endswith(".")


@pytest.mark.parametrize("command", [*SPILL_COMMANDS, "run"])
def test_global_options_are_accepted_after_every_command_name(command: str) -> None:
    """``--dir`` and ``--session`` work after the command name (and ``--json`` where it
    prints JSON); before the name they work for every command."""
    runner = CliRunner()
    after = ["--dir", "/nowhere", "--session", "s"]
    after += ["--json"] if command in JSON_COMMANDS else []
    assert runner.invoke(cli_app.app, [command, *after, "--help"]).exit_code == 0
    before = ["--dir", "/nowhere", "--session", "s", "--json"]
    assert runner.invoke(cli_app.app, [*before, command, "--help"]).exit_code == 0


@pytest.mark.parametrize("command", ["read", "grep", "demo"])
def test_text_only_commands_have_no_json_option(command: str) -> None:
    """``read``, ``grep`` and ``demo`` print text only: ``--json`` after them is unknown."""
    result = CliRunner().invoke(cli_app.app, [command, "--json", "--help"])
    assert result.exit_code == 2


def test_grep_options_take_defaults_and_help_from_grep_args() -> None:
    """The CLI's grep options are GrepArgs' fields: same defaults, the same descriptions."""
    command = typer.main.get_group(recover.app).commands["grep"]
    params = {param.name: param for param in command.params}
    derived = ("spill", "ignore_case", "literal", "context", "before", "after", "head_limit")
    for name in (*derived, "offset"):
        field = GrepArgs.model_fields[name]
        assert params[name].default == field.default, name
        assert field.description is not None
        shown = str(getattr(params[name], "help", ""))
        assert shown.startswith(field.description.removesuffix(".")), name
    context_help = str(getattr(params["context"], "help", ""))
    assert context_help.endswith("(0-50).")


def test_console_script_entry_point_is_lazy_and_runs() -> None:
    """Importing ``spillstore._cli`` loads no command line yet; its ``main`` (the
    console script) prints the version."""
    code = (
        "import sys\n"
        "import spillstore._cli\n"
        "print('spillstore._cli.app' in sys.modules, 'typer' in sys.modules)\n"
        "spillstore._cli.main(['--version'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "False False"
    assert done.stdout.splitlines()[1].startswith("spillstore ")
    assert done.stderr == ""


def test_python_m_spillstore_mcp_is_the_cli_sub_app() -> None:
    """``python -m spillstore.mcp`` runs the same command group as ``spillstore mcp``."""

    def help_of(*argv: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, *argv, "--help"],
            capture_output=True,
            text=True,
            env=_env(),
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[1:]  # the usage line names the program

    assert help_of("-m", "spillstore.mcp", "proxy") == help_of(
        "-m", "spillstore._cli", "mcp", "proxy"
    )
    assert help_of("-m", "spillstore.mcp") == help_of("-m", "spillstore._cli", "mcp")
