"""Suite-wide settings and the fixtures used in more than one folder.

Hypothesis: locally, it explores with fresh random seeds and remembers failures in its
example database, so a run can find new bugs. In CI (``CI`` set) the same number of
examples runs derandomized and without a database, so a green commit stays green: a
red CI run then means the code changed, not the dice.

Fixtures: a clean environment for every test (no SPILLSTORE_* variables, no real cache
dir), the stores (every backend, local, memory), the fake clock, a service on the
memory store, and anyio's backend. Fixtures used by one folder live in that folder's
conftest.py; fixtures used by one module live beside its tests.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from spillstore._service.service import TruncationService
from spillstore._stores.base import Store
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from tests.backends import BACKENDS, FakeClock, StoreFactory

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    database=None,
    print_blob=True,
)
settings.load_profile("ci" if os.environ.get("CI") else "default")

_test_numbers = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--update-snapshots``: rewrite the pointer snapshots that differ (see their test)."""
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="rewrite tests/core/snapshots/ files that differ from the output; "
        "each rewritten snapshot fails its test once, so the diff gets reviewed",
    )


@pytest.fixture(autouse=True)
def clean_spillstore_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every test runs without the machine's SPILLSTORE_* variables, on a cache of its own.

    ``XDG_CACHE_HOME`` points at a fresh path under pytest's temporary directory (made only
    when a test writes there), so a default store never touches the real
    ``~/.cache/spillstore``.
    """
    for name in list(os.environ):
        if name.upper().startswith("SPILLSTORE_"):
            monkeypatch.delenv(name)
    cache = tmp_path_factory.getbasetemp() / "xdg-cache" / str(next(_test_numbers))
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Run ``@pytest.mark.anyio`` tests on asyncio only (module scope, for module fixtures)."""
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock starting at a fixed epoch time."""
    return FakeClock()


@pytest.fixture(params=sorted(BACKENDS))
def make_any_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> StoreFactory:
    """A factory for each backend in turn; keyword arguments go to the store.

    Stores made by one test share their place (root directory, S3 prefix) unless
    ``under`` names another directory, whose name must be unique in the run.
    """

    def factory(*, under: Path | None = None, **kwargs: object) -> Store:
        kwargs.setdefault("clock", clock)
        return BACKENDS[request.param](under or tmp_path, **kwargs)

    return factory


@pytest.fixture
def any_store(make_any_store: StoreFactory) -> Store:
    """A store of each backend, with the fake clock."""
    return make_any_store()


@pytest.fixture
def local_store(tmp_path: Path, clock: FakeClock) -> LocalStore:
    """A local store on a fresh directory, with the fake clock."""
    return LocalStore(tmp_path / "spills", clock=clock)


@pytest.fixture
def memory_store() -> MemoryStore:
    """A fresh, empty memory store (the real clock)."""
    return MemoryStore()


@pytest.fixture
def memory_service(memory_store: MemoryStore) -> TruncationService:
    """A service with the default settings that spills to ``memory_store``."""
    return TruncationService(memory_store)
