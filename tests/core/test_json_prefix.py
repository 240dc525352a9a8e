"""An output's first bytes are judged "starts like JSON" exactly when they begin JSON
containers: every cut of a JSON document is, a numbered or bracketed log is not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore._core.json_prefix import is_json_prefix, starts_like_json
from tests.strategies import json_documents


@given(document=json_documents, data=st.data())
def test_every_cut_of_a_json_container_starts_like_json(document: str, data: st.DataObject) -> None:
    """A document cut anywhere (in a string, an escape, a number or a literal) is a prefix."""
    if document.strip()[:1] not in ("[", "{"):
        return  # a lone scalar: a cut output of one scalar gets no note
    cut = data.draw(st.integers(document.index(document.strip()[0]) + 1, len(document)))
    assert is_json_prefix(document[:cut])
    assert is_json_prefix(f"{document}\n{document[:cut]}")  # values one after another


@pytest.mark.parametrize(
    "text",
    [
        "00001 step ok\n00002 step ok\n",
        "[INFO] starting\n",
        "[2026-12-01 10:00:00] ready\n",
        '{"a": 1} trailing words',
        '"a lone string"',
        "12 34",
        "",
        " \n ",
        '{"a": fx',
    ],
)
def test_logs_and_scalars_do_not_start_like_json(text: str) -> None:
    """Text whose first byte could start JSON but whose next ones cannot is not JSON."""
    assert not is_json_prefix(text)


def test_the_probe_is_the_kept_head_in_bytes_for_str_and_bytes_alike() -> None:
    """The same bytes judged from a str and from bytes (a stream's head) agree, a 4-byte
    character cut by the probe included."""
    text = '["' + "\U0001f600" * 400 + '"]' + " tail words" * 100
    for kept in (1, 5, 6, 7, 8, 1024, 10_000):
        assert starts_like_json(text, kept) == starts_like_json(text.encode(), kept)
    junk = "[1, " + "\u00e9" * 10  # not JSON: a probe cut inside a character hides it alike
    assert [starts_like_json(junk, n) for n in range(4, 8)] == [True, True, False, False]
    assert [starts_like_json(junk.encode(), n) for n in range(4, 8)] == [True, True, False, False]
    assert starts_like_json(text, 10_000)  # judged on its first 1,024 bytes only
    assert not starts_like_json('["x"] words', 10_000)
