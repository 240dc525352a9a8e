"""Grep (``grep_spill``): one search over one spill or the session, as a bounded page.

Every spill is searched with RE2 on bytes (:mod:`~spillstore._tools.regex`; linear
time, so model-written patterns cannot backtrack catastrophically), range by stored
range (:mod:`~spillstore._tools.scan`), with line numbers from the spill's line index.
Three output modes share the paging (``head_limit`` results from ``offset``) and the
page cap; the last line is ``end of results`` or the exact call for the next page::

    grep_spill "timeout" in spill bash-0123456789abcdef0123: matching lines 1-100
    1234:2026-11-29T12:03:04Z WARN [db.pool] request failed after timeout
    -- more results: call grep_spill(pattern="timeout", spill="bash-...", offset=100) --

With several spills each line is prefixed by the spill id (``bash-...:1234:text``),
context lines use ``-`` instead of ``:`` and ``--`` separates groups, as grep does.
A spill the retention cap cut, or one that expired during a session-wide search, is
named in a note rather than failing the search.
"""

from __future__ import annotations

import itertools
import json
import mmap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from spillstore._core.index import LineIndex
from spillstore._core.ranges import format_ranges
from spillstore._core.utf8 import utf8_size
from spillstore._errors import SpillNotFound, SpillstoreError
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import MAX_SAFE_INT, GrepArgs
from spillstore._tools.grep_lines import ContentWriter
from spillstore._tools.grep_plain import render_plain
from spillstore._tools.regex import Buffer, Matcher
from spillstore._tools.scan import Haystack, count_matching_lines, iter_hits
from spillstore._tools.text import ToolsView, quote

__all__ = ["Search"]

_NOTE_BYTES = 200
"""An upper bound of a Grep note's size, its spill id excluded."""

_MAX_NOTES = 2
"""Grep names at most this many spills it could not search in full (then a count)."""

_ECHO_CHARS = 100
"""Grep repeats at most this many characters of the pattern in its title and hints."""

_HINTED_DEFAULTS = {
    key: field.default
    for key, field in GrepArgs.model_fields.items()
    if key not in ("pattern", "spill", "offset")
}
"""The arguments a next-page hint names only when they differ from these defaults (it
always writes the pattern, the spill and the offset itself)."""


def _searchable(data: bytes | memoryview) -> Buffer:
    """The store's buffer as an object with ``find``/``count`` (``bytes`` or ``mmap``).

    ``memoryview`` has neither, so the object under a view of a whole ``bytes`` or
    ``mmap`` is searched directly; any other shape is copied (bounded by the retention
    cap).
    """
    if not isinstance(data, memoryview):
        return data
    owner = data.obj
    if isinstance(owner, bytes | mmap.mmap) and len(owner) == len(data) and data.contiguous:
        return owner
    return bytes(data)


def _as_haystacks(meta: SpillMeta, buf: Buffer, *, trust_utf8: bool = True) -> list[Haystack]:
    """One haystack per stored range: the store lays the ranges out one after another."""
    valid = trust_utf8 and not meta.invalid_utf8
    out: list[Haystack] = []
    base = 0
    for start, end in meta.stored_ranges:
        size = end - start
        out.append(
            Haystack(buf, base, base + size, start, valid, start > 0, end < meta.total_bytes)
        )
        base += end - start
    return out


def _may_match(meta: SpillMeta, buf: Buffer, matcher: Matcher) -> bool:
    """False only if no stored range of the spill holds a match: one RE2 call when the
    spill is one stored range (most spills: across a session, most hold no match)."""
    if len(meta.stored_ranges) != 1:
        return True
    return matcher.raw(matcher.anchor, buf, 0, len(buf))[0][0] >= 0


def _one_line_once(
    stacks: Sequence[Haystack], matcher: Matcher, index: LineIndex
) -> list[Haystack]:
    """The stored ranges, searched so that a line running across a gap counts once.

    When the retention cap cut one line in two (no newline between the end of a kept
    range and the start of the next), and both parts of the line match, the part after
    the gap is skipped up to its first newline: the line is reported from its first part.
    """
    return [
        stacks[0],
        *(_past_a_reported_line(a, b, matcher, index) for a, b in itertools.pairwise(stacks)),
    ]


def _past_a_reported_line(
    before: Haystack, after: Haystack, matcher: Matcher, index: LineIndex
) -> Haystack:
    """``after``, starting past its first line when that line began before the gap and
    matches on both sides of it."""
    buf = before.buf
    try:
        one_line = (
            before.hi > before.lo
            and buf[before.hi - 1 : before.hi] != b"\n"
            and index.newlines_at(before.origin + before.hi - before.lo)
            == index.newlines_at(after.origin)
        )
    except KeyError:  # not a checkpoint: keep both parts
        return after
    if not one_line:
        return after
    newline = buf.find(b"\n", after.lo, after.hi)
    end = after.hi if newline < 0 else newline
    cut = buf.rfind(b"\n", before.lo, before.hi) + 1 or before.lo
    # The part after the gap first: it is bounded by the retained tail, and when it holds
    # no match there is nothing to skip (the part before is then never searched twice).
    if not count_matching_lines(Haystack(buf, after.lo, end, after.origin), matcher, stop_after=1):
        return after
    if not count_matching_lines(
        Haystack(buf, cut, before.hi, before.origin + cut - before.lo), matcher, stop_after=1
    ):
        return after
    lo = after.hi if newline < 0 else newline + 1
    origin = after.origin + lo - after.lo  # lo now starts a whole line (or is the end)
    return Haystack(buf, lo, after.hi, origin, after.valid_utf8, cut_hi=after.cut_hi)


def _any_hit(stacks: Sequence[Haystack], matcher: Matcher) -> bool:
    """Whether any of a spill's stored ranges holds a matching line."""
    return any(count_matching_lines(hay, matcher, stop_after=1) for hay in stacks)


@dataclass(eq=False)
class Search:
    """Runs one Grep request over its spills and renders the bounded page."""

    tools: ToolsView
    args: GrepArgs
    matcher: Matcher
    metas: Sequence[SpillMeta]
    unsearched: list[str] = field(default_factory=list, init=False)
    trust_utf8: bool = field(default=True, init=False)

    @property
    def single(self) -> bool:
        """Whether one spill is searched (its lines then carry no spill id)."""
        return self.args.spill is not None

    @property
    def limit(self) -> int | None:
        """The most results on the page; ``None`` when ``head_limit`` is 0 or null."""
        return self.args.head_limit or None

    @property
    def before(self) -> int:
        """Context lines before each match."""
        return self.args.context if self.args.before is None else self.args.before

    @property
    def after(self) -> int:
        """Context lines after each match."""
        return self.args.context if self.args.after is None else self.args.after

    # --- text pieces

    def _where(self) -> str:
        if self.single:
            return f"in spill {self.metas[0].spill_id}"
        return f"in the {len(self.metas)} spills of session {quote(self.tools.session)}"

    def _title(self) -> str:
        pattern = json.dumps(
            self.args.pattern[:_ECHO_CHARS]
            + ("..." if len(self.args.pattern) > _ECHO_CHARS else ""),
            ensure_ascii=False,
        )
        flags = []
        if self.args.ignore_case:
            flags.append("ignore_case")
        if self.args.literal:
            flags.append("literal")
        extra = f" ({', '.join(flags)})" if flags else ""
        return f"{self.tools.names.grep} {pattern}{extra} {self._where()}"

    def _again(self, offset: int) -> str:
        """The call for the page at ``offset``: the arguments not at their defaults."""
        args = self.args
        if len(args.pattern) > _ECHO_CHARS:
            return f"{self.tools.names.grep}(<the same arguments>, offset={offset})"
        parts = [f"pattern={json.dumps(args.pattern, ensure_ascii=False)}"]
        if args.spill is not None:
            parts.append(f'spill="{self.metas[0].spill_id}"')
        for key, default in _HINTED_DEFAULTS.items():
            value = getattr(args, key)
            if value != default:
                parts.append(f"{key}={json.dumps(value)}")
        parts.append(f"offset={offset}")
        return f"{self.tools.names.grep}({', '.join(parts)})"

    def _gap_notes(self) -> list[str]:
        notes = self.unsearched[:_MAX_NOTES]
        if len(self.unsearched) > _MAX_NOTES:
            more = len(self.unsearched) - _MAX_NOTES
            notes.append(f"and {more} more spills not searched in full")
        return notes

    def _overhead(self) -> int:
        """An upper bound of the title, notes and hint sizes (the rest is for results)."""
        big = MAX_SAFE_INT
        title = self._title() + f": matching lines {big}-{big} (more below)"
        hint = f"-- more results: call {self._again(big)} --"
        id_bytes = max((len(m.spill_id) for m in self.metas), default=0)
        if self.single:
            notes = 0 if self.metas[0].complete else _NOTE_BYTES + id_bytes
        else:
            notes = (_MAX_NOTES + 1) * (_NOTE_BYTES + id_bytes)
        return utf8_size(title) + utf8_size(hint) + notes + 16

    def _each(
        self, *, numbered: bool
    ) -> Iterator[tuple[SpillMeta, list[Haystack], LineIndex | None]]:
        """Yield each spill to search: its stored ranges and line index; note what was not
        searched.

        The spills are opened from the metadata in hand, in one pass over the store
        (:meth:`~spillstore.Store.scan_data`). Across a session only spills with a
        matching line are yielded, so a spill with none costs one search and its index
        is never loaded; the index is None unless ``numbered``. With one spill its errors
        propagate (the result is that error); across a session a spill deleted or damaged
        meanwhile is skipped with a note, not a failed search.
        """
        store, matcher, single = self.tools.store, self.matcher, self.single
        for meta, data in store.scan_data(self.metas):
            try:
                if isinstance(data, SpillstoreError):
                    raise data
                buf = _searchable(data)
                found = single or _may_match(meta, buf, matcher)
                if found:
                    stacks = _as_haystacks(meta, buf, trust_utf8=self.trust_utf8)
                    found = single or _any_hit(stacks, matcher)
                spliced = found and len(stacks) > 1  # retention cut a line in two?
                index = store.line_index_of(meta) if found and (numbered or spliced) else None
                if spliced:
                    assert index is not None
                    stacks = _one_line_once(stacks, matcher, index)
            except SpillstoreError as exc:
                if single:
                    raise
                reason = "it expired" if isinstance(exc, SpillNotFound) else "it cannot be read"
                self.unsearched.append(f"spill {meta.spill_id} was not searched: {reason}")
                continue
            if not meta.complete:
                self.unsearched.append(
                    f"spill {meta.spill_id} was saved in part: bytes "
                    f"{format_ranges(meta.gaps)} were not kept and were not searched"
                )
            if found:
                yield meta, stacks, index

    # --- modes

    def run(self) -> str:
        mode = self.args.output_mode
        if mode == "count":
            return self._counts()
        if mode == "spills":
            return self._spills()
        return self._content()

    def _finish(self, head: str, body: Sequence[str], tail: str) -> str:
        return "\n".join([head, *self._gap_notes(), *body, tail])

    def _counts(self) -> str:
        tools, args = self.tools, self.args
        rows: list[tuple[SpillMeta, int]] = []
        for meta, stacks, _ in self._each(numbered=False):
            found = sum(count_matching_lines(hay, self.matcher) for hay in stacks)
            if found or self.single:
                rows.append((meta, found))
        total = sum(found for _, found in rows)
        if self.single:
            meta, found = rows[0]
            head = f"{self._title()}: {found} matching lines"
            return self._finish(head, [], "end of results")
        budget = tools.max_page_bytes - self._overhead()
        body: list[str] = []
        used = 0
        selected = rows[args.offset :]
        shown = 0
        for meta, found in selected:
            if self.limit is not None and shown >= self.limit:
                break
            entry = f"{meta.spill_id}: {found} (tool {quote(meta.tool_name, 60)})"
            if used + utf8_size(entry) + 1 > budget:
                break
            body.append(entry)
            used += utf8_size(entry) + 1
            shown += 1
        head = f"{self._title()}: {total} matching lines in {len(rows)} spills" + (
            f"; counts {args.offset + 1}-{args.offset + shown}" if shown else ""
        )
        if args.offset + shown < len(rows):
            tail = f"-- more results: call {self._again(args.offset + shown)} --"
        else:
            tail = "end of results"
        return self._finish(head, body, tail)

    def _spills(self) -> str:
        tools, args = self.tools, self.args
        budget = tools.max_page_bytes - self._overhead()
        body: list[str] = []
        used = 0
        matched = 0
        shown = 0
        more = False
        for meta, stacks, _ in self._each(numbered=False):
            if self.single and not _any_hit(stacks, self.matcher):
                continue  # across a session only spills with a match come
            matched += 1
            if matched <= args.offset:
                continue
            entry = (
                f"{meta.spill_id} (tool {quote(meta.tool_name, 60)}, call "
                f"{quote(meta.tool_call_id, 60)})"
            )
            page_full = used + utf8_size(entry) + 1 > budget
            if (self.limit is not None and shown >= self.limit) or page_full:
                more = True
                break
            body.append(entry)
            used += utf8_size(entry) + 1
            shown += 1
        if shown:
            head = f"{self._title()}: spills with matches {args.offset + 1}-{args.offset + shown}"
        elif matched:
            head = (
                f"{self._title()}: no spills with matches after offset {args.offset} "
                f"({matched} in all)"
            )
        else:
            head = f"{self._title()}: no spill matches"
        tail = (
            f"-- more results: call {self._again(args.offset + shown)} --"
            if more
            else "end of results"
        )
        return self._finish(head, body, tail)

    def _content(self) -> str:
        """Content mode; a spill whose bytes are not all valid UTF-8 is rendered lossily."""
        text = self._content_pass(lossy=any(meta.invalid_utf8 for meta in self.metas))
        if text is None:  # metadata said valid UTF-8 and was wrong: render it safely
            self.unsearched.clear()
            self.trust_utf8 = False
            text = self._content_pass(lossy=True)
        assert text is not None
        return text

    def _content_pass(self, *, lossy: bool) -> str | None:
        tools, args = self.tools, self.args
        writer = ContentWriter(
            budget=tools.max_page_bytes - self._overhead(),
            column_bytes=tools.max_column_bytes,
            before=self.before,
            after=self.after,
            lossy=lossy,
        )
        skip = args.offset
        limit = self.limit
        seen = 0
        more = False
        plain = not (self.before or self.after or lossy)
        for meta, stacks, index in self._each(numbered=True):
            assert index is not None
            prefix = b"" if self.single else meta.spill_id.encode("ascii")
            for hay in stacks:
                add = writer.start(hay, prefix)
                if plain:
                    found, shown, used, more = render_plain(
                        hay,
                        self.matcher,
                        index,
                        head=prefix + b":" if prefix else b"",
                        column_bytes=writer.column_bytes,
                        skip=max(0, skip - seen),
                        limit=None if limit is None else limit - writer.hits,
                        budget=writer.budget - writer.used,
                        pieces=writer.pieces,
                        long_line=writer.long_line,
                    )
                    seen += found
                    writer.hits += shown
                    writer.used += used
                    if more:
                        break
                    continue
                stop_at: int | None = None
                for line, line_start, line_end, match_start, _ in iter_hits(
                    hay, self.matcher, index
                ):
                    seen += 1
                    if seen <= skip:
                        continue
                    if limit is not None and writer.hits >= limit:
                        more = True
                        stop_at = line_start
                        break
                    if not add(line, line_start, line_end, match_start):
                        more = True
                        break
                writer.end(stop_at)
                if more:
                    break
            if more:
                break
        shown = writer.hits
        if shown:
            head = f"{self._title()}: matching lines {skip + 1}-{skip + shown}" + (
                " (more below)" if more else ""
            )
        elif seen > skip or skip == 0:
            head = f"{self._title()}: no matching lines"
        else:
            head = f"{self._title()}: no matching lines after offset {skip} ({seen} in all)"
        tail = f"-- more results: call {self._again(skip + shown)} --" if more else "end of results"
        lead = "".join(f"{line}\n" for line in [head, *self._gap_notes()])
        try:
            text = writer.text(lead, tail)  # the page in one copy: it may be megabytes
        except UnicodeDecodeError:
            return None
        if more and not shown:  # a match bigger than the page: the hint still moves on
            head = f"{self._title()}: matching line {skip + 1} does not fit in one page"
            tail = f"-- more results: call {self._again(skip + 1)} --"
            return "".join((f"{head}\n", *(f"{n}\n" for n in self._gap_notes()), tail))
        return text
