"""Spill ids and session names: what may name a spill."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore._core.ids import (
    is_session,
    is_spill_id,
    make_spill_id,
    sanitize_stem,
    validate_session,
)
from spillstore._errors import ConfigError


@given(name=st.text(max_size=80), call=st.text(max_size=20), session=st.just("s"))
def test_ids_are_always_valid(name: str, call: str, session: str) -> None:
    """Whatever the tool name, the id is valid, bounded and starts with a clean stem."""
    spill_id = make_spill_id(
        session=session, tool_name=name, tool_call_id=call, sha256="0" * 64, total_bytes=0,
        stored_ranges=(), suffix=None, media_notes=(),
    )  # fmt: skip
    assert is_spill_id(spill_id)
    assert spill_id.startswith(sanitize_stem(name) + "-")
    assert len(spill_id) <= 32 + 1 + 20


@pytest.mark.parametrize(
    ("name", "accepted"),
    [
        ("s1", True),
        ("A-1_b.c", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("", False),
        ("a..b", False),
        (".x", False),
        ("-x", False),
        ("a/b", False),
        ("caf\u00e9", False),
        ("a b", False),
    ],
)
def test_session_names(name: str, accepted: bool) -> None:
    """A session is 1-64 of [A-Za-z0-9._-], starting with a letter or digit, without '..'."""
    assert is_session(name) is accepted
    if accepted:
        assert validate_session(name) == name
    else:
        with pytest.raises(ConfigError, match="invalid session name"):
            validate_session(name)
