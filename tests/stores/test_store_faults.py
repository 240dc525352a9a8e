"""LocalStore under faults: failing syscalls, a full disk, and writers killed with -9."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import spillstore._stores.local as local_module
import spillstore._stores.local_catalog as local_catalog_module
import spillstore._stores.local_files as local_files_module
import spillstore._stores.local_marks as local_marks_module
import spillstore._stores.local_migrate as local_migrate_module
import spillstore._stores.local_sink as local_sink_module
from spillstore._errors import SpillNotFound, StoreError
from spillstore._stores.local import LocalStore
from spillstore._stores.local_marks import CATALOG_FILES
from tests.stores.small_fs import tmpfs

KW = {"session": "s1", "tool_name": "bash", "tool_call_id": "call-1"}
SMALL = b"".join(b"small line %d\n" % n for n in range(200))
LARGE = b"".join(b"large line %07d\n" % n for n in range(200_000))  # 3.6 MB: threaded path
LOCAL_MODULES = (
    local_module,
    local_files_module,
    local_sink_module,
    local_catalog_module,
    local_marks_module,
    local_migrate_module,
)
"""The local store's own modules: the system calls of writing, publishing, reading and
removing a spill go through their ``os`` (reading an adopted file goes through
``_stores.writer.copy_fd``, and is not faulted here)."""


def _use_os(monkeypatch: pytest.MonkeyPatch, fake: object) -> None:
    for module in LOCAL_MODULES:
        monkeypatch.setattr(module, "os", fake)


class FaultyOs:
    """Stands in for the ``os`` module inside the local store's modules; fails one call."""

    def __init__(self, name: str, at: int, err: int) -> None:
        self.name = name
        self.at = at
        self.err = err
        self.calls = 0

    def __getattr__(self, attr: str) -> Any:
        value = getattr(os, attr)
        if attr != self.name:
            return value

        def failing(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == self.at:
                raise OSError(self.err, os.strerror(self.err))
            return value(*args, **kwargs)

        return failing


BOOKKEEPING = {".gc.lock", ".spillstore", ".session", *CATALOG_FILES}
"""The store's own files (the root's marker, the cleaner lock, session markers)."""
STORE_CLASSES = pytest.mark.parametrize("store_class", [LocalStore], ids=["catalog"])


def _files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if not p.is_dir() and p.name not in BOOKKEEPING)


def _put(store: LocalStore, data: bytes) -> Any:
    return store.put(
        [data[i : i + 500_000] for i in range(0, len(data), 500_000)],
        **KW,
        retention_bytes=None,
    )


@STORE_CLASSES
@pytest.mark.parametrize("data", [SMALL, LARGE], ids=["inline", "threaded"])
@pytest.mark.parametrize("call", ["write", "fsync", "link"])
def test_failing_syscall_leaves_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    call: str,
    data: bytes,
    store_class: type[LocalStore],
) -> None:
    """ENOSPC/EIO/EACCES at any write, fsync or link: one StoreError, nothing left, store works."""
    root = tmp_path / "root"
    first = store_class(root)  # opening (and marking) the root is not counted
    counter = FaultyOs(call, 0, 0)
    _use_os(monkeypatch, counter)
    _put(first, data)
    total_calls = counter.calls
    assert total_calls >= 1
    errnos = [errno.ENOSPC, errno.EIO, errno.EACCES]
    for at in range(1, total_calls + 1):
        err = errnos[at % 3]
        fresh = tmp_path / f"r{at}"
        store = store_class(fresh)
        _use_os(monkeypatch, FaultyOs(call, at, err))
        with pytest.raises(StoreError) as caught:
            _put(store, data)
        assert caught.value.errno == err
        assert isinstance(caught.value.__cause__, OSError)
        _use_os(monkeypatch, os)
        assert _files(fresh) == [], (call, at)
        assert store.list() == []
        meta = _put(store, data)
        assert store.read_bytes(meta.spill_id, 0, meta.total_bytes) == data


def test_real_full_disk(tmp_path: Path) -> None:
    """On a real 1 MiB tmpfs, a 2 MiB spill fails cleanly and the store works after."""
    mount = tmp_path / "mnt"
    with tmpfs(mount, "1m"):
        store = LocalStore(mount / "root")
        big = b"x" * (2 << 20)
        with pytest.raises(StoreError) as caught:
            store.put(big, **KW, retention_bytes=None)
        assert caught.value.errno == errno.ENOSPC
        assert _files(mount) == []
        assert store.list() == []
        meta = store.put(b"fits\n", **KW)
        assert store.read_bytes(meta.spill_id, 0, 5) == b"fits\n"
        capped = store.put(big, **{**KW, "tool_call_id": "2"}, retention_bytes=100_000)
        assert capped.total_bytes == 2 << 20 and capped.stored_bytes == 100_000


# --------------------------------------------------------------------------- kill -9

HOOKED = ("open", "write", "fsync", "link", "unlink", "close", "mkdir", "replace")
KILL_DATA = b"".join(b"kill test line %05d\n" % n for n in range(1500))
KILL_CHUNKS = [KILL_DATA[i : i + 1000] for i in range(0, len(KILL_DATA), 1000)]


class _Handshake:
    """Stands in for ``os`` in the child: stops before and after each hooked call."""

    def __init__(self, point_w: int, go_r: int) -> None:
        self.point_w = point_w
        self.go_r = go_r

    def _wait(self) -> None:
        os.write(self.point_w, b"p")
        os.read(self.go_r, 1)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(os, attr)
        if attr not in HOOKED:
            return value

        def hooked(*args: Any, **kwargs: Any) -> Any:
            self._wait()
            try:
                return value(*args, **kwargs)
            finally:
                self._wait()

        return hooked


def _fork(target: Callable[[], None]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            target()
            code = 0
        finally:
            os._exit(code)
    return pid


def run_until(prepare: Callable[[], Callable[[], object]], kill_at: int | None) -> tuple[int, bool]:
    """Run a child: ``prepare()`` unhooked, then the step it returns with every system
    call of the local store's modules hooked; kill it at handshake point ``kill_at``.
    Return (points, killed)."""
    point_r, point_w = os.pipe()
    go_r, go_w = os.pipe()

    def child() -> None:
        os.close(point_r)
        os.close(go_w)
        step = prepare()
        handshake = _Handshake(point_w, go_r)
        for module in LOCAL_MODULES:
            module.os = handshake  # type: ignore[assignment]
        step()
        os.write(point_w, b"E")

    pid = _fork(child)
    os.close(point_w)
    os.close(go_r)
    points, killed = 0, False
    try:
        while os.read(point_r, 1) == b"p":
            if kill_at is not None and points == kill_at:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            points += 1
            os.write(go_w, b"g")
    finally:
        os.close(point_r)
        os.close(go_w)
        _, status = os.waitpid(pid, 0)
    if not killed:
        assert os.waitstatus_to_exitcode(status) == 0
    return points, killed


def _run_writer_until(
    root: Path, kill_at: int | None, store_class: type[LocalStore] = LocalStore
) -> tuple[int, bool]:
    """Run a writer child; kill it at handshake point ``kill_at``. Return (points, killed)."""

    def prepare() -> Callable[[], object]:
        store = store_class(root)
        return lambda: store.put(KILL_CHUNKS, **KW)

    return run_until(prepare, kill_at)


@STORE_CLASSES
def test_kill_9_at_every_point_shows_all_or_nothing(
    tmp_path: Path, store_class: type[LocalStore]
) -> None:
    """A writer killed with -9 at any of its steps leaves either no spill or the whole spill."""
    points, killed = _run_writer_until(tmp_path / "probe", None, store_class)
    assert not killed
    assert points >= 30, points
    expected_sha = hashlib.sha256(KILL_DATA).hexdigest()
    outcomes = {"none": 0, "whole": 0}
    for k in range(points + 1):
        root = tmp_path / f"k{k}"
        _, killed = _run_writer_until(root, k, store_class)
        assert killed == (k < points)
        reader = store_class(root)
        metas = reader.list()
        assert len(metas) <= 1
        if metas:
            meta = metas[0]
            assert meta.sha256 == expected_sha and meta.complete
            assert reader.read_bytes(meta.spill_id, 0, meta.total_bytes) == KILL_DATA
            assert reader.read_lines(meta.spill_id, 1500, 1).data == KILL_DATA[-21:]
            outcomes["whole"] += 1
        else:
            with pytest.raises(SpillNotFound):
                reader.stat(store_class(tmp_path / "probe").list()[0].spill_id)
            outcomes["none"] += 1
        # The dead writer's lock is gone, so gc may take its leftovers at once.
        reader.gc(grace=0)
        left = _files(root)
        if metas:
            assert left == [f"{metas[0].spill_id}.out"]
        else:
            assert left == []
    assert outcomes["none"] > 0 and outcomes["whole"] > 0
