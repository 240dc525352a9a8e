"""The store backends the tests run over, and the fake clock they share (no fixtures here).

:data:`BACKENDS` maps a backend's name to a factory ``(tmp_path, **store_kwargs) ->
Store``; the ``make_any_store`` fixture (tests/conftest.py) is parametrized over it, so a
new backend joins the contract suite by adding one entry. The S3 factory imports
tests/stores/s3_server.py on use, so a run without S3 tests never imports obstore or
moto.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from spillstore._stores.base import Store
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore


class FakeClock:
    """A settable clock: ``clock()`` returns ``now``; ``advance`` moves it forward."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


StoreFactory = Callable[..., Store]


def _memory(tmp_path: Path, **kwargs: object) -> Store:
    return MemoryStore(**kwargs)  # type: ignore[arg-type]


def _local(tmp_path: Path, **kwargs: object) -> Store:
    return LocalStore(tmp_path / "spills", **kwargs)  # type: ignore[arg-type]


def _s3(tmp_path: Path, **kwargs: object) -> Store:
    from tests.stores.s3_server import make_s3_store

    return make_s3_store(tmp_path, **kwargs)  # type: ignore[arg-type]


BACKENDS: dict[str, Callable[..., Store]] = {
    "memory": _memory,
    "local": _local,
    "s3": _s3,
}
