"""The typed Python shells (read, grep, list and their async twins) match the argument models."""

from __future__ import annotations

import inspect

import pytest

from spillstore._tools.args import GrepArgs, ListArgs, ReadArgs, ToolArgs
from spillstore._tools.spill_tools import SpillTools

SHELLS = [("read", ReadArgs), ("grep", GrepArgs), ("list", ListArgs)]


@pytest.mark.parametrize(("name", "model"), SHELLS)
def test_shell_signature_restates_the_model_exactly(name: str, model: type[ToolArgs]) -> None:
    """Each shell takes the model's fields, in the model's order, with the model's defaults."""
    parameters = list(inspect.signature(getattr(SpillTools, name)).parameters.values())[1:]
    assert [p.name for p in parameters] == list(model.model_fields)
    for parameter in parameters:
        field = model.model_fields[parameter.name]
        if field.is_required():
            assert parameter.default is inspect.Parameter.empty, parameter.name
        else:
            assert parameter.default == field.default, parameter.name
