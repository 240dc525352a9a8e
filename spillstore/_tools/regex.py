r"""Model-written patterns, compiled for linear-time matching on bytes.

Patterns come from a model, so they never reach a backtracking engine. Every pattern is
compiled by google-re2 and searched on **bytes** (RE2 is linear in the input whatever
the pattern; on ``str`` it would re-encode the text on every call). Constructs RE2 cannot
run in linear time (backreferences, lookaround, atomic groups, possessive repeats) are
refused with a message naming the construct and what to do instead.

Two more programs keep the scanners' per-hit cost down (:mod:`~spillstore._tools.scan`),
both proven safe only for patterns whose matches cannot contain a newline
(:func:`newline_free`): ``(?:pattern)[^\n]*`` finds a match and the end of its line in
one RE2 call, and a regex without a literal prefix but with a required literal
(``[0-9]+ ms NEEDLE``) is searched for that literal first (:func:`required_literal`),
since RE2 is fast only from a literal prefix. The literal analysis here is a cautious
scan of the pattern's text: when in doubt it gives up, and the plain search runs.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import re2

from spillstore._errors import RequestRefused, SpillstoreError

__all__ = [
    "REGEX_METACHARACTERS",
    "Buffer",
    "Matcher",
    "RawMatch",
    "compile_pattern",
    "newline_free",
    "required_literal",
]

REGEX_METACHARACTERS = frozenset(".^$*+?()[]{}|\\")
"""A pattern without any of these is a plain literal."""

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
        lead: for a case-sensitive literal whose rarest character is not its first, the
            bytes before that character (else empty): RE2 looks for a literal's first
            byte with ``memchr``, so a rare first byte is found with fewer stops.
        rare_line_end: ``to_line_end`` for the literal after ``lead``; a caller searches
            from ``pos + len(lead)`` and checks that ``lead`` stands before the match.
        spans_lines: a regex that may match a newline: a match that *starts* with the
            newline ending a line holds nothing of that line, so the scan does not count
            it as a hit there (``[^a]$`` or ``\\s+$`` are not told that a line followed
            by an empty one matches).
    """

    pattern: str
    needle: bytes | None
    raw: RawMatch
    anchor: Any
    prefilter: RawMatch | None = None
    to_line_end: RawMatch | None = None
    lead: bytes = b""
    rare_line_end: RawMatch | None = None
    spans_lines: bool = False


_NEWLINE_CAPABLE = (
    "\\n", "\\s", "\\D", "\\W", "\\p", "\\P", "\\C", "\\x", "\\Q", "\n",
    "\\0", "\\1", "\\2", "\\3", "\\4", "\\5", "\\6", "\\7",
)  # fmt: skip
"""Pattern pieces that may match a newline, or that this scan does not parse."""

MIN_PREFILTER_BYTES = 3
"""A required literal shorter than this is not worth a prefilter."""


class _GiveUp(SpillstoreError):
    """The pattern is beyond what :func:`required_literal` can prove things about.

    Control flow inside this module only: it never escapes :func:`required_literal` and
    :func:`newline_free`.
    """


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
    lead, rare_line_end = b"", None
    if is_literal and b"\n" not in encoded:
        body = re2.escape(encoded)
        rest = _rare_start(pattern).encode("utf-8") if needle is not None else encoded
        if len(rest) < len(encoded):
            lead = encoded[: len(encoded) - len(rest)]
            rare_line_end = _line_program(re2.escape(rest), ignore_case)
    elif not is_literal and prefilter is None and newline_free(pattern):
        body = b"(?m)" + encoded
    spans_lines = not is_literal and body is None and prefilter is None
    return Matcher(
        pattern=pattern,
        needle=needle,
        raw=raw,
        anchor=anchor,
        prefilter=prefilter,
        to_line_end=None if body is None else _line_program(body, ignore_case),
        lead=lead,
        rare_line_end=rare_line_end,
        spans_lines=spans_lines,
    )


def _line_program(body: bytes, ignore_case: bool) -> RawMatch | None:
    """RE2's search for ``(?:body)[^\\n]*``: a match, then the rest of its line."""
    try:
        regex = re2.compile(
            b"(?:" + body + b")[^\\n]*", _options(ignore_case=ignore_case, literal=False)
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
