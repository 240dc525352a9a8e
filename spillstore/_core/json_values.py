"""Values for the native jq evaluator: jq's order, equality, arithmetic, indexing and
the compiled-node type the evaluator and its builtins share. Pure: no I/O.

jq's rules, as :mod:`~spillstore._core.json_eval` applies them to Python values
(``None``, ``bool``, ``int``, ``float``, ``str``, ``list``, ``dict``): :class:`JqError`
where jq fails, :class:`~spillstore._core.json_jq.Unsupported` where this module does not
carry jq's rule (jq then runs the whole expression).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from functools import cmp_to_key
from typing import Any

from spillstore._core.json_jq import Unsupported
from spillstore._errors import SpillstoreError

__all__ = [
    "COMPARE",
    "SAFE_INT",
    "SORT_KEY",
    "Compiled",
    "Env",
    "JqError",
    "One",
    "Pair",
    "Path",
    "Run",
    "arith",
    "as_number",
    "check_int",
    "from_one",
    "from_step",
    "get_field",
    "get_index",
    "is_number",
    "iterate",
    "jq_add",
    "jq_compare",
    "jq_equal",
    "path_list",
    "recurse",
    "truthy",
    "type_name",
    "values_of",
]

Path = tuple[Any, ...] | None
Env = dict[str, Any]
Pair = tuple[Any, Path]
Run = Callable[[Any, Path, Env], Iterable[Pair]]
One = Callable[[Any, Env], Any]


class JqError(SpillstoreError):
    """A jq runtime error (the program fails here, as it would in jq)."""


_TYPE_NAMES = {
    type(None): "null",
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}
SAFE_INT = 2**53


def type_name(value: Any) -> str:
    return _TYPE_NAMES[type(value)]


def truthy(value: Any) -> bool:
    return value is not None and value is not False


def is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is float


def _rank(value: Any) -> int:
    if value is None:
        return 0
    if value is False:
        return 1
    if value is True:
        return 2
    kind = type(value)
    if kind is int or kind is float:
        return 3
    if kind is str:
        return 4
    return 5 if kind is list else 6


def jq_compare(a: Any, b: Any) -> int:
    """jq's total order: null < false < true < numbers < strings < arrays < objects;
    arrays element by element, objects by their sorted keys and then their values."""
    rank_a, rank_b = _rank(a), _rank(b)
    if rank_a != rank_b:
        return -1 if rank_a < rank_b else 1
    if rank_a in (3, 4):
        return int(a > b) - int(a < b)
    if rank_a == 5:
        for x, y in zip(a, b, strict=False):
            found = jq_compare(x, y)
            if found:
                return found
        return (len(a) > len(b)) - (len(a) < len(b))
    if rank_a == 6:
        keys_a, keys_b = sorted(a), sorted(b)
        if keys_a != keys_b:
            return (keys_a > keys_b) - (keys_a < keys_b)
        for key in keys_a:
            found = jq_compare(a[key], b[key])
            if found:
                return found
    return 0


def jq_equal(a: Any, b: Any) -> bool:
    kind = type(a)
    if kind is type(b) and (kind is str or kind is int or kind is float):
        return bool(a == b)
    return jq_compare(a, b) == 0


SORT_KEY = cmp_to_key(jq_compare)


def as_number(value: float) -> Any:
    """An arithmetic result as jq prints it: an integral double shows as an integer."""
    if type(value) is float:
        if math.isnan(value) or math.isinf(value):
            raise Unsupported("a number a double cannot hold")
        if value.is_integer() and abs(value) < SAFE_INT and (value or math.copysign(1, value) > 0):
            return int(value)  # but -0.0 stays: jq prints it -0
    return value


def check_int(value: int) -> int:
    if abs(value) >= SAFE_INT:
        raise Unsupported("an integer past 2**53")
    return value


def jq_add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    kind_a, kind_b = type(a), type(b)
    if is_number(a) and is_number(b):
        if kind_a is int and kind_b is int:
            return check_int(a + b)
        return as_number(a + b)
    if kind_a is kind_b and kind_a in (str, list):
        return a + b
    if kind_a is dict and kind_b is dict:
        return {**a, **b}
    raise JqError(f"{type_name(a)} and {type_name(b)} cannot be added")


def arith(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return jq_add(a, b)
    if op == "-":
        if type(a) is list and type(b) is list:
            return [x for x in a if not any(jq_equal(x, y) for y in b)]
        if not (is_number(a) and is_number(b)):
            raise JqError(f"{type_name(a)} and {type_name(b)} cannot be subtracted")
        if type(a) is int and type(b) is int:
            return check_int(a - b)
        return as_number(a - b)
    if not (is_number(a) and is_number(b)):
        raise Unsupported(f"{op} of {type_name(a)} and {type_name(b)}")
    if op == "*":
        if type(a) is int and type(b) is int:
            return check_int(a * b)
        return as_number(a * b)
    if op == "/":
        if b == 0:
            raise JqError("cannot be divided because the divisor is zero")
        return as_number(a / b)
    # %: jq truncates both to integers; the result takes the dividend's sign.
    if not (abs(a) < SAFE_INT and abs(b) < SAFE_INT):
        raise Unsupported("% of a number past 2**53")
    dividend, divisor = int(a), int(b)
    if divisor == 0:
        raise JqError("cannot be divided because the divisor is zero")
    rest = abs(dividend) % abs(divisor)
    return -rest if dividend < 0 else rest


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": jq_equal,
    "!=": lambda a, b: not jq_equal(a, b),
    "<": lambda a, b: jq_compare(a, b) < 0,
    "<=": lambda a, b: jq_compare(a, b) <= 0,
    ">": lambda a, b: jq_compare(a, b) > 0,
    ">=": lambda a, b: jq_compare(a, b) >= 0,
}


def get_field(value: Any, key: str) -> Any:
    if type(value) is dict:
        return value.get(key)
    if value is None:
        return None
    raise JqError(f'Cannot index {type_name(value)} with "{key}"')


def get_index(value: Any, index: Any) -> tuple[Any, Any]:
    """``value[index]`` and the path key it adds (jq keeps a negative index as given)."""
    kind = type(index)
    if kind is str:
        return get_field(value, index), index
    if kind is float:
        if not index.is_integer():
            raise Unsupported("a fractional index")
        index = int(index)
    elif kind is not int:
        raise Unsupported(f"an index of type {type_name(index)}")
    if type(value) is list:
        at = index + len(value) if index < 0 else index
        return (value[at] if 0 <= at < len(value) else None), index
    if value is None:
        return None, index
    raise JqError(f"Cannot index {type_name(value)} with number")


def iterate(value: Any, path: Path) -> Iterator[Pair]:
    kind = type(value)
    if kind is list:
        if path is None:
            for item in value:
                yield item, None
        else:
            for at, item in enumerate(value):
                yield item, (path, at)
    elif kind is dict:
        for key, item in value.items():
            yield item, (None if path is None else (path, key))
    else:
        raise JqError(f"Cannot iterate over {type_name(value)}")


def recurse(value: Any, path: Path, step: Run | None, env: Env) -> Iterator[Pair]:
    """``recurse(f)`` (``..`` when ``step`` is None: ``recurse(.[]?)``), pre-order, with
    an explicit stack (no Python recursion limit on deep documents)."""
    stack: list[Iterator[Pair]] = [iter(((value, path),))]
    while stack:
        for item, item_path in stack[-1]:
            yield item, item_path
            if step is None:
                if type(item) in (list, dict):
                    stack.append(iterate(item, item_path))
            else:
                stack.append(iter(step(item, item_path, env)))
            break
        else:
            stack.pop()


def path_list(path: Path) -> list[Any] | None:
    """A tracked path as jq's ``path(...)`` gives it (a list of keys and indexes)."""
    if path is None:
        return None
    out = []
    while path:
        path, key = path
        out.append(key)
    out.reverse()
    return out


class Compiled:
    """A compiled node: ``run`` yields every output; ``one`` (when the node always has
    exactly one output and no path) computes it directly; ``step`` (when it has exactly
    one output that keeps a path, such as ``.a``) maps a pair to a pair."""

    __slots__ = ("one", "run", "select", "step")

    def __init__(
        self,
        run: Run,
        one: One | None = None,
        step: Callable[[Any, Path], Pair] | None = None,
        select: One | None = None,
    ) -> None:
        self.run = run
        self.one = one
        self.step = step
        self.select = select


def from_one(one: One) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        yield one(value, env), None

    return Compiled(run, one=one)


def from_step(step: Callable[[Any, Path], Pair]) -> Compiled:
    """A node with exactly one output that keeps a path (``.a``, ``.``)."""

    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        yield step(value, path)

    def one(value: Any, env: Env) -> Any:
        return step(value, None)[0]

    return Compiled(run, one=one, step=step)


def values_of(node: Compiled, value: Any, env: Env) -> Iterator[Any]:
    """The outputs of ``node`` on ``value``, without paths."""
    if node.one is not None:
        yield node.one(value, env)
    else:
        for item, _ in node.run(value, None, env):
            yield item
