"""Query (``query_spill``): a jq expression over a spill that holds JSON or JSON Lines.

The page lists one result per line as compact JSON. A result that is a value of the
document (the expression is a path expression, such as ``.items[] | select(...)``)
carries its exact ``[start, end)`` byte range in the spill, so a byte-mode Read of that
range shows the value's own bytes; for JSON Lines the expression runs on each line and
every result names its line. A result longer than the line cap is cut, saying how to
read the rest. Results are paged with ``offset``/``limit``; the last line says the next
call. The program runs in a killable worker process
(:mod:`~spillstore._tools.query_worker`), bounded in wall time and memory: natively on the
document the worker parsed once and kept (the common jq subset,
:mod:`~spillstore._core.json_eval`), with jq for the rest.

What the model reads instead of results: a spill that is not JSON names the tools that
do work on it; a spill saved in part (the retention cap) cannot be parsed as a whole
and points to Grep and Read; a syntax error, a failing program, a program that runs too
long or grows too large each says so.
"""

from __future__ import annotations

import json

from spillstore._core.ranges import format_ranges
from spillstore._core.utf8 import utf8_size
from spillstore._errors import RequestRefused
from spillstore._stores.meta import SpillMeta
from spillstore._tools.args import MAX_READ_BYTES, QueryArgs
from spillstore._tools.query_worker import Found, QueryFailed, QueryWorker, Results
from spillstore._tools.text import ToolsView, quote

__all__ = ["INSTALL_HINT", "query_page"]

INSTALL_HINT = 'pip install "jq>=1.7" (a dependency of spillstore; reinstall spillstore)'
"""What to run when the jq package is missing."""

_PAGE_RESERVE = 1200
"""Bytes of the page kept for the header and the closing hints (and the expression)."""

_MAX_REPEATED_BYTES = 1000
"""A longer expression is not repeated in the next-call hint."""

_ADVICE = {
    "time": "; narrow it (first(...), limit(n; ...), a select) or query a smaller part",
    "memory": "; narrow it (first(...), limit(n; ...), a select)",
    "depth": "; query a shallower part (.a.b, keys, length)",
    "syntax": "",
    "runtime": "; a ? after a step (.a?, .[]?) skips values of the wrong type",
}


def query_page(tools: ToolsView, worker: QueryWorker, meta: SpillMeta, args: QueryArgs) -> str:
    """Render the page of results ``args`` asks for.

    Raises:
        RequestRefused: the spill is not JSON, was saved in part, the jq package is
            missing, or the expression failed (the message says which and what to do).
    """
    names, spill = tools.names, meta.spill_id
    if not meta.complete:
        raise RequestRefused(
            f"spill {spill} was saved in part (the retention cap kept bytes"
            f" {format_ranges(meta.stored_ranges)} of {meta.total_bytes}), so it cannot be"
            f' parsed as a whole; search what was kept with {names.grep}(pattern="...",'
            f' spill="{spill}") and page it with {names.read}(spill="{spill}")'
        )
    if not QueryWorker.available():
        raise RequestRefused(
            f"{names.query} needs the jq package, which is missing: {INSTALL_HINT}"
        )
    # The header quotes the expression (cut to 200 characters), the next call repeats it.
    quoted = utf8_size(quote(args.expression, 200)) + _next_call_size(args.expression)
    max_total = max(tools.max_page_bytes - _PAGE_RESERVE - quoted, tools.max_line_bytes)

    def load() -> bytes:
        return tools.store.read_bytes(spill, 0, meta.total_bytes)

    try:
        results = worker.query(
            spill,
            meta.total_bytes,
            load,
            args.expression,
            skip=args.offset,
            limit=args.limit,
            max_result_bytes=tools.max_line_bytes,
            max_total_bytes=max_total,
        )
    except QueryFailed as failed:
        raise RequestRefused(_failure(tools, meta, failed)) from None
    return _render(tools, meta, args, results)


def _failure(tools: ToolsView, meta: SpillMeta, failed: QueryFailed) -> str:
    names, spill = tools.names, meta.spill_id
    if failed.kind == "notjson":
        return (
            f"spill {spill} is not JSON or JSON Lines ({failed.message[:200]}), so"
            f' {names.query} cannot run on it; page it with {names.read}(spill="{spill}")'
            f' and search it with {names.grep}(pattern="...", spill="{spill}")'
        )
    what = {
        "syntax": "the jq expression does not compile",
        "runtime": "the jq expression failed",
        "depth": "the jq expression could not run",
    }.get(failed.kind, "the jq expression was stopped")
    message = " ".join(failed.message.split())[:400]
    return f"{what}: {message}{_ADVICE.get(failed.kind, '')}"


def _render(tools: ToolsView, meta: SpillMeta, args: QueryArgs, results: Results) -> str:
    names, spill = tools.names, meta.spill_id
    kind = {"ndjson": "JSON Lines", "stream": "JSON values one after another"}.get(
        results.kind, "JSON"
    )
    if results.skipped_lines:
        kind += f"; {results.skipped_lines} lines holding no JSON object or array skipped"
    first = args.offset + 1
    last = args.offset + len(results.found)
    if not results.found:
        shown = "no results" if args.offset == 0 else f"no results after the first {args.offset}"
    else:
        shown = f"results {first}-{last}" + ("" if results.more else " (the last)")
    out = [
        f"{names.query} {quote(args.expression, 200)} on spill {spill} ({kind},"
        f" {meta.total_bytes} bytes): {shown}."
    ]
    if results.found and not results.paths:
        out.append("The results are computed values, not values of the document: no byte ranges.")
    cut_hint = None
    for number, found in enumerate(results.found, start=first):
        out.append(_line(number, found))
        if found.size > utf8_size(found.text) and cut_hint is None:
            cut_hint = _cut_hint(tools, spill, number, found)
    if cut_hint:
        out.append(cut_hint)
    if results.found and results.paths and results.found[0].byte_range is not None:
        start, end = results.found[0].byte_range
        out.append(
            f'Exact bytes of result {first}: {names.read}(spill="{spill}", byte_offset={start},'
            f" max_bytes={min(max(end - start, 4), MAX_READ_BYTES)})."
        )
    if results.more:
        expression = json.dumps(args.expression, ensure_ascii=False)
        if _next_call_size(args.expression):
            out.append(
                f'More: {names.query}(spill="{spill}", expression={expression},'
                f" offset={last}, limit={args.limit})."
            )
        else:
            out.append(f"More: the same {names.query} call with offset={last}.")
    return "\n".join(out)


def _next_call_size(expression: str) -> int:
    """The bytes the next-call hint spends on the expression (0: too long to repeat)."""
    size = utf8_size(json.dumps(expression, ensure_ascii=False))
    return size if size <= _MAX_REPEATED_BYTES else 0


def _line(number: int, found: Found) -> str:
    where = []
    if found.line is not None:
        where.append(f"line {found.line}")
    if found.byte_range is not None:
        where.append(f"bytes [{found.byte_range[0]}, {found.byte_range[1]})")
    label = f"{number}. " + (", ".join(where) + ": " if where else "")
    if found.size > utf8_size(found.text):
        return f"{label}{found.text} ... (cut: {utf8_size(found.text)} of {found.size} bytes)"
    return label + found.text


def _cut_hint(tools: ToolsView, spill: str, number: int, found: Found) -> str:
    if found.byte_range is None:
        return (
            f"Result {number} was cut; ask for a part of it (e.g. keys, .[0:10], .field)"
            " to see more."
        )
    start, end = found.byte_range
    return (
        f'Result {number} was cut; {tools.names.read}(spill="{spill}", byte_offset={start},'
        f" max_bytes={min(end - start, tools.max_page_bytes // 2)}) reads its bytes from the"
        f" start (they end at byte {end})."
    )
