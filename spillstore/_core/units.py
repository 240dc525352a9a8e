"""Sizes and durations from ints and human strings. Pure: no I/O.

Sizes are UTF-8 bytes. :func:`parse_size` accepts whole numbers and human sizes:

- no unit or ``B``: bytes (``50000``, ``"50000"``, ``"512B"``);
- ``KB``, ``MB``, ``GB``: powers of 1000 (``"50KB"`` is 50,000);
- ``KiB``, ``MiB``, ``GiB``: powers of 1024 (``"10MiB"`` is 10,485,760).

Units are case-insensitive (``"50kb"`` and ``"50kB"`` both mean 50,000). A bare
``K``/``M``/``G`` is rejected: half the world reads it as 1000-based and half as
1024-based, so the error asks for ``KB`` or ``KiB``. Caps that can be turned off take
``"off"`` (or ``None``); ``0`` never means "off". :func:`parse_duration` reads seconds
with an optional ``s``/``m``/``h``/``d`` unit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, Literal, overload

from spillstore._core.checks import shown
from spillstore._errors import ConfigError

__all__ = ["parse_duration", "parse_size"]

_SIZE_UNITS: Final[Mapping[str, int]] = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_AMBIGUOUS_SIZE_UNITS: Final = frozenset({"k", "m", "g"})
_DURATION_UNITS: Final[Mapping[str, int]] = {"": 1, "s": 1, "m": 60, "h": 3_600, "d": 86_400}

# ASCII digits only: str.isdigit() and int() also accept other scripts' digits.
_NUMBER_WITH_UNIT: Final = re.compile(r"([0-9]+)\s*([A-Za-z]*)", re.ASCII)

_SIZE_EXPECTED: Final = 'must be a positive whole number of bytes such as 50000, "50KB" or "10MiB"'
_DURATION_EXPECTED: Final = (
    'must be a positive whole number of seconds, or a duration such as "30s", "10m", "2h" or "7d"'
)


def _size_error(value: object, *, allow_off: bool, hint: str | None = None) -> ConfigError:
    """Build the error for a value :func:`parse_size` refuses."""
    expected = _SIZE_EXPECTED + (', or "off" to turn the cap off' if allow_off else "")
    message = f"{expected}; got {shown(value)}"
    return ConfigError(f"{message} ({hint})" if hint else message)


@overload
def parse_size(value: object, *, allow_off: Literal[False] = False) -> int: ...
@overload
def parse_size(value: object, *, allow_off: bool) -> int | None: ...
def parse_size(value: object, *, allow_off: bool = False) -> int | None:
    """Parse a size in bytes from an int or a human size string.

    Accepts an ``int`` greater than zero, or a string holding a whole number and an
    optional unit (see the module docstring), with any surrounding whitespace and
    optional whitespace before the unit: ``"50000"``, ``" 50KB "``, ``"10 MiB"``.

    Args:
        value: the raw value, e.g. from a keyword argument or an environment variable.
        allow_off: accept ``None`` and ``"off"`` (any case) and return ``None``, meaning
            the cap is turned off.

    Returns:
        The size in bytes, or ``None`` when ``allow_off`` and the value turns the cap off.

    Raises:
        ConfigError: for zero, negatives, bools, floats (even ``5.0``), NaN/infinity,
            fractions (``"1.5MB"``), words, empty strings, a bare ``K``/``M``/``G``
            unit, unknown units, and ``None``/``"off"`` unless ``allow_off``.
    """
    if value is None:
        if allow_off:
            return None
        raise _size_error(value, allow_off=allow_off, hint="this setting cannot be turned off")
    if isinstance(value, bool):
        raise _size_error(value, allow_off=allow_off, hint="a bool is not a size")
    if isinstance(value, int):
        if value > 0:
            return value
        hint = 'to turn the cap off write "off", not 0' if allow_off and value == 0 else None
        raise _size_error(value, allow_off=allow_off, hint=hint)
    if isinstance(value, float):
        raise _size_error(value, allow_off=allow_off, hint="sizes are whole bytes, not floats")
    if not isinstance(value, str):
        raise _size_error(value, allow_off=allow_off, hint=f"a {type(value).__name__}")

    text = value.strip()
    if text.lower() == "off":
        if allow_off:
            return None
        raise _size_error(value, allow_off=allow_off, hint="this setting cannot be turned off")
    match = _NUMBER_WITH_UNIT.fullmatch(text)
    if match is None:
        raise _size_error(value, allow_off=allow_off)
    digits, unit = match.groups()
    unit_key = unit.lower()
    if unit_key in _AMBIGUOUS_SIZE_UNITS:
        letter = unit.upper()
        raise _size_error(
            value,
            allow_off=allow_off,
            hint=f'"{unit}" is ambiguous: write "{digits}{letter}B" (x1000) '
            f'or "{digits}{letter}iB" (x1024)',
        )
    multiplier = _SIZE_UNITS.get(unit_key)
    if multiplier is None:
        raise _size_error(
            value,
            allow_off=allow_off,
            hint=f'unknown unit "{unit}"; use B, KB, MB, GB, KiB, MiB or GiB',
        )
    number = _whole_number(digits)
    if number is None:
        raise _size_error(value, allow_off=allow_off, hint="too many digits")
    size = number * multiplier
    if size <= 0:
        hint = 'to turn the cap off write "off", not 0' if allow_off else None
        raise _size_error(value, allow_off=allow_off, hint=hint)
    return size


def parse_duration(value: object) -> float:
    """Parse a duration in seconds from an int or a string such as ``"10m"``.

    Accepts an ``int`` greater than zero (seconds), or a string holding a whole number
    and an optional unit, with any surrounding whitespace and optional whitespace before
    the unit: ``s`` seconds, ``m`` minutes, ``h`` hours, ``d`` days (case-insensitive;
    there is no month unit, so ``"10M"`` is ten minutes).

    Args:
        value: the raw value, e.g. a ``--max-age`` command-line argument.

    Returns:
        The duration in seconds.

    Raises:
        ConfigError: for zero, negatives, bools, floats (even ``5.0``), NaN/infinity,
            fractions (``"1.5h"``), words, empty strings, ``None`` and unknown units.
    """
    if isinstance(value, bool):
        raise _duration_error(value, hint="a bool is not a duration")
    if isinstance(value, int):
        if value > 0:
            return _seconds(value, value)
        raise _duration_error(value)
    if isinstance(value, float):
        raise _duration_error(value, hint="write whole seconds or use a unit")
    if not isinstance(value, str):
        raise _duration_error(value, hint=f"a {type(value).__name__}")
    match = _NUMBER_WITH_UNIT.fullmatch(value.strip())
    if match is None:
        raise _duration_error(value)
    digits, unit = match.groups()
    multiplier = _DURATION_UNITS.get(unit.lower())
    if multiplier is None:
        raise _duration_error(value, hint=f'unknown unit "{unit}"; use s, m, h or d')
    number = _whole_number(digits)
    if number is None:
        raise _duration_error(value, hint="too many digits")
    if number == 0:
        raise _duration_error(value)
    return _seconds(number * multiplier, value)


def _duration_error(value: object, *, hint: str | None = None) -> ConfigError:
    """Build the error for a value :func:`parse_duration` refuses."""
    message = f"{_DURATION_EXPECTED}; got {shown(value)}"
    return ConfigError(f"{message} ({hint})" if hint else message)


def _seconds(seconds: int, value: object) -> float:
    """Convert whole seconds to a float, refusing durations too long for one."""
    try:
        return float(seconds)
    except OverflowError:
        raise _duration_error(value, hint="too long") from None


def _whole_number(digits: str) -> int | None:
    """Return ``int(digits)``, or ``None`` past Python's int-from-string digit limit."""
    try:
        return int(digits)
    except ValueError:
        return None
