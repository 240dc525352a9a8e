r"""The Grep engine: linear-time matching over a spill's stored bytes, line by line.

Patterns come from a model, so they never reach a backtracking engine. Every pattern is
compiled by google-re2 and searched on **bytes** (RE2 is linear in the input whatever
the pattern; on ``str`` it would re-encode the text on every call). Constructs RE2 cannot
run in linear time (backreferences, lookaround, atomic groups, possessive repeats) are
refused with a message naming the construct.

A plain literal (no regex metacharacters, or ``literal=True``) is also searched with
``bytes.find``/``mmap.find``, adaptively. Measured on the benchmark log (2 cores, Python
3.11, google-re2 1.1): RE2's literal-prefix accelerator scans about 2.5x faster than
``find`` (about 5.8 vs 2.2 GB/s), but each RE2 call costs about 0.6 us against 0.13 us
for ``find``. So the scanner asks RE2 for the next hit after a long gap, and ``find``
while hits are less than :data:`DENSE_GAP_BYTES` apart (the crossover). Both engines
give the same leftmost match of a literal, so the choice never changes a result.

Two more things keep the per-hit cost down, both proven safe only for patterns whose
matches cannot contain a newline (:func:`newline_free`): ``(?:pattern)[^\n]*`` finds a
match and the end of its line in one RE2 call, and a regex without a literal prefix but
with a required literal (``[0-9]+ ms NEEDLE``) is searched for that literal first
(:func:`required_literal`), since RE2 is fast only from a literal prefix.

Line numbers come from the spill's sparse line index: the first hit of a run counts
newlines from its nearest checkpoint, later hits count from the previous hit, so the
counting work is bounded by the distance between hits (or one index block), never by
the distance from the start of the file, and every count is one ``bytes.count`` in C.

A *hit* is a matching line: the line holding the start of a match. A match that runs
over several lines is reported at its first line; the next search starts after that
line (or after the match, if it ends later). Nothing here formats model-facing text
except :func:`render_plain`, the fused hot loop of Grep's content mode.
"""

from __future__ import annotations

import mmap
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import re2

from spillstore._core.index import INDEX_BLOCK_BYTES, LineIndex
from spillstore._errors import RequestRefused

__all__ = [
    "DENSE_GAP_BYTES",
    "REGEX_METACHARACTERS",
    "Haystack",
    "Hit",
    "Matcher",
    "compile_pattern",
    "count_matching_lines",
    "iter_hits",
    "newline_free",
    "render_plain",
    "required_literal",
]

REGEX_METACHARACTERS = frozenset(".^$*+?()[]{}|\\")
"""A pattern without any of these is a plain literal."""

_NEWLINE = 0x0A

DENSE_GAP_BYTES = 1600
"""Below this gap between hits, ``find`` beats an RE2 call for a literal (measured)."""

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


Buffer = bytes | mmap.mmap
"""What the scanners search: ``bytes`` (memory store) or an ``mmap`` (local store)."""

RawMatch = Callable[[Any, Buffer, int, int], list[tuple[int, int]]]
"""``raw(anchor, buf, pos, end) -> [(start, end)]``: RE2's binding, ``(-1, -1)`` if none."""


@dataclass(frozen=True, slots=True)
class Haystack:
    """One stored range of a spill, as a searchable buffer.

    Attributes:
        buf: the buffer holding the range (it may hold other ranges too).
        lo, hi: the range's physical bounds in ``buf``.
        origin: the original offset of ``buf[lo]``.
        valid_utf8: every byte of the range is valid UTF-8 (so RE2's ``[^\\n]*`` always
            runs on to the newline, and need not be checked).
    """

    buf: Buffer
    lo: int
    hi: int
    origin: int
    valid_utf8: bool = False


Hit = tuple[int, int, int, int, int]
"""A matching line: ``(line, line_start, line_end, match_start, match_end)``.

``line`` is the 1-based line number in the original output (0 when not numbered); the
offsets are physical offsets in the haystack's buffer, the line without its newline. A
plain tuple: it is made once per hit on a hot path."""


@dataclass(frozen=True, slots=True)
class Matcher:
    """A compiled model pattern.

    Attributes:
        pattern: the pattern as given.
        needle: the UTF-8 bytes of a case-sensitive literal (also searched with
            ``find``), else None.
        raw: RE2's search for the next match span (see :data:`RawMatch`).
        anchor: the unanchored-search constant ``raw`` takes.
        prefilter: RE2's search for a literal every match contains (see
            :func:`required_literal`), when the pattern has one and no literal prefix.
        to_line_end: RE2's search for ``(?:pattern)[^\\n]*``, when no match can span a
            line: one call gives where the next matching line's match starts and where
            that line ends (the hot loops then skip a ``find`` per hit). RE2 reads UTF-8,
            so ``[^\\n]*`` stops early at an invalid byte; the callers check for that.
        to_next_line: the same with ``\\n?`` added: its match ends where the next line
            starts (for counting).
    """

    pattern: str
    needle: bytes | None
    raw: RawMatch
    anchor: Any
    prefilter: RawMatch | None = None
    to_line_end: RawMatch | None = None
    to_next_line: RawMatch | None = None

    def searcher(self, buf: Buffer) -> Callable[[int, int], tuple[int, int]]:
        """Return ``search(pos, end) -> (start, end)`` of the next match, ``(-1, -1)`` if none.

        For a literal it switches between RE2 and ``find`` by the last gap between hits;
        with a prefilter it looks for the required literal first (see :func:`_filtered`).
        """
        raw, anchor, needle = self.raw, self.anchor, self.needle
        if self.prefilter is not None:
            return _filtered(buf, raw, self.prefilter, anchor)
        if needle is None:
            return lambda pos, end: raw(anchor, buf, pos, end)[0]
        find = buf.find
        size = len(needle)
        dense = False

        def search(pos: int, end: int) -> tuple[int, int]:
            nonlocal dense
            if dense:
                start = find(needle, pos, end)
                if start < 0:
                    return -1, -1
                found = start, start + size
            else:
                found = raw(anchor, buf, pos, end)[0]
                start = found[0]
                if start < 0:
                    return found
            dense = start - pos < DENSE_GAP_BYTES
            return found

        return search


def _filtered(
    buf: Buffer, raw: RawMatch, prefilter: RawMatch, anchor: Any
) -> Callable[[int, int], tuple[int, int]]:
    """A search that finds the pattern's required literal first, then checks its line.

    RE2 scans at its fastest only from a literal *prefix*; ``[0-9]+ ms NEEDLE`` has
    none, and RE2's DFA then reads every byte (about 0.7 GB/s here). Every match of
    such a pattern contains ``" ms NEEDLE"`` and lies within one line (the prefilter is
    only built for patterns that cannot match a newline), so: find the literal (fast),
    run the pattern on that line only, and go on after the line if it does not match.
    Results are exactly the plain search's. When candidate lines mostly fail (the
    literal is common), the search falls back to the plain scan for good.
    """
    find, rfind = buf.find, buf.rfind
    misses = found = 0
    filtering = True

    def search(pos: int, end: int) -> tuple[int, int]:
        nonlocal misses, found, filtering
        while filtering:
            candidate = prefilter(anchor, buf, pos, end)[0][0]
            if candidate < 0:
                return -1, -1
            line_start = max(rfind(b"\n", 0, candidate) + 1, pos)
            line_end = find(b"\n", candidate, end)
            if line_end < 0:
                line_end = end
            match = raw(anchor, buf, line_start, line_end)[0]
            if match[0] >= 0:
                found += 1
                return match
            misses += 1
            if misses > 64 and misses > 8 * found:
                filtering = False
            pos = line_end + 1
            if pos > end:
                return -1, -1
        return raw(anchor, buf, pos, end)[0]

    return search


_NEWLINE_CAPABLE = (
    "\\n", "\\s", "\\D", "\\W", "\\p", "\\P", "\\C", "\\x", "\\Q", "\n",
    "\\0", "\\1", "\\2", "\\3", "\\4", "\\5", "\\6", "\\7",
)  # fmt: skip
"""Pattern pieces that may match a newline, or that this scan does not parse."""

MIN_PREFILTER_BYTES = 3
"""A required literal shorter than this is not worth a prefilter."""


class _GiveUp(Exception):
    """The pattern is beyond what :func:`required_literal` can prove things about."""


def required_literal(pattern: str) -> str | None:
    r"""Return a literal that every match of ``pattern`` contains, if one is easy to prove.

    A conservative scan of the pattern's top level: runs of plain (or backslash-escaped
    punctuation) characters that no quantifier makes optional; groups, classes, ``.``,
    anchors and escapes such as ``\d`` end a run. Gives up (None) on alternation, flags,
    anything that may match a newline (so every match lies within one line), and when
    the longest run is a prefix of the pattern (RE2 accelerates literal prefixes
    itself) or is shorter than :data:`MIN_PREFILTER_BYTES` bytes.
    """
    if "|" in pattern or not newline_free(pattern):
        return None
    runs = _literal_runs(pattern)
    if not runs:
        return None
    start, best = max(runs, key=lambda run: len(run[1].encode("utf-8")))
    if len(best.encode("utf-8")) < MIN_PREFILTER_BYTES or not pattern[:start].strip("^"):
        return None
    return _rare_start(best)


_COMMON_FIRST = " etaoinsrhldcumfpgwybvkxjqz0123456789=:.,-_/[]()\"'"
"""Bytes by how common they are in typical tool output, most common first."""


def _rare_start(literal: str) -> str:
    """The suffix of ``literal`` (at least 3 bytes) starting at its least common character.

    RE2 finds a literal by looking for its first byte, so ``" ms NEEDLE"`` is found far
    faster as ``"NEEDLE"``: spaces are everywhere, capitals are rare.
    """
    best, best_rank = literal, -1
    for i, char in enumerate(literal):
        if len(literal[i:].encode("utf-8")) < MIN_PREFILTER_BYTES:
            break
        rank = _COMMON_FIRST.find(char)
        rank = len(_COMMON_FIRST) if rank < 0 else rank
        if rank > best_rank:
            best, best_rank = literal[i:], rank
    return best


def newline_free(pattern: str) -> bool:
    """Whether no match of ``pattern`` can contain a newline, as far as a cautious scan sees.

    False for flags (``(?s)`` lets ``.`` match one), escapes that may match a newline
    (``\\n``, ``\\s``, ``\\W``, ``\\x0a``, ...), negated or escaped classes and ranges
    that span it, and anything it cannot parse.
    """
    if "(?" in pattern.replace("(?:", ""):
        return False
    if any(piece in pattern for piece in _NEWLINE_CAPABLE):
        return False
    try:
        _literal_runs(pattern)
    except _GiveUp:
        return False
    return True


def _literal_runs(pattern: str) -> list[tuple[int, str]]:
    """The top-level runs of required literal characters, with where each starts."""
    runs: list[tuple[int, str]] = []
    run: list[str] = []
    run_start = 0
    i = 0

    def flush() -> None:
        if run:
            runs.append((run_start, "".join(run)))
            run.clear()

    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            following = pattern[i + 1 : i + 2]
            if following and not following.isalnum():
                if not run:
                    run_start = i
                run.append(following)
            else:
                flush()  # \d, \w, \b, \A, \z ...: not a literal character
            i += 2
        elif char in "*?{":
            if run:
                run.pop()  # the quantified character is optional
            flush()
            i = _skip_quantifier(pattern, i)
        elif char == "+":
            flush()  # the character before is required, and the run ends with it
            i = _skip_quantifier(pattern, i)
        elif char in "([":
            flush()
            i = _skip_bracket(pattern, i)
        elif char in ".^$)]}":
            flush()
            i += 1
        else:
            if not run:
                run_start = i
            run.append(char)
            i += 1
    flush()
    return runs


def _skip_quantifier(pattern: str, i: int) -> int:
    """The index after the quantifier at ``i`` (``*``, ``+``, ``?``, ``{m,n}``, lazy ``?``)."""
    if pattern[i] == "{":
        close = pattern.find("}", i)
        i = len(pattern) if close < 0 else close + 1
    else:
        i += 1
    if pattern[i : i + 1] == "?":
        i += 1
    return i


def _skip_bracket(pattern: str, i: int) -> int:
    """The index after the group ``(...)`` or class ``[...]`` opening at ``i``.

    Raises:
        _GiveUp: a class that is negated, uses escapes or POSIX names, or is unclosed
            (it might match a newline: ``[\t-\r]`` does).
    """
    if pattern[i] == "[":
        close = pattern.find("]", i + 2)
        body = pattern[i + 1 : close]
        if close < 0 or body.startswith("^") or "\\" in body or "[:" in body:
            raise _GiveUp
        for k in range(1, len(body) - 1):
            if body[k] == "-" and ord(body[k - 1]) <= 0x0A <= ord(body[k + 1]):
                raise _GiveUp  # a range that holds the newline, like [\t-\r]
        return close + 1
    depth = 0
    j = i
    while j < len(pattern):
        char = pattern[j]
        if char == "\\":
            j += 2
            continue
        if char == "[":
            j = _skip_bracket(pattern, j)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise _GiveUp


def _binding(regex: Any) -> tuple[RawMatch, Any]:
    """The fastest way to ask RE2 for one span: the binding's ``Match`` when present.

    google-re2's ``search`` builds a match object per call (about 1 us); its ``_regexp``
    binding returns the spans directly (about 0.6 us), which matters at 35,000 hits.
    """
    binding = getattr(regex, "_regexp", None)
    anchor = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
    if binding is not None and anchor is not None and hasattr(binding, "Match"):
        raw: RawMatch = binding.Match
        return raw, anchor

    def search(_: Any, buf: Buffer, pos: int, end: int) -> list[tuple[int, int]]:
        found = regex.search(buf, pos, end)  # pragma: no cover - other google-re2 versions
        return [(found.start(), found.end()) if found is not None else (-1, -1)]

    return search, None  # pragma: no cover


def _options(*, ignore_case: bool, literal: bool) -> Any:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    options.literal = literal
    # Only the whole match's span is used; capture groups would force RE2 off its DFA
    # onto the NFA (e.g. 78 ms instead of 0.3 ms for (.*a){20} over 100 KB).
    options.never_capture = True
    return options


def compile_pattern(pattern: str, *, ignore_case: bool = False, literal: bool = False) -> Matcher:
    """Compile a model's pattern for searching bytes.

    ``^`` and ``$`` match at line boundaries (grep semantics); ``.`` does not match a
    newline. A pattern without regex metacharacters (or with ``literal=True``) is a
    literal.

    Raises:
        RequestRefused: the pattern is empty, not valid Unicode, uses a construct RE2 does not
            support, or does not compile; the message says which and what to do.
    """
    if not pattern:
        raise RequestRefused("the pattern is empty; give a literal string or an RE2 regex")
    try:
        encoded = pattern.encode("utf-8")
    except UnicodeEncodeError:
        raise RequestRefused(
            "the pattern is not valid Unicode (it holds a lone surrogate)"
        ) from None
    is_literal = literal or not (REGEX_METACHARACTERS & set(pattern))
    if is_literal:
        program = encoded
    else:
        for marker, construct in _UNSUPPORTED:
            if marker in pattern:
                raise RequestRefused(_unsupported(construct))
        program = b"(?m)" + encoded
    try:
        regex = re2.compile(program, _options(ignore_case=ignore_case, literal=is_literal))
    except re2.error as exc:
        raise RequestRefused(_explain(pattern, exc)) from None
    raw, anchor = _binding(regex)
    needle = encoded if is_literal and not ignore_case else None
    prefilter = None
    required = None if is_literal else required_literal(pattern)
    if required is not None:
        literal_regex = re2.compile(
            required.encode("utf-8"), _options(ignore_case=ignore_case, literal=True)
        )
        prefilter = _binding(literal_regex)[0]
    body = None
    if is_literal and b"\n" not in encoded:
        body = re2.escape(encoded)
    elif not is_literal and prefilter is None and newline_free(pattern):
        body = b"(?m)" + encoded
    return Matcher(
        pattern=pattern,
        needle=needle,
        raw=raw,
        anchor=anchor,
        prefilter=prefilter,
        to_line_end=None if body is None else _line_program(body, b"", ignore_case),
        to_next_line=None if body is None else _line_program(body, b"\\n?", ignore_case),
    )


def _line_program(body: bytes, tail: bytes, ignore_case: bool) -> RawMatch | None:
    """RE2's search for ``(?:body)[^\\n]*`` plus ``tail``: a match, then its line's rest."""
    try:
        regex = re2.compile(
            b"(?:" + body + b")[^\\n]*" + tail, _options(ignore_case=ignore_case, literal=False)
        )
    except re2.error:  # pragma: no cover - body compiled on its own already
        return None
    return _binding(regex)[0]


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


def iter_hits(hay: Haystack, matcher: Matcher, index: LineIndex | None) -> Iterator[Hit]:
    """Yield the matching lines of one stored range, in order, with their numbers.

    Without an index the lines are not numbered (``line`` is 0). Each step is a C call:
    the next match, its line's start (``rfind``) and end (``find``), and the newlines
    since the previous hit (``count``), or since the nearest index checkpoint when the
    previous hit is more than one index block away.
    """
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return
    search = matcher.searcher(buf)
    find, rfind = buf.find, buf.rfind
    is_bytes = isinstance(buf, bytes)
    number = index is not None
    offsets, newline_counts = (index.offsets, index.newlines) if index is not None else ((), ())
    last_interval = len(offsets) - 2
    shift = hay.origin - lo  # original offset = physical offset + shift
    known = -1  # a physical offset whose newline count is known ...
    newlines = 0  # ... and that count (newlines before it, from the original start)
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
        line = 0
        if number:
            if known < 0 or line_start - known > INDEX_BLOCK_BYTES:
                interval = min(bisect_right(offsets, line_start + shift) - 1, last_interval)
                known = offsets[interval] - shift
                newlines = newline_counts[interval]
            if is_bytes:
                newlines += buf.count(b"\n", known, line_start)  # type: ignore[union-attr]
            elif line_start > known:
                newlines += buf[known:line_start].count(b"\n")
            known = line_start
            line = newlines + 1
        yield line, line_start, line_end, match_start, match_end
        pos = line_end + 1 if line_end + 1 > match_end else match_end


def count_matching_lines(hay: Haystack, matcher: Matcher, *, stop_after: int | None = None) -> int:
    """Return how many lines of one stored range match (at most ``stop_after``).

    The hot loop of count mode (grep -c's job): one RE2 call per matching line, for
    ``(?:pattern)[^\\n]*\\n?``, whose match ends where the next line starts.
    """
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return 0
    to_next_line, anchor = matcher.to_next_line, matcher.anchor
    if to_next_line is None or matcher.prefilter is not None:
        count = 0
        for _ in iter_hits(hay, matcher, None):
            count += 1
            if stop_after is not None and count >= stop_after:
                break
        return count
    valid = hay.valid_utf8
    find, rfind = buf.find, buf.rfind
    limit = hi if stop_after is None else stop_after
    count = 0
    pos = lo
    while pos < hi:
        start, pos = to_next_line(anchor, buf, pos, hi)[0]
        if start < 0:
            break
        if start >= hi and rfind(b"\n", lo, start) + 1 >= hi:
            break  # an empty match after the final newline: not a line
        count += 1
        if count >= limit:
            break
        if not valid and pos < hi and buf[pos - 1] != _NEWLINE:  # stopped at invalid UTF-8
            pos = find(b"\n", pos, hi)
            if pos < 0:
                break
            pos += 1
        elif pos == start:  # an empty match at the very end of the range
            break
    return count


def render_plain(
    hay: Haystack,
    matcher: Matcher,
    index: LineIndex,
    *,
    head: bytes,
    column_bytes: int,
    skip: int,
    limit: int | None,
    budget: int,
    pieces: list[bytes],
    long_line: Callable[[int, int, int, int], bytes],
) -> tuple[int, int, int, bool]:
    """Render matching lines as ``<head><line>:<text>\\n`` into ``pieces``: grep -n's job.

    The loop of :func:`iter_hits` fused with the formatting, because listing every one
    of 35,000 matches pays this loop body 35,000 times: one search, one ``rfind``, one
    ``find``, one ``count`` and one ``%``-format per hit, no generator and no per-hit
    objects besides the output line. Skipped hits (``skip``) are not numbered. A line
    over ``column_bytes`` is rendered by ``long_line(line, start, end, match_start)``.

    Returns:
        ``(seen, shown, used, more)``: hits seen (skipped ones included), lines added,
        their bytes, and whether it stopped early (``limit`` or ``budget`` reached) with
        a hit left unshown.
    """
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    if hi <= lo:
        return 0, 0, 0, False
    pos, seen = lo, 0
    if skip:
        pos, seen = _skip(hay, matcher, skip)
    needle = matcher.needle
    raw, anchor = matcher.raw, matcher.anchor
    size = len(needle) if needle is not None else 0
    find, rfind = buf.find, buf.rfind
    is_bytes = isinstance(buf, bytes)
    offsets, newline_counts = index.offsets, index.newlines
    last_interval = len(offsets) - 2
    shift = hay.origin - lo
    cap = hi if limit is None else limit  # shown can never reach hi: one hit a byte at most
    form = head + b"%d:%b\n"  # head is a spill id and a colon: no % in it
    shown = used = 0
    known = -1
    newlines = 0
    dense = False
    filtered = matcher.searcher(buf) if matcher.prefilter is not None else None
    to_line_end = matcher.to_line_end
    valid = hay.valid_utf8
    while pos < hi:
        line_end = -1
        if filtered is not None:
            match_start, match_end = filtered(pos, hi)
            if match_start < 0:
                break
        elif dense:
            match_start = find(needle, pos, hi)  # type: ignore[arg-type]
            if match_start < 0:
                break
            match_end = match_start + size
        elif to_line_end is not None:
            match_start, line_end = to_line_end(anchor, buf, pos, hi)[0]
            if match_start < 0:
                break
            match_end = line_end
            if not valid and line_end < hi and buf[line_end] != _NEWLINE:  # invalid UTF-8
                line_end = -1
        else:
            match_start, match_end = raw(anchor, buf, pos, hi)[0]
            if match_start < 0:
                break
        if needle is not None:
            dense = match_start - pos < DENSE_GAP_BYTES
        newline = rfind(b"\n", lo, match_start)
        line_start = newline + 1 if newline >= 0 else lo
        if line_start >= hi:
            break
        if line_end < 0:
            line_end = find(b"\n", match_start, hi)
            if line_end < 0:
                line_end = hi
        pos = line_end + 1 if line_end + 1 > match_end else match_end
        if shown >= cap:
            return seen + shown + 1, shown, used, True
        if known < 0 or line_start - known > INDEX_BLOCK_BYTES:
            interval = min(bisect_right(offsets, line_start + shift) - 1, last_interval)
            known = offsets[interval] - shift
            newlines = newline_counts[interval]
        if is_bytes:
            newlines += buf.count(b"\n", known, line_start)  # type: ignore[union-attr]
        elif line_start > known:
            newlines += buf[known:line_start].count(b"\n")
        if line_end - line_start <= column_bytes:
            piece = form % (newlines + 1, buf[line_start:line_end])
        else:
            piece = long_line(newlines + 1, line_start, line_end, match_start)
        if used + len(piece) > budget:
            return seen + shown + 1, shown, used, True
        used += len(piece)
        pieces.append(piece)
        shown += 1
        # The shown line holds no newline but the one that ends it: count from there.
        known = line_end + 1
        newlines += 1
    return seen + shown, shown, used, False


def _skip(hay: Haystack, matcher: Matcher, count: int) -> tuple[int, int]:
    """Pass over ``count`` matching lines; return where to go on and how many there were."""
    buf, lo, hi = hay.buf, hay.lo, hay.hi
    search = matcher.searcher(buf)
    find, rfind = buf.find, buf.rfind
    pos = lo
    skipped = 0
    while skipped < count and pos < hi:
        match_start, match_end = search(pos, hi)
        if match_start < 0:
            break
        if match_start >= hi and rfind(b"\n", lo, match_start) + 1 >= hi:
            break  # an empty match after the final newline: not a line
        line_end = find(b"\n", match_start, hi)
        if line_end < 0:
            line_end = hi
        pos = line_end + 1 if line_end + 1 > match_end else match_end
        skipped += 1
    return pos, skipped
