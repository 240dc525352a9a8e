"""A native evaluator for the common jq subset, on a parsed document. Pure: no I/O.

jq's Python binding re-parses the document's text for every program and cannot keep a
parsed value, so a second query on a large spill costs as much as the first. This
evaluator runs on the value :func:`json.loads` (or the worker's indexed parse) already
built: the tree from :func:`~spillstore._core.json_jq.parse_jq` is compiled once into
Python closures, each taking ``(value, path, env)`` and yielding ``(value, path)``
pairs lazily, in jq's order. ``path`` tracks where a value sits in the document, as jq's
``path(...)`` does (a chain ``(parent, key)`` from ``()``, or ``None`` for a computed
value), so a result that is a value of the document gets its byte range.

Two exceptions leave it. :class:`JqError` is a runtime error whose condition matches
jq's (indexing a number, iterating null, ``length`` of a boolean, adding a number to
an array...): ``?`` and ``try`` catch it as jq would; at the top it means the
program fails, and the caller asks jq for its exact wording.
:class:`~spillstore._core.json_jq.Unsupported` is anything this evaluator does not
mean to decide (a builtin it lacks, arithmetic on types whose rules it does not
carry, a number outside what a double holds): jq then runs the whole expression.
A differential property test holds the subset to jq's results, order and errors.

Known, deliberate difference: integers past 2**53 keep their exact value here (jq
rounds them to doubles), so comparisons of such numbers may differ.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from spillstore._core.json_builtins import compile_call
from spillstore._core.json_jq import Node, Unsupported, parse_jq
from spillstore._core.json_values import (
    COMPARE,
    Compiled,
    Env,
    JqError,
    Pair,
    Path,
    arith,
    from_one,
    from_step,
    get_field,
    get_index,
    is_number,
    iterate,
    jq_equal,
    path_list,
    recurse,
    truthy,
    type_name,
    values_of,
)

__all__ = ["Program", "compile_jq"]


class Program:
    """A compiled expression: :meth:`run` yields ``(value, path)`` for each result,
    ``path`` a list of keys and indexes for a value of the document, else ``None``."""

    def __init__(self, expression: str | Node) -> None:
        tree = parse_jq(expression) if isinstance(expression, str) else expression
        self._root = self._compile(tree, frozenset())

    def run(self, value: Any) -> Iterator[tuple[Any, list[Any] | None]]:
        """Every result of the program on ``value``, lazily, in jq's order.

        Raises:
            JqError: the program fails on this input (jq words the error).
            Unsupported: a step is outside the subset (jq runs the program instead).
        """
        for item, path in self._root.run(value, (), {}):
            yield item, path_list(path)

    def _compile(self, node: Node, scope: frozenset[str]) -> Compiled:
        kind = node[0]
        if kind == "identity":
            return from_step(lambda value, path: (value, path))
        if kind == "literal":
            constant = node[1]
            return from_one(lambda value, env: constant)
        if kind == "field":
            key = node[1]

            def field_step(value: Any, path: Path) -> Pair:
                return get_field(value, key), (None if path is None else (path, key))

            return from_step(field_step)
        if kind == "iterate":
            return Compiled(lambda value, path, env: iterate(value, path))
        if kind == "recurse":
            return Compiled(lambda value, path, env: recurse(value, path, None, env))
        if kind == "var":
            name = node[1]
            if name not in scope:
                raise Unsupported(f"${name}")
            return from_one(lambda value, env: env[name])
        if kind == "pipe":
            return self._pipe(self._compile(node[1], scope), self._compile(node[2], scope))
        if kind == "comma":
            return self._comma(self._compile(node[1], scope), self._compile(node[2], scope))
        if kind == "index":
            term, index = self._compile(node[1], scope), self._compile(node[2], scope)
            return self._indexed(term, index, optional=node[3])
        if kind == "array":
            return self._array(None if node[1] is None else self._compile(node[1], scope))
        if kind == "object":
            entries = [(self._compile(k, scope), self._compile(v, scope)) for k, v in node[1]]
            return self._object(entries)
        if kind == "neg":
            return self._negate(self._compile(node[1], scope))
        if kind == "binop":
            if node[1] == "==":
                fast = _field_equals(node[2], node[3]) or _field_equals(node[3], node[2])
                if fast is not None:
                    return fast
            fast = _field_order(node[1], node[2], node[3])
            if fast is not None:
                return fast
            left, right = self._compile(node[2], scope), self._compile(node[3], scope)
            return self._binop(node[1], left, right)
        if kind in ("and", "or"):
            return self._logic(kind, self._compile(node[1], scope), self._compile(node[2], scope))
        if kind == "alt":
            return self._alternative(self._compile(node[1], scope), self._compile(node[2], scope))
        if kind == "try":
            return self._try(self._compile(node[1], scope))
        if kind == "if":
            branches = [(self._compile(c, scope), self._compile(t, scope)) for c, t in node[1]]
            return self._if(branches, self._compile(node[2], scope))
        if kind == "as":
            source = self._compile(node[1], scope)
            return self._bind(source, node[2], self._compile(node[3], scope | {node[2]}))
        if kind == "call":
            args = [self._compile(arg, scope) for arg in node[2]]
            return compile_call(node[1], args)
        raise Unsupported(kind)  # pragma: no cover - the parser makes no other node

    @staticmethod
    def _pipe(left: Compiled, right: Compiled) -> Compiled:
        if left.step is not None and right.step is not None:
            first, second = left.step, right.step
            return from_step(lambda value, path: second(*first(value, path)))
        if right.select is not None:
            keep = right.select
            left_run = left.run

            def run_select(value: Any, path: Path, env: Env) -> Iterator[Pair]:
                for pair in left_run(value, path, env):
                    if truthy(keep(pair[0], env)):
                        yield pair

            return Compiled(run_select)
        if left.step is not None:
            step, then = left.step, right.run

            def run_after_step(value: Any, path: Path, env: Env) -> Iterable[Pair]:
                return then(*step(value, path), env)

            return Compiled(run_after_step)
        if right.step is not None:
            inner, each = left.run, right.step

            def run_step(value: Any, path: Path, env: Env) -> Iterator[Pair]:
                for item, item_path in inner(value, path, env):
                    yield each(item, item_path)

            return Compiled(run_step)
        first_run, second_run = left.run, right.run

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for item, item_path in first_run(value, path, env):
                yield from second_run(item, item_path, env)

        one = None
        if left.one is not None and right.one is not None:
            one_left, one_right = left.one, right.one
            one = lambda value, env: one_right(one_left(value, env), env)  # noqa: E731
        return Compiled(run, one=one)

    @staticmethod
    def _comma(left: Compiled, right: Compiled) -> Compiled:
        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            yield from left.run(value, path, env)
            yield from right.run(value, path, env)

        return Compiled(run)

    @staticmethod
    def _indexed(term: Compiled, index: Compiled, *, optional: bool) -> Compiled:
        """``term[index]``: ``index`` runs on the input (outer loop), then ``term``;
        ``optional`` (``term[index]?``) skips the applications that fail."""

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for key in values_of(index, value, env):
                for item, item_path in term.run(value, path, env):
                    try:
                        found, step = get_index(item, key)
                    except JqError:
                        if optional:
                            continue
                        raise
                    yield found, (None if item_path is None else (item_path, step))

        return Compiled(run)

    @staticmethod
    def _array(body: Compiled | None) -> Compiled:
        if body is None:
            return from_one(lambda value, env: [])
        return from_one(lambda value, env: list(values_of(body, value, env)))

    @staticmethod
    def _object(entries: list[tuple[Compiled, Compiled]]) -> Compiled:
        def build(value: Any, env: Env, at: int, made: dict[str, Any]) -> Iterator[Any]:
            if at == len(entries):
                yield dict(made)
                return
            key_node, value_node = entries[at]
            for key in values_of(key_node, value, env):
                for member in values_of(value_node, value, env):
                    if type(key) is not str:  # checked on insertion, as in jq
                        raise JqError(f"Object keys must be strings, not {type_name(key)}")
                    made[key] = member
                    yield from build(value, env, at + 1, made)
                    made.pop(key, None)

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for made in build(value, env, 0, {}):
                yield made, None

        return Compiled(run)

    @staticmethod
    def _negate(body: Compiled) -> Compiled:
        def negate(item: Any) -> Any:
            if not is_number(item):
                raise JqError(f"{type_name(item)} cannot be negated")
            return -item

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for item in values_of(body, value, env):
                yield negate(item), None

        return Compiled(run)

    @staticmethod
    def _binop(op: str, left: Compiled, right: Compiled) -> Compiled:
        compute: Callable[[Any, Any], Any] = COMPARE.get(op) or (lambda a, b: arith(op, a, b))
        if left.one is not None and right.one is not None:
            one_left, one_right = left.one, right.one
            return from_one(lambda value, env: compute(one_left(value, env), one_right(value, env)))

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for b in values_of(right, value, env):
                for a in values_of(left, value, env):
                    yield compute(a, b), None

        return Compiled(run)

    @staticmethod
    def _logic(kind: str, left: Compiled, right: Compiled) -> Compiled:
        stop = kind == "or"  # the left value that decides without the right

        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for a in values_of(left, value, env):
                if truthy(a) == stop:
                    yield stop, None
                    continue
                for b in values_of(right, value, env):
                    yield truthy(b), None

        return Compiled(run)

    @staticmethod
    def _alternative(left: Compiled, right: Compiled) -> Compiled:
        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            found = False
            for pair in left.run(value, path, env):  # jq 1.8: an error here is not caught
                if truthy(pair[0]):
                    found = True
                    yield pair
            if not found:
                yield from right.run(value, path, env)

        return Compiled(run)

    @staticmethod
    def _try(body: Compiled) -> Compiled:
        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            try:
                yield from body.run(value, path, env)
            except JqError:
                return

        return Compiled(run)

    @staticmethod
    def _if(branches: list[tuple[Compiled, Compiled]], otherwise: Compiled) -> Compiled:
        def run_from(at: int, value: Any, path: Path, env: Env) -> Iterator[Pair]:
            if at == len(branches):
                yield from otherwise.run(value, path, env)
                return
            condition, then = branches[at]
            for test in values_of(condition, value, env):
                if truthy(test):
                    yield from then.run(value, path, env)
                else:
                    yield from run_from(at + 1, value, path, env)

        return Compiled(lambda value, path, env: run_from(0, value, path, env))

    @staticmethod
    def _bind(source: Compiled, name: str, body: Compiled) -> Compiled:
        def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
            for bound in values_of(source, value, env):
                yield from body.run(value, path, {**env, name: bound})

        return Compiled(run)


def _field_equals(field: Node, literal: Node) -> Compiled | None:
    """``.f == "text"`` (the needle's test): only a string equals a string, so on an
    object it is one look-up and one comparison; anything else as ``==`` does it."""
    if field[0] != "field" or literal[0] != "literal" or type(literal[1]) is not str:
        return None
    key, text = field[1], literal[1]

    def one(value: Any, env: Env) -> bool:
        if type(value) is dict:
            return value.get(key) == text
        return bool(jq_equal(get_field(value, key), text))

    return from_one(one)


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _field_order(op: str, left: Node, right: Node) -> Compiled | None:
    """``.f > 10`` (or ``10 < .f``; a filter's test against a number): a number field
    of an object is compared at once (numbers compare as numbers, as
    :func:`~spillstore._core.json_values.jq_compare` does); anything else as the
    operator does it."""
    if op not in _ORDER:
        return None
    if left[0] == "literal" and right[0] == "field":
        op, left, right = _SWAPPED[op], right, left
    if left[0] != "field" or right[0] != "literal":
        return None
    bound = right[1]
    if type(bound) is not int and type(bound) is not float:
        return None
    key, fast, slow = left[1], _ORDER[op], COMPARE[op]

    def one(value: Any, env: Env) -> bool:
        if type(value) is dict:
            found = value.get(key)
            kind = type(found)
            if kind is int or kind is float:
                return fast(found, bound)
        return slow(get_field(value, key), bound)

    return from_one(one)


def compile_jq(expression: str | Node) -> Program:
    """``expression`` (or its tree from :func:`~spillstore._core.json_jq.parse_jq`)
    compiled for the native evaluator.

    Raises:
        Unsupported: it is outside the subset (jq runs it).
    """
    return Program(expression)
