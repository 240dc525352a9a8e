"""Confinement: an adversarial corpus against Read/Grep/List; nothing outside the store leaks.

Every case must come back as a short model-facing error (no traceback), never hang, and
never return a byte of the canary file that sits outside the store.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spillstore._content import ToolResult
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from spillstore._tools.spill_tools import SpillTools

CANARY = "CANARY-5f0c1d9a-this-must-never-reach-the-model"
SESSION = "default"
SPILL_TEXT = b"".join(b"spill line %04d \xe2\x82\xac\n" % i for i in range(400))
HANG_SECONDS = 20


@dataclass
class World:
    """A store with one spill, and a canary outside it."""

    tmp: Path
    root: Path
    store: LocalStore
    tools: SpillTools
    spill_id: str
    data_path: Path
    canary: Path
    outside: Path

    @property
    def session_dir(self) -> Path:
        return self.root / SESSION

    def sibling(self, suffix: str) -> Path:
        return self.data_path.with_name(f"{self.spill_id}.{suffix}")


@pytest.fixture
def world(tmp_path: Path) -> World:
    """A local store holding one spill, and an outside directory with a canary file."""
    root = tmp_path / "spills"
    store = LocalStore(root)
    meta = store.put(SPILL_TEXT, session=SESSION, tool_name="bash", tool_call_id="call_1")
    assert meta.path is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    # Same size as the spill's data, so a size check alone would not catch a swap.
    body = (CANARY + "\n").encode()
    canary.write_bytes((body * (len(SPILL_TEXT) // len(body) + 1))[: len(SPILL_TEXT)])
    return World(
        tmp=tmp_path,
        root=Path(store.root),
        store=store,
        tools=SpillTools(store),
        spill_id=meta.spill_id,
        data_path=Path(meta.path),
        canary=canary,
        outside=outside,
    )


def bounded(call: Callable[[], ToolResult]) -> ToolResult:
    """Run ``call`` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: list[ToolResult | BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # reported below
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_SECONDS)
    assert not thread.is_alive(), "the tool call hung"
    (outcome,) = box
    assert not isinstance(outcome, BaseException), f"the tool raised {outcome!r}"
    return outcome


def text_of(result: ToolResult) -> str:
    """The single text part of a result, checked to be spill-exempt."""
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def assert_refused(result: ToolResult) -> str:
    """The result is a short error with no traceback and no canary."""
    text = text_of(result)
    assert result.is_error, text
    assert CANARY not in text
    assert "Traceback" not in text and 'File "' not in text
    assert len(text.encode()) < 600, text
    return text


def every_tool(tools: SpillTools, spill: str) -> Iterator[ToolResult]:
    """Read (lines and bytes) and Grep (content and count) of one spill argument."""
    yield bounded(lambda: tools.read(spill))
    yield bounded(lambda: tools.read(spill, byte_offset=0, max_bytes=100_000))
    yield bounded(lambda: tools.grep("CANARY", spill))
    yield bounded(lambda: tools.grep(".", spill, output_mode="count"))
    yield bounded(lambda: tools.call("read_spill", {"spill": spill, "offset": -1}))


def assert_all_refused(tools: SpillTools, spill: str) -> list[str]:
    """Every tool refuses ``spill``."""
    return [assert_refused(result) for result in every_tool(tools, spill)]


# --------------------------------------------------------------------------- path strings


def dotdot_paths(w: World) -> list[str]:
    """``..`` at the start, in the middle, after the file name and at the end."""
    root, sid = str(w.root), w.spill_id
    return [
        "..",
        "../",
        "../outside/canary.txt",
        "../../etc/passwd",
        f"{root}/..",
        f"{root}/../outside/canary.txt",
        f"{root}/{SESSION}/..",
        f"{root}/{SESSION}/../../outside/canary.txt",
        f"{root}/{SESSION}/{sid}.out/..",
        f"{root}/{SESSION}/{sid}.out/../../../outside/canary.txt",
        f"{root}/{SESSION}/../{SESSION}/../../outside/canary.txt",
        f"{root}/./{SESSION}/./../../outside/canary.txt",
        f"{sid}/../../outside/canary.txt",
        f"{SESSION}/../../outside/canary.txt",
        f"{root}/{SESSION}/{sid}.out/../../{SESSION}/../../outside/canary.txt",
        f"{root}//{SESSION}//..//..//outside//canary.txt",
    ]


def elsewhere_paths(w: World) -> list[str]:
    """Absolute paths outside the store, home and URL forms, percent-encoded dots."""
    root = str(w.root)
    return [
        "/etc/passwd",
        "/",
        "/proc/self/environ",
        "/dev/zero",
        str(w.canary),
        str(w.outside),
        "~",
        "~/canary.txt",
        "~root/.bashrc",
        f"file://{w.canary}",
        "file:///etc/passwd",
        f"file://{w.data_path}",
        "%2e%2e/%2e%2e/outside/canary.txt",
        f"{root}/{SESSION}/%2e%2e/%2e%2e/outside/canary.txt",
        f"{root}/%2e%2e/outside/canary.txt",
        f"{root}/{SESSION}/..%2f..%2foutside%2fcanary.txt",
        "\\..\\..\\outside\\canary.txt",
        str(w.root),
        str(w.session_dir),
        str(w.sibling("json")),
        str(w.sibling("idx")),
    ]


def test_dotdot_in_every_position_is_refused(world: World) -> None:
    """Paths with .. anywhere are refused by every tool."""
    for path in dotdot_paths(world):
        for text in assert_all_refused(world.tools, path):
            assert "spill" in text


def test_paths_elsewhere_home_urls_and_encodings_are_refused(world: World) -> None:
    """Absolute paths elsewhere, ~, file:// and %2e%2e are refused; nothing is decoded."""
    for path in elsewhere_paths(world):
        assert_all_refused(world.tools, path)


def test_nul_bytes_and_very_long_paths_are_refused(world: World) -> None:
    """NUL bytes and 5,000-character paths are refused without touching the filesystem."""
    data_path = str(world.data_path)
    for path in [
        data_path + "\x00.txt",
        "\x00",
        world.spill_id + "\x00",
        "\x00" + data_path,
        "a/" * 2500,
        "/" + "x" * 4999,
        f"{world.root}/{SESSION}/" + "y" * 5000 + ".out",
        "/" + "z/" * 2000,  # 4,001 characters: passes the length check, then refused
    ]:
        assert_all_refused(world.tools, path)
    assert assert_refused(world.tools.read(data_path + "\x00")).startswith(
        "refused: a spill id or path never contains a NUL byte"
    )


def test_prefix_sibling_directories_are_refused(world: World) -> None:
    """A sibling directory whose name starts with the root's name is not the store."""
    sibling_root = world.root.with_name(world.root.name + "-evil")
    shutil.copytree(world.root, sibling_root, symlinks=True)
    evil = sibling_root / SESSION / world.data_path.name
    evil.write_bytes(world.canary.read_bytes())
    sibling_session = world.root / (SESSION + "-evil")
    sibling_session.mkdir(mode=0o700)
    shutil.copy(world.data_path, sibling_session / world.data_path.name)
    (sibling_session / world.data_path.name).write_bytes(world.canary.read_bytes())
    for path in (str(evil), str(sibling_session / world.data_path.name)):
        assert_all_refused(world.tools, path)
    assert_refused(world.tools.list(session=SESSION + "-evil"))
    assert CANARY not in text_of(world.tools.grep("CANARY"))


# --------------------------------------------------------------------------- links


def test_symlinks_out_of_the_store_are_refused(world: World) -> None:
    """Symlinks to a file or a directory outside, chains of three and relative links."""
    session = world.session_dir
    fake = "bash-" + "f" * 20
    links = {
        session / f"{fake}.out": world.canary,  # a spill-like name pointing out
        world.root / "outdir": world.outside,  # a directory link
        session / "rel.out": Path("../../outside/canary.txt"),  # relative
        session / "chain1": session / "chain2",
        session / "chain2": session / "chain3",
        session / "chain3": world.canary,
    }
    for link, target in links.items():
        link.symlink_to(target)
    for path in [
        session / f"{fake}.out",
        world.root / "outdir" / "canary.txt",
        world.root / "outdir",
        session / "rel.out",
        session / "chain1",
    ]:
        assert_all_refused(world.tools, str(path))
    assert_refused(world.tools.read(fake))
    assert CANARY not in text_of(world.tools.grep("CANARY"))


def test_spill_data_file_swapped_for_a_symlink_is_refused(world: World) -> None:
    """A spill whose data file became a symlink (sidecar intact) is refused by id and path."""
    world.data_path.unlink()
    world.data_path.symlink_to(world.canary)
    for spill in (world.spill_id, str(world.data_path)):
        texts = assert_all_refused(world.tools, spill)
        assert any("cannot be read" in t or "not a spill" in t for t in texts)
    assert CANARY not in text_of(world.tools.grep("CANARY"))
    assert CANARY not in text_of(world.tools.list())


def test_session_directory_replaced_by_a_symlink_is_refused(world: World) -> None:
    """A session directory swapped for a symlink to a look-alike outside is refused."""
    fake_session = world.outside / "fake-session"
    shutil.copytree(world.session_dir, fake_session)
    (fake_session / world.data_path.name).write_bytes(world.canary.read_bytes())
    real = world.root / "moved-away"
    world.session_dir.rename(real)
    world.session_dir.symlink_to(fake_session, target_is_directory=True)
    for spill in (world.spill_id, str(world.data_path)):
        assert_all_refused(world.tools, spill)
    for result in (world.tools.grep("CANARY"), world.tools.list()):
        assert CANARY not in text_of(result)
        assert "Traceback" not in text_of(result)


def test_hardlinks_to_foreign_files_are_refused(world: World) -> None:
    """A data file that is a hard link to a foreign file is refused, even one with a
    sidecar of the files layout made to match it (only catalog rows make spills)."""
    sidecar = world.store.stat(world.spill_id).model_dump(mode="json")
    world.data_path.unlink()
    os.link(world.canary, world.data_path)
    assert_all_refused(world.tools, world.spill_id)
    forged = "bash-" + "0" * 20
    sidecar.update(spill_id=forged, path=str(world.session_dir / f"{forged}.out"))
    os.link(world.canary, world.session_dir / f"{forged}.out")
    (world.session_dir / f"{forged}.json").write_text(json.dumps(sidecar), encoding="utf-8")
    assert_all_refused(world.tools, forged)
    assert CANARY not in text_of(world.tools.grep("CANARY"))


# --------------------------------------------------------------------------- special files


def _replace_data(world: World, make: Callable[[Path], None]) -> None:
    world.data_path.unlink()
    make(world.data_path)


def test_fifo_in_place_of_the_data_file_does_not_hang(world: World) -> None:
    """A FIFO as the data file (no writer) is refused at once: O_NONBLOCK + regular-file check."""
    _replace_data(world, lambda p: os.mkfifo(p, 0o600))
    for spill in (world.spill_id, str(world.data_path)):
        assert_all_refused(world.tools, spill)
    outside_fifo = world.outside / "fifo"
    os.mkfifo(outside_fifo, 0o600)
    assert_all_refused(world.tools, str(outside_fifo))
    across = bounded(lambda: world.tools.grep("line"))
    assert not across.is_error
    assert f"spill {world.spill_id} was not searched: it cannot be read" in text_of(across)


def test_socket_in_place_of_the_data_file_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unix socket as the data file is refused."""
    world.data_path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        monkeypatch.chdir(world.data_path.parent)  # a socket path is limited to ~107 bytes
        server.bind(world.data_path.name)
        for spill in (world.spill_id, str(world.data_path)):
            assert_all_refused(world.tools, spill)
    finally:
        server.close()


def test_devices_are_refused(world: World) -> None:
    """/dev/zero by path, and a device or device symlink as the data file, are refused."""
    assert_all_refused(world.tools, "/dev/zero")
    _replace_data(world, lambda p: p.symlink_to("/dev/zero"))
    assert_all_refused(world.tools, world.spill_id)
    world.data_path.unlink()
    try:
        os.mknod(world.data_path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    except PermissionError:
        return  # creating device nodes needs privileges; the symlink case covered it
    for spill in (world.spill_id, str(world.data_path)):
        assert_all_refused(world.tools, spill)


# --------------------------------------------------------------------------- numbers

BAD_NUMBERS: list[object] = [True, False, 1.0, 5.5, float("nan"), float("inf"), "5", "1e3", 2**63]


def test_bad_numbers_are_refused_everywhere(world: World) -> None:
    """Bools, floats, NaN, strings and 2**63 as any integer argument are refused."""
    fields = {
        "read_spill": ["offset", "limit", "byte_offset", "max_bytes"],
        "grep_spill": ["context", "before", "after", "head_limit", "offset"],
        "list_spills": ["offset", "limit"],
    }
    base = {
        "read_spill": {"spill": world.spill_id},
        "grep_spill": {"pattern": "x", "spill": world.spill_id},
        "list_spills": {},
    }
    for tool, names in fields.items():
        for name in names:
            for value in BAD_NUMBERS:
                text = assert_refused(world.tools.call(tool, {**base[tool], name: value}))
                assert text.startswith(f"invalid arguments for {tool}: {name}: ")
    nan_json = '{"spill": "' + world.spill_id + '", "offset": NaN}'
    assert_refused(world.tools.call("read_spill", nan_json))
    assert_refused(world.tools.read(world.spill_id, offset=True))
    assert_refused(world.tools.read(world.spill_id, byte_offset=-1))
    assert_refused(world.tools.read(world.spill_id, offset=2**63))
    assert_refused(world.tools.grep("x", world.spill_id, head_limit=-1))
    for flag in ("ignore_case", "literal"):
        assert_refused(world.tools.call("grep_spill", {"pattern": "x", flag: 1}))
        assert_refused(world.tools.call("grep_spill", {"pattern": "x", flag: "true"}))
    assert_refused(world.tools.call("read_spill", {"spill": 12345}))
    assert_refused(world.tools.call("read_spill", {"spill": None}))


def test_offsets_past_the_end_and_inside_characters(world: World) -> None:
    """Past-EOF offsets are refused; a mid-character byte_offset moves to the next one."""
    lines = SPILL_TEXT.count(b"\n")
    assert_refused(world.tools.read(world.spill_id, offset=lines + 1))
    assert_refused(world.tools.read(world.spill_id, offset=2**53 - 1))
    assert_refused(world.tools.read(world.spill_id, byte_offset=len(SPILL_TEXT)))
    assert_refused(world.tools.read(world.spill_id, byte_offset=2**53 - 1))
    euro = SPILL_TEXT.index("€".encode())
    result = world.tools.read(world.spill_id, byte_offset=euro + 1, max_bytes=20)
    assert not result.is_error
    assert f"showing from the next character boundary, byte {euro + 3}" in text_of(result)


# --------------------------------------------------------------------------- sessions, memory


def test_sessions_cannot_be_escaped(world: World) -> None:
    """List and Read stay in the tools' session; session names cannot carry paths."""
    other = world.store.put(b"other\n", session="other", tool_name="t", tool_call_id="c")
    assert_refused(world.tools.read(other.spill_id))
    assert_refused(world.tools.list(session="other"))
    roaming = SpillTools(world.store, cross_session=True)
    for session in ("../outside", "..", "a/b", "/etc", "%2e%2e"):
        assert_refused(roaming.list(session=session))
        assert_refused(world.tools.list(session=session))


def test_memory_store_refuses_every_path() -> None:
    """A memory store has no files: every path is refused, ids still work."""
    store = MemoryStore()
    meta = store.put(b"hello\n", session=SESSION, tool_name="t", tool_call_id="c")
    tools = SpillTools(store)
    for path in ("/etc/passwd", "../x", f"/tmp/{meta.spill_id}.out", "~/x"):
        assert_all_refused(tools, path)
    assert not tools.read(meta.spill_id).is_error


# --------------------------------------------------------------------------- the swap race


def test_swapping_the_data_file_for_a_symlink_while_reading_leaks_nothing(
    world: World,
) -> None:
    """10,000 swaps of the data file for a canary symlink during reads: 0 canary bytes out."""
    saved = world.data_path.with_name("saved-data")
    evil = world.data_path.with_name("evil-link")
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        try:
            for _ in range(10_000):
                os.replace(world.data_path, saved)
                evil.symlink_to(world.canary)
                os.replace(evil, world.data_path)
                os.replace(saved, world.data_path)
                swaps += 1
        finally:
            stop.set()

    thread = threading.Thread(target=swapper)
    thread.start()
    calls = [
        lambda: world.tools.read(world.spill_id, offset=-5),
        lambda: world.tools.read(str(world.data_path), byte_offset=0, max_bytes=500),
        lambda: world.tools.grep("CANARY|spill line 0399", world.spill_id),
        lambda: world.tools.grep("line", output_mode="count"),
    ]
    reads = refused = 0
    while not stop.is_set():
        for call in calls:
            result = call()
            text = text_of(result)
            assert CANARY not in text
            assert "Traceback" not in text
            reads += 1
            refused += result.is_error
    thread.join()
    assert swaps == 10_000
    assert reads > 0
    # Afterwards the spill is intact and readable again.
    final = world.tools.read(world.spill_id, offset=-1)
    assert not final.is_error and "spill line 0399" in text_of(final)
