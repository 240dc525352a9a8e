"""Compact JSON as jq prints it (`spillstore._core.json_print`).

The table was printed by jq 1.6 (`jq -c .` on the same numbers, 2026-12-01); when a jq
binary is on the PATH, random doubles are compared with it directly. The properties
hold without jq: every number reads back as the double jq holds, and strings are never
touched.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore import SpillTools
from spillstore._core.json_print import jq_number, jq_text
from spillstore._stores.memory import MemoryStore

JQ_16 = [
    (1.0, "1"),
    (-0.0, "-0"),
    (1e100, "1e+100"),
    (1.5, "1.5"),
    (0.1, "0.1"),
    (1e17, "1e+17"),
    (1e-7, "1e-07"),
    (123456789012345678, "123456789012345680"),
    (300.0, "300"),
    (1e16, "1e+16"),
    (12345678901234567890, "12345678901234567000"),
    (0.000001, "1e-06"),
    (1e-5, "1e-05"),
    (1e23, "1e+23"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.0025, "0.0025"),
    (-1e300, "-1e+300"),
    (9007199254740993, "9007199254740992"),
    (100, "100"),
    (-5, "-5"),
    (1e6, "1000000"),
    (1e15, "1000000000000000"),
    (1.5e16, "15000000000000000"),
    (0.0001, "0.0001"),
    (1.5e-4, "0.00015"),
    (1.23e22, "1.23e+22"),
    (1.25e17, "125000000000000000"),
    (2e-310, "2e-310"),
    (10**400, "1.7976931348623157e+308"),
    (-(10**400), "-1.7976931348623157e+308"),
]


@pytest.mark.parametrize(("value", "printed"), JQ_16)
def test_numbers_print_as_jq_prints_them(value: float, printed: str) -> None:
    assert jq_number(value) == printed
    assert jq_text(json.dumps([value])) == f"[{printed}]"


finite = st.floats(allow_nan=False, allow_infinity=False)


@given(finite)
def test_a_printed_double_reads_back_as_the_same_double(x: float) -> None:
    printed = jq_number(x)
    back = float(printed)
    assert back == x and math.copysign(1.0, back) == math.copysign(1.0, x)
    assert not printed.endswith(".0") and "E" not in printed


@given(st.integers(min_value=-(2**70), max_value=2**70))
def test_an_integer_prints_exactly_below_two_to_the_53_else_as_its_double(n: int) -> None:
    printed = jq_number(n)
    if abs(n) < 2**53:
        assert printed == str(n)
    else:
        assert float(printed) == float(n)


tricky_text = st.text(alphabet='"\\1.5e+-0\x7f x', max_size=12)
"""Strings that look like numbers, with quotes and backslashes escaped around them."""

json_values = st.recursive(
    st.none() | st.booleans() | finite | st.integers() | st.text() | tricky_text,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | tricky_text, inner, max_size=4)
    ),
    max_leaves=20,
)


def _as_jq_holds(value: Any) -> Any:
    """``value`` with every number as the double jq holds (a too large integer as the
    largest double)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) < 2**53:
            return value
        try:
            return float(value)
        except OverflowError:
            return math.copysign(sys.float_info.max, value)
    if isinstance(value, float):
        return value
    if isinstance(value, list):
        return [_as_jq_holds(item) for item in value]
    return {key: _as_jq_holds(item) for key, item in value.items()}


@given(json_values)
def test_jq_text_changes_numbers_only_and_reads_back_as_jq_holds_the_value(value: Any) -> None:
    dumped = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    printed = jq_text(dumped)
    # jq reads every number as a double: so does this reading (digits are the shortest)
    assert json.loads(printed, parse_int=float) == _as_jq_holds(value)
    assert "\x7f" not in printed


@pytest.mark.skipif(shutil.which("jq") is None, reason="no jq binary on the PATH")
def test_random_doubles_print_as_the_jq_binary_prints_them() -> None:
    rnd = random.Random(20261201)
    values: list[float | int] = []
    while len(values) < 3000:
        x = struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(x):
            values.append(x)
    for _ in range(1000):
        values.append(rnd.randint(-(10**20), 10**20) / 10 ** rnd.randint(0, 25))
        values.append(rnd.randint(-(10**20), 10**20))
    dumped = json.dumps(values, separators=(",", ":"))
    ran = subprocess.run(["jq", "-c", "."], input=dumped, capture_output=True, text=True)
    assert ran.returncode == 0
    assert jq_text(dumped).split(",") == ran.stdout.strip().split(",")


def test_query_results_print_numbers_as_jq_whichever_evaluator_ran() -> None:
    """Values of the document and computed ones, by the native evaluator or by jq, print
    their numbers as the jq binary prints them."""
    store = MemoryStore()
    doc = '[1.0, -0.0, 1e100, 123456789012345678, 300.0, "1.0 in text", "\\u007f"]'
    meta = store.put(doc, session="s", tool_name="t", tool_call_id="c")
    tools = SpillTools(store, session="s")

    def results(expression: str) -> str:
        page = tools.query(meta.spill_id, expression)
        return str(page.content[0].text)  # type: ignore[union-attr]

    listed = results(".[]")
    for line in ("): 1\n", "): -0\n", "): 1e+100\n", "): 123456789012345680\n", "): 300\n"):
        assert line in listed
    assert '): "1.0 in text"\n' in listed and '): "\\u007f"' in listed
    assert "[1,-0,1e+100]" in results("[.[0], .[1], .[2] | . * 1]")  # native
    # an integer past 2**53 in arithmetic: jq runs it (whose binding reads -0 as 0)
    assert "[1e+100,123456789012345680,300]" in results("[.[2], .[3], .[4] | . * 1]")
