"""One query on a parsed document, in the worker: natively when it can, else with jq.

The native evaluator (:mod:`~spillstore._core.json_eval`) runs on the values the worker
kept; an expression outside its subset, a step it does not carry, or a failure (jq
words the error) goes to the jq binding, which parses the text again. Both feed the same
paging: skip ``ask.skip`` results, then up to the limit and the byte cap, each result
compact JSON cut to the result cap, with its byte range when it is a value of the
document. Runs in the child process only (:mod:`~spillstore._tools.query_worker`).

A reply is a tuple: ``("results", found, more, kind, paths, skipped_lines)`` or
``("error", kind, message)``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from spillstore._core.json_doc import JsonDoc, NotJson
from spillstore._core.json_eval import Program, compile_jq
from spillstore._core.json_jq import Node, Unsupported, parse_jq
from spillstore._core.json_lazy import Keep, LazyDoc, parse_chunked
from spillstore._core.json_print import jq_text
from spillstore._core.json_values import JqError
from spillstore._core.utf8 import utf8_size
from spillstore._tools.query_limits import Parsing, no_parse_allowance

__all__ = ["Ask", "run_query"]

_LONE_SURROGATE = re.compile(
    rb"(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
)
"""A lone surrogate escape in JSON text (an escaped backslash before ``u`` may match
too: then jq answers, which is only slower)."""

_LABEL_BYTES = 64
"""Counted per result for its label on the page (``12. line 3, bytes [a, b): ``)."""

Item = tuple[str, int, tuple[int, int] | None, int | None]
Results = Callable[[int], Iterable[tuple[Any, list[Any] | None]]]


@dataclass(frozen=True, slots=True)
class Ask:
    """One query, as the child runs it."""

    expression: str
    skip: int
    limit: int
    max_result_bytes: int
    max_total_bytes: int


def run_query(
    doc: JsonDoc | LazyDoc, ask: Ask, parsing: Parsing = no_parse_allowance
) -> tuple[Any, ...]:
    """Run ``ask`` natively on the kept values when the expression is in the subset,
    else (or when it fails: jq words the error) with jq.

    On a :class:`LazyDoc`, an expression ``.key[] | rest`` (``.[] | rest`` on an array)
    runs item by item, a chunk parsed at a time; any other is run on the whole document,
    parsed for this query only (or, outside the native subset, left to jq's own parse
    of the text). Every parse of the document (and jq's whole run, whose
    parse cannot be told apart from it) runs in ``parsing(size)``: the worker's CPU
    limit lends it an allowance (:mod:`~spillstore._tools.query_limits`).
    """
    if isinstance(doc, LazyDoc):
        streamed = _streamed(doc, ask, parsing)
        if streamed is not None:
            return streamed
        if not _native(ask.expression):
            # jq parses the text itself: values parsed here would only take its room.
            unparsed = JsonDoc(doc.data, "json", doc.roots, chunks=doc, _canonical_known=True)
            return _run_jq(unparsed, ask, parsing)
        with parsing(doc.total_bytes):
            whole = parse_chunked(doc.data)
        if whole is None:  # pragma: no cover - it was cut once
            return ("error", "notjson", "it could not be parsed again")
        return run_query(whole, ask, parsing)
    if _native_safe(doc):
        try:
            program = compile_jq(ask.expression)
            return _page(doc, ask, lambda root: program.run(doc.values[root]), parsing)
        except (Unsupported, JqError, RecursionError):
            pass
    return _run_jq(doc, ask, parsing)


def _native(expression: str) -> bool:
    """Whether ``expression`` is in the native evaluator's subset."""
    try:
        compile_jq(expression)
    except Unsupported:
        return False
    return True


def _streamed(doc: LazyDoc, ask: Ask, parsing: Parsing) -> tuple[Any, ...] | None:
    """``ask`` run over the lazy array's items, or None: the expression does not start
    with the iteration of that array (or leaves the native subset). Each chunk is
    parsed in ``parsing``."""
    try:
        stages = _stages(parse_jq(ask.expression))
    except Unsupported:
        return None
    while stages and stages[0] == ("identity",):
        stages.pop(0)
    base: list[Any] = [] if doc.key is None else [doc.key]
    if base and stages and stages[0][0] == "field" and stages[0][1] != doc.key:
        return _on_head(doc, ask, stages, parsing)
    if stages == [("field", doc.key), ("call", "length", ())]:
        return _page(doc, ask, lambda root: [(doc.count, None)], parsing)
    prefix = [*(("field", key) for key in base), ("iterate",)]
    if stages[: len(prefix)] != prefix:
        return None
    rest = stages[len(prefix) :]
    keep = _needle(rest[0]) if rest else None
    try:
        program = _pipe_of(rest)
    except Unsupported:
        return None

    def results(root: int) -> Iterable[tuple[Any, list[Any] | None]]:
        for index, item in doc.each(keep, parsing):
            if program is None:
                yield item, [*base, index]
                continue
            for value, path in program.run(item):
                yield value, (None if path is None else [*base, index, *path])

    try:
        return _page(doc, ask, results, parsing)
    except (Unsupported, JqError, RecursionError):
        return None  # run on the whole document: natively again, then jq words it


def _on_head(
    doc: LazyDoc, ask: Ask, stages: list[Node], parsing: Parsing
) -> tuple[Any, ...] | None:
    """A program whose first step is another member of the root never reaches the
    array: it runs on the members before it, parsed apart (at the same offsets)."""
    head = doc.head()
    if isinstance(head, NotJson) or not head.strict:
        return None
    try:
        program = _pipe_of(stages)
        assert program is not None  # stages is not empty
        return _page(doc, ask, lambda root: program.run(head.values[0]), parsing)
    except (Unsupported, JqError, RecursionError):
        return None


def _stages(node: Node) -> list[Node]:
    """A pipeline's stages, left to right (jq's pipe is associative)."""
    if node[0] == "pipe":
        return [*_stages(node[1]), *_stages(node[2])]
    return [node]


def _pipe_of(stages: list[Node]) -> Program | None:
    if not stages:
        return None
    node = stages[-1]
    for stage in reversed(stages[:-1]):
        node = ("pipe", stage, node)
    return compile_jq(node)


_NEEDLE_NUMBER = 10**15
"""A number literal below this is written positionally by orjson, as an integer or a
float (``500000``, ``500000.0``): its digits are a needle."""


def _needle(stage: Node) -> Keep | None:
    """For ``select(.f == "text")``: the bytes an item written without escapes must
    hold to pass it (``"text"`` in UTF-8); for ``select(.f == 12)``, the digits an item
    written as orjson writes it must hold; else None."""
    if stage[0] != "call" or stage[1] != "select" or len(stage[2]) != 1:
        return None
    condition = stage[2][0]
    if condition[0] != "binop" or condition[1] != "==":
        return None
    sides = {condition[2][0]: condition[2], condition[3][0]: condition[3]}
    field, literal = sides.get("field"), sides.get("literal")
    if field is None or literal is None:
        return None
    value = literal[1]
    if isinstance(value, str):
        try:
            return b'"' + value.encode("utf-8") + b'"', False
        except UnicodeEncodeError:  # a lone surrogate: no prefilter
            return None
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and abs(value) < _NEEDLE_NUMBER and value == int(value):  # not inf, nan
        return str(int(value)).encode(), True
    return None


def _native_safe(doc: JsonDoc) -> bool:
    """Whether the native evaluator may answer on ``doc``: not when its text has a
    lone surrogate escape (Python parses it, jq refuses the document; orjson refuses
    it too)."""
    if doc.strict or b"\\u" not in doc.data:
        return True
    return _LONE_SURROGATE.search(doc.data) is None


def _page(doc: JsonDoc | LazyDoc, ask: Ask, results: Results, parsing: Parsing) -> tuple[Any, ...]:
    """The page of results: skip ``ask.skip``, then up to the limit and the byte cap;
    ``paths``: every result shown is a value of the document. Finding a value of the
    document and writing it out (work bounded by the document, not the program) run
    in ``parsing``."""
    found: list[Item] = []
    seen = total = 0
    paths = True
    kind = "stream" if getattr(doc, "stream", False) else doc.kind  # how the header says it
    for root, (line, _, _) in enumerate(doc.roots):
        for value, path in results(root):
            seen += 1
            if seen <= ask.skip:
                continue
            if len(found) >= ask.limit or total >= ask.max_total_bytes:
                return ("results", found, True, kind, paths, doc.skipped_lines)
            line_of = line if doc.kind == "ndjson" else None
            if path is None:
                paths = False
                found.append(_found(value, None, line_of, ask))
            else:
                with parsing(doc.total_bytes):
                    found.append(_found(value, doc.locate(root, path), line_of, ask))
            total += utf8_size(found[-1][0]) + _LABEL_BYTES
    return ("results", found, False, kind, paths, doc.skipped_lines)


def _found(value: Any, byte_range: tuple[int, int] | None, line: int | None, ask: Ask) -> Item:
    """One result as the page shows it: compact JSON cut to the result cap, its size."""
    dumped = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if "Infinity" in dumped and _has_infinity(value):
        # 1e400 in the text: Python reads infinity, jq the largest double; jq shows it.
        raise Unsupported("a number past the largest double")
    dumped = jq_text(dumped)  # numbers as jq writes them, whichever evaluator ran
    size = len(dumped.encode("utf-8", "replace"))
    return _cut(dumped, ask.max_result_bytes), size, byte_range, line


def _has_infinity(value: Any) -> bool:
    if isinstance(value, float):
        return math.isinf(value)
    if isinstance(value, list):
        return any(map(_has_infinity, value))
    if isinstance(value, dict):
        return any(map(_has_infinity, value.values()))
    return False


_MARKED = ". as $__spillstore_input | null, ((\n{}\n) | [.]), ($__spillstore_input | null)"
"""A jq program written inside this emits ``null`` as soon as jq has parsed its input,
then each of its own results wrapped in an array, then ``null`` again; jq frees the
parsed input after that (the variable holds it until then). The markers tell jq's parse
and its freeing of the input (work that grows with the document, granted an allowance)
from the program's own time (the query's); jq's parse, run and freeing are otherwise
one call of the binding."""

_PATHS = "path(\n{}\n) as $p | [$p, getpath($p)]"
"""A path expression's results, each with its path."""

_NOT_A_PATH = (
    'try ({}) catch (if type == "string" and startswith("Invalid path expression")'
    ' then {{"not_a_path": .}} else error end)'
)
""":data:`_PATHS` inside :data:`_MARKED`: an expression that is not a path expression
yields ``{"not_a_path": message}`` instead of failing, so jq frees its input after the
last marker (on the parse's allowance), not while the error unwinds (on the query's
time: 0.3 s per 19 MB); any other error is raised again as it was."""


def _run_jq(doc: JsonDoc, ask: Ask, parsing: Parsing = no_parse_allowance) -> tuple[Any, ...]:
    """Run ``ask`` with jq as a path expression (values with ranges), else as it is.

    jq parses the text on each run, inside ``parsing``; the program's own time is the
    query's. A program that does not compile behind the marker (a ``module``
    directive) runs whole inside ``parsing``.
    """
    import jq  # type: ignore[import-not-found]  # noqa: PLC0415 - only the child loads it

    marked = True
    try:
        plain = jq.compile(_MARKED.format(ask.expression))
    except ValueError:
        marked = False
        try:
            plain = jq.compile(ask.expression)
        except ValueError as exc:
            return ("error", "syntax", str(exc))
    paths = _PATHS.format(ask.expression)
    try:
        located = jq.compile(_MARKED.format(_NOT_A_PATH.format(paths)) if marked else paths)
    except ValueError:
        located = None
    if located is not None:
        try:
            return _page(doc, ask, _jq_run(doc, located, True, marked, parsing), parsing)
        except ValueError as exc:
            if "Invalid path expression" not in str(exc):
                return _failed(exc)
    try:
        return _page(doc, ask, _jq_run(doc, plain, False, marked, parsing), parsing)
    except ValueError as exc:
        return _failed(exc)


def _jq_run(doc: JsonDoc, program: Any, paths: bool, marked: bool, parsing: Parsing) -> Results:
    return lambda root: _jq_results(doc, program, root, paths=paths, marked=marked, parsing=parsing)


def _jq_results(
    doc: JsonDoc, program: Any, root: int, *, paths: bool, marked: bool, parsing: Parsing
) -> Iterator[tuple[Any, list[Any] | None]]:
    """jq's results on one root, as ``(value, path)`` (``path`` None for plain values).

    With ``marked`` (:data:`_MARKED`), jq's parse of the root's text and its freeing of
    the parsed input run in ``parsing``; without, the whole run does.
    """
    text = doc.text if doc.kind == "json" else doc.root_text(root)
    size = doc.total_bytes if doc.kind == "json" else len(text)
    try:
        found = iter(program.input_text(text))
        if not marked:
            with parsing(size):
                for value in found:
                    yield (value[1], value[0]) if paths else (value, None)
            return
        with parsing(size):
            next(found, None)  # the first marker: jq has parsed the text
        for wrapped in found:
            if wrapped is None:  # the last marker: what is left is freeing the input
                with parsing(size):
                    next(found, None)
                return
            value = wrapped[0]
            if paths and type(value) is dict:  # _NOT_A_PATH: the last marker, the freeing
                with parsing(size):
                    for _ in found:
                        pass
                raise ValueError(value["not_a_path"])
            yield (value[1], value[0]) if paths else (value, None)
    except ValueError as exc:
        if doc.kind == "ndjson" and "Invalid path expression" not in str(exc):
            raise ValueError(f"line {doc.roots[root][0]}: {exc}") from None
        raise


def _failed(exc: ValueError) -> tuple[str, str, str]:
    """A jq failure: its parser refused the document (it reads JSON more strictly than
    Python's, e.g. a lone surrogate escape), or the program failed."""
    message = str(exc)
    if message.removeprefix("line ").lstrip("0123456789: ").startswith("parse error"):
        return ("error", "notjson", f"jq cannot parse it: {message[:200]}")
    return ("error", "runtime", message)


def _cut(text: str, max_bytes: int) -> str:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")
