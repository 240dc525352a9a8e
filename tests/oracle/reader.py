"""Checks through the real recovery tools: every told range pages back exactly.

Each check calls :class:`~spillstore.SpillTools` as a model would (by the spill id, with
the arguments a hint names), parses the page, and compares every shown byte with the
original sliced by hand (:class:`~tests.oracle.model.Truth`). Paging follows the
next-call hints; each must move forward, and the walk must end within a bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spillstore import SpillTools, ToolResult
from tests.oracle.model import Range, Truth, gaps, shown

BYTE_HEADER = re.compile(
    r"spill (\S+): bytes \[(\d+), (\d+)\) of (\d+), (?:line (\d+)|lines (\d+)-(\d+)) of (\d+)"
)
LINE_HEADER = re.compile(
    r"spill (\S+): (?:line (\d+)|lines (\d+)-(\d+)) of (\d+), bytes \[(\d+), (\d+)\) of (\d+)"
)
CALL = re.compile(r'(\w+)\(spill="([^"]+)", ([a-z_]+=-?\d+(?:, [a-z_]+=-?\d+)*)\)')
NUMBERED = re.compile(r" *(\d+)\t(.*)", re.S)
CUT_MARKER = re.compile(
    r" \[\.\.\. cut: (?:(\d+) more bytes|this line goes on (?:into|with (?:(\d+) more kept bytes,"
    r" then )?bytes) \[(\d+), (\d+)\), which were not kept(?:; the kept bytes stop at \d+)?)"
    r'; continue with \w+\(spill="[^"]+", byte_offset=(\d+)\)\]$'
)
GREP_ROW = re.compile(r"(\d+)([:-])(.*)", re.S)


def call_args(text: str) -> dict[str, int]:
    """The integer arguments of the first tool call written in ``text``."""
    match = CALL.search(text)
    assert match is not None, f"no call in {text!r}"
    pairs = (item.split("=") for item in match.group(3).split(", "))
    return {key: int(value) for key, value in pairs}


def text_of(result: ToolResult) -> str:
    """The one text of a recovery tool's result, checked to be a good result."""
    assert result.spill_exempt, "a recovery tool result must be spill-exempt"
    text = result.content[0].text  # type: ignore[union-attr]
    assert "internal error" not in text, text
    assert not result.is_error, f"the tool refused a call the model was told to make: {text}"
    return text


@dataclass
class Pager:
    """Pages one spill through the Read and Grep tools and checks every page.

    Attributes:
        tools: the recovery tools over the store holding the spill.
        spill: the spill id the model was told.
        truth: the original output.
        stored: the byte ranges the store kept (already checked against the truth).
    """

    tools: SpillTools
    spill: str
    truth: Truth
    stored: tuple[Range, ...]

    @property
    def bound(self) -> int:
        """The most pages a walk may take before it counts as a loop."""
        return 2 * self.truth.total_lines + self.truth.total // 2 + 20

    def _check_size(self, text: str) -> None:
        size = len(text.encode("utf-8"))
        assert size <= self.tools.max_page_bytes, f"a page of {size} bytes exceeds the cap"

    @property
    def _gaps(self) -> tuple[Range, ...]:
        return gaps(self.stored, self.truth.total)

    def _gap_at(self, offset: int) -> Range | None:
        return next((g for g in self._gaps if g[0] <= offset < g[1]), None)

    def _stored_end(self, offset: int) -> int:
        return next(end for start, end in self.stored if start <= offset < end)

    # ------------------------------------------------------------------ byte mode

    def bytes_from(self, start: int, stop: int, max_bytes: int | None = None) -> None:
        """Read in byte mode from ``start`` until ``stop`` is covered, following hints."""
        truth, position, pages = self.truth, start, 0
        kwargs: dict[str, int] = {} if max_bytes is None else {"max_bytes": max_bytes}
        while position < stop:
            pages += 1
            assert pages <= self.bound, f"byte paging from {start} does not end"
            text = text_of(self.tools.read(self.spill, byte_offset=position, **kwargs))
            self._check_size(text)
            gap = self._gap_at(position)
            expected = position
            if gap is not None:
                assert f"[{gap[0]}, {gap[1]})" in text, f"gap {gap} not named: {text[:300]}"
                if gap[1] >= truth.total:
                    assert text.endswith("end of output"), text
                    return
                expected = gap[1]
            elif position not in truth.char_starts:  # inside a valid character
                expected = min(p for p in truth.char_starts if p > position)
            header = text.split("\n", 1)[0]
            match = BYTE_HEADER.fullmatch(header)
            assert match is not None, f"bad byte page header {header!r}"
            s, e, total, lines = int(match[2]), int(match[3]), int(match[4]), int(match[8])
            first = int(match[5] or match[6])
            last = int(match[5] or match[7])
            assert (total, lines) == (truth.total, truth.total_lines), header
            assert s == expected, f"byte_offset={position} showed from {s}, expected {expected}"
            assert e > s, f"an empty byte page at {s}"
            assert e <= self._stored_end(s), f"page [{s}, {e}) runs past the stored range"
            assert (first, last) == truth.lines_of(s, e), f"{header}: lines {truth.lines_of(s, e)}"
            footer = text.rsplit("\n", 1)[1]
            body = shown(truth.data[s:e])
            body = body if body.endswith("\n") else body + "\n"
            assert text.endswith(body + footer), f"[{s}, {e}) does not read back: {text!r}"
            if e >= truth.total:
                assert footer == "end of output", footer
                return
            if e == self._stored_end(s):
                resume = next((a for a, _ in self.stored if a >= e), None)
                named = f"[{e}, {truth.total if resume is None else resume})"
                assert named in footer and "not kept" in footer, footer
                if resume is None or resume >= truth.total:
                    return
                assert call_args(footer)["byte_offset"] == resume, footer
            else:
                assert footer.startswith("next: "), footer
                assert call_args(footer)["byte_offset"] == e, footer
            nxt = call_args(footer)
            kwargs = {k: v for k, v in nxt.items() if k == "max_bytes"}
            assert nxt["byte_offset"] > position, f"the next call does not move: {footer}"
            position = nxt["byte_offset"]

    # ------------------------------------------------------------------ line mode

    def lines_from(self, first: int, last: int, limit: int = 200) -> None:
        """Read in line mode from line ``first`` until line ``last`` is covered."""
        truth, line, pages, previous_start = self.truth, first, 0, -1
        while True:
            pages += 1
            assert pages <= self.bound, f"line paging from line {first} does not end"
            text = text_of(self.tools.read(self.spill, offset=line, limit=limit))
            self._check_size(text)
            rows = text.split("\n")
            begin = truth.line_start(line)
            if self._gap_at(begin) is not None:
                begin = self._gap_at(begin)[1]  # type: ignore[index]
            if begin >= truth.total:
                assert rows[-1].endswith("end of output"), text
                return
            match = LINE_HEADER.fullmatch(rows[0])
            assert match is not None, f"bad line page header {rows[0]!r} for offset={line}"
            a = int(match[2] or match[3])
            b = int(match[2] or match[4])
            s, e = int(match[6]), int(match[7])
            assert (int(match[5]), int(match[8])) == (truth.total_lines, truth.total), rows[0]
            assert s == begin, f"offset={line}: page starts at byte {s}, expected {begin}"
            assert a == truth.line_of(begin), f"offset={line}: first line {a}"
            assert s > previous_start, f"offset={line} does not move forward"
            previous_start = s
            body = [NUMBERED.fullmatch(row) for row in rows[1:-1]]
            numbered = [m for m in body if m is not None]
            numbers = [int(m[1]) for m in numbered]
            assert numbers and (numbers[0], numbers[-1]) == (a, b), rows[0]
            for m, previous in zip(numbered, [a - 1, *numbers], strict=False):
                number = int(m[1])
                start = s if number == a else truth.line_start(number)
                start_gap = self._gap_at(start)
                if start_gap is not None:  # the line's start was not kept
                    start = start_gap[1]
                if number != previous + 1:  # only lines the retention cap did not keep
                    gap = self._gap_at(truth.line_start(previous + 1))
                    assert gap is not None and gap[1] > truth.line_start(number - 1), (
                        f"lines {previous + 1}-{number - 1} were skipped but were kept"
                    )
                    assert f"[{gap[0]}, {gap[1]})" in text, f"skipped lines: gap {gap} not named"
                    start = max(start, gap[1])
                if start > truth.line_start(number):
                    told = f"line {number}, whose start was not kept" in text
                    assert told or "not kept" in m[2], (
                        f"line {number} is shown from byte {start} without saying its start"
                        f" was not kept: {m[2][:80]!r}"
                    )
                self._check_line(number, start, m[2])
            footer = rows[-1]
            if footer == "end of output":
                assert b == truth.total_lines and e >= truth.total, text[-300:]
                return
            if footer.startswith("next: "):
                args = call_args(footer)
                assert args["offset"] == b + 1, footer
            else:
                named = re.search(r"\(bytes \[(\d+), (\d+)\)\) were not kept", footer)
                assert named is not None, footer
                gap = (int(named[1]), int(named[2]))
                assert gap in self._gaps and gap[0] >= s, f"{footer}: gaps are {self._gaps}"
                if gap[1] >= truth.total:
                    assert "end of stored output" in footer, footer
                    return
                args = call_args(footer)
                resume_line = truth.line_of(gap[1])
                if "byte_offset" in args:  # the gap is inside a line: go on by bytes
                    assert args["byte_offset"] == gap[1], footer
                    self.bytes_from(gap[1], truth.line_end(resume_line))
                    if resume_line >= min(last, truth.total_lines):
                        return
                    line = resume_line + 1
                    continue
                assert args["offset"] == resume_line, footer
            if b >= last:
                return
            line = args["offset"]

    def _check_line(self, number: int, line_start: int, text: str) -> None:
        """One numbered line: whole, or a kept prefix with a marker that says the rest."""
        truth = self.truth
        line_end = truth.line_end(number)
        after = line_end + 1  # the newline belongs to the line
        gap = next((g for g in self._gaps if line_start < g[1] and g[0] < after), None)
        if text == shown(truth.data[line_start:line_end]) and (gap is None or gap[0] >= line_end):
            return
        marker = CUT_MARKER.search(text)
        assert marker is not None, f"line {number} is neither whole nor cut: {text[:200]!r}"
        resume = int(marker[5])
        assert line_start < resume <= line_end, f"line {number}: resume {resume}"
        prefix = text[: marker.start()]
        assert prefix == shown(truth.data[line_start:resume]), f"line {number}: wrong kept text"
        if marker[1] is not None:
            # The line's rest is counted in original bytes; a gap in it is named by the
            # byte pages that run into it.
            assert gap is None or resume <= gap[0], f"line {number}: resume {resume} in {gap}"
            assert int(marker[1]) == line_end - resume, f"line {number}: {marker[0]}"
            self.bytes_from(resume, line_end)
        else:
            stated = (int(marker[3]), int(marker[4]))
            assert gap is not None and stated == gap, f"line {number}: {marker[0]}, gap {gap}"
            assert resume <= gap[0]
            if marker[2] is not None:
                assert int(marker[2]) == gap[0] - resume, f"line {number}: {marker[0]}"
            self.bytes_from(resume, gap[0])

    # ------------------------------------------------------------------ grep

    def grep_needle(self, needle: str, context: int) -> None:
        """Grep finds the needle on every line that holds it in kept bytes, true line numbers."""
        truth = self.truth
        expected = truth.needle_lines(needle.encode(), self.stored)
        found: list[int] = []
        offset, pages = 0, 0
        while True:
            pages += 1
            assert pages <= len(expected) + 5, "grep paging does not end"
            result = self.tools.grep(
                needle, self.spill, literal=True, context=context, offset=offset
            )
            text = text_of(result)
            self._check_size(text)
            rows = text.split("\n")
            for row in rows[1:-1]:
                match = GREP_ROW.fullmatch(row)
                if match is None or match[2] != ":":
                    continue
                number = int(match[1])
                assert needle in match[3], f"grep row {number} does not show the match"
                found.append(number)
            footer = rows[-1]
            if footer == "end of results":
                break
            assert footer.startswith("-- more results"), footer
            nxt = int(re.search(r"offset=(\d+)", footer)[1])  # type: ignore[index]
            assert nxt > offset, f"grep hint does not move: {footer}"
            offset = nxt
        assert found == expected, f"grep -C {context} found lines {found}, expected {expected}"
        counted = text_of(self.tools.grep(needle, self.spill, literal=True, output_mode="count"))
        assert counted.split("\n", 1)[0].endswith(f": {len(expected)} matching lines"), counted
