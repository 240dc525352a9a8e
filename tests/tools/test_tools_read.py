"""Read (read_spill): line and byte paging, exact ranges, gaps, UTF-8, the page cap."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._content import ToolResult
from spillstore._core.ranges import Range
from spillstore._core.utf8 import continues_character, utf8_size
from spillstore._errors import ConfigError
from spillstore._settings import Settings
from spillstore._stores.base import Store
from spillstore._stores.local import LocalStore
from spillstore._stores.memory import MemoryStore
from spillstore._tools.spill_tools import (
    DEFAULT_MAX_PAGE_BYTES,
    MIN_PAGE_BYTES,
    SpillTools,
    delegate_read,
)
from tests.strategies import hostile_text

SESSION = "default"

_BYTES = re.compile(r"bytes \[(\d+), (\d+)\) of (\d+)")
_NEXT_LINE = re.compile(r"^next: read_spill\(spill=\"[^\"]+\", offset=(\d+), limit=(\d+)\)$")
_NEXT_BYTE = re.compile(r"read_spill\(spill=\"[^\"]+\", byte_offset=(\d+), max_bytes=(\d+)\)$")
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$", re.DOTALL)


def put(store: Store, data: bytes | str, **kwargs: object) -> str:
    """Store ``data`` in the test session and return its id."""
    return store.put(
        data, session=SESSION, tool_name="bash", tool_call_id="call_1", **kwargs
    ).spill_id  # type: ignore[arg-type]


def text_of(result: ToolResult) -> str:
    """The single text part of a tool result."""
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def body_lines(text: str) -> list[tuple[int, str]]:
    """The numbered lines of a line-mode page, as (number, text)."""
    out = []
    for line in text.split("\n")[1:-1]:
        found = _NUMBERED.match(line)
        if found:
            out.append((int(found.group(1)), found.group(2)))
    return out


def byte_page(text: str, data: bytes) -> tuple[int, int, bytes]:
    """Parse a byte-mode page: its exact range and the bytes shown (checked against data)."""
    start, end, _ = (int(g) for g in _BYTES.search(text.split("\n", 1)[0]).groups())  # type: ignore[union-attr]
    footer = text.rsplit("\n", 1)[1]
    body = text[: len(text) - len(footer)].encode()
    size = end - start
    candidates = (body[len(body) - size :], body[len(body) - size - 1 : len(body) - 1])
    assert data[start:end] in candidates
    return start, end, data[start:end]


def lines_of(data: bytes) -> list[bytes]:
    """The lines of data under spillstore's convention (no final empty line)."""
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    return parts


# --------------------------------------------------------------------------- line paging


def test_line_pages_reconstruct_the_output(any_store: Store) -> None:
    """Following the next-call hints from line 1 to the end yields every line exactly once."""
    data = "".join(f"{i:05d} héllo wörld €\n" for i in range(1, 3001)).encode()
    spill = put(any_store, data)
    tools = SpillTools(any_store)
    seen: list[str] = []
    offset = 1
    calls = 0
    while True:
        text = text_of(tools.read(spill, offset=offset, limit=700))
        calls += 1
        numbered = body_lines(text)
        assert numbered[0][0] == offset
        seen.extend(t for _, t in numbered)
        footer = text.rsplit("\n", 1)[1]
        if footer == "end of output":
            break
        found = _NEXT_LINE.match(footer)
        assert found, footer
        offset = int(found.group(1))
        assert offset == numbered[-1][0] + 1
    assert "\n".join(seen).encode() + b"\n" == data
    assert calls >= 5  # 700-line pages are bounded by the 16,000-byte cap


def test_header_states_exact_line_and_byte_range(any_store: Store) -> None:
    """The header names the lines shown and their exact original byte range."""
    data = b"".join(b"line %d\n" % i for i in range(1, 101))
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).read(spill, offset=10, limit=5))
    header = text.split("\n", 1)[0]
    start = data.index(b"line 10\n")
    end = data.index(b"line 15\n")
    assert header == f"spill {spill}: lines 10-14 of 100, bytes [{start}, {end}) of {len(data)}"
    assert text.rsplit("\n", 1)[1] == f'next: read_spill(spill="{spill}", offset=15, limit=5)'


def test_negative_offsets_count_from_the_end(any_store: Store) -> None:
    """offset=-1 is the last line, -3 the third from last, and too far back clamps to 1."""
    data = b"".join(b"row %d\n" % i for i in range(1, 51))
    spill = put(any_store, data)
    tools = SpillTools(any_store)
    assert body_lines(text_of(tools.read(spill, offset=-1))) == [(50, "row 50")]
    assert [n for n, _ in body_lines(text_of(tools.read(spill, offset=-3)))] == [48, 49, 50]
    text = text_of(tools.read(spill, offset=-1000, limit=2))
    assert "offset -1000 is before the first line; showing from line 1" in text
    assert [n for n, _ in body_lines(text)] == [1, 2]


def test_last_line_without_newline_ends_the_output(any_store: Store) -> None:
    """A final line without a newline is shown whole and the page says end of output."""
    spill = put(any_store, b"a\nb\nlast")
    text = text_of(SpillTools(any_store).read(spill))
    assert text.split("\n")[0] == f"spill {spill}: lines 1-3 of 3, bytes [0, 8) of 8"
    assert body_lines(text)[-1] == (3, "last")
    assert text.endswith("\nend of output")


def test_offset_past_the_end_is_a_model_error(any_store: Store) -> None:
    """An offset past the last line is a short error that says how many lines there are."""
    spill = put(any_store, b"one\ntwo\n")
    result = SpillTools(any_store).read(spill, offset=3)
    assert result.is_error
    assert text_of(result) == (
        f"offset 3 is past the end: spill {spill} has 2 lines; the last ones: "
        f'read_spill(spill="{spill}", offset=-200)'
    )


def test_empty_spill_reads_as_empty(any_store: Store) -> None:
    """An empty output reads as empty, not as an error."""
    spill = put(any_store, b"")
    result = SpillTools(any_store).read(spill)
    assert not result.is_error
    assert text_of(result) == f"spill {spill}: empty output (0 bytes, 0 lines)\nend of output"


def test_long_line_is_cut_with_exact_remaining_bytes_and_offset(any_store: Store) -> None:
    """A line over max_line_bytes is cut, saying how many bytes remain and where they start."""
    long_line = "é" * 3000  # 6,000 bytes
    data = f"short\n{long_line}\nafter\n".encode()
    spill = put(any_store, data)
    tools = SpillTools(any_store, max_line_bytes=1000)
    text = text_of(tools.read(spill))
    numbered = dict(body_lines(text))
    shown, marker = numbered[2].split(" [... cut: ", 1)
    assert shown == "é" * 500
    resume = 6 + 1000
    assert marker == (
        f'{6000 - 1000} more bytes; continue with read_spill(spill="{spill}", '
        f"byte_offset={resume})]"
    )
    assert numbered[3] == "after"
    continued = text_of(tools.read(spill, byte_offset=resume, max_bytes=10))
    assert continued.split("\n")[0].startswith(f"spill {spill}: bytes [{resume}, {resume + 10})")


def test_line_mode_max_bytes_caps_the_lines_shown(any_store: Store) -> None:
    """In line mode max_bytes bounds the bytes of lines shown; the next call continues."""
    data = b"".join(b"%03d-abcdefgh\n" % i for i in range(100))  # 13 bytes a line
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).read(spill, limit=100, max_bytes=40))
    assert [n for n, _ in body_lines(text)] == [1, 2, 3]
    assert text.endswith("offset=4, limit=100)")


# --------------------------------------------------------------------------- byte paging


def test_byte_pages_reconstruct_a_5mb_single_line(any_store: Store) -> None:
    """Byte paging through a 5 MB line without newlines reconstructs it exactly."""
    unit = "ab€😀é"  # 1+1+3+4+2 = 11 bytes, so pages end mid-character unless cut well
    data = (unit * (5_000_000 // 11)).encode()
    spill = put(any_store, data)
    tools = SpillTools(any_store, max_page_bytes=300_000)
    pieces = []
    offset = 0
    while True:
        text = text_of(tools.read(spill, byte_offset=offset, max_bytes=250_000))
        start, end, shown = byte_page(text, data)
        assert start == offset
        assert len(text.encode()) <= 300_000
        assert "line 1 of 1" in text.split("\n", 1)[0]
        shown.decode("utf-8")  # every page is whole characters
        pieces.append(shown)
        footer = text.rsplit("\n", 1)[1]
        if footer == "end of output":
            break
        found = _NEXT_BYTE.search(footer)
        assert found, footer
        offset = int(found.group(1))
        assert offset == end
    assert b"".join(pieces) == data


def test_byte_offset_inside_a_character_moves_to_the_next_boundary(any_store: Store) -> None:
    """A byte_offset in the middle of a UTF-8 sequence starts at the next character, saying so."""
    data = "€uro".encode()  # € is 3 bytes
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).read(spill, byte_offset=1))
    assert text.split("\n")[0] == f"spill {spill}: bytes [3, 6) of 6, line 1 of 1"
    assert (
        "byte_offset 1 is inside a UTF-8 character; showing from the next character "
        "boundary, byte 3"
    ) in text
    assert "\nuro\n" in text
    assert "\ufffd" not in text


def test_byte_page_ends_on_a_character_boundary(any_store: Store) -> None:
    """A byte page never ends inside a character: it stops before it."""
    data = "a€b".encode()  # a | e2 82 ac | b
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).read(spill, byte_offset=0, max_bytes=4 - 1 + 1))
    start, end, shown = byte_page(text, data)
    assert (start, end) == (0, 4)
    assert shown == "a€".encode()


def test_byte_offset_past_the_end_is_a_model_error(any_store: Store) -> None:
    """A byte_offset at or past the end is refused with the size."""
    spill = put(any_store, b"12345")
    result = SpillTools(any_store).read(spill, byte_offset=5)
    assert result.is_error
    assert text_of(result) == (
        f"byte_offset 5 is past the end: spill {spill} has 5 bytes (the last is byte 4)"
    )


def test_invalid_utf8_is_shown_with_replacement_and_said(any_store: Store) -> None:
    """Invalid UTF-8 shows as U+FFFD with a note, in both modes, and stays within the cap."""
    data = b"ok\n\xff\xfe bad \xc3\n" + b"\xff" * 5000 + b"\n"
    spill = put(any_store, data)
    tools = SpillTools(any_store, max_page_bytes=MIN_PAGE_BYTES, max_line_bytes=1000)
    lines = text_of(tools.read(spill))
    assert "\ufffd\ufffd bad \ufffd" in lines
    assert "invalid UTF-8 bytes are shown as U+FFFD" in lines
    assert len(lines.encode()) <= MIN_PAGE_BYTES
    raw = text_of(tools.read(spill, byte_offset=15, max_bytes=4000))
    assert "invalid UTF-8 bytes are shown as U+FFFD" in raw
    assert len(raw.encode()) <= MIN_PAGE_BYTES


_not_utf8 = st.lists(
    st.sampled_from(
        [b"\x80", b"\xbf", b"\xff", b"\xe2\x82", "€".encode(), "😀".encode(), b"a", b"\n"]
    ),
    min_size=1,
    max_size=30,
).map(b"".join)


@settings(max_examples=150)
@given(data=_not_utf8, max_bytes=st.integers(4, 8))
def test_byte_pages_over_invalid_utf8_always_move_forward(data: bytes, max_bytes: int) -> None:
    """Following byte-mode hints over bytes that are not UTF-8 shows bytes on every page,
    and a page says it shows U+FFFD exactly when the bytes it shows are not UTF-8."""
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY)
    offset = 0
    for _ in range(len(data) + 1):
        text = text_of(tools.read(spill, byte_offset=offset, max_bytes=max_bytes))
        start, end, _ = (int(g) for g in _BYTES.search(text.split("\n", 1)[0]).groups())  # type: ignore[union-attr]
        try:
            data[start:end].decode("utf-8")
            shown_valid = True
        except UnicodeDecodeError:
            shown_valid = False
        assert ("invalid UTF-8 bytes are shown as U+FFFD" in text) != shown_valid, text
        footer = text.rsplit("\n", 1)[1]
        if footer == "end of output":
            break
        assert end > start, text
        found = _NEXT_BYTE.search(footer)
        assert found, text
        offset = int(found.group(1))
    else:
        pytest.fail(f"no end of output after {len(data) + 1} pages")


# --------------------------------------------------------------------------- the gap


def _capped(store: Store) -> tuple[str, bytes]:
    data = b"".join(b"line %05d\n" % i for i in range(1, 20001))  # 11 bytes a line
    meta = store.put(
        data,
        session=SESSION,
        tool_name="bash",
        tool_call_id="c",
        retention_bytes=60_000,
        retained_tail_bytes=20_000,
    )
    assert meta.stored_ranges == ((0, 40_000), (len(data) - 20_000, len(data)))
    return meta.spill_id, data


def test_reading_lines_in_the_gap_says_what_was_not_kept(any_store: Store) -> None:
    """Lines in the unstored gap are reported with the exact bytes and where storage resumes."""
    spill, data = _capped(any_store)
    tail_start = len(data) - 20_000
    text = text_of(SpillTools(any_store).read(spill, offset=10_000, limit=3))
    first_gap_line = 40_000 // 11 + 1
    last_gap_line = (tail_start - 1) // 11 + 1
    assert (
        f"lines {first_gap_line}-{last_gap_line} (bytes [40000, {tail_start})) were not kept "
        f"by the retention cap; showing from byte {tail_start}"
    ) in text
    numbered = body_lines(text)
    assert numbered[0][0] == last_gap_line
    start = (last_gap_line - 1) * 11
    assert numbered[0][1] == data[tail_start : start + 10].decode()
    assert numbered[1] == (last_gap_line + 1, f"line {last_gap_line + 1:05d}")


def test_a_page_stops_at_the_gap_and_names_the_resume_call(any_store: Store) -> None:
    """A page running into the gap stops at it and gives the exact call after it."""
    spill, data = _capped(any_store)
    tail_start = len(data) - 20_000
    tools = SpillTools(any_store)
    text = text_of(tools.read(spill, offset=3630, limit=200))
    footer = text.rsplit("\n", 1)[1]
    resume_line = tail_start // 11 + 1
    assert footer.startswith(
        f"lines {40_000 // 11 + 1}-{resume_line} (bytes [40000, {tail_start})) were not kept"
    )
    assert footer.endswith(
        f'the stored part resumes at line {resume_line}: read_spill(spill="{spill}", '
        f"offset={resume_line}, limit=200)"
    )
    last = body_lines(text)[-1]
    assert last[0] == 40_000 // 11 + 1  # the line the gap cuts, shown in part
    assert "which were not kept" in last[1]


def test_byte_reads_in_the_gap_resume_where_storage_resumes(any_store: Store) -> None:
    """A byte_offset in the gap says which bytes were not kept and shows from the tail."""
    spill, data = _capped(any_store)
    tail_start = len(data) - 20_000
    text = text_of(SpillTools(any_store).read(spill, byte_offset=50_000, max_bytes=22))
    assert (
        f"bytes [40000, {tail_start}) of spill {spill} were not kept (the retention cap kept "
        f"[0, 40000) and [{tail_start}, {len(data)}) of {len(data)} bytes)"
    ) in text
    start, end, _ = byte_page(text, data)
    assert (start, end) == (tail_start, tail_start + 22)


def test_byte_page_stops_at_the_gap(any_store: Store) -> None:
    """A byte page that reaches the gap stops there and points past it."""
    spill, data = _capped(any_store)
    tail_start = len(data) - 20_000
    text = text_of(SpillTools(any_store).read(spill, byte_offset=39_990, max_bytes=100))
    start, end, _ = byte_page(text, data)
    assert (start, end) == (39_990, 40_000)
    assert text.rsplit("\n", 1)[1] == (
        f"bytes [40000, {tail_start}) were not kept (retention cap); the stored part resumes "
        f'at: read_spill(spill="{spill}", byte_offset={tail_start}, max_bytes=100)'
    )


# --------------------------------------------------------------------------- the page cap

_line_pieces = st.one_of(
    hostile_text.map(lambda s: s.encode("utf-8", "surrogatepass").replace(b"\n", b" ")),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.integers(0, 9000).map(lambda n: b"x" * n),
    st.integers(0, 3000).map(lambda n: "€".encode() * n),
)
_outputs = st.lists(_line_pieces, min_size=1, max_size=40).map(b"\n".join)
_MEMORY = MemoryStore()


@settings(max_examples=150)
@given(
    data=_outputs,
    newline_end=st.booleans(),
    page=st.integers(MIN_PAGE_BYTES, 6000),
    line_cap=st.integers(16, 1000),
    offset=st.integers(-50, 50).filter(bool),
    limit=st.integers(1, 2000),
    byte_offset=st.none() | st.integers(0, 200_000),
    max_bytes=st.none() | st.integers(4, 20_000),
)
def test_a_page_never_exceeds_max_page_bytes(
    data: bytes,
    newline_end: bool,
    page: int,
    line_cap: int,
    offset: int,
    limit: int,
    byte_offset: int | None,
    max_bytes: int | None,
) -> None:
    """Whatever the output and the arguments, a Read result fits max_page_bytes (UTF-8)."""
    data = data + (b"\n" if newline_end else b"")
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY, max_page_bytes=page, max_line_bytes=min(line_cap, page // 2))
    result = tools.read(
        spill, offset=offset, limit=limit, byte_offset=byte_offset, max_bytes=max_bytes
    )
    text = text_of(result)
    assert len(text.encode()) <= page
    past_end = (byte_offset is not None and byte_offset >= len(data)) or (
        byte_offset is None and offset > len(lines_of(data))
    )
    assert result.is_error == (past_end and bool(data))
    if not result.is_error and data:
        footer = text.rsplit("\n", 1)[1]
        assert footer == "end of output" or "read_spill(" in footer
        if byte_offset is None:
            assert body_lines(text), text  # every page shows at least one line


@settings(max_examples=40)
@given(data=_outputs, page=st.integers(MIN_PAGE_BYTES, 4000))
def test_following_hints_covers_every_line_in_order(data: bytes, page: int) -> None:
    """From line 1, following next-call hints visits each line once, in order, to the end."""
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY, max_page_bytes=page, max_line_bytes=page // 4)
    expected = list(range(1, len(lines_of(data)) + 1))
    visited: list[int] = []
    offset = 1
    for _ in range(len(expected) + 1):
        text = text_of(tools.read(spill, offset=offset))
        visited.extend(n for n, _ in body_lines(text))
        footer = text.rsplit("\n", 1)[1]
        found = _NEXT_LINE.match(footer)
        if not found:
            assert footer == "end of output"
            break
        offset = int(found.group(1))
    assert visited == expected


# --------------------------------------------------------------------------- errors and ids


def test_unknown_and_malformed_ids_are_model_errors(any_store: Store) -> None:
    """An unknown id says to call list_spills; a malformed one says it is not an id."""
    tools = SpillTools(any_store)
    unknown = tools.read("bash-0123456789abcdef0123")
    assert unknown.is_error
    assert (
        text_of(unknown) == "no spill bash-0123456789abcdef0123; call list_spills to see the spills"
    )
    bad = tools.read("not an id")
    assert bad.is_error
    assert "is not a spill id or a spill path; call list_spills" in text_of(bad)


def test_expired_spill_says_expired_and_to_rerun(any_store: Store) -> None:
    """A deleted spill reads as expired, with the advice to rerun the tool."""
    spill = put(any_store, b"gone soon\n")
    any_store.delete(spill)
    result = SpillTools(any_store).read(spill)
    assert result.is_error
    text = text_of(result)
    assert "expired" in text and "deleted" in text
    assert text.endswith("rerun the tool to get its output again")
    assert "Traceback" not in text


def test_other_sessions_are_invisible_unless_allowed(any_store: Store) -> None:
    """A spill of another session reads as unknown, unless cross_session is on."""
    spill = any_store.put(b"theirs\n", session="other", tool_name="t", tool_call_id="c").spill_id
    assert SpillTools(any_store).read(spill).is_error
    assert "no spill" in text_of(SpillTools(any_store).read(spill))
    assert not SpillTools(any_store, cross_session=True).read(spill).is_error


def test_read_by_path_in_a_local_store(local_store: LocalStore) -> None:
    """A spill's absolute path reads the same page as its id."""
    meta = local_store.put(b"x\ny\n", session=SESSION, tool_name="bash", tool_call_id="c")
    assert meta.path is not None
    tools = SpillTools(local_store)
    assert text_of(tools.read(meta.path)) == text_of(tools.read(meta.spill_id))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_page_bytes": MIN_PAGE_BYTES - 1},
        {"max_page_bytes": True},
        {"max_page_bytes": 16000.0},
        {"max_line_bytes": 9000},
        {"max_column_bytes": 10},
        {"session": "../evil"},
        {"read_name": "read spill"},
        {"read_name": "same", "grep_name": "same"},
        {"cross_session": 1},
    ],
)
def test_bad_constructor_arguments_raise_config_error(kwargs: dict[str, object]) -> None:
    """Developer mistakes in the constructor raise ConfigError."""
    with pytest.raises(ConfigError):
        SpillTools(MemoryStore(), **kwargs)  # type: ignore[arg-type]


def test_store_must_be_a_store() -> None:
    """Passing something that is not a Store is a developer error."""
    with pytest.raises(ConfigError):
        SpillTools(object())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- call & schemas


def test_call_accepts_the_pointer_s_argument_names(any_store: Store) -> None:
    """The calls the service's pointer renders are valid arguments for call()."""
    spill = put(any_store, b"".join(b"%d\n" % i for i in range(500)))
    tools = SpillTools(any_store)
    by_lines = tools.call("read_spill", {"spill": spill, "offset": 201, "limit": 200})
    assert not by_lines.is_error
    by_bytes = tools.call("read_spill", {"spill": spill, "byte_offset": 100, "max_bytes": 4096})
    assert not by_bytes.is_error
    grep = tools.call("grep_spill", json.dumps({"pattern": "^42$", "spill": spill}))
    assert "43:42" in text_of(grep)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"spill": "bash-0123456789abcdef0123", "offset": True}, "offset: Input should be"),
        ({"spill": "bash-0123456789abcdef0123", "limit": 5000}, "limit: Input should be less"),
        ({"spill": "bash-0123456789abcdef0123", "offset": 0}, "offset is 1-based"),
        ({"spill": "bash-0123456789abcdef0123", "colour": 1}, "colour: Extra inputs"),
        ({}, "spill: Field required"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_call_turns_bad_arguments_into_short_errors(arguments: object, expected: str) -> None:
    """Invalid model arguments come back as a short error result, not an exception."""
    result = SpillTools(MemoryStore()).call("read_spill", arguments)  # type: ignore[arg-type]
    assert result.is_error and result.spill_exempt
    text = text_of(result)
    assert text.startswith(("invalid arguments for read_spill: ", "the arguments of read_spill"))
    assert expected in text
    assert len(text) < 400


def test_call_unknown_tool_is_an_error_result() -> None:
    """A tool name that is not one of the three is a short error listing the right names."""
    result = SpillTools(MemoryStore()).call("rm_rf", {})
    assert result.is_error
    assert (
        text_of(result)
        == 'unknown tool "rm_rf"; the spill tools are read_spill, grep_spill, list_spills'
    )


def test_schemas_in_both_shapes_with_configured_names() -> None:
    """Schemas come in the OpenAI and Anthropic shapes, with configurable names that calls use."""
    tools = SpillTools(MemoryStore(), read_name="Read", grep_name="Grep", list_name="List")
    openai = tools.schemas("openai")
    anthropic = tools.schemas("anthropic")
    assert [s["function"]["name"] for s in openai] == ["Read", "Grep", "List"]
    assert [s["name"] for s in anthropic] == ["Read", "Grep", "List"]
    for o, a in zip(openai, anthropic, strict=True):
        assert o["type"] == "function"
        assert o["function"]["parameters"] == a["input_schema"]
        assert o["function"]["description"] == a["description"]
        assert a["input_schema"]["type"] == "object"
        assert a["input_schema"]["additionalProperties"] is False
        json.dumps(o)
    read = anthropic[0]["input_schema"]
    assert read["required"] == ["spill"]
    assert set(read["properties"]) == {"spill", "offset", "limit", "byte_offset", "max_bytes"}
    assert read["properties"]["offset"]["maximum"] == 2**53 - 1
    grep = anthropic[1]["input_schema"]
    assert read["properties"]["spill"]["type"] == "string"
    assert grep["properties"]["output_mode"]["enum"] == ["content", "spills", "count"]
    with pytest.raises(ConfigError):
        tools.schemas("gemini")  # type: ignore[arg-type]
    read_result = tools.call("Read", {"spill": "x"})
    assert read_result.is_error
    assert text_of(read_result) == (
        '"x" is not a spill id or a spill path; call List to see the spills'
    )
    assert text_of(tools.call("read_spill", {"spill": "x"})) == (
        'unknown tool "read_spill"; the spill tools are Read, Grep, List'
    )


def test_results_are_spill_exempt_and_default_cap_is_under_budget(any_store: Store) -> None:
    """Every result (success or error) is spill-exempt, and a default page never needs spilling.

    design.md §5: a page of a spill far larger than the page stops at the default page cap,
    which is within the default budget, so a Read or Grep result never needs spilling.
    """
    spill = put(any_store, b"".join(b"line %06d %s\n" % (n, b"x" * 180) for n in range(5_000)))
    tools = SpillTools(any_store)
    pages = (
        tools.read(spill),
        tools.read(spill, byte_offset=0, max_bytes=1_000_000),
        tools.grep("line", spill),
    )
    for page in pages:
        size = utf8_size(text_of(page))
        assert DEFAULT_MAX_PAGE_BYTES // 2 < size <= DEFAULT_MAX_PAGE_BYTES <= Settings().max_bytes
    for result in (tools.read("nope"), tools.grep("a"), tools.list()):
        assert result.spill_exempt


# --------------------------------------------------------------------------- async, delegate


@pytest.mark.anyio
async def test_async_twins_give_the_same_results(any_store: Store) -> None:
    """aread, agrep, alist and acall return what their sync twins return."""
    spill = put(any_store, b"alpha\nbeta\ngamma\n")
    tools = SpillTools(any_store)
    assert await tools.aread(spill, offset=2) == tools.read(spill, offset=2)
    assert await tools.agrep("a$", spill) == tools.grep("a$", spill)
    assert await tools.alist() == tools.list()
    args = {"spill": spill, "byte_offset": 1}
    assert await tools.acall("read_spill", args) == tools.call("read_spill", args)


def test_delegate_read_serves_spill_paths_only(local_store: LocalStore, tmp_path: Path) -> None:
    """delegate_read returns None for an ordinary file and a Read page for a spill path."""
    meta = local_store.put(b"one\ntwo\n", session=SESSION, tool_name="bash", tool_call_id="c")
    other = tmp_path / "notes.txt"
    other.write_text("mine\n", encoding="utf-8")
    assert delegate_read(local_store, str(other)) is None
    assert delegate_read(local_store, "/etc/passwd") is None
    assert meta.path is not None
    result = delegate_read(local_store, meta.path, offset=2, limit=1)
    assert result is not None and result.spill_exempt and not result.is_error
    assert body_lines(text_of(result)) == [(2, "two")]
    assert delegate_read(MemoryStore(), meta.path) is None


@pytest.mark.parametrize(("offset", "limit"), [(1, 200), (2, 1)])
def test_a_line_whose_newline_was_not_kept_shows_its_kept_part_and_where_it_stops(
    offset: int, limit: int
) -> None:
    """A line running into the retention gap, cut by the page cap first, is shown, not a crash."""
    store = MemoryStore()
    output = "first line\n" + "x" * 100_000 + "\n" + "ok\n" * 10_000
    spill = put(store, output, retention_bytes=65_536, retained_tail_bytes=16_384)
    kept = store.stat(spill).stored_ranges
    gap_start, gap_end = kept[0][1], kept[1][0]
    result = SpillTools(store).read(spill, offset=offset, limit=limit)
    text = text_of(result)
    assert not result.is_error, text
    lines = dict(body_lines(text))
    assert lines[2].startswith("x" * 100)
    assert f"bytes [{gap_start}, {gap_end}), which were not kept" in text
    assert f"the kept bytes stop at {gap_start}" in text
    resume = int(re.search(r"byte_offset=(\d+)\)\]", text).group(1))  # type: ignore[union-attr]
    assert 11 < resume < gap_start


def _byte_pages(tools: SpillTools, spill: str, offset: int, max_bytes: int) -> list[Range]:
    """Page a spill in byte mode from ``offset`` to the end; each page's range, in order."""
    pages: list[Range] = []
    while True:
        text = text_of(tools.read(spill, byte_offset=offset, max_bytes=max_bytes))
        found = _BYTES.search(text.split("\n", 1)[0])
        assert found is not None, text
        pages.append((int(found.group(1)), int(found.group(2))))
        nxt = _NEXT_BYTE.search(text)
        if nxt is None:
            assert text.endswith("end of output")
            return pages
        assert int(nxt.group(1)) > offset, "a next-call hint moves forward"
        offset = int(nxt.group(1))


def test_stray_continuation_bytes_at_a_byte_offset_are_shown_not_skipped() -> None:
    """Reading from a stated start on stray continuation bytes shows them (as invalid)."""
    store = MemoryStore()
    data = b"a" * 1000 + b"\n" + b"\x80\x81\x82" + b"b" * 100_000
    spill = put(store, data)
    text = text_of(SpillTools(store).read(spill, byte_offset=1001, max_bytes=64))
    assert text.startswith(f"spill {spill}: bytes [1001, ")
    assert "inside a UTF-8 character" not in text
    assert "invalid UTF-8 bytes are shown as U+FFFD" in text
    assert "\ufffd\ufffd\ufffdb" in text


def test_a_byte_offset_inside_a_valid_character_starts_at_the_next_boundary() -> None:
    """An offset inside a real multi-byte character skips to its end, and says so."""
    store = MemoryStore()
    spill = put(store, "é€😀x".encode())
    for offset, boundary in [(1, 2), (3, 5), (4, 5), (6, 9), (8, 9)]:
        text = text_of(SpillTools(store).read(spill, byte_offset=offset))
        assert (
            f"inside a UTF-8 character; showing from the next character boundary, byte {boundary}"
            in text
        )
        assert text.startswith(f"spill {spill}: bytes [{boundary}, ")


@given(
    data=st.lists(
        st.sampled_from(
            [b"a", b"\n", b"\x80", b"\xc3", b"\xa9", b"\xe2\x82\xac", b"\xf0", b"\xff"]
        ),
        min_size=1,
        max_size=300,
    ).map(b"".join),
    start=st.integers(min_value=0, max_value=10_000),
    page=st.integers(min_value=4, max_value=64),
)
@settings(max_examples=150, deadline=None)
def test_paging_bytes_from_any_offset_covers_every_byte_to_the_end(
    data: bytes, start: int, page: int
) -> None:
    """Byte pages from an offset are contiguous to the end; only a real character is skipped."""
    store = MemoryStore()
    spill = put(store, data)
    start %= len(data)
    pages = _byte_pages(SpillTools(store), spill, start, page)
    first = pages[0][0]
    if first != start:
        assert continues_character(data[max(0, start - 3) : start], data[start:]) == first - start
    for (_, end), (begin, _) in itertools.pairwise(pages):
        assert begin == end
    assert pages[-1][1] == len(data)


def test_a_line_after_the_gap_mid_page_says_its_start_was_not_kept() -> None:
    """Lines shown before the gap, then the kept part resumes mid-line: the page says so."""
    store = MemoryStore()
    output = "first line\n" + "x" * 100_000 + "\n" + "ok\n" * 10_000
    spill = put(store, output, retention_bytes=65_536, retained_tail_bytes=16_384)
    text = text_of(SpillTools(store).read(spill, offset=1))
    assert "(line 4541, whose start was not kept)" in text


def test_the_pointer_hint_reads_when_the_retention_cap_kept_no_tail() -> None:
    """A 1-byte retained tail cannot hold a 3-byte character: Read still answers, exactly."""
    store = MemoryStore()
    spill = put(store, "€" * 1366, retention_bytes=4096, retained_tail_bytes=1)
    assert store.stat(spill).stored_ranges == ((0, 4095),)
    tools = SpillTools(store)
    lines = tools.read(spill, offset=1)
    assert not lines.is_error
    assert "(bytes [4095, 4098)) were not kept" in text_of(lines)
    page = text_of(tools.read(spill, byte_offset=0))
    assert "None" not in page
    assert page.endswith("bytes [4095, 4098) were not kept (retention cap); end of stored output")


def test_a_gap_inside_a_shown_line_resumes_by_byte_offset_not_the_same_call() -> None:
    """The kept part resumes inside line 1, already shown: the hint moves on by bytes."""
    store = MemoryStore()
    spill = put(
        store, "p" * 2500 + "\n" + "p" * 2500, retention_bytes=4096, retained_tail_bytes=2910
    )
    (_, head_end), (tail_start, _) = store.stat(spill).stored_ranges
    text = text_of(SpillTools(store).read(spill, offset=1))
    assert text.endswith(f"byte_offset={tail_start})")
    assert "offset=1, limit" not in text.rsplit("\n", 1)[1]
    assert head_end < tail_start < 2500
