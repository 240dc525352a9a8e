"""read_lines inside full-size index blocks: every page is exact, whatever the lines."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from spillstore._stores.local import LocalStore


@pytest.mark.parametrize("widths", [(0, 3), (150, 260), (0, 5000), (1, 60_000)])
def test_pages_deep_in_a_spill_are_exact(tmp_path: Path, widths: tuple[int, int]) -> None:
    """Short, long and very unequal lines over many 32 KiB index blocks: a page from
    any line holds exactly the lines asked for, and says where they are."""
    rnd = random.Random(sum(widths))
    lines = [b"%d:" % n + b"x" * rnd.randint(*widths) + b"\n" for n in range(1, 4001)]
    data = b"".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    store = LocalStore(tmp_path / "store")
    meta = store.put(data, session="s", tool_name="t", tool_call_id="1", retention_bytes=None)
    fresh = LocalStore(store.root)
    for first in [1, 2, 999, 2000, 3999, 4000, *rnd.sample(range(1, 4001), 40)]:
        count = rnd.choice([1, 2, 37, 500])
        page = fresh.read_lines(meta.spill_id, first, count)
        last = min(first + count - 1, 4000)
        assert (page.first_line, page.last_line) == (first, last)
        assert (page.start_byte, page.end_byte) == (starts[first - 1], starts[last])
        assert page.data == data[starts[first - 1] : starts[last]]
