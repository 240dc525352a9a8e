"""Fixtures and helpers shared by the store tests (import them into a test module).

The ``store`` fixture is parametrized over every backend; a new backend (S3) joins the
contract suite by adding one entry to :data:`BACKENDS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

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
    from tests.stores.s3_fixtures import make_s3_store  # on use: it is a pytest plugin as well

    return make_s3_store(tmp_path, **kwargs)  # type: ignore[arg-type]


BACKENDS: dict[str, Callable[..., Store]] = {"memory": _memory, "local": _local, "s3": _s3}


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock starting at a fixed epoch time."""
    return FakeClock()


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> StoreFactory:
    """A factory for the parametrized backend; keyword arguments go to the store."""

    def factory(**kwargs: object) -> Store:
        kwargs.setdefault("clock", clock)
        return BACKENDS[request.param](tmp_path, **kwargs)

    return factory


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    """A store of each backend, with the fake clock."""
    return make_store()


@pytest.fixture
def local_store(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """A local store on a fresh directory, with the fake clock."""
    return LocalStore(tmp_path / "spills", clock=clock)


@pytest.fixture
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio only."""
    return "asyncio"


@pytest.fixture
def umask0() -> Iterator[None]:
    """Run with umask 000, so only explicit modes protect files."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def files_under(root: Path) -> list[str]:
    """Every file name under ``root`` (relative), sorted."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
