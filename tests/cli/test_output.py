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


def test_table_cells_and_error_lines_are_printable() -> None:
    """A tool name or first line holding escape sequences, CR or a bidi override is shown
    escaped in ``ls``'s table and in one-line messages; plain text (tabs of a diff kept
    when asked) passes unchanged."""
    from spillstore._cli.output import one_line, printable, table

    shown = table([["t\x1b[2Jx", "a\u202eb\rc"]], header=["TOOL", "FIRST"], right=frozenset())
    assert "\x1b" not in shown and "\u202e" not in shown and "\r" not in shown
    assert "t\\x1b[2Jx" in shown and "a\\u202eb\\x0dc" in shown
    assert one_line("bad name 'x\x07y'\nsecond") == "bad name 'x\\x07y'; second"
    assert printable("é 😀 plain") == "é 😀 plain"
    assert printable("-a\tb\n", keep="\t\n") == "-a\tb\n"
