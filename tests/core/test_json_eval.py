"""The native jq evaluator agrees with jq: same results, same order, same paths, and it
fails exactly where jq fails (a differential test against the jq binding)."""

from __future__ import annotations

import json
import os
from typing import Any

import jq  # type: ignore[import-not-found]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillstore._core.json_eval import compile_jq
from spillstore._core.json_jq import Unsupported, parse_jq
from spillstore._core.json_values import JqError

KEYS = ["a", "b", "k y", "é", "\U0001f600"]

documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(lambda f: round(f, 3))
    | st.text(st.sampled_from("ab, éA\U0001f600"), max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=12,
)
"""Small JSON values: every type, unicode with 4-byte characters, repeated shapes."""

_LEAVES = [
    ".",
    ".a",
    ".b",
    '."k y"',
    ".[0]",
    ".[-1]",
    ".[1]",
    ".[]",
    ".[]?",
    "..",
    ".a?",
    ".a.b",
    '.["é"]',
    "1",
    "0",
    "-2",
    "1.5",
    '"a"',
    '"b,"',
    "null",
    "true",
    "false",
    "[]",
    "{}",
    "length",
    "keys",
    "keys_unsorted",
    "type",
    "not",
    "empty",
    "first",
    "last",
    "add",
    "sort",
    "unique",
    "min",
    "max",
    "reverse",
    "to_entries",
    "values",
    "nulls",
    "numbers",
    "strings",
    "arrays",
    "objects",
    "scalars",
    "iterables",
    "booleans",
    "any",
    "all",
    "tostring",
    "ascii_downcase",
    "ascii_upcase",
    "utf8bytelength",
    "floor",
    "recurse",
    'has("a")',
    "has(0)",
    'startswith("a")',
    'endswith("b")',
    'split(",")',
    'join(",")',
    'ltrimstr("a")',
    'rtrimstr("b")',
    "range(3)",
    "range(1; 3)",
    "tonumber",
]
_UNARY = [
    "({})",
    "[{}]",
    "{{a: {}}}",
    "select({})",
    "map({})",
    "first({})",
    "last({})",
    "limit(2; {})",
    "limit(0; {})",
    "{}?",
    "try {}",
    "sort_by({})",
    "min_by({})",
    "max_by({})",
    "unique_by({})",
    "any({})",
    "all({})",
    "isempty({})",
    "-({})",
    "{} as $x | [$x, .]",
    "{} as $v | $v",
    ".[{}]",
    '{{(.a // "k"): {}}}',
]
_BINARY = [
    "{} | {}",
    "{}, {}",
    "{} == {}",
    "{} != {}",
    "{} < {}",
    "{} <= {}",
    "{} > {}",
    "{} >= {}",
    "{} and {}",
    "{} or {}",
    "{} // {}",
    "{} + {}",
    "{} - {}",
    "{} * {}",
    "{} / {}",
    "{} % {}",
    "if {} then {} else . end",
    "any({}; {})",
    "all({}; {})",
    "{{a: {}, b: {}}}",
    "[{}, {}]",
]


def _programs() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        unary = st.tuples(st.sampled_from(_UNARY), inner).map(lambda t: t[0].format(t[1]))
        binary = st.tuples(st.sampled_from(_BINARY), inner, inner).map(
            lambda t: t[0].format(f"({t[1]})", f"({t[2]})")
        )
        return unary | binary

    return st.recursive(st.sampled_from(_LEAVES), extend, max_leaves=6)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: booleans are not numbers, 1 equals 1.0, key order counts."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _jq(program: str, value: Any) -> list[Any] | str:
    try:
        return list(jq.compile(program).input_value(value).all())
    except ValueError as exc:
        return f"error: {exc}"


def _native(program: str, value: Any) -> list[tuple[Any, Any]] | str | None:
    try:
        return list(compile_jq(program).run(value))
    except JqError as exc:
        return f"error: {exc}"
    except Unsupported:
        return None


def check_against_jq(program: str, value: Any) -> bool:
    """Assert that the evaluator agrees with jq; False when it left the program to jq."""
    native = _native(program, value)
    if native is None:
        return False
    expected = _jq(program, value)
    context = f"program {program!r} on {json.dumps(value, ensure_ascii=False)}"
    if isinstance(native, str) or isinstance(expected, str):
        assert isinstance(native, str) == isinstance(expected, str), (context, native, expected)
        return True
    values = [item for item, _ in native]
    assert len(values) == len(expected) and all(map(_same, values, expected)), (
        context,
        values,
        expected,
    )
    paths = [path for _, path in native]
    if native and all(path is not None for path in paths):
        jq_paths = _jq(f"path({program})", value)
        assert jq_paths == paths, (context, paths, jq_paths)
    return True


@settings(max_examples=int(os.environ.get("SPILLSTORE_JQ_EXAMPLES", "400")), deadline=None)
@given(program=_programs(), value=documents)
def test_native_results_match_jq(program: str, value: Any) -> None:
    """On random documents and programs of the subset, the evaluator gives jq's results in
    jq's order, jq's paths for values of the document, and fails where jq fails
    (``SPILLSTORE_JQ_EXAMPLES=20000`` explores further)."""
    check_against_jq(program, value)


@pytest.mark.parametrize(
    "program",
    [
        '.items[] | select(.name == "user2")',
        ".items | map(.id) | add",
        "[.items[] | {id, name}]",
        ".items[] | select(.id > 0 and (.tags | length) > 1) | .name",
        "[.items[].tags[]] | unique",
        '.items | sort_by(.name) | reverse | first | .name // "none"',
        "[.. | numbers] | max",
        '.items[] | select(.name | startswith("user1")) | .id',
        "[limit(2; .items[])] | length",
        "if .total > 2 then .items[-1] else empty end",
        ".items[0] as $first | .items[] | select(.id == $first.id)",
        ".missing[]?",
        '{"n": .total, (.items[0].name): 1}',
        "[.items[] | .id % 2] | [any, all]",
    ],
)
def test_common_queries_run_natively_and_match_jq(program: str) -> None:
    """The queries models write most (select, map, construction, sorting) stay native."""
    items = [{"id": i, "name": f"user{i}", "tags": ["a", "b"][: i % 3]} for i in range(5)]
    assert check_against_jq(program, {"total": 5, "items": items}), program


_MIXED = [
    {"a": 1},
    {"a": 2},
    {"a": 1.5},
    {"a": -3},
    {"a": 2**60},
    {"a": None},
    {},
    {"a": "x"},
    {"a": True},
    {"a": [1]},
    {"a": {"b": 1}},
]


@pytest.mark.parametrize(
    "program",
    [
        "[.[] | select(.a > 1)]",
        "[.[] | select(1 >= .a)]",
        "[.[] | .a < 2.5]",
        "[.[] | .a <= -3]",
        "[.[] | select(.a >= 1152921504606846976)]",
        "[.[] | select(.a > 1)] | length",
    ],
)
def test_a_field_compared_with_a_number_matches_jq_on_every_type(program: str) -> None:
    """``.f > N`` (a number field compared at once) orders every kind of value as jq
    does (null, booleans, strings, arrays, objects, a missing key, a big integer), and
    fails on a non-object as jq does."""
    assert check_against_jq(program, _MIXED), program
    assert check_against_jq(program, [*_MIXED, 3]), program


@pytest.mark.parametrize(
    "program",
    [
        "def f: f; f",
        "reduce .[] as $x (0; . + $x)",
        '"\\(.a)"',
        ".[1:2]",
        'test("a")',
        ".a = 1",
        "$ENV",
        "env",
        "input",
        "@base64",
        'try error("x") catch .',
        "repeat(.)",
        "[" * 100 + "]" * 100,
        ".[",
    ],
)
def test_what_the_subset_lacks_is_left_to_jq(program: str) -> None:
    """Definitions, reductions, interpolation, slices, regexes, assignment, the
    environment, formats and syntax errors are jq's to run (or to refuse)."""
    with pytest.raises(Unsupported):
        compile_jq(program)


def test_a_very_long_expression_is_left_to_jq() -> None:
    """The parser does not recurse on an expression past its length bound."""
    with pytest.raises(Unsupported):
        parse_jq(".a | " * 2000 + ".")
