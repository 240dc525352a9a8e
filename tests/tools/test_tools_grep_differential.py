"""grep_spill against a line-by-line reference model, paging through every result.

Each case is a random output over a small alphabet (so patterns hit often; 2- and 4-byte
characters, tabs, quotes and backslashes; sometimes few newlines, so matching lines are
longer than Grep's column window), saved through ``TruncationService`` on a local store,
and a random pattern: a literal or a regex, case-sensitive or not, with quotes and
backslashes that the continuation hint must quote. The model is Python's ``re`` over the
decoded lines, one line at a time. Checked, through the public tool calls:

- count mode states exactly the model's number of matching lines;
- content mode, paged by following each result's own "more results" call (parsed and
  replayed as a model would), lists exactly the model's matching lines, in order, each
  once; every listed line is the model's line of that number, or, when cut to a window,
  names that line's byte length and the byte offset of its first match (which the saved
  bytes hold there).

Size: :data:`CASES` cases by default (a few seconds, CI included, fixed seeds);
``SPILLSTORE_DIFF_EXAMPLES=N`` runs N cases with fresh seeds (RESULTS.md has a long run).
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

from spillstore import LocalStore, SpillTools, TruncationService
from spillstore._content import ToolResult

_ASKED = os.environ.get("SPILLSTORE_DIFF_EXAMPLES")
"""Read at import: the suite's autouse fixture clears SPILLSTORE_* before each test."""
CASES = int(_ASKED) if _ASKED else 12
SEEDS = [random.SystemRandom().randrange(2**32) for _ in range(CASES)] if _ASKED else range(CASES)

ALPHABET = ["a", "b", "aa", "ab", "\n", "é", "😀", "x", "\t", "A", "B", " ", '"', "\\", "É"]
PATTERN_PIECES = ["a", "b", "a", "é", "😀", "x", "A", '"', "\\", "É", " "]
REGEXES = ["a.b", "[ab]x", "é+A", "b{2,}", "^a", "a$", "x|😀", '"\\\\', "^$", "(?:ab)+x", "[^a]$"]

_HEADER = re.compile(r"^grep_spill .*?: (?:matching lines (\d+)-(\d+)|no matching lines)")
_COUNT = re.compile(r": (\d+) matching lines?\b")
_HIT = re.compile(r"^(\d+):(.*)$", re.DOTALL)
_WINDOW = re.compile(r"\[\.\.\. (\d+) more bytes; line of (\d+) bytes; match at byte (\d+)\]$")
_MORE = re.compile(r"^-- more results: call grep_spill\((.*)\) --$")
_ARGUMENT = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]+)')


def _text(result: ToolResult) -> str:
    assert result.spill_exempt
    (part,) = result.content
    return part.text  # type: ignore[union-attr]


def _replayable(call: str) -> dict[str, object]:
    """The arguments of a hint's call, read as a model reads them (JSON values)."""
    arguments = {name: json.loads(value) for name, value in _ARGUMENT.findall(call)}
    assert _ARGUMENT.sub("", call).replace(", ", "") == "", f"unparsed hint: {call}"
    return arguments


class Model:
    """The output as lines, with the byte offset each line starts at."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        if text.endswith("\n"):
            self.lines.pop()
        self.starts: list[int] = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line.encode()) + 1

    def matching(self, rx: re.Pattern[str]) -> list[int]:
        return [number for number, line in enumerate(self.lines, 1) if rx.search(line)]

    def first_match_byte(self, rx: re.Pattern[str], number: int) -> int:
        line = self.lines[number - 1]
        found = rx.search(line)
        assert found is not None
        return self.starts[number - 1] + len(line[: found.start()].encode())


def _case(seed: int) -> tuple[str, str, bool, bool, int]:
    rng = random.Random(seed)
    # Mostly short lines; else long ones, which Grep shows a window of.
    long_lines = [c for c in ALPHABET if c != "\n"] * 40 + ["\n"]
    alphabet = ALPHABET if rng.random() < 0.7 else long_lines
    pieces = [rng.choice(alphabet) for _ in range(rng.randint(40_000, 60_000))]
    text = "".join(pieces) + ("\n" if rng.random() < 0.5 else "")
    literal = rng.random() < 0.6
    if literal or rng.random() < 0.6:
        pattern = "".join(rng.choice(PATTERN_PIECES) for _ in range(rng.randint(1, 4)))
        if not literal:
            pattern = re.escape(pattern)
    else:
        pattern = rng.choice(REGEXES)
    return text, pattern, literal, rng.random() < 0.3, rng.choice([1, 7, 50, 100, 500, 0])


@pytest.mark.parametrize("seed", SEEDS)
def test_grep_agrees_with_a_line_by_line_model_through_every_page(
    seed: int, tmp_path: Path
) -> None:
    """Counts, every page's matching lines and their windows agree with the model."""
    text, pattern, literal, ignore_case, head_limit = _case(seed)
    store = LocalStore(tmp_path / "spills")
    spill = TruncationService(store).truncate_for_model(text, tool_name="t", tool_call_id="c")
    assert spill.spill is not None and spill.spill.spill_id is not None
    spill_id = spill.spill.spill_id
    tools = SpillTools(store)
    model = Model(text)
    rx = re.compile(re.escape(pattern) if literal else pattern, re.I if ignore_case else 0)
    want = model.matching(rx)
    options = {"ignore_case": ignore_case, "literal": literal}

    counted = _text(
        tools.grep(
            pattern,
            spill=spill_id,
            output_mode="count",
            ignore_case=ignore_case,
            literal=literal,
        )
    )
    found = _COUNT.search(counted.split("\n")[0])
    assert (int(found.group(1)) if found else 0) == len(want), counted[:300]

    listed: list[int] = []
    arguments: dict[str, object] = {
        "pattern": pattern,
        "spill": spill_id,
        "head_limit": head_limit,
        **options,
    }
    for _ in range(len(want) + 2):
        page = _text(tools.call("grep_spill", arguments))
        lines = page.split("\n")
        header = _HEADER.match(lines[0])
        assert header, page[:300]
        numbers = []
        for line in lines[1:]:
            hit = _HIT.match(line)
            if hit is None:
                continue
            number, shown = int(hit.group(1)), hit.group(2)
            numbers.append(number)
            window = _WINDOW.search(shown)
            if window is None:
                assert shown == model.lines[number - 1], (number, shown[:80])
                continue
            start = model.starts[number - 1]
            length, match_byte = int(window.group(2)), int(window.group(3))
            assert length == len(model.lines[number - 1].encode()), (number, shown[:80])
            assert match_byte == model.first_match_byte(rx, number), (number, shown[-120:])
            assert start <= match_byte < start + max(length, 1)
        if numbers:
            assert header.group(1) is not None
            assert int(header.group(2)) - int(header.group(1)) + 1 == len(numbers)
            assert int(header.group(1)) == len(listed) + 1, lines[0]
        listed += numbers
        more = _MORE.match(lines[-1])
        if more is None:
            assert "end of results" in lines[-1] or not want, lines[-1]
            break
        arguments = _replayable(more.group(1))
    assert listed == want
