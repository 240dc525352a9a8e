"""A store whose root directory is read-only (0500) on a writable filesystem, used by a
user who is not root (root ignores modes): it is listed, read, grepped and checked, a
put says NOT saved with the reason and never raises out of a tool call, and rm, gc and
clean fail in one clear line.

The test runs as root (this project's machines do) and drops to ``nobody`` in a forked
child, after making the store and giving it to ``nobody``. The child cannot read the
interpreter's own directory (``/root`` is 0700 here), so everything it runs is imported
before the fork.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import spillstore._cli.spills  # noqa: F401 - the commands the child runs, loaded here
from spillstore import TextPart, ToolResult, TruncationService
from spillstore._cli.app import app
from spillstore._stores.local import LocalStore
from spillstore._tools.spill_tools import SpillTools

KW = {"session": "s1", "tool_name": "bash"}


def _nobody() -> tuple[int, int]:
    try:
        found = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this machine has no user 'nobody'")
    return found.pw_uid, found.pw_gid


def _as_user(uid: int, gid: int, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work`` in a forked child that dropped to ``uid``/``gid``; return its result
    (JSON through a pipe; a failure comes back as its traceback)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            payload = json.dumps(work()).encode()
        except BaseException:
            payload = json.dumps({"crashed": traceback.format_exc()}).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as got:
        raw = got.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(raw)
    assert "crashed" not in result, result.get("crashed")
    return result


@pytest.fixture
def nobody_store() -> Iterator[tuple[Path, list[str], int, int]]:
    """A store of three spills owned by ``nobody``, its root then made 0500."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to give the store to another user and become that user")
    uid, gid = _nobody()
    base = Path(tempfile.mkdtemp(prefix="spillstore-ro-"))
    base.chmod(0o711)  # nobody may pass through, not list
    root = base / "root"
    store = LocalStore(root)
    ids = [store.put(b"line %d\n" % n * 1000, tool_call_id=str(n), **KW).spill_id for n in range(3)]
    store._catalog.close()
    for directory, _, files in os.walk(root):
        os.chown(directory, uid, gid)
        for name in files:
            os.chown(os.path.join(directory, name), uid, gid)
    root.chmod(0o500)
    try:
        yield root, ids, uid, gid
    finally:
        root.chmod(0o700)
        shutil.rmtree(base)


def _text(result: ToolResult) -> str:
    return "".join(part.text for part in result.content if isinstance(part, TextPart))


def _outcome(call: Callable[[], object]) -> str:
    try:
        return f"ok {call()!r}"
    except Exception as exc:
        return f"{type(exc).__name__} {exc}"


def test_a_read_only_root_is_read_and_refuses_changes_clearly(
    nobody_store: tuple[Path, list[str], int, int],
) -> None:
    """As a user who owns the store but may not write its root: list, read, grep and
    check work; a put fails with a StoreError naming the read-only root (no file left);
    through the service it is a NOT saved preview with that reason; delete, gc and clean
    fail naming it; nothing changes."""
    root, ids, uid, gid = nobody_store
    before = sorted(p.name for p in root.rglob("*"))

    def work() -> dict[str, Any]:
        store = LocalStore(root)
        tools = SpillTools(store, session="s1")
        big = ToolResult(content=(TextPart("y\n" * 100_000),))
        capped = TruncationService(store=store).truncate_for_model(
            big, tool_name="t", tool_call_id="c"
        )
        return {
            "list": [m.spill_id for m in store.list()],
            "read": store.read_bytes(ids[1], 0, 6).decode(),
            "grep": _text(tools.call("grep_spill", {"pattern": "line 2"})),
            "check": [store.check().ok, store.check(fix=True).ok],
            "put": _outcome(lambda: store.put(b"x\n", tool_call_id="new", **KW)),
            "service": _text(capped)[:600],
            "delete": _outcome(lambda: store.delete(ids[0])),
            "gc": _outcome(lambda: store.gc(max_files=0, grace=0)),
            "clean": _outcome(lambda: store.clean("s1", grace=0)),
            "list_after": [m.spill_id for m in store.list()],
        }

    found = _as_user(uid, gid, work)
    assert found["list"] == found["list_after"] == ids
    assert found["read"] == "line 1"
    assert "line 2" in found["grep"] and ids[2] in found["grep"], found["grep"]
    assert found["check"] == [True, True]
    not_writable = "is not writable"
    assert found["put"].startswith("StoreError") and not_writable in found["put"], found["put"]
    assert "NOT saved" in found["service"] and not_writable in found["service"], found["service"]
    for what in ("delete", "gc", "clean"):
        assert found[what].startswith("StoreError"), found[what]
        assert not_writable in found[what], found[what]
    assert sorted(p.name for p in root.rglob("*")) == before


def test_the_cli_on_a_read_only_root(nobody_store: tuple[Path, list[str], int, int]) -> None:
    """The commands a user runs there: ls, read, grep and check exit 0; rm, gc and clean
    exit 1 with a one-line error naming the read-only root."""
    root, ids, uid, gid = nobody_store
    commands = {
        "ls": ["ls", "-a"],
        "read": ["read", ids[0]],
        "grep": ["grep", "line 2", "--session", "s1"],
        "check": ["check"],
        "check_fix": ["check", "--fix"],
        "rm": ["rm", ids[1]],
        "gc": ["gc", "--max-files", "0", "--grace", "0"],
        "clean": ["clean", "--session", "s1", "--yes"],
    }

    def work() -> dict[str, Any]:
        runner = CliRunner()
        found = {}
        for name, args in commands.items():
            ran = runner.invoke(app, args, env={"SPILLSTORE_DIR": str(root)})
            found[name] = [ran.exit_code, ran.stdout, ran.stderr, repr(ran.exception)]
        return found

    found = _as_user(uid, gid, work)
    for name in ("ls", "read", "grep", "check", "check_fix"):
        assert found[name][0] == 0, (name, found[name])
    assert ids[2] in found["ls"][1] and "line 0" in found["read"][1]
    for name in ("rm", "gc", "clean"):
        code, _, _, error = found[name]  # the one line spillstore's main prints
        assert code == 1 and error.startswith("CliError(") and "is not writable" in error, error


if sys.platform != "linux":  # fork and setuid as used here
    pytestmark = pytest.mark.skip("Linux only")
