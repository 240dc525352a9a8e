"""Argument checks shared by every public entry point. Pure: no I/O.

A developer's bad argument raises :class:`~spillstore.ConfigError` naming the argument
and the value; ``bool`` is never accepted as a number, whatever Python thinks of it.
"""

from __future__ import annotations

import math
import re

from spillstore._errors import ConfigError

__all__ = [
    "MAX_SHOWN_CHARS",
    "at_most",
    "check_int",
    "check_number",
    "header_problem",
    "shown",
    "split_header",
]

MAX_SHOWN_CHARS = 100
"""The most characters of a bad value an error message echoes."""


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with a count.

    A hostile value (a 5,000-digit number, a megabyte string) must not make the message
    itself huge; ``int`` reprs past Python's digit limit are described, not raised.
    """
    try:
        text = repr(value)
    except ValueError:  # an int past sys.get_int_max_str_digits()
        return f"<{type(value).__name__} too large to show>"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def at_most(size: int | None, maximum: int) -> int | None:
    """Return ``size`` (``None``: a cap turned off) unless it is over ``maximum``.

    Raises:
        ConfigError: it is; the caller's error translation names the field.
    """
    if size is not None and size > maximum:
        raise ConfigError(f"must be at most {maximum} bytes; got {shown(size)}")
    return size


def check_int(
    name: str,
    value: object,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    allow_none: bool = False,
) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in ``[minimum, maximum]``.

    Raises:
        ConfigError: it is not (``field`` is ``name``).
    """
    if value is None and allow_none:
        return value  # type: ignore[return-value]  # callers type it as int | None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        none = " or None" if allow_none else ""
        raise ConfigError(f"{name} must be an int {bounds}{none}; got {shown(value)}", field=name)
    return value


def check_number(name: str, value: object, *, minimum: float = 0.0) -> float:
    """Return ``value`` if it is a real ``int`` or ``float`` (not bool, not NaN) >= ``minimum``.

    Raises:
        ConfigError: it is not.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or math.isnan(value)
        or value < minimum
    ):
        raise ConfigError(f"{name} must be a number >= {minimum:g}; got {shown(value)}", field=name)
    return float(value)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP field name (RFC 9110 ``token``)."""


def header_problem(name: object, value: object) -> str | None:
    """Why ``name: value`` cannot be sent as an HTTP header (None: it can)."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        return f"{shown(name)} is not an HTTP header name (letters, digits and !#$%&'*+.^_`|~-)"
    if not isinstance(value, str) or re.search(r"[^\t\x20-\x7e]", value):
        return f"the value of header {name} is not one line of printable ASCII"
    return None


def split_header(text: str, option: str = "--header") -> tuple[str, str]:
    """``NAME=VALUE`` (a command-line option) as (name, value).

    Raises:
        ConfigError: no ``=``, or ``NAME`` is not an HTTP header name.
    """
    name, sep, value = text.partition("=")
    problem = header_problem(name, "") if sep else "give NAME=VALUE"
    if problem is not None:
        raise ConfigError(f"{option} {shown(text)}: {problem}")
    return name, value
