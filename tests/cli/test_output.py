"""The CLI's plain-text table: columns measured in terminal cells, two spaces apart."""

from __future__ import annotations

from spillstore._cli.output import table


def test_columns_align_by_terminal_cells() -> None:
    """A wide character counts two cells; right columns align right; lines end stripped."""
    text = table([["\U0001f600x", "7"], ["abc", "1234"]], header=["ID", "N"], right=frozenset({1}))
    assert text.splitlines() == ["ID      N", "\U0001f600x     7", "abc  1234"]


def test_no_rows_and_no_header_is_empty() -> None:
    """Nothing to show prints nothing."""
    assert table([], right=frozenset()) == ""
