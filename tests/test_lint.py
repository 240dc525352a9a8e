"""The code stays clean: ruff and mypy --strict run as part of the suite, so CI holds them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_check_is_clean() -> None:
    """ruff finds nothing in the package, tests, benchmarks and examples."""
    result = _run("ruff", "check", "spillstore", "tests", "benchmarks", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    """Every file is formatted as ruff formats it."""
    result = _run("ruff", "format", "--check", "spillstore", "tests", "benchmarks", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy --strict passes on the package."""
    result = _run("mypy", "--strict", "spillstore")
    assert result.returncode == 0, result.stdout + result.stderr
