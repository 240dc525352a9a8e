"""``spillstore check``, ``--force-root``, and commands that keep working past a bad entry."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from spillstore._stores.local import LocalStore
from tests.cli.test_cli import cli, one_error_line, run_python, spills
from tests.stores.files_layout import write_files_layout

SEQ = "import sys\nsys.stdout.write(''.join(f'{n}\\n' for n in range(100_000)))\n"
SEQ2 = "import sys\nsys.stdout.write(''.join(f'{n}\\n' for n in range(200_000)))\n"


def _two_spills(store: Path) -> tuple[str, str]:
    assert run_python(store, SEQ).returncode == 0
    assert run_python(store, SEQ2).returncode == 0
    first, second = (s["spill_id"] for s in spills(store))
    return str(first), str(second)


def test_a_symlinked_sidecar_is_skipped_reported_and_fixed(tmp_path: Path) -> None:
    """A 0.1 store with a symlinked sidecar: ls migrates the rest and works (a warning
    names the spill left behind); gc works; check --fix repairs it."""
    store = tmp_path / "store"
    bad, good = (
        m.spill_id for m in write_files_layout(store, [("default", b"a\n"), ("default", b"b\n")])
    )
    sidecar = store / "default" / f"{bad}.json"
    shutil.copy(sidecar, tmp_path / "copy.json")
    sidecar.unlink()
    sidecar.symlink_to(tmp_path / "copy.json")
    listed = cli(store, "ls")
    assert listed.returncode == 0 and good.encode() in listed.stdout
    assert b"spillstore: warning: spill default/" + bad.encode() in listed.stderr
    gc = cli(store, "--json", "gc", "--max-files", "0", "--grace", "0")
    assert gc.returncode == 0
    assert [e["spill_id"] for e in json.loads(gc.stdout)["entries"]] == [good]
    found = cli(store, "--json", "check")
    assert found.returncode == 1
    assert [p["kind"] for p in json.loads(found.stdout)["problems"]] == ["bad_entry"]
    fixed = cli(store, "check", "--fix")
    assert fixed.returncode == 0 and b"fixed" in fixed.stdout
    clean = cli(store, "check")
    assert clean.returncode == 0 and b"no problems found" in clean.stdout
    assert cli(store, "ls").stderr == b""
    assert (tmp_path / "copy.json").exists()


def test_a_non_empty_foreign_root_is_refused_unless_forced(tmp_path: Path) -> None:
    """SPILLSTORE_DIR at a directory of other files: one clear error; --force-root opts in."""
    root = tmp_path / "docs"
    (root / "Templates").mkdir(parents=True)
    os.chmod(root, 0o700)
    refused = cli(root, "gc")
    assert refused.returncode == 1
    assert "not a spillstore store" in one_error_line(refused)
    assert sorted(p.name for p in root.iterdir()) == ["Templates"]
    forced = cli(root, "--force-root", "gc", "--grace", "0", "--max-age", "1s")
    assert forced.returncode == 0, forced.stderr
    assert (root / "Templates").is_dir() and (root / ".spillstore").is_file()


def test_cli_names_check_fix_and_check_fix_repairs(tmp_path: Path) -> None:
    """With a garbage catalog: ls and rm fail in one line naming check --fix; check exits
    1 saying so; check --fix exits 0; the spill is listed again."""
    store = tmp_path / "store"
    spill_id = (
        LocalStore(store)
        .put(b"x\n" * 9, session="default", tool_name="t", tool_call_id="1")
        .spill_id
    )
    (store / "catalog.sqlite3").write_bytes(b"garbage")
    for args in (["ls"], ["rm", spill_id]):
        failed = cli(store, *args)
        assert "'spillstore check --fix'" in one_error_line(failed), args
    found = cli(store, "check")
    assert found.returncode == 1 and b"bad_catalog" in found.stdout
    assert cli(store, "check", "--fix").returncode == 0
    assert [m.spill_id for m in LocalStore(store).list()] == [spill_id]
