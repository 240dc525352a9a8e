"""Grep (grep_spill): RE2 on bytes, line numbers from the index, modes, paging, bounds."""

from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spillstore._content import ToolResult
from spillstore._core.index import LineIndex
from spillstore._errors import RequestRefused
from spillstore._stores.base import Store
from spillstore._stores.memory import MemoryStore
from spillstore._stores.meta import SpillMeta
from spillstore._tools.regex import compile_pattern, required_literal
from spillstore._tools.scan import Haystack, iter_hits
from spillstore._tools.spill_tools import MIN_PAGE_BYTES, SpillTools

SESSION = "default"
_HIT = re.compile(r"^(?:([a-z0-9_]+-[0-9a-f]{20}):)?(\d+):(.*)$", re.DOTALL)
_MORE = re.compile(r"^-- more results: call grep_spill\((.*), offset=(\d+)\) --$")
_ARGUMENT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]+)')


def put(store: Store, data: bytes | str, *, session: str = SESSION, tool: str = "bash") -> str:
    """Store ``data`` and return its id."""
    return store.put(data, session=session, tool_name=tool, tool_call_id="call_1").spill_id


def text_of(result: ToolResult) -> str:
    """The single text part of a tool result."""
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def hits(text: str) -> list[tuple[str | None, int, str]]:
    """The matching lines of a content page: (spill id or None, line, text)."""
    out = []
    for line in text.split("\n")[1:-1]:
        found = _HIT.match(line)
        if found:
            out.append((found.group(1), int(found.group(2)), found.group(3)))
    return out


def brute_lines(data: bytes, needle: bytes) -> list[int]:
    """Line numbers of lines holding ``needle``, counted the slow, obvious way."""
    numbers: list[int] = []
    position = data.find(needle)
    while position >= 0:
        line = data.count(b"\n", 0, position) + 1
        if not numbers or numbers[-1] != line:
            numbers.append(line)
        end = data.find(b"\n", position)
        if end < 0:
            break
        position = data.find(needle, end + 1)
    return numbers


def log_lines(count: int) -> bytes:
    """A log-like output of ``count`` lines."""
    return b"".join(
        b"2026-11-29T12:%02d:%02d INFO worker.%d request %d handled in %d ms\n"
        % (i // 60 % 60, i % 60, i % 7, i, i * 37 % 1000)
        for i in range(count)
    )


# --------------------------------------------------------------------------- content mode


def test_needle_in_the_middle_has_the_brute_force_line_number(any_store: Store) -> None:
    """A needle far into a spill is found with the line number brute force gives."""
    data = bytearray(log_lines(60_000))
    middle = data.index(b"\n", len(data) // 2) + 1
    data[middle:middle] = b"FATAL disk quota exceeded on /var\n"
    data = bytes(data)
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).grep("FATAL", spill))
    expected_line = data.count(b"\n", 0, middle) + 1
    assert hits(text) == [(None, expected_line, "FATAL disk quota exceeded on /var")]
    assert text.split("\n")[0] == f'grep_spill "FATAL" in spill {spill}: matching lines 1-1'
    assert text.endswith("\nend of results")


def test_regex_matches_with_line_anchors(any_store: Store) -> None:
    """^ and $ anchor at line boundaries, and . never crosses a newline."""
    spill = put(any_store, b"alpha\nbeta\nalphabet\ngamma alpha\n")
    tools = SpillTools(any_store)
    assert [n for _, n, _ in hits(text_of(tools.grep("^alpha$", spill)))] == [1]
    assert [n for _, n, _ in hits(text_of(tools.grep("alpha.*", spill)))] == [1, 3, 4]
    assert [n for _, n, _ in hits(text_of(tools.grep("a$", spill)))] == [1, 2, 4]


def test_ignore_case(any_store: Store) -> None:
    """ignore_case matches regardless of case, for literals and regexes, ASCII and not."""
    spill = put(any_store, b"Error one\nerror two\nERROR three\nfine\n\xc3\x89T\xc3\x89\n")
    tools = SpillTools(any_store)
    assert [n for _, n, _ in hits(text_of(tools.grep("error", spill)))] == [2]
    assert [n for _, n, _ in hits(text_of(tools.grep("error", spill, ignore_case=True)))] == [
        1,
        2,
        3,
    ]
    assert [n for _, n, _ in hits(text_of(tools.grep("^e.ror", spill, ignore_case=True)))] == [
        1,
        2,
        3,
    ]
    assert [n for _, n, _ in hits(text_of(tools.grep("été", spill, ignore_case=True)))] == [5]


def test_literal_flag_searches_metacharacters_verbatim(any_store: Store) -> None:
    """literal=True searches a pattern with metacharacters as plain text."""
    spill = put(any_store, b"a+b\naab\n(x)\n")
    tools = SpillTools(any_store)
    assert [n for _, n, _ in hits(text_of(tools.grep("a+b", spill, literal=True)))] == [1]
    assert [n for _, n, _ in hits(text_of(tools.grep("a+b", spill)))] == [2]
    assert [n for _, n, _ in hits(text_of(tools.grep("(x)", spill, literal=True)))] == [3]
    assert [
        n for _, n, _ in hits(text_of(tools.grep("(X)", spill, literal=True, ignore_case=True)))
    ] == [3]


def test_context_lines_and_group_separators(any_store: Store) -> None:
    """Context lines use '-', matching lines ':', and '--' separates groups, as in grep."""
    data = b"".join(b"l%d%s\n" % (i, b" hit" if i in (5, 7, 20) else b"") for i in range(1, 31))
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store).grep("hit", spill, before=2, after=1))
    body = text.split("\n")[1:-1]
    assert body == [
        "3-l3",
        "4-l4",
        "5:l5 hit",
        "6-l6",
        "7:l7 hit",
        "8-l8",
        "--",
        "18-l18",
        "19-l19",
        "20:l20 hit",
        "21-l21",
    ]
    around = text_of(SpillTools(any_store).grep("l30", spill, context=3)).split("\n")[1:-1]
    assert around == ["27-l27", "28-l28", "29-l29", "30:l30"]
    first = text_of(SpillTools(any_store).grep("^l1$", spill, context=2)).split("\n")[1:-1]
    assert first == ["1:l1", "2-l2", "3-l3"]


def test_multiline_match_is_reported_at_its_first_line(any_store: Store) -> None:
    """A match that spans lines is reported once, at the line where it starts."""
    spill = put(any_store, b"one\nstart here\nend there\nfour\n")
    found = hits(text_of(SpillTools(any_store).grep(r"here\s+end", spill)))
    assert [(n, t) for _, n, t in found] == [(2, "start here")]


@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        (r"\s+$", [7]),
        (r"[^;]$", [1, 4, 7]),
        (r"[^a-z]", [3, 7]),
        (r"\s*$", [1, 2, 3, 4, 5, 6, 7]),
        (r"\n", []),
        (r"o\n\n", [1]),
    ],
)
def test_a_match_starting_at_a_line_s_newline_is_no_hit_on_that_line(
    any_store: Store, pattern: str, lines: list[int]
) -> None:
    """A line is no hit for a match that only starts at its newline (as grep -n has it)."""
    spill = put(any_store, b"foo\n\nbar;\nbaz\n\n\nqux \n")
    tools = SpillTools(any_store)
    found = hits(text_of(tools.grep(pattern, spill)))
    assert [n for _, n, _ in found] == lines
    counted = text_of(tools.grep(pattern, spill, output_mode="count"))
    assert f": {len(lines)} matching line" in counted.split("\n")[0]


def test_long_matching_line_shows_a_window_around_the_match(any_store: Store) -> None:
    """A matching line over the column cap shows the part around the match and its offset."""
    line = b"a" * 5000 + b"NEEDLE" + b"b" * 5000
    data = b"first\n" + line + b"\n"
    spill = put(any_store, data)
    text = text_of(SpillTools(any_store, max_column_bytes=100).grep("NEEDLE", spill))
    ((_, number, shown),) = hits(text)
    assert number == 2
    assert "NEEDLE" in shown
    assert shown.startswith("[... 4975 bytes] ")
    assert shown.endswith(f"more bytes; line of {len(line)} bytes; match at byte {6 + 5000}]")
    assert len(shown) < 250


# --------------------------------------------------------------------------- paging


def test_head_limit_and_offset_page_through_every_hit(any_store: Store) -> None:
    """Following the 'more results' hint pages through exactly the brute-force hits."""
    data = log_lines(3000)
    spill = put(any_store, data)
    tools = SpillTools(any_store)
    expected = brute_lines(data, b"worker.3")
    seen: list[int] = []
    offset = 0
    for _ in range(100):
        text = text_of(tools.grep("worker.3", spill, head_limit=150, offset=offset))
        seen.extend(n for _, n, _ in hits(text))
        footer = text.rsplit("\n", 1)[1]
        found = _MORE.match(footer)
        if not found:
            assert footer == "end of results"
            break
        assert found.group(1) == f'pattern="worker.3", spill="{spill}", head_limit=150'
        offset = int(found.group(2))
        assert offset == len(seen)
    assert seen == expected


def test_more_results_hint_names_every_argument_not_at_its_default(any_store: Store) -> None:
    """The hint repeats each argument that differs from its default, and works as a call."""
    spill = put(any_store, "".join(f"line {i} Timeout\n" for i in range(300)))
    tools = SpillTools(any_store)
    text = text_of(
        tools.grep(
            "timeout", spill, ignore_case=True, context=1, after=0, head_limit=5, literal=True
        )
    )
    footer = text.rsplit("\n", 1)[1]
    assert footer == (
        f'-- more results: call grep_spill(pattern="timeout", spill="{spill}", '
        "ignore_case=true, context=1, after=0, head_limit=5, literal=true, offset=5) --"
    )
    call = footer.removeprefix("-- more results: call grep_spill(").removesuffix(") --")
    arguments = {key: json.loads(value) for key, value in _ARGUMENT.findall(call)}
    following = text_of(tools.call("grep_spill", arguments))
    assert following.split("\n", 1)[0].endswith("matching lines 6-10 (more below)")


def test_unlimited_head_limit_is_still_bounded_by_the_page(any_store: Store) -> None:
    """head_limit=0 (or None) lists everything that fits, then hints where to go on."""
    data = log_lines(5000)
    spill = put(any_store, data)
    tools = SpillTools(any_store)
    for limit in (0, None):
        text = text_of(tools.grep("INFO", spill, head_limit=limit))
        assert len(text.encode()) <= 16_000
        shown = len(hits(text))
        assert 100 < shown < 5000
        assert text.endswith(f"head_limit={0 if limit == 0 else 'null'}, offset={shown}) --")


def test_offset_past_the_last_hit_says_how_many_there_were(any_store: Store) -> None:
    """An offset beyond the last hit is not an error, and says the total."""
    spill = put(any_store, b"x\nx\ny\n")
    text = text_of(SpillTools(any_store).grep("x", spill, offset=5))
    assert text.split("\n")[0].endswith("no matching lines after offset 5 (2 in all)")


# --------------------------------------------------------------------------- modes, sessions


def test_count_mode_counts_matching_lines(any_store: Store) -> None:
    """count mode gives matching lines (not matches) per spill, like grep -c."""
    spill = put(any_store, b"a a a\nb\na\n")
    text = text_of(SpillTools(any_store).grep("a", spill, output_mode="count"))
    assert text == f'grep_spill "a" in spill {spill}: 2 matching lines\nend of results'


def test_all_spills_of_the_session_are_searched_and_no_others(any_store: Store) -> None:
    """Without a spill, every spill of this session is searched, prefixed by its id."""
    first = put(any_store, b"one needle\nnothing\n", tool="a")
    second = put(any_store, b"nothing\nnothing\ntwo needle\n", tool="b")
    put(any_store, b"needle of another session\n", session="other")
    tools = SpillTools(any_store)
    found = hits(text_of(tools.grep("needle")))
    assert found == [(first, 1, "one needle"), (second, 3, "two needle")]
    count = text_of(tools.grep("needle", output_mode="count"))
    assert f'{first}: 1 (tool "a")' in count and f'{second}: 1 (tool "b")' in count
    assert "2 matching lines in 2 spills" in count
    spills = text_of(tools.grep("needle", output_mode="spills", head_limit=1))
    assert spills.split("\n")[1] == f'{first} (tool "a", call "call_1")'
    assert spills.endswith('output_mode="spills", head_limit=1, offset=1) --')
    assert second in text_of(tools.grep("needle", output_mode="spills", offset=1))


def test_a_session_wide_search_reads_no_metadata_again_and_numbers_only_spills_that_match(
    any_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across a session each listed spill is opened once, from the listing's metadata,
    and only a spill with a matching line has its line index loaded."""
    spills = [put(any_store, log_lines(50 + n), tool=f"t{n}") for n in range(6)]
    target = put(any_store, log_lines(40) + b"the needle\n" + log_lines(5))
    stats: list[str] = []
    indexes: list[str] = []
    real_stat, real_index = any_store._stat, any_store.line_index_of
    monkeypatch.setattr(
        any_store, "_stat", lambda spill_id: stats.append(spill_id) or real_stat(spill_id)
    )
    monkeypatch.setattr(
        any_store, "line_index_of", lambda meta: indexes.append(meta.spill_id) or real_index(meta)
    )
    tools = SpillTools(any_store)
    assert hits(text_of(tools.grep("needle"))) == [(target, 41, "the needle")]
    assert "1 matching lines in 1 spills" in text_of(tools.grep("needle", output_mode="count"))
    assert target in text_of(tools.grep("needle", output_mode="spills"))
    assert (stats, indexes) == ([], [target])
    found = hits(text_of(tools.grep("request 45 handled", head_limit=0)))
    assert sorted(spill for spill, _, _ in found) == sorted(spills)
    assert stats == [] and sorted(indexes[1:]) == sorted(spills)


@pytest.mark.parametrize("mode", ["content", "count", "spills"])
def test_a_spill_removed_after_the_listing_is_named_and_the_others_are_searched(
    any_store: Store, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A spill deleted between the session's listing and its search is named as expired,
    and does not stop the search."""
    first = put(any_store, b"a needle\n", tool="a")
    gone = put(any_store, b"another needle\n", tool="b")
    last = put(any_store, b"a last needle\n", tool="c")
    real_list = any_store.list

    def list_then_delete(session: str | None = None) -> list[SpillMeta]:
        metas = real_list(session)
        any_store.delete(gone)
        return metas

    monkeypatch.setattr(any_store, "list", list_then_delete)
    text = text_of(SpillTools(any_store).grep("needle", output_mode=mode))
    assert f"spill {gone} was not searched: it expired" in text
    assert first in text and last in text


def test_no_match_is_not_an_error(any_store: Store) -> None:
    """A search without matches says so plainly."""
    spill = put(any_store, b"abc\n")
    result = SpillTools(any_store).grep("zzz", spill)
    assert not result.is_error
    assert text_of(result).split("\n")[0].endswith("no matching lines")


def test_partially_saved_spill_reports_what_was_not_searched(any_store: Store) -> None:
    """A match in the kept tail has its true line number; the unsearched gap is named."""
    data = b"".join(b"line %05d\n" % i for i in range(1, 20001))
    meta = any_store.put(
        data,
        session=SESSION,
        tool_name="bash",
        tool_call_id="c",
        retention_bytes=60_000,
        retained_tail_bytes=20_000,
    )
    tools = SpillTools(any_store)
    text = text_of(tools.grep("line 19999", meta.spill_id))
    assert hits(text) == [(None, 19999, "line 19999")]
    gap = meta.gaps[0]
    assert (
        f"spill {meta.spill_id} was saved in part: bytes [{gap[0]}, {gap[1]}) were not kept "
        "and were not searched"
    ) in text
    assert hits(text_of(tools.grep("line 10000", meta.spill_id))) == []


@pytest.mark.parametrize("tail_matches", [True, False])
def test_a_line_cut_in_two_by_retention_is_one_matching_line(
    any_store: Store, tail_matches: bool
) -> None:
    """A line running across the unkept gap, matching before it (and after it, or not), is
    listed and counted once, with the part after the gap not searched again; the next
    line after the gap is still found."""
    tail = b"NEEDLE" if tail_matches else b"plain"
    data = b"NEEDLE " + "\u20ac".encode() * 2000 + tail + b"\nNEEDLE again\n"
    meta = any_store.put(
        data,
        session=SESSION,
        tool_name="bash",
        tool_call_id="c",
        retention_bytes=4096,
        retained_tail_bytes=30,
    )
    assert len(meta.stored_ranges) == 2
    tools = SpillTools(any_store)
    assert [line for _, line, _ in hits(text_of(tools.grep("NEEDLE", meta.spill_id)))] == [1, 2]
    counted = text_of(tools.grep("NEEDLE", meta.spill_id, output_mode="count"))
    assert counted.split("\n", 1)[0].endswith(": 2 matching lines"), counted


def test_a_long_line_reaching_unkept_bytes_is_not_given_a_length(any_store: Store) -> None:
    """A matching line over the column cap that runs into the gap the retention cap left
    is said to be *at least* its stored length, whichever side of the gap it is seen
    from; a long line stored whole keeps its exact length."""
    cut_line = b"NEEDLE " + b"a" * 20_000 + b" NEEDLE"  # the gap falls inside it
    whole = b"NEEDLE " + b"c" * 3000
    data = cut_line + b"\n" + whole + b"\n"
    tail = 3100 + len(whole) + 1
    meta = any_store.put(
        data,
        session=SESSION,
        tool_name="bash",
        tool_call_id="c",
        retention_bytes=4096 + tail,
        retained_tail_bytes=tail,
    )
    ((_, kept_head), (tail_start, _)) = meta.stored_ranges
    tools = SpillTools(any_store, max_column_bytes=100)
    shown = [t for _, _, t in hits(text_of(tools.grep("NEEDLE", meta.spill_id)))]
    assert len(shown) == 2, shown  # the cut line once, from its first part
    assert shown[0].endswith(
        f"line of at least {kept_head} bytes (it reaches bytes not kept); match at byte 0]"
    ), shown[0]
    assert shown[1].endswith(f"line of {len(whole)} bytes; match at byte {len(cut_line) + 1}]")
    # seen from after the gap only (its first part holds no match)
    shown = [t for _, _, t in hits(text_of(tools.grep("a NEEDLE", meta.spill_id)))]
    kept_part = len(cut_line) - tail_start
    assert shown == [shown[0]] and shown[0].endswith(
        f"line of at least {kept_part} bytes (it reaches bytes not kept); "
        f"match at byte {len(cut_line) - 8}]"
    ), shown


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        ("foo(?=bar)", "lookahead"),
        ("foo(?!bar)", "negative lookahead"),
        ("(?<=a)b", "lookbehind"),
        ("(?<!a)b", "negative lookbehind"),
        (r"(a)\1", "backreference"),
        ("(?P<x>a)(?P=x)", "named backreference"),
        ("(?>ab)", "atomic group"),
        ("a++", "possessive"),
    ],
)
def test_unsupported_constructs_are_named(pattern: str, construct: str) -> None:
    """Backreferences and lookaround are refused with a message naming the construct."""
    store = MemoryStore()
    spill = put(store, b"abc\n")
    result = SpillTools(store).grep(pattern, spill)
    assert result.is_error
    text = text_of(result)
    assert construct in text and "RE2" in text
    assert len(text) < 300


def test_invalid_regex_is_a_short_model_error() -> None:
    """A pattern that does not parse is a short error, not an exception."""
    store = MemoryStore()
    put(store, b"x\n")
    result = SpillTools(store).grep("a(b")
    assert result.is_error
    assert text_of(result).startswith("invalid regex (missing ): a(b)")


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|a)*b", "(a|aa)+", "(.*a){20}"])
def test_redos_corpus_completes(pattern: str) -> None:
    """Patterns that make backtracking engines explode run in linear time on RE2."""
    store = MemoryStore()
    spill = put(store, b"a" * 100_000 + b"!\n" + b"a" * 100_000)
    started = time.perf_counter()
    result = SpillTools(store).grep(pattern, spill, output_mode="count")
    assert not result.is_error
    assert time.perf_counter() - started < 30  # a hang guard, not a benchmark


def test_literal_and_regex_engines_are_chosen_by_the_pattern() -> None:
    """Plain text uses find (a needle); metacharacters or ignore_case use RE2."""
    assert compile_pattern("hello world").needle == b"hello world"
    assert compile_pattern("a.b").needle is None
    assert compile_pattern("a.b", literal=True).needle == b"a.b"
    assert compile_pattern("hello", ignore_case=True).needle is None
    # A literal is searched from its rarest character; the bytes before it are checked.
    assert compile_pattern("timeout").lead == b"ti"
    assert compile_pattern("NEEDLE-7f3a9c").lead == b""
    assert compile_pattern("timeout", ignore_case=True).lead == b""
    with pytest.raises(RequestRefused):
        compile_pattern("")


# --------------------------------------------------------------------------- properties

_MEMORY = MemoryStore()
_alphabet = st.sampled_from([b"a", b"b", b"ab", b"\n", b"\n\n", b"\xc3\xa9", b"\xff", b"xyz"])


@settings(max_examples=300)
@given(
    chunks=st.lists(_alphabet, max_size=300),
    needle=st.lists(st.sampled_from([b"a", b"b", b"\xc3\xa9", b"y"]), min_size=1, max_size=3),
    page=st.integers(MIN_PAGE_BYTES, 8000),
)
def test_grep_line_numbers_equal_brute_force(
    chunks: list[bytes], needle: list[bytes], page: int
) -> None:
    """For random outputs and literal patterns, every hit is found with the right line."""
    data = b"".join(chunks)
    pattern_bytes = b"".join(needle)
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY, max_page_bytes=page)
    text = text_of(tools.grep(pattern_bytes.decode(), spill, head_limit=0))
    assert len(text.encode()) <= page
    found = [n for _, n, _ in hits(text)]
    expected = brute_lines(data, pattern_bytes)
    assert found == expected[: len(found)]
    if len(found) < len(expected):
        assert _MORE.match(text.rsplit("\n", 1)[1])
    count = text_of(tools.grep(pattern_bytes.decode(), spill, output_mode="count"))
    assert f": {len(expected)} matching lines" in count


@settings(max_examples=200)
@given(
    chunks=st.lists(
        st.sampled_from([b"ab", b"a", b"\n", b"ba", b"b a", b"\xe2\x82\xac"]), max_size=200
    ),
    pattern=st.sampled_from(["a+b", "^a", "b$", "a.a", "[ab]{3}", "^$", "€|b a", "a\\s+b"]),
    context=st.integers(0, 3),
    page=st.integers(MIN_PAGE_BYTES, 6000),
    column=st.integers(16, 200),
)
def test_regex_hits_match_a_reference_engine(
    chunks: list[bytes], pattern: str, context: int, page: int, column: int
) -> None:
    """Regex hits (first line of each match) agree with a reference scan; pages stay bounded."""
    data = b"".join(chunks)
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY, max_page_bytes=page, max_column_bytes=min(column, page // 2))
    text = text_of(tools.grep(pattern, spill, head_limit=0, context=context))
    assert len(text.encode()) <= page
    # The reference runs on str: RE2 matches UTF-8 characters, not single bytes, with ".".
    decoded = data.decode("utf-8")
    reference = re.compile(pattern, re.MULTILINE)
    expected: list[int] = []
    position = 0
    while position < len(decoded):
        match = reference.search(decoded, position)
        if match is None:
            break
        line_start = decoded.rfind("\n", 0, match.start()) + 1
        if line_start >= len(decoded):
            break
        line_end = decoded.find("\n", match.start())
        line_end = len(decoded) if line_end < 0 else line_end
        expected.append(decoded.count("\n", 0, line_start) + 1)
        position = max(line_end + 1, match.end())
    found = [n for _, n, _ in hits(text)]
    assert found == expected[: len(found)]


@settings(max_examples=100)
@given(
    gaps=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    ignore_case=st.booleans(),
)
def test_literal_engines_agree_across_sparse_and_dense_hits(
    gaps: list[int], ignore_case: bool
) -> None:
    """Hits separated by short and long gaps (find vs RE2 scanning) match brute force."""
    data = b"".join(b"x" * gap + b"\nNeedle here\n" for gap in gaps)
    spill = put(_MEMORY, data)
    tools = SpillTools(_MEMORY, max_page_bytes=1 << 20)
    pattern = "needle" if ignore_case else "Needle"
    text = text_of(tools.grep(pattern, spill, head_limit=0, ignore_case=ignore_case))
    assert [n for _, n, _ in hits(text)] == brute_lines(data, b"Needle")
    count = text_of(tools.grep(pattern, spill, output_mode="count", ignore_case=ignore_case))
    assert f": {len(gaps)} matching lines" in count


def test_required_literals_are_found_conservatively() -> None:
    """The prefilter literal is a run every match must contain; doubtful patterns get none."""
    assert required_literal("[0-9]+ ms NEEDLE") == "NEEDLE"  # from its rarest character
    assert required_literal(r"\d+\.\d+ seconds") == "conds"
    assert required_literal("abc?def") == "def"
    assert required_literal("q(abc)+defg") == "defg"
    for pattern in [
        "ERROR.*reset",  # a literal prefix: RE2 accelerates it already
        "a|bcdef",  # alternation
        "(?i)x+abcd",  # flags
        r"\s+abcd",  # may match a newline
        "[^a]+abcd",
        "[\t-\r]+abcd",
        r"[\n]abcd",
        r"\x0aabcd",
        "x+ab",  # too short
    ]:
        assert required_literal(pattern) is None, pattern


_words = st.sampled_from(
    [b"ab", b"abc", b"cab", b" ", b"\n", b"12", b"x", b"\xe2\x82\xac", b"\n\n"]
)
_pieces = st.sampled_from(
    ["[a-c]+", "[0-9]+", ".", ".*", "x?", "b+", r"\d", "(ab)+", "c{2}", "[ ]"]
)


@settings(max_examples=300)
@given(
    chunks=st.lists(_words, max_size=300),
    before=st.lists(_pieces, min_size=1, max_size=3),
    literal=st.sampled_from(["abc", "cab", " ab", "b 12", "€ab"]),
    after=st.lists(_pieces, max_size=2),
    ignore_case=st.booleans(),
)
def test_prefilter_never_changes_the_hits(
    chunks: list[bytes], before: list[str], literal: str, after: list[str], ignore_case: bool
) -> None:
    """Searching with the required-literal prefilter gives exactly the plain search's hits."""
    pattern = "".join(before) + literal + "".join(after)
    data = b"".join(chunks)
    filtered = compile_pattern(pattern, ignore_case=ignore_case)
    assume(filtered.prefilter is not None)
    plain = dataclasses.replace(filtered, prefilter=None)
    hay = Haystack(data, 0, len(data), 0)
    index = LineIndex.build(
        [0, len(data)] if data else [0],
        [0, data.count(b"\n")][: 2 if data else 1],
        [(0, len(data))] if data else [],
    )
    assert list(iter_hits(hay, filtered, index)) == list(iter_hits(hay, plain, index))
    spill = put(_MEMORY, data)
    text = text_of(
        SpillTools(_MEMORY, max_page_bytes=1 << 20).grep(
            pattern, spill, head_limit=0, ignore_case=ignore_case
        )
    )
    assert [n for _, n, _ in hits(text)] == [hit[0] for hit in iter_hits(hay, plain, index)]


def test_long_non_ascii_patterns_leave_room_for_results() -> None:
    """A long pattern is echoed in part; even at the smallest page cap results still show."""
    store = MemoryStore()
    pattern = "😀" * 150
    spill = put(store, ("x\n" + pattern + "\n") * 50)
    tools = SpillTools(store, max_page_bytes=MIN_PAGE_BYTES)
    text = text_of(tools.grep(pattern, head_limit=0))
    assert len(text.encode()) <= MIN_PAGE_BYTES
    assert hits(text), text
    assert text.endswith("grep_spill(<the same arguments>, offset=1) --")
    single = text_of(tools.grep(pattern, spill, head_limit=0))
    assert len(single.encode()) <= MIN_PAGE_BYTES and hits(single)


def test_pointer_next_calls_work_and_grep_finds_the_elided_middle(any_store: Store) -> None:
    """Through the service: the pointer's Read call runs, and Grep finds a hidden needle."""
    from spillstore._service.service import TruncationService

    lines = [f"row {i:06d} ok" for i in range(1, 40_001)]
    lines[20_000] = "row 020001 NEEDLE-in-the-elided-middle"
    output = "\n".join(lines) + "\n"
    service = TruncationService(any_store, session=SESSION)
    result = service.truncate_for_model(output, tool_name="bash", tool_call_id="c1")
    assert result.spill is not None and result.spill.spill_id is not None
    pointer = result.content[0].text  # type: ignore[union-attr]
    assert "NEEDLE" not in pointer
    tools = SpillTools(any_store, session=SESSION)
    found = re.search(r"Next: read_spill\(([^)]*)\)", pointer)
    assert found is not None
    arguments = {
        key.strip(): value.strip().strip('"')
        for key, value in (pair.split("=", 1) for pair in found.group(1).split(","))
    }
    call = {key: value if key == "spill" else int(value) for key, value in arguments.items()}
    page = tools.call("read_spill", call)
    assert not page.is_error
    text = text_of(tools.grep("NEEDLE", result.spill.spill_id))
    expected = output.encode()[: output.index("NEEDLE")].count(b"\n") + 1
    assert hits(text) == [(None, expected, "row 020001 NEEDLE-in-the-elided-middle")]
    assert expected == 20_001


@pytest.mark.parametrize("context", [{"context": 50}, {"before": 50}, {"after": 50}])
def test_a_match_always_shows_and_its_context_is_cut_first(context: dict[str, int]) -> None:
    """Context that would fill the page is cut before the match is; the hint moves forward."""
    store = MemoryStore()
    lines = ["y" * 1000] * 50 + ["x"] + ["z" * 1000] * 50
    spill = put(store, "\n".join(lines) + "\n")
    text = text_of(SpillTools(store).grep("x", spill=spill, **context))  # type: ignore[arg-type]
    assert "51:x" in text.split("\n")
    assert "no matching lines" not in text
    assert "offset=0" not in text


def test_paging_matches_with_wide_context_reaches_every_match() -> None:
    """Every match of a context search is shown once, and the offsets only move forward."""
    store = MemoryStore()
    lines = [("x" if n % 7 == 0 else "y" * 900) for n in range(200)]
    spill = put(store, "\n".join(lines) + "\n")
    tools = SpillTools(store, max_page_bytes=MIN_PAGE_BYTES)
    offset, seen = 0, []
    for _ in range(200):
        text = text_of(tools.grep("^x$", spill=spill, context=5, offset=offset))
        seen += [number for _, number, body in hits(text) if body == "x"]
        more = _MORE.search(text.split("\n")[-1])
        if more is None:
            break
        assert int(more.group(2)) > offset
        offset = int(more.group(2))
    assert seen == [n + 1 for n in range(0, 200, 7)]
