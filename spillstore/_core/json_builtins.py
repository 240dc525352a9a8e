"""The jq builtins the native evaluator knows, by name and arity. Pure: no I/O.

Each follows jq 1.8's definition (the one the PyPI binding bundles): the same outputs
in the same order, the same failures (:class:`JqError`), and paths where jq keeps them
(``select``, ``first``, ``last``, ``recurse``, ``limit``, ``values``...). A builtin
this module lacks, or a case of one it does not carry (``tostring`` of a float, whose
text jq formats its own way), raises
:class:`~spillstore._core.json_jq.Unsupported`: jq runs the expression instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from spillstore._core.json_jq import Unsupported
from spillstore._core.json_values import (
    SAFE_INT,
    SORT_KEY,
    Compiled,
    Env,
    JqError,
    Pair,
    Path,
    from_one,
    get_index,
    is_number,
    iterate,
    jq_add,
    jq_compare,
    jq_equal,
    recurse,
    truthy,
    type_name,
    values_of,
)

__all__ = ["BUILTINS", "compile_call"]

_NUMBER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


# --------------------------------------------------------------------- one value, no arguments


def _length(value: Any) -> Any:
    if value is None:
        return 0
    if type(value) is bool:
        raise JqError("boolean has no length")
    if is_number(value):
        return abs(value)
    return len(value)


def _utf8bytelength(value: Any) -> int:
    if type(value) is not str:
        raise JqError(f"{type_name(value)} only strings have UTF-8 byte length")
    return len(value.encode("utf-8", "surrogatepass"))


def _keys(value: Any) -> list[Any]:
    if type(value) is dict:
        return sorted(value)
    if type(value) is list:
        return list(range(len(value)))
    raise JqError(f"{type_name(value)} has no keys")


def _keys_unsorted(value: Any) -> list[Any]:
    if type(value) is dict:
        return list(value)
    return _keys(value)


def _items(value: Any) -> list[Any]:
    return [item for item, _ in iterate(value, None)]


def _add_all(value: Any) -> Any:
    total = None
    for item in _items(value):
        total = jq_add(total, item)
    return total


def _sorted(value: Any) -> list[Any]:
    if type(value) is not list:
        raise JqError(f"{type_name(value)} cannot be sorted, as it is not an array")
    return sorted(value, key=SORT_KEY)


def _unique(value: Any) -> list[Any]:
    out: list[Any] = []
    for item in _sorted(value):
        if not out or not jq_equal(out[-1], item):
            out.append(item)
    return out


def _extreme(value: Any, *, largest: bool) -> Any:
    items = _sorted(value)
    if not items:
        return None
    return items[-1] if largest else items[0]


def _reverse(value: Any) -> Any:
    if value is None:
        return []
    if type(value) is list:
        return value[::-1]
    raise Unsupported(f"reverse of {type_name(value)}")


def _text(value: Any) -> str:
    """``tostring`` where jq's text is certain (strings, integers, constants)."""
    kind = type(value)
    if kind is str:
        return str(value)
    if kind is int and abs(value) < SAFE_INT:
        return str(value)
    if value is None or kind is bool:
        return {None: "null", True: "true", False: "false"}[value]
    raise Unsupported(f"tostring of {type_name(value)}")


def _case(table: dict[int, int]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if type(value) is not str:
            raise JqError(f"{type_name(value)} cannot be case-converted")
        return str(value).translate(table)

    return convert


def _to_entries(value: Any) -> list[dict[str, Any]]:
    return [{"key": key, "value": value[key]} for key in _keys_unsorted(value)]


def _floor(value: Any) -> Any:
    if not is_number(value):
        raise JqError(f"{type_name(value)} number required")
    if type(value) is int:
        return value
    if math.isinf(value) or abs(value) >= SAFE_INT:
        raise Unsupported("floor of a large number")
    return math.floor(value)


def _tonumber(value: Any) -> Any:
    if is_number(value):
        return value
    if type(value) is str and _NUMBER_TEXT.fullmatch(value) and len(value) < 16:
        number = float(value)
        return int(number) if number.is_integer() else number
    raise Unsupported(f"tonumber of {type_name(value)}")


def _any(value: Any) -> bool:
    return any(truthy(item) for item in _items(value))


def _all(value: Any) -> bool:
    return all(truthy(item) for item in _items(value))


_ONE: dict[str, Callable[[Any], Any]] = {
    "length": _length,
    "utf8bytelength": _utf8bytelength,
    "not": lambda value: not truthy(value),
    "type": type_name,
    "keys": _keys,
    "keys_unsorted": _keys_unsorted,
    "add": _add_all,
    "any": _any,
    "all": _all,
    "sort": _sorted,
    "unique": _unique,
    "min": lambda value: _extreme(value, largest=False),
    "max": lambda value: _extreme(value, largest=True),
    "reverse": _reverse,
    "tostring": _text,
    "ascii_downcase": _case(_ASCII_LOWER),
    "ascii_upcase": _case(_ASCII_UPPER),
    "to_entries": _to_entries,
    "floor": _floor,
    "tonumber": _tonumber,
}

# ---------------------------------------------------------- filters that keep the input's path

_KINDS: dict[str, Callable[[Any], bool]] = {
    "values": lambda value: value is not None,
    "nulls": lambda value: value is None,
    "booleans": lambda value: type(value) is bool,
    "numbers": is_number,
    "strings": lambda value: type(value) is str,
    "arrays": lambda value: type(value) is list,
    "objects": lambda value: type(value) is dict,
    "iterables": lambda value: type(value) in (list, dict),
    "scalars": lambda value: type(value) not in (list, dict),
}


def _kind_filter(test: Callable[[Any], bool]) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        if test(value):
            yield value, path

    return Compiled(run)


def _index_step(at: int) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        found, key = get_index(value, at)
        yield found, (None if path is None else (path, key))

    return Compiled(run)


def _empty(value: Any, path: Path, env: Env) -> Iterator[Pair]:
    return iter(())


# ----------------------------------------------------------------- one argument, value-wise


def _has(value: Any, key: Any) -> bool:
    if value is None:
        return False
    if type(value) is dict and type(key) is str:
        return key in value
    if type(value) is list and is_number(key):
        return bool(0 <= key < len(value))
    raise JqError(f"Cannot check whether {type_name(value)} has a {type_name(key)} key")


def _strings(name: str, value: Any, arg: Any) -> tuple[str, str]:
    if type(value) is not str or type(arg) is not str:
        raise JqError(f"{name}() requires string inputs")
    return value, arg


def _split(value: Any, sep: Any) -> list[str]:
    text, sep = _strings("split", value, sep)
    if not sep:
        raise Unsupported("split on an empty string")
    return [] if not text else text.split(sep)


def _join(value: Any, sep: Any) -> str:
    if type(sep) is not str:
        raise Unsupported("join with a separator that is not a string")
    parts = []
    for item in _items(value):
        if type(item) in (list, dict):
            raise JqError(f"Cannot join with {type_name(item)}")
        parts.append("" if item is None else _text(item))
    return sep.join(parts)


def _trim(value: Any, affix: Any, *, left: bool) -> Any:
    """jq 1.8's ``ltrimstr``/``rtrimstr``: both must be strings (its error names the test)."""
    text, affix = _strings("startswith" if left else "endswith", value, affix)
    if left and text.startswith(affix):
        return text[len(affix) :]
    if not left and affix and text.endswith(affix):
        return text[: -len(affix)]
    return text


_WITH_VALUE: dict[str, Callable[[Any, Any], Any]] = {
    "has": _has,
    "startswith": lambda value, arg: str.startswith(*_strings("startswith", value, arg)),
    "endswith": lambda value, arg: str.endswith(*_strings("endswith", value, arg)),
    "split": _split,
    "join": _join,
    "ltrimstr": lambda value, arg: _trim(value, arg, left=True),
    "rtrimstr": lambda value, arg: _trim(value, arg, left=False),
}


def _with_value(fn: Callable[[Any, Any], Any], arg: Compiled) -> Compiled:
    if arg.one is not None:
        one = arg.one
        return from_one(lambda value, env: fn(value, one(value, env)))

    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        for item in values_of(arg, value, env):
            yield fn(value, item), None

    return Compiled(run)


# ------------------------------------------------------------------- one argument, filters


def _select(condition: Compiled) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        for test in values_of(condition, value, env):
            if truthy(test):
                yield value, path

    if condition.one is not None:
        return Compiled(run, select=condition.one)
    return Compiled(run)


def _map(body: Compiled) -> Compiled:
    def one(value: Any, env: Env) -> list[Any]:
        return [out for item in _items(value) for out in values_of(body, item, env)]

    return from_one(one)


def _by(body: Compiled, value: Any, env: Env) -> list[tuple[list[Any], Any]]:
    if type(value) is not list:
        raise Unsupported(f"sorting {type_name(value)}")
    keyed = [(list(values_of(body, item, env)), item) for item in value]
    keyed.sort(key=lambda pair: SORT_KEY(pair[0]))
    return keyed


def _sort_by(body: Compiled) -> Compiled:
    return from_one(lambda value, env: [item for _, item in _by(body, value, env)])


def _extreme_by(body: Compiled, *, largest: bool) -> Compiled:
    def one(value: Any, env: Env) -> Any:
        keyed = _by(body, value, env)
        if not keyed:
            return None
        return keyed[-1][1] if largest else keyed[0][1]

    return from_one(one)


def _unique_by(body: Compiled) -> Compiled:
    def one(value: Any, env: Env) -> list[Any]:
        out: list[tuple[list[Any], Any]] = []
        for key, item in _by(body, value, env):
            if not out or jq_compare(out[-1][0], key) != 0:
                out.append((key, item))
        return [item for _, item in out]

    return from_one(one)


def _first_of(body: Compiled) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        for pair in body.run(value, path, env):
            yield pair
            return

    return Compiled(run)


def _last_of(body: Compiled) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        last = None
        for pair in body.run(value, None, env):
            last = pair
        if last is not None:
            yield last  # no path: jq 1.8's last(f) is a reduce, whose path() is not f's

    return Compiled(run)


def _quantifier(generator: Compiled | None, condition: Compiled, *, every: bool) -> Compiled:
    """``any(gen; cond)`` / ``all(gen; cond)`` (``gen`` None: ``.[]``), short-circuit."""

    def one(value: Any, env: Env) -> bool:
        items = _items(value) if generator is None else values_of(generator, value, env)
        for item in items:
            for test in values_of(condition, item, env):
                if truthy(test) != every:
                    return not every
        return every

    return from_one(one)


def _isempty(body: Compiled) -> Compiled:
    def one(value: Any, env: Env) -> bool:
        return next(iter(body.run(value, None, env)), None) is None

    return from_one(one)


def _recurse_with(step: Compiled) -> Compiled:
    return Compiled(lambda value, path, env: recurse(value, path, step.run, env))


def _range(low: Compiled, high: Compiled | None) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        for start in [0] if high is None else values_of(low, value, env):
            for stop in values_of(high or low, value, env):
                if not (is_number(start) and is_number(stop)):
                    raise JqError("Range bounds must be numeric")
                at = start
                while at < stop:
                    yield at, None
                    at += 1

    return Compiled(run)


def _limit(count: Compiled, body: Compiled) -> Compiled:
    def run(value: Any, path: Path, env: Env) -> Iterator[Pair]:
        for most in values_of(count, value, env):
            if not is_number(most):
                raise Unsupported("limit with a count that is not a number")
            if most < 0:
                raise JqError("limit doesn't support negative count")
            if most == 0:
                continue
            for taken, pair in enumerate(body.run(value, path, env), start=1):
                yield pair
                if taken >= most:
                    break

    return Compiled(run)


_FILTERS: dict[tuple[str, int], Callable[..., Compiled]] = {
    ("select", 1): _select,
    ("map", 1): _map,
    ("sort_by", 1): _sort_by,
    ("min_by", 1): lambda body: _extreme_by(body, largest=False),
    ("max_by", 1): lambda body: _extreme_by(body, largest=True),
    ("unique_by", 1): _unique_by,
    ("first", 1): _first_of,
    ("last", 1): _last_of,
    ("any", 1): lambda cond: _quantifier(None, cond, every=False),
    ("all", 1): lambda cond: _quantifier(None, cond, every=True),
    ("any", 2): lambda gen, cond: _quantifier(gen, cond, every=False),
    ("all", 2): lambda gen, cond: _quantifier(gen, cond, every=True),
    ("isempty", 1): _isempty,
    ("recurse", 1): _recurse_with,
    ("range", 1): lambda high: _range(high, None),
    ("range", 2): _range,
    ("limit", 2): _limit,
}


def compile_call(name: str, args: list[Compiled]) -> Compiled:
    """The builtin ``name`` called with ``args`` (compiled arguments).

    Raises:
        Unsupported: the evaluator does not know this builtin with this arity.
    """
    arity = len(args)
    if arity == 0:
        if name in _ONE:
            fn = _ONE[name]
            return from_one(lambda value, env: fn(value))
        if name in _KINDS:
            return _kind_filter(_KINDS[name])
        if name == "empty":
            return Compiled(_empty)
        if name == "first":
            return _index_step(0)
        if name == "last":
            return _index_step(-1)
        if name == "recurse":
            return Compiled(lambda value, path, env: recurse(value, path, None, env))
    elif arity == 1 and name in _WITH_VALUE:
        return _with_value(_WITH_VALUE[name], args[0])
    factory = _FILTERS.get((name, arity))
    if factory is None:
        raise Unsupported(f"{name}/{arity}")
    return factory(*args)


BUILTINS = frozenset(
    [(name, 0) for name in (*_ONE, *_KINDS, "empty", "first", "last", "recurse")]
    + [(name, 1) for name in _WITH_VALUE]
    + list(_FILTERS)
)
"""Every builtin the evaluator knows, as ``(name, arity)``."""
