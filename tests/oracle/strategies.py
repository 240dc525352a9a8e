"""Random cases for the oracle: settings, outputs at the edges, chunk splits, stores.

Outputs are built from hostile pieces (4-byte characters, lone surrogates, CR, CRLF,
NUL, stray and cut UTF-8 sequences), long runs (single huge lines) and newline runs, and
are often padded to exactly one below, at, or one over the budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from spillstore import Settings
from tests.oracle.model import model_encode
from tests.strategies import HOSTILE_PIECES

NEEDLE = "QzNeedLeQz"
"""A string random pieces never spell, placed in outputs for Grep to find."""

TEXT_PIECES = (*HOSTILE_PIECES, "\r", "word ", "a", "line of text\n", "\n\n\n", NEEDLE)
BYTE_PIECES = (b"\xff", b"\x80", b"\x80\x81\x82", b"\xf0\x9f", b"\xc3", b"\xed\xa0\x80")


@st.composite
def settings(draw: st.DrawFn) -> Settings:
    """Random valid settings: budget, previews, line cap (or off), retention and its tail."""
    max_bytes = draw(st.integers(2048, 9000))
    room = max_bytes - 1536
    head = draw(st.integers(1, room - 1))
    tail = draw(st.integers(1, room - head))
    line = draw(st.one_of(st.none(), st.integers(80, 3000)))
    retention = draw(st.one_of(st.none(), st.integers(4096, 24_000)))
    kept_tail = draw(st.integers(1, (retention or 4096) - 1))
    return Settings(
        max_bytes=max_bytes,
        head_bytes=head,
        tail_bytes=tail,
        max_line_bytes=line,
        retention_bytes=retention,
        retained_tail_bytes=kept_tail,
    )


RUNS = st.tuples(
    st.sampled_from(["x", "\u00e9", "\u20ac", "\U0001f600", "\n", "ab\n", "\r\n"]),
    st.integers(1, 4000),
).map(lambda pair: pair[0] * pair[1])
"""Single huge lines, and outputs made only of newlines."""


@st.composite
def texts(draw: st.DrawFn, budget: int) -> str:
    """A str output: hostile pieces, runs and random text, often padded to the budget's edge."""
    pieces = draw(
        st.lists(
            st.one_of(
                st.sampled_from(TEXT_PIECES),
                st.text(max_size=40),
                RUNS,
            ),
            max_size=30,
        )
    )
    text = "".join(pieces)
    if draw(st.booleans()):
        size = len(model_encode(text))
        target = budget + draw(st.sampled_from([-1, 0, 1]))
        text = text + "p" * (target - size) if size < target else text
    return text


@st.composite
def raw_outputs(draw: st.DrawFn, budget: int) -> bytes:
    """A bytes output: a str output's bytes with stray, cut and invalid sequences mixed in."""
    base = model_encode(draw(texts(budget)))
    inserts = draw(
        st.lists(st.tuples(st.integers(0, len(base)), st.sampled_from(BYTE_PIECES)), max_size=6)
    )
    for position, piece in sorted(inserts, reverse=True):
        base = base[:position] + piece + base[position:]
    return base


def split_points(draw: st.DrawFn, size: int) -> list[int]:
    """Chunk boundaries for a stream: random, so some fall inside a UTF-8 character."""
    points = draw(st.lists(st.integers(0, size), max_size=12))
    if size and draw(st.booleans()):
        step = draw(st.integers(1, max(1, size // 3)))
        points += list(range(0, size, step))
    return sorted(set(points))


@dataclass(frozen=True)
class StoreChoice:
    """Which store a case runs on: memory, local, or one failing after ``fail_after`` bytes."""

    kind: str
    fail_after: int = 0


stores = st.one_of(
    st.just(StoreChoice("memory")),
    st.just(StoreChoice("local")),
    st.integers(0, 30_000).map(lambda n: StoreChoice("failing", n)),
)
