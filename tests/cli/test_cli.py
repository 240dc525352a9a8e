"""The ``spillstore`` command line, driven as a subprocess (issue 6).

Every test runs ``python -m spillstore._cli`` with ``SPILLSTORE_DIR`` pointing at a
fresh store, stdin from /dev/null (not a terminal) and no other ``SPILLSTORE_*``
variable, so nothing depends on the user's cache dir or environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

# A deterministic ~3.4 MB log with multi-byte characters and a needle in the middle.
LOG_CODE = """
lines = []
for i in range(1, 60_001):
    if i == 31_337:
        lines.append("2026-11-29T12:03:04Z ERROR [payments] needle: café ☕ \\U0001f642")
    else:
        stamp = "2026-11-29T12:00:00Z INFO "
        lines.append(f"{stamp} [worker-{i % 17:02d}] step {i:05d} ok " + "é" * (i % 5))
data = ("\\n".join(lines) + "\\n").encode()
"""
EMIT_LOG = LOG_CODE + "import sys\nsys.stdout.buffer.write(data)\n"

BLOCK_LINES = 64
BLOCKS = 3200  # 3200 blocks of 64 KiB: 200 MiB
BLOCK = (b"x" * 1023 + b"\n") * BLOCK_LINES
EMIT_200_MIB = (
    "import sys\n"
    f"block = (b'x' * 1023 + b'\\n') * {BLOCK_LINES}\n"
    "write = sys.stdout.buffer.write\n"
    f"for _ in range({BLOCKS}):\n"
    "    write(block)\n"
)

# Spawns the CLI with posix_spawn and reports its peak RSS from wait4: the rusage of
# exactly that child (and what it waited for), taken from a small process, so no large
# parent's high-water mark is carried over through exec.
RSS_WRAPPER = """
import json, os, sys
out_path, argv = sys.argv[1], sys.argv[2:]
actions = [(os.POSIX_SPAWN_OPEN, 1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)]
pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
_, status, usage = os.wait4(pid, 0)
print(json.dumps({"maxrss_kib": usage.ru_maxrss, "exit": os.waitstatus_to_exitcode(status)}))
"""

SPILL_KEYS = {
    "spill_id",
    "session",
    "tool_name",
    "tool_call_id",
    "created_at",
    "created",
    "total_bytes",
    "total_lines",
    "stored_bytes",
    "complete",
    "stored_ranges",
    "sha256",
    "suffix",
    "media_notes",
    "invalid_utf8",
    "path",
}
HINT = re.compile(r"Next: (read_spill\(.*?\)) reads")


def _log_bytes() -> bytes:
    namespace: dict[str, object] = {}
    exec(LOG_CODE, namespace)
    data = namespace["data"]
    assert isinstance(data, bytes)
    return data


def _env(store: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SPILLSTORE_")}
    env.update(SPILLSTORE_DIR=str(store), PYTHONUTF8="1", **extra)
    return env


def cli(
    store: Path,
    *args: str,
    env: dict[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.PIPE,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``spillstore ARGS`` against ``store`` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "spillstore._cli", *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        stdin=stdin,
        env=env if env is not None else _env(store),
        timeout=120,
        check=False,
    )


def run_python(store: Path, code: str, *options: str) -> subprocess.CompletedProcess[bytes]:
    """``spillstore run [OPTIONS] -- python -c CODE``."""
    return cli(store, "run", *options, "--", sys.executable, "-c", code)


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    """The single stderr line of a failed command (asserting it is one, with no traceback)."""
    err = result.stderr.decode()
    assert result.returncode != 0, result
    assert "Traceback" not in err, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("spillstore: "), err
    return err


def spills(store: Path, *args: str) -> list[dict[str, object]]:
    result = cli(store, "ls", "--json", *args)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)["spills"]
    assert isinstance(listed, list)
    return listed


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """The store root the CLI gets as SPILLSTORE_DIR: a path, not made until the CLI needs it."""
    return tmp_path / "store"


@pytest.fixture(scope="module")
def log_spill(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """One store holding the 3.4 MB log, spilled through ``spillstore run``."""
    root = tmp_path_factory.mktemp("log") / "store"
    result = run_python(root, EMIT_LOG, "--tool-name", "app_log")
    assert result.returncode == 0, result.stderr
    pointer = result.stdout.decode()
    spill_id = re.search(r"Saved in \w+ as spill (\S+?)[.:]\s", pointer)
    assert spill_id is not None, pointer
    return root, spill_id.group(1), pointer


# --------------------------------------------------------------------------- run


def test_run_small_output_is_printed_as_the_model_sees_it(store_dir: Path) -> None:
    """An output within budget is printed unchanged, then the suffix part, exit 0."""
    result = run_python(store_dir, "print('hi')")
    assert result.returncode == 0
    assert result.stdout == b"hi\n\nexit code 0\n"
    assert result.stderr == b""
    assert spills(store_dir) == []


def test_run_merges_stdout_and_stderr_in_arrival_order(store_dir: Path) -> None:
    """stdout and stderr share one pipe, so the saved output keeps the order of writes."""
    code = "import os\nos.write(1, b'a\\n')\nos.write(2, b'b\\n')\nos.write(1, b'c\\n')"
    result = run_python(store_dir, code)
    assert result.stdout == b"a\nb\nc\n\nexit code 0\n"


@pytest.mark.parametrize("code", [0, 3])
def test_run_propagates_the_exit_code_into_status_and_suffix(store_dir: Path, code: int) -> None:
    """The command's exit code is spillstore's, and the suffix names it."""
    # Short lines: one 60 KB line is shaped and appended to, as the whole output would be.
    program = f"import sys\nfor _ in range(1000): print('x' * 59)\nsys.exit({code})"
    result = run_python(store_dir, program)
    assert result.returncode == code
    text = result.stdout.decode()
    assert text.startswith("[spillstore] The output of tool python")
    assert text.endswith(f"--- end of preview ---\nexit code {code}\n")


def test_run_reports_a_signal_death_like_a_shell(store_dir: Path) -> None:
    """A command killed by SIGTERM gives exit status 143 and says so in the suffix."""
    result = run_python(store_dir, "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)")
    assert result.returncode == 143
    assert result.stdout.decode().endswith("killed by signal SIGTERM\n")


def test_run_missing_command_exits_127_with_one_line(store_dir: Path) -> None:
    """A command that does not exist: one line on stderr, nothing on stdout, exit 127."""
    result = cli(store_dir, "run", "--", "spillstore-no-such-command-xyz", "arg")
    err = one_error_line(result)
    assert result.returncode == 127
    assert "spillstore-no-such-command-xyz" in err and "not found" in err
    assert result.stdout == b""


def test_run_non_executable_file_exits_126(store_dir: Path, tmp_path: Path) -> None:
    """A file that exists but cannot be executed: one line, exit 126 as shells do."""
    script = tmp_path / "not-executable.sh"
    script.write_text("echo hi\n", encoding="utf-8")
    result = cli(store_dir, "run", "--", str(script))
    one_error_line(result)
    assert result.returncode == 126


def test_run_read_round_trip_is_byte_exact(log_spill: tuple[Path, str, str]) -> None:
    """The pointer's Read hint works verbatim in ``spillstore read``, with exact bytes."""
    root, spill_id, pointer = log_spill
    data = _log_bytes()
    lines = data.decode().split("\n")
    assert f"{len(data)} bytes, 60000 lines" in pointer
    assert f"sha256 {hashlib.sha256(data).hexdigest()}" in pointer
    assert pointer.endswith("--- end of preview ---\nexit code 0\n")
    hint = HINT.search(pointer)
    assert hint is not None, pointer
    offset = int(re.search(r"offset=(\d+)", hint.group(1)).group(1))  # type: ignore[union-attr]

    by_hint = cli(root, "read", hint.group(1))
    by_options = cli(root, "read", spill_id, "--offset", str(offset), "--limit", "200")
    assert by_hint.returncode == 0, by_hint.stderr
    assert by_hint.stdout == by_options.stdout
    page = by_hint.stdout.decode().split("\n")
    assert page[0].startswith(f"spill {spill_id}: lines {offset}-{offset + 199} of 60000")
    shown = [line.split("\t", 1) for line in page[1:201]]
    assert [int(number) for number, _ in shown] == list(range(offset, offset + 200))
    assert [text for _, text in shown] == lines[offset - 1 : offset + 199]
    assert page[201] == f'next: read_spill(spill="{spill_id}", offset={offset + 200}, limit=200)'

    # Byte paging returns the original bytes themselves, by id or by the pointer's path.
    path = re.search(r"^File: (/\S+\.out)$", pointer, re.M).group(1)  # type: ignore[union-attr]
    assert Path(path).read_bytes() == data
    for name in (spill_id, path):
        raw = cli(root, "read", name, "--byte-offset", "1000000", "--max-bytes", "5000").stdout
        header, _, body = raw.partition(b"\n")
        start, end = map(int, re.search(rb"bytes \[(\d+), (\d+)\)", header).groups())  # type: ignore[union-attr]
        assert start == 1_000_000 and 4_996 <= end - start <= 5_000
        assert body[: end - start] == data[start:end]


def test_run_streams_200_mib_with_flat_memory(store_dir: Path, tmp_path: Path) -> None:
    """200 MiB through ``spillstore run`` keeps peak RSS far below the output size."""
    out = tmp_path / "pointer.txt"
    command = [sys.executable, "-m", "spillstore._cli", "run", "--retain", "10MiB", "--"]
    wrapper = subprocess.run(
        [sys.executable, "-c", RSS_WRAPPER, str(out), *command, sys.executable, "-c", EMIT_200_MIB],
        capture_output=True,
        env=_env(store_dir),
        timeout=120,
        check=True,
    )
    measured = json.loads(wrapper.stdout)
    assert measured["exit"] == 0, wrapper.stderr
    assert measured["maxrss_kib"] < 150 * 1024, measured

    total = BLOCKS * len(BLOCK)
    digest = hashlib.sha256()
    for _ in range(BLOCKS):
        digest.update(BLOCK)
    pointer = out.read_text(encoding="utf-8")
    assert f"{total} bytes, {BLOCKS * BLOCK_LINES} lines, sha256 {digest.hexdigest()}" in pointer
    assert "Saved in part as spill" in pointer
    [spill] = spills(store_dir)
    cap, kept_tail = 10 * 1024**2, 1024**2
    assert spill["total_bytes"] == total and spill["sha256"] == digest.hexdigest()
    assert spill["stored_ranges"] == [[0, cap - kept_tail], [total - kept_tail, total]]
    assert Path(str(spill["path"])).stat().st_size == cap


def test_run_retain_and_max_bytes_options(store_dir: Path) -> None:
    """--retain caps what is saved; --max-bytes caps what is printed, pointer included."""
    result = run_python(store_dir, EMIT_LOG, "--retain", "64KiB", "--max-bytes", "4KB")
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert len(text.encode()) - 1 <= 4000
    assert "Saved in part as spill" in text and "exit code 0" in text
    [spill] = spills(store_dir)
    total = len(_log_bytes())
    assert spill["complete"] is False
    ranges = spill["stored_ranges"]
    assert isinstance(ranges, list) and ranges[0][0] == 0 and ranges[-1][1] == total
    assert int(str(spill["stored_bytes"])) <= 64 * 1024


def test_run_json_reports_the_result(store_dir: Path) -> None:
    """``run --json`` gives the model-facing text, the exit code and the spill facts."""
    result = cli(store_dir, "run", "--json", "--", sys.executable, "-c", "print('y' * 80_000)")
    assert result.returncode == 0
    document = json.loads(result.stdout)
    assert set(document) == {"version", "exit_code", "is_error", "text", "spill"}
    assert document["version"] == 1 and document["exit_code"] == 0
    assert document["is_error"] is False
    assert document["text"].endswith("exit code 0")
    assert set(document["spill"]) == {
        "mode",
        "saved",
        "spill_id",
        "path",
        "total_bytes",
        "total_lines",
        "sha256",
        "stored_ranges",
        "elided_bytes",
        "elided_lines",
        "error",
        "invalid_utf8",
    }
    assert document["spill"]["saved"] == "full"
    assert document["spill"]["total_bytes"] == 80_001


def _read_all(fd: int, sink: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            return
        if not chunk:
            return
        sink += chunk


def test_run_shows_progress_only_on_a_terminal(store_dir: Path) -> None:
    """With stderr on a terminal a large run draws a progress line; piped, stderr is empty."""
    code = EMIT_200_MIB.replace(str(BLOCKS), "400")
    piped = run_python(store_dir, code)
    assert piped.returncode == 0 and piped.stderr == b""

    leader, follower = pty.openpty()
    seen = bytearray()
    reader = threading.Thread(target=_read_all, args=(leader, seen))
    reader.start()
    try:
        on_tty = cli(store_dir, "run", "--", sys.executable, "-c", code, stderr=follower)
    finally:
        os.close(follower)
        reader.join(timeout=30)
        os.close(leader)
    assert on_tty.returncode == 0
    assert on_tty.stdout == piped.stdout
    assert b"seen" in seen and b"spilled" in seen, bytes(seen)


# --------------------------------------------------------------------------- read / grep


def test_grep_finds_the_needle_in_modes(log_spill: tuple[Path, str, str]) -> None:
    """grep finds the buried line, with context, case folding, counts and spill lists."""
    root, spill_id, _ = log_spill
    plain = cli(root, "grep", "needle", spill_id, "-C", "1").stdout.decode()
    assert "31337:2026-11-29T12:03:04Z ERROR [payments] needle: café" in plain
    assert "31336-" in plain and "31338-" in plain
    folded = cli(root, "grep", "-i", "NEEDLE: CAFÉ", spill_id).stdout.decode()
    assert "31337:" in folded
    counted = cli(root, "grep", "INFO", spill_id, "--count").stdout.decode()
    assert "59999 matching lines" in counted
    listed = cli(root, "grep", "-F", "café ☕", "-l").stdout.decode()
    assert spill_id in listed


def test_read_paging_options(log_spill: tuple[Path, str, str]) -> None:
    """Negative offsets count from the end; the last page says the output ended."""
    root, spill_id, _ = log_spill
    last = cli(root, "read", spill_id, "--offset", "-2", "--limit", "2").stdout.decode()
    assert "lines 59999-60000 of 60000" in last
    assert last.endswith("end of output\n")


ERROR_CASES: list[tuple[Sequence[str], int, str]] = [
    (["run", "--max-bytes", "12XB", "--", "true"], 2, "--max-bytes"),
    (["run", "--max-bytes", "0", "--", "true"], 2, "--max-bytes"),
    (["run", "--max-bytes", "1000", "--", "true"], 2, "at least 2048"),
    (["run", "--retain", "10K", "--", "true"], 2, "ambiguous"),
    (["run"], 2, "no command"),
    (["gc", "--max-age", "7y"], 2, "--max-age"),
    (["gc", "--max-age", "1.5h"], 2, "--max-age"),
    (["gc", "--max-total", "lots"], 2, "--max-total"),
    (["gc", "--max-files", "many"], 2, "--max-files"),
    (["gc", "--grace", "-5"], 2, "--grace"),
    (["read", "nope-0123456789abcdef0123"], 1, "no spill"),
    (["show", "nope-0123456789abcdef0123"], 1, "no spill"),
    (["read", "not a spill"], 1, "not a spill id"),
    (["read", "/etc/passwd"], 1, "refused"),
    (["read", "../../../etc/passwd"], 1, "refused"),
    (["show", "/etc/passwd"], 1, "refused"),
    (["grep", "(unclosed"], 1, "invalid regex"),
    (["grep", "(a)\\1"], 1, "backreference"),
    (["grep", "x", "--count", "--spills"], 2, "cannot be combined"),
    (["read", 'read_spill(spill="x", evil=__import__("os"))'], 2, "unknown argument"),
    (["read", "nope-0123456789abcdef0123", "--offset", "ten"], 2, "--offset"),
    (["ls", "--bogus"], 2, "--bogus"),
    (["--session", "../x", "ls"], 2, "--session"),
    (["no-such-command"], 2, "no-such-command"),
    (["--json", "grep", "x"], 2, "no --json"),
    (["read", "read_spill(spill=" + "[" * 5000 + ")"], 2, "not a read call"),
]


@pytest.mark.parametrize(("args", "status", "words"), ERROR_CASES)
def test_errors_are_one_line_without_traceback(
    store_dir: Path, args: Sequence[str], status: int, words: str
) -> None:
    """Bad sizes, durations, spills, paths, patterns and options: one stderr line, exit != 0."""
    result = cli(store_dir, *args)
    assert words in one_error_line(result)
    assert result.returncode == status
    assert result.stdout == b""


def test_bad_environment_is_one_line(store_dir: Path) -> None:
    """A bad SPILLSTORE_* variable is named in one line, not a traceback."""
    result = cli(store_dir, "run", "--", "true", env=_env(store_dir, SPILLSTORE_MAX_BYTES="lots"))
    assert "SPILLSTORE_MAX_BYTES" in one_error_line(result)


def test_unsafe_store_root_is_one_line(tmp_path: Path) -> None:
    """A world-writable store root is refused in one line, without an errno prefix."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    err = one_error_line(cli(shared, "ls"))
    assert "refusing store root" in err and "[Errno" not in err


def test_expired_spill_and_bad_offset_are_one_line(store_dir: Path) -> None:
    """Reading a removed spill says it expired; offset 0 is refused; both in one line."""
    run_python(store_dir, "print('z' * 70_000)")
    [spill] = spills(store_dir)
    spill_id = str(spill["spill_id"])
    assert "1-based" in one_error_line(cli(store_dir, "read", spill_id, "--offset", "0"))
    removed = cli(store_dir, "rm", spill_id)
    assert removed.stdout.decode() == f"removed  {spill_id}\n"
    assert cli(store_dir, "rm", spill_id).stdout.decode() == f"already gone  {spill_id}\n"
    assert "expired" in one_error_line(cli(store_dir, "read", spill_id))
    assert "expired" in one_error_line(cli(store_dir, "show", spill_id))


# --------------------------------------------------------------------------- ls / show


def test_ls_and_show_json_schema(store_dir: Path) -> None:
    """ls and show --json carry the documented spill fields; --dir works on both sides."""
    run_python(store_dir, "print('w' * 70_000)", "--session", "one", "--call-id", "c1")
    env = _env(store_dir)
    del env["SPILLSTORE_DIR"]
    listed = cli(store_dir, "--dir", str(store_dir), "--session", "one", "ls", "--json", env=env)
    document = json.loads(listed.stdout)
    assert set(document) == {"version", "session", "spills"}
    assert document["version"] == 1 and document["session"] == "one"
    [spill] = document["spills"]
    assert set(spill) == SPILL_KEYS
    assert spill["tool_name"] == "python" and spill["tool_call_id"] == "c1"
    assert spill["total_bytes"] == 70_001 and spill["total_lines"] == 1
    assert spill["stored_ranges"] == [[0, 70_001]] and spill["complete"] is True
    assert spill["suffix"] == "exit code 0" and spill["created"].endswith("Z")

    shown = cli(store_dir, "show", spill["spill_id"], "--json", "--dir", str(store_dir), env=env)
    assert json.loads(shown.stdout) == {"version": 1, "spill": spill}
    assert json.loads(cli(store_dir, "ls", "--json").stdout)["spills"] == []
    assert json.loads(cli(store_dir, "ls", "--json", "--all-sessions").stdout)["spills"] == [spill]
    text = cli(store_dir, "show", spill["spill_id"]).stdout.decode()
    assert f"spill    {spill['spill_id']}\n" in text and "sha256   " in text


def test_ls_prints_a_table_with_sizes_right_aligned(store_dir: Path) -> None:
    """ls without --json: a header, one row per spill, the BYTES column right-aligned."""
    run_python(store_dir, "print('a' * 70_000)")
    run_python(store_dir, "print('b' * 700_000)")
    lines = cli(store_dir, "ls").stdout.decode().splitlines()
    assert lines[0].split() == [
        "SPILL",
        "SESSION",
        "TOOL",
        "BYTES",
        "LINES",
        "SAVED",
        "CREATED",
        "(UTC)",
    ]
    assert len(lines) == 3 and all(line == line.rstrip() for line in lines)
    sizes = ["BYTES", "70,001", "700,001"]  # oldest first
    ends = {line.index(size) + len(size) for line, size in zip(lines, sizes, strict=True)}
    assert len(ends) == 1


# --------------------------------------------------------------------------- gc / clean


def _session_files(store: Path) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_size) for p in (store / "default").iterdir())


def test_gc_dry_run_deletes_nothing(store_dir: Path) -> None:
    """gc --dry-run reports what it would remove and leaves every file in place."""
    for letter in "ab":
        run_python(store_dir, f"print({letter!r} * 70_000)")
    before = _session_files(store_dir)
    assert len(spills(store_dir)) == 2

    dry = cli(store_dir, "gc", "--max-files", "0", "--grace", "0", "--dry-run", "--json")
    report = json.loads(dry.stdout)
    assert set(report) == {"version", "command", "dry_run", "count", "bytes_freed", "entries"}
    assert report["dry_run"] is True and report["count"] == 2
    assert {e["reason"] for e in report["entries"]} == {"max_files"}
    assert set(report["entries"][0]) == {
        "spill_id",
        "session",
        "name",
        "bytes",
        "reason",
        "created_at",
        "created",
    }
    assert _session_files(store_dir) == before
    assert len(spills(store_dir)) == 2

    done = json.loads(cli(store_dir, "gc", "--max-files", "0", "--grace", "0", "--json").stdout)
    assert done["dry_run"] is False and done["count"] == 2
    assert done["bytes_freed"] == report["bytes_freed"] == 2 * 70_001
    assert spills(store_dir) == []


def test_clean_refuses_without_yes_and_a_terminal(store_dir: Path) -> None:
    """clean without --yes on a pipe refuses in one line; with --yes it empties one session."""
    run_python(store_dir, "print('k' * 70_000)")
    run_python(store_dir, "print('k' * 70_000)", "--session", "keep")
    assert "--yes" in one_error_line(cli(store_dir, "clean"))
    assert len(spills(store_dir)) == 1

    report = json.loads(cli(store_dir, "clean", "--yes", "--json").stdout)
    assert report["command"] == "clean" and report["count"] == 1
    assert report["entries"][0]["reason"] == "session"
    assert spills(store_dir) == []
    assert len(spills(store_dir, "--session", "keep")) == 1


@pytest.mark.parametrize(("answer", "status", "left"), [(b"n\n", 1, 1), (b"y\n", 0, 0)])
def test_clean_asks_on_a_terminal(store_dir: Path, answer: bytes, status: int, left: int) -> None:
    """On a terminal clean asks first, and removes only on yes."""
    run_python(store_dir, "print('q' * 70_000)")
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer)
        result = cli(store_dir, "clean", stdin=follower)
    finally:
        os.close(follower)
        os.close(leader)
    assert result.returncode == status
    assert b"Remove 1 spill(s)" in result.stderr
    assert len(spills(store_dir)) == left


# --------------------------------------------------------------------------- demo / help


def test_demo_finds_the_needle(store_dir: Path) -> None:
    """The demo shows a pointer, then finds and reads the buried failure, and cleans up."""
    result = cli(store_dir, "demo")
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "[spillstore] The output of tool pytest" in text
    assert "37411:tests/test_checkout.py::test_refund_after_partial_capture FAILED" in text
    assert text.count("refund of 19.99 EUR sent twice") == 2  # grep hit, then the read
    root = re.search(r"Temporary store: (\S+),", text)
    assert root is not None and not Path(root.group(1)).exists()


def test_help_lists_every_command(store_dir: Path) -> None:
    """--help names every command and exits 0."""
    result = cli(store_dir, "--help")
    assert result.returncode == 0
    for command in ("run", "read", "grep", "ls", "show", "rm", "gc", "clean", "demo"):
        assert f"  {command} " in result.stdout.decode()


def test_run_without_a_terminal_passes_an_interrupt_on_and_saves_the_output(
    store_dir: Path,
) -> None:
    """``spillstore run`` interrupted by a parent that is not a terminal (the signal
    reaches spillstore alone, as from ``kill -INT`` or an agent harness) hands the
    interrupt to the command, saves what it printed and exits with 130."""
    started = store_dir.parent / "started"
    code = (
        f"import sys, time\nprint('started', flush=True)\nopen({str(started)!r}, 'w').close()\n"
        "for i in range(600):\n    print('line', i, flush=True)\n    time.sleep(0.1)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "spillstore._cli", "run", "--", sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=_env(store_dir),
        start_new_session=True,  # no terminal: only spillstore gets the signal
    )
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 60  # the command is running and printing
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    assert out.decode().endswith("killed by signal SIGINT\n")
    assert b"started" in out


def test_run_with_a_store_that_cannot_be_opened_still_runs_and_shows_a_preview(
    store_dir: Path,
) -> None:
    """A store that cannot be opened (a catalog that is not a database; a full disk gives
    the same ``StoreError``) does not stop ``run``: the command runs, its status is
    kept, the model's view says the output was NOT saved, with one warning line."""
    assert cli(store_dir, "ls").returncode == 0
    (store_dir / "catalog.sqlite3").write_bytes(b"not a database " * 1_000)
    result = run_python(
        store_dir, "print('w\\n' * 60000)\nraise SystemExit(3)", "--max-bytes", "4KB"
    )
    assert result.returncode == 3
    out = result.stdout.decode()
    assert "NOT saved" in out and "not a database" in out
    assert out.endswith("exit code 3\n")
    assert len(out.encode()) <= 4_000
    [warning] = result.stderr.decode().splitlines()
    assert warning.startswith("spillstore: warning: the store cannot be used")


@pytest.mark.parametrize(
    ("signals", "died_of"), [([signal.SIGINT], -signal.SIGINT), ([signal.SIGINT] * 2, -9)]
)
def test_a_signal_before_the_command_starts_reaches_it_once_it_has(
    signals: list[int], died_of: int
) -> None:
    """``spillstore run`` handles signals from before it starts the command: one that
    came in between is passed to the command once it runs (it would otherwise be left
    running with nobody reading it); two interrupts kill it, as two Ctrl-C do."""
    from spillstore._cli.run import _Forwarder

    forward = _Forwarder()
    for signum in signals:
        forward(signum, None)  # delivered before the command exists
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        forward.attach(proc)
        assert proc.wait(timeout=30) == died_of
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
