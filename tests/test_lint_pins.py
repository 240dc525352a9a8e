"""The tools that judge the code are pinned exactly, and the suite runs with the pinned ones.

A lower bound (``ruff>=0.6``) lets a new release turn a green commit red with no code
change; an exact pin in the ``test`` extra makes a bump a commit of its own. Running the
suite with another version than the pin fails here, by name, rather than as a puzzling
lint or typing failure elsewhere.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PINNED = ("ruff", "mypy", "pytest", "hypothesis", "pyfakefs")


def _test_extra() -> dict[str, Requirement]:
    """The requirements of pyproject.toml's ``test`` extra, by name."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        extra = tomllib.load(file)["project"]["optional-dependencies"]["test"]
    return {(req := Requirement(line)).name.lower(): req for line in extra}


@pytest.mark.parametrize("tool", PINNED)
def test_the_tool_is_pinned_exactly(tool: str) -> None:
    """The test extra names one exact version of each tool that judges the code."""
    requirement = _test_extra().get(tool)
    assert requirement is not None, f"{tool} is missing from the test extra"
    (spec,) = requirement.specifier
    assert spec.operator == "==" and "*" not in spec.version, requirement


@pytest.mark.parametrize("tool", PINNED)
def test_the_installed_tool_is_the_pinned_one(tool: str) -> None:
    """The version installed is the pinned one (reinstall with ``pip install -e '.[test]'``)."""
    assert version(tool) in _test_extra()[tool].specifier, (tool, version(tool))
