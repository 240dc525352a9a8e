"""Fixtures of the store tests: a zero umask, and S3 stores on a loopback moto server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spillstore.s3 import S3Store
from tests.stores.s3_server import BlackHole, FaultProxy, make_s3_store, moto_endpoint


@pytest.fixture
def umask0() -> Iterator[None]:
    """Run with umask 000, so only explicit modes protect files."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """The moto server's URL (one server per test session)."""
    return moto_endpoint()


@pytest.fixture
def make_s3(tmp_path: Path, s3_endpoint: str) -> Callable[..., S3Store]:
    """A factory of S3 stores on moto sharing this test's prefix (keywords go to S3Store)."""

    def make(**kwargs: Any) -> S3Store:
        kwargs.setdefault("endpoint", s3_endpoint)
        return make_s3_store(tmp_path, **kwargs)

    return make


@pytest.fixture
def s3_store(make_s3: Callable[..., S3Store]) -> S3Store:
    """An S3 store on moto with a prefix of its own."""
    return make_s3()


@pytest.fixture
def fault_proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    """A started :class:`FaultProxy` in front of the moto server (forwards everything)."""
    proxy = FaultProxy(s3_endpoint)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def black_hole() -> Iterator[BlackHole]:
    """A :class:`BlackHole` endpoint, closed at the end."""
    hole = BlackHole()
    try:
        yield hole
    finally:
        hole.close()
