"""List (``list_spills``): the spills of a session, oldest first and newest last.

A model finds its spills again with this after its context was compacted. Each entry
names the spill id, the tool and call that made it, its size in bytes and lines,
whether it was saved in full (or which byte ranges were kept), and the start of its
first line. The newest spills are shown first when the page cap or ``limit`` cuts the
list; the last line then says how to page back to older ones.
"""

from __future__ import annotations

import json

from spillstore._core.ids import validate_session
from spillstore._core.ranges import format_ranges
from spillstore._core.utf8 import head_cut, utf8_size
from spillstore._errors import ConfigError, RequestRefused, SpillstoreError
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import ListArgs
from spillstore._tools.text import ToolsView, quote

__all__ = ["list_page"]

_PREVIEW_BYTES = 100
"""List shows this many bytes of each spill's first line."""


def list_page(tools: ToolsView, args: ListArgs) -> str:
    """Render the page of the session's spills that ``args`` asks for.

    Raises:
        RequestRefused: another session without ``cross_session``, a bad session name,
            or an offset that skips every spill.
    """
    session = tools.session if args.session is None else args.session
    if session != tools.session and not tools.cross_session:
        raise RequestRefused(
            f"only this session's spills can be listed (session {quote(tools.session)}); "
            f"call {tools.names.list}() without a session"
        )
    try:
        validate_session(session)
    except ConfigError:
        raise RequestRefused(f"{quote(session)} is not a session name") from None
    metas = tools.store.list(session)
    total = len(metas)
    name = tools.names.list
    if total == 0:
        return f"{name}: session {quote(session)} has no spills"
    end = max(total - args.offset, 0)
    if end == 0:
        raise RequestRefused(
            f"offset {args.offset} skips every spill: session {quote(session)} has "
            f"{total}; call {name}() for the newest"
        )
    start = max(end - args.limit, 0)
    digits = len(str(total))
    header_max = (
        f"{name}: session {quote(session)}, spills {total}-{total} of {total} "
        f"(oldest first, newest last)"
    )
    footer_max = f"-- {total} older spills not shown: call {name}(offset={total}) --"
    budget = tools.max_page_bytes - utf8_size(header_max) - utf8_size(footer_max) - 4
    entries: list[str] = []
    used = 0
    shown_from = end
    for position in range(end - 1, start - 1, -1):
        entry = _entry(tools, metas[position], position + 1, digits)
        if used + utf8_size(entry) + 1 > budget:
            break
        entries.append(entry)
        used += utf8_size(entry) + 1
        shown_from = position
    entries.reverse()
    header = (
        f"{name}: session {quote(session)}, spills {shown_from + 1}-{end} of {total} "
        f"(oldest first, newest last)"
    )
    lines = [header, *entries]
    if shown_from > 0:
        lines.append(
            f"-- {shown_from} older spills not shown: call {name}(offset={total - shown_from}) --"
        )
    return "\n".join(lines)


def _entry(tools: ToolsView, meta: SpillMeta, number: int, digits: int) -> str:
    """One numbered entry; a first line that cannot be read is left out, not an error."""
    if meta.complete:
        saved = "saved in full"
    else:
        saved = f"saved in part (kept {format_ranges(meta.stored_ranges)})"
    preview = ""
    if meta.stored_ranges and meta.stored_ranges[0][0] == 0:
        head_end = meta.stored_ranges[0][1]
        try:
            first = tools.store.read_bytes(meta.spill_id, 0, min(_PREVIEW_BYTES + 4, head_end))
        except SpillstoreError:
            first = b""
        newline = first.find(b"\n")
        line = first if newline < 0 else first[:newline]
        cut = head_cut(line, _PREVIEW_BYTES)
        more = cut < len(line) or (newline < 0 and len(first) < meta.total_bytes)
        text = line[:cut].decode("utf-8", "replace") + ("..." if more else "")
        preview = f"; first line: {json.dumps(text, ensure_ascii=False)}"
    return (
        f"{number:>{digits}}. {meta.spill_id} tool {quote(meta.tool_name, 60)} call "
        f"{quote(meta.tool_call_id, 60)}: {meta.total_bytes} bytes, {meta.total_lines} "
        f"lines, {saved}{preview}"
    )
