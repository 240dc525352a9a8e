"""List (list_spills): the session's spills, newest last, bounded, with paging back."""

from __future__ import annotations

import errno
import re

from spillstore._content import ToolResult
from spillstore._errors import StoreError
from spillstore._stores.base import Store
from spillstore._stores.memory import MemoryStore
from spillstore._stores.unavailable import UnavailableStore
from spillstore._tools.spill_tools import MIN_PAGE_BYTES, SpillTools

SESSION = "default"
_ENTRY = re.compile(r"^ *(\d+)\. ([a-z0-9_]+-[0-9a-f]{20}) ")


def text_of(result: ToolResult) -> str:
    """The single text part of a tool result."""
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def entries(text: str) -> list[tuple[int, str]]:
    """The (number, spill id) of each listed spill."""
    return [(int(m.group(1)), m.group(2)) for line in text.split("\n") if (m := _ENTRY.match(line))]


def test_lists_spills_newest_last_with_their_facts(any_store: Store, clock: object) -> None:
    """Each entry gives id, tool, call id, bytes, lines, how it was saved and its first line."""
    first = any_store.put(
        b"first line\nsecond\n", session=SESSION, tool_name="bash", tool_call_id="c1"
    )
    clock.advance(5)  # type: ignore[attr-defined]
    second = any_store.put(
        "é" * 200 + "\nmore\n",
        session=SESSION,
        tool_name="web fetch",
        tool_call_id="c2",
        retention_bytes=100,
        retained_tail_bytes=10,
    )
    any_store.put(b"elsewhere\n", session="other", tool_name="bash", tool_call_id="c3")
    text = text_of(SpillTools(any_store).list())
    lines = text.split("\n")
    assert lines[0] == 'list_spills: session "default", spills 1-2 of 2 (oldest first, newest last)'
    assert lines[1] == (
        f'1. {first.spill_id} tool "bash" call "c1": 18 bytes, 2 lines, saved in full; '
        'first line: "first line"'
    )
    assert lines[2].startswith(f'2. {second.spill_id} tool "web fetch" call "c2": 406 bytes, ')
    assert "saved in part (kept [0, 90) and [396, 406))" in lines[2]
    assert lines[2].endswith('first line: "' + "é" * 45 + '..."')
    assert len(lines) == 3


def test_empty_session_says_so(any_store: Store) -> None:
    """A session without spills is not an error."""
    result = SpillTools(any_store).list()
    assert not result.is_error
    assert text_of(result) == 'list_spills: session "default" has no spills'


def test_long_lists_show_the_newest_and_page_back(any_store: Store, clock: object) -> None:
    """Past the limit the newest spills are shown and a hint pages back to older ones."""
    ids = []
    for i in range(30):
        ids.append(
            any_store.put(
                f"out {i}\n", session=SESSION, tool_name="t", tool_call_id=f"c{i}"
            ).spill_id
        )
        clock.advance(1)  # type: ignore[attr-defined]
    tools = SpillTools(any_store)
    page = text_of(tools.list(limit=10))
    assert entries(page) == [(n + 1, ids[n]) for n in range(20, 30)]
    assert page.endswith("-- 20 older spills not shown: call list_spills(offset=10) --")
    older = text_of(tools.list(offset=10, limit=10))
    assert entries(older) == [(n + 1, ids[n]) for n in range(10, 20)]
    assert older.endswith("call list_spills(offset=20) --")
    oldest = text_of(tools.list(offset=20, limit=10))
    assert entries(oldest) == [(n + 1, ids[n]) for n in range(10)]
    assert not oldest.endswith("--")
    beyond = tools.list(offset=30)
    assert beyond.is_error


def test_list_is_bounded_by_the_page_cap() -> None:
    """Many spills with long names never push a List result over max_page_bytes."""
    store = MemoryStore()
    for i in range(200):
        store.put(
            "x" * 300 + "\n",
            session=SESSION,
            tool_name="a_very_long_tool_name_" * 5,
            tool_call_id="call-" + "9" * 80 + str(i),
        )
    tools = SpillTools(store, max_page_bytes=MIN_PAGE_BYTES)
    text = text_of(tools.list(limit=1000))
    assert len(text.encode()) <= MIN_PAGE_BYTES
    shown = entries(text)
    assert shown and shown[-1][0] == 200
    assert text.endswith(f"call list_spills(offset={len(shown)}) --")


def test_a_store_that_fails_is_named_as_the_store_not_a_spill() -> None:
    """A store that cannot be used (here one that could not be opened) makes every spill
    tool say the store cannot be read, with why; list_spills asked for no spill, so no message
    may speak of one."""
    store = UnavailableStore(StoreError(errno.ENOSPC, "cannot open the catalog: disk full"))
    tools = SpillTools(store, session=SESSION)
    for result in (tools.list(), tools.read("bash-" + "0" * 20), tools.grep("x")):
        assert result.is_error
        text = text_of(result)
        assert text.startswith("the spill store cannot be read: ")
        assert "disk full" in text
