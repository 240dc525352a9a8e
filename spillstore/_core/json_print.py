"""Compact JSON as jq prints it. Pure: no I/O.

The Query page shows each result as compact JSON. Python's ``json.dumps`` (C speed)
writes it; this module rewrites what jq writes differently, so a result reads the same
whichever evaluator computed it (the native one or jq):

- A number is a double to jq. It prints the shortest digits that read back the same
  double (as Python's ``repr``), in plain notation unless the decimal point is 4 or more
  places left of the first digit or more than 15 places right of the last one (jq's
  ``jvp_dtoa_fmt``): ``1.0`` is ``1``, ``-0.0`` is ``-0``, ``1e16`` is ``1e+16``,
  ``1e-05`` keeps its two exponent digits, ``0.0001`` stays.
- An integer past ``2**53`` is first rounded to a double (``123456789012345678`` is
  ``123456789012345680``); one past the largest double prints as the largest double.
- DEL (U+007F) in a string is escaped (``\\u007f``).
"""

from __future__ import annotations

import math
import re
import sys
from typing import Final

__all__ = ["jq_number", "jq_text"]

_SAFE_INT: Final = 2**53

_NUMBER: Final = re.compile(r"-?\d+\.\d+(?:e[+-]\d+)?|-?\d+e[+-]\d+|-?\d{16,}")
"""A number Python writes otherwise than jq may (a float, a long integer), outside strings."""

# Characters json.dumps never writes raw (it escapes every control character), to stand
# for an escaped backslash and an escaped quote, and to join the text between strings.
_BACKSLASH, _QUOTE, _JOIN = "\x00", "\x01", "\x02"


def jq_number(value: int | float) -> str:
    """``value`` as jq prints a number."""
    if type(value) is int:
        if abs(value) < _SAFE_INT:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            value = sys.float_info.max if value > 0 else -sys.float_info.max
    return _double(float(value))


def _double(x: float) -> str:
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    if not math.isfinite(x):
        raise ValueError(f"jq prints no number for {x!r}")
    sign = "-" if x < 0 else ""
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # the decimal point, after this many digits
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    if point <= -4 or point > len(digits) + 15:
        power = point - 1
        rest = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{rest}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _rewrite(match: re.Match[str]) -> str:
    number = match.group(0)
    if "." in number or "e" in number:
        return _double(float(number))
    return jq_number(int(number))


def jq_text(dumped: str) -> str:
    """Compact JSON written by ``json.dumps(..., ensure_ascii=False, separators=(",",
    ":"))`` (finite numbers only) as jq writes it.

    Only the text between strings can hold numbers: the strings are set apart by
    splitting at the quotes (escaped quotes and backslashes stood for first), and the
    text between them is rewritten in one pass, so a large result costs a few copies at
    C speed and one call per float.
    """
    if "\x7f" in dumped:
        dumped = dumped.replace("\x7f", "\\u007f")
    marked = dumped.replace("\\\\", _BACKSLASH).replace('\\"', _QUOTE)
    pieces = marked.split('"')  # outside strings at even places, inside at odd ones
    between = _JOIN.join(pieces[0::2])
    rewritten = _NUMBER.sub(_rewrite, between)
    if rewritten == between:
        return dumped
    pieces[0::2] = rewritten.split(_JOIN)
    return '"'.join(pieces).replace(_QUOTE, '\\"').replace(_BACKSLASH, "\\\\")
