"""The Grep engine: linear-time matching over a spill's stored bytes, line by line.

Patterns come from a model, so they never reach a backtracking engine: a pure literal is
searched with ``bytes.find`` (``mmap.find`` for local files), anything else with
google-re2 on **bytes** (RE2 is linear in the input whatever the pattern; on ``str`` it
would re-encode the text on every call). Constructs RE2 cannot run in linear time
(backreferences, lookaround, atomic groups, possessive repeats) are refused with a
message naming the construct.

Line numbers come from the spill's sparse line index: the first hit of a run counts
newlines from its nearest checkpoint, later hits count from the previous hit, so the
counting work is bounded by the distance between hits (or one index block), never by
the distance from the start of the file, and every count is one ``bytes.count`` in C.

A *hit* is a matching line: the line holding the start of a match. A match that runs
over several lines is reported at its first line; the next search starts after that
line (or after the match, if it ends later). Nothing here formats model-facing text.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import re2

from spillstore._meta import INDEX_BLOCK_BYTES, LineIndex

__all__ = [
    "REGEX_METACHARACTERS",
    "Haystack",
    "Hit",
    "Matcher",
    "Refusal",
    "compile_pattern",
    "count_matching_lines",
    "iter_hits",
]

REGEX_METACHARACTERS = frozenset(".^$*+?()[]{}|\\")
"""A pattern without any of these is a plain literal and is searched with ``find``."""

_UNSUPPORTED = (
    ("(?<=", "lookbehind (?<=...)"),
    ("(?<!", "negative lookbehind (?<!...)"),
    ("(?=", "lookahead (?=...)"),
    ("(?!", "negative lookahead (?!...)"),
    ("(?>", "atomic group (?>...)"),
    ("(?P=", "named backreference (?P=name)"),
    ("(?#", "comment group (?#...)"),
    ("\\Z", r"\Z (use \z for the end of the text, or $ for the end of a line)"),
)


class Refusal(Exception):
    """A request the model should fix; the message is the model-facing text."""


Buffer = bytes | mmap.mmap
"""What the scanners search: ``bytes`` (memory store) or an ``mmap`` (local store)."""


@dataclass(frozen=True, slots=True)
class Haystack:
    """One stored range of a spill, as a searchable buffer.

    Attributes:
        buf: the buffer holding the range (it may hold other ranges too).
        lo, hi: the range's physical bounds in ``buf``.
        origin: the original offset of ``buf[lo]``.
    """

    buf: Buffer
    lo: int
    hi: int
    origin: int

    def count_newlines(self, start: int, end: int) -> int:
        """Return the newlines in ``buf[start:end]`` (``mmap`` has no ``count``)."""
        if end <= start:
            return 0
        buf = self.buf
        if isinstance(buf, bytes):
            return buf.count(b"\n", start, end)
        return buf[start:end].count(b"\n")


@dataclass(frozen=True, slots=True)
class Hit:
    """A matching line: physical ``[line_start, line_end)`` (no newline) and its number."""

    line: int
    line_start: int
    line_end: int
    match_start: int
    match_end: int


@dataclass(frozen=True, slots=True)
class Matcher:
    """A compiled model pattern.

    Attributes:
        pattern: the pattern as given.
        needle: the UTF-8 literal when ``find`` is used, else None.
        regex: the compiled RE2 program when ``needle`` is None.
    """

    pattern: str
    needle: bytes | None
    regex: Any

    def searcher(self, buf: Buffer) -> Callable[[int, int], tuple[int, int]]:
        """Return ``search(pos, end) -> (start, end)`` of the next match, ``(-1, -1)`` if none."""
        needle = self.needle
        if needle is not None:
            find = buf.find
            size = len(needle)

            def find_literal(pos: int, end: int) -> tuple[int, int]:
                found = find(needle, pos, end)
                return (found, found + size) if found >= 0 else (-1, -1)

            return find_literal
        match = _raw_match(self.regex)
        return lambda pos, end: match(buf, pos, end)


def _raw_match(regex: Any) -> Callable[[Buffer, int, int], tuple[int, int]]:
    """The fastest way to ask RE2 for one span: the binding's ``Match`` when present.

    google-re2's ``search`` builds a match object per call (about 1 us); its ``_regexp``
    binding returns the spans directly (about 0.6 us), which matters at 35,000 hits.
    """
    binding = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if binding is not None and anchor is not None and hasattr(binding, "Match"):
        raw = binding.Match

        def match(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
            span: tuple[int, int] = raw(anchor, buf, pos, end)[0]
            return span

        return match

    def search(buf: Buffer, pos: int, end: int) -> tuple[int, int]:  # pragma: no cover
        found = regex.search(buf, pos, end)
        return (found.start(), found.end()) if found is not None else (-1, -1)

    return search


def _options(*, ignore_case: bool, literal: bool) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.literal = literal
    return options


def compile_pattern(pattern: str, *, ignore_case: bool = False, literal: bool = False) -> Matcher:
    """Compile a model's pattern for searching bytes.

    ``^`` and ``$`` match at line boundaries (grep semantics); ``.`` does not match a
    newline. A pattern without regex metacharacters (or with ``literal=True``) is a
    literal; case-sensitive literals use ``find``, the rest RE2.

    Raises:
        Refusal: the pattern is empty, not valid Unicode, uses a construct RE2 does not
            support, or does not compile; the message says which and what to do.
    """
    if not pattern:
        raise Refusal("the pattern is empty; give a literal string or an RE2 regex")
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal("the pattern is not valid Unicode (it holds a lone surrogate)") from None
    is_literal = literal or not (REGEX_METACHARACTERS & set(pattern))
    if is_literal and not ignore_case:
        return Matcher(pattern=pattern, needle=encoded, regex=None)
    if is_literal:
        program = encoded
    else:
        for marker, construct in _UNSUPPORTED:
            if marker in pattern:
                raise Refusal(_unsupported(construct))
        program = b"(?m)" + encoded
    try:
        regex = re2.compile(program, _options(ignore_case=ignore_case, literal=is_literal))
    except re2.error as exc:
        raise Refusal(_explain(pattern, exc)) from None
    return Matcher(pattern=pattern, needle=None, regex=regex)


def _unsupported(construct: str) -> str:
    return (
        f"the pattern uses {construct}, which the linear-time RE2 engine does not "
        "support (no lookaround, backreferences or atomic groups); rewrite it without "
        "that, or search a literal with literal=true"
    )


def _explain(pattern: str, exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    reason = reason.replace("(?m)" + pattern, pattern)  # our line-mode prefix, not theirs
    if "invalid escape sequence: \\" in reason and any(
        f"\\{digit}" in pattern for digit in "123456789"
    ):
        return _unsupported("a backreference (\\1 ... \\9)")
    if "bad repetition operator: " in reason and any(
        op in pattern for op in ("++", "*+", "?+", "}+")
    ):
        return _unsupported("a possessive repeat (a++, a*+, a?+)")
    if "pattern too large" in reason:
        return (
            "the pattern is too large for RE2 (big counted repeats multiply); use a "
            "smaller repeat count"
        )
    return f"invalid regex ({reason[:200]}); RE2 syntax, or pass literal=true"


def iter_hits(
    hay: Haystack,
    matcher: Matcher,
    index: LineIndex,
    *,
    number: bool = True,
) -> Iterator[Hit]:
    """Yield the matching lines of one stored range, in order.

    With ``number=False`` the line numbers are not computed (``Hit.line`` is 0), for
    callers that only skip or count hits.
    """
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return
    search = matcher.searcher(buf)
    find, rfind = buf.find, buf.rfind
    numberer = _Numberer(hay, index) if number else None
    pos = lo
    while pos < hi:
        match_start, match_end = search(pos, hi)
        if match_start < 0:
            return
        newline = rfind(b"\n", lo, match_start)
        line_start = newline + 1 if newline >= 0 else lo
        if line_start >= hi:  # an empty match after the final newline: not a line
            return
        line_end = find(b"\n", match_start, hi)
        if line_end < 0:
            line_end = hi
        line = numberer.line_of(line_start) if numberer is not None else 0
        yield Hit(line, line_start, line_end, match_start, match_end)
        pos = max(line_end + 1, match_end)


class _Numberer:
    """Numbers the lines of increasing physical offsets in one stored range."""

    __slots__ = ("_hay", "_index", "_known_newlines", "_known_pos")

    def __init__(self, hay: Haystack, index: LineIndex) -> None:
        self._hay = hay
        self._index = index
        self._known_pos = -1
        self._known_newlines = 0

    def line_of(self, position: int) -> int:
        """Return the 1-based line of physical ``position`` (non-decreasing calls)."""
        hay = self._hay
        if self._known_pos < 0 or position - self._known_pos > INDEX_BLOCK_BYTES:
            index = self._index
            original = hay.origin + position - hay.lo
            interval = index.interval_of_offset(original)
            checkpoint = index.offsets[interval]
            base = hay.lo + checkpoint - hay.origin
            newlines = index.newlines[interval] + hay.count_newlines(base, position)
        else:
            newlines = self._known_newlines + hay.count_newlines(self._known_pos, position)
        self._known_pos = position
        self._known_newlines = newlines
        return newlines + 1


def count_matching_lines(hay: Haystack, matcher: Matcher, *, stop_after: int | None = None) -> int:
    """Return how many lines of one stored range match (at most ``stop_after``)."""
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return 0
    find = buf.find
    count = 0
    pos = lo
    needle = matcher.needle
    if needle is not None and needle and b"\n" not in needle:
        # The hot loop of count mode: two C calls per matching line.
        size = len(needle)
        while True:
            found = find(needle, pos, hi)
            if found < 0:
                return count
            count += 1
            if stop_after is not None and count >= stop_after:
                return count
            line_end = find(b"\n", found + size, hi)
            if line_end < 0:
                return count
            pos = line_end + 1
    for _ in iter_hits(hay, matcher, _NO_INDEX, number=False):
        count += 1
        if stop_after is not None and count >= stop_after:
            break
    return count


_NO_INDEX = LineIndex.build([0], [0], ())
