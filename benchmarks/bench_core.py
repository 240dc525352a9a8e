"""Benchmark the pure capping core against its peers, side by side in one run.

Run:  .venv/bin/pip install -e '.[bench]' && .venv/bin/python benchmarks/bench_core.py

Compares, on the same inputs in the same run:
  (a) pass-through of a 100-byte result: cap_result / cap_content / elide_middle vs
      smolagents' truncate_content;
  (b) head/tail capping of 100 MB: ASCII str and bytes vs smolagents (target <= 5x);
      non-ASCII str vs a plain len(s.encode()) (target <= 1.1x); and vs a naive cut
      that encodes everything;
  (c) cap_result of 100 MB (hashes the whole original) vs encode + hashlib.sha256
      (target <= 1.1x).
"""

from __future__ import annotations

import hashlib
import sys

from smolagents.utils import truncate_content

from benchmarks._timing import fmt, machine, side_by_side
from spillstore import TextPart
from spillstore.text import cap_content, cap_result, elide_middle

CAP = 50_000
MB100 = 100_000_000


def naive_cut(text: str, cap: int) -> str:
    """The obvious byte-safe cut: encode everything, slice, decode ignoring the split."""
    data = text.encode("utf-8", "surrogatepass")
    half = cap // 2
    return (
        data[:half].decode("utf-8", "ignore")
        + "\n[elided]\n"
        + data[-half:].decode("utf-8", "ignore")
    )


def report(title: str, times: dict[str, float], baseline: str, target: float | None) -> None:
    print(f"\n{title}")
    base = times[baseline]
    for name, value in times.items():
        ratio = value / base
        mark = ""
        if target is not None and name.startswith("spillstore"):
            mark = "  ok" if ratio <= target else f"  OVER target {target}x"
        print(f"  {name:<40} {fmt(value):>12}   {ratio:6.2f}x {baseline}{mark}")


def main() -> None:
    quick = "--quick" in sys.argv
    size = MB100 // 10 if quick else MB100
    print(f"machine: {machine()}")
    print(f"input size: {size:,} bytes")

    small = "x" * 100
    small_parts = [TextPart(small)]
    times = side_by_side(
        {
            "smolagents truncate_content": lambda: truncate_content(small, CAP),
            "spillstore cap_result": lambda: cap_result(small, CAP),
            "spillstore elide_middle": lambda: elide_middle(small, CAP, tool_name="t"),
            "spillstore cap_content": lambda: cap_content(small_parts, CAP, tool_name="t"),
        },
        rounds=7,
        calls=200_000,
    )
    report("(a) pass-through of a 100-byte result", times, "smolagents truncate_content", 15)

    ascii_text = "0123456789abcdef\n" * (size // 17)
    ascii_bytes = ascii_text.encode()
    times = side_by_side(
        {
            "smolagents truncate_content (str)": lambda: truncate_content(ascii_text, CAP),
            "spillstore elide_middle (ASCII str)": lambda: elide_middle(
                ascii_text, CAP, tool_name="t"
            ),
            "spillstore elide_middle (bytes)": lambda: elide_middle(
                ascii_bytes, CAP, tool_name="t"
            ),
            "naive encode-everything cut (str)": lambda: naive_cut(ascii_text, CAP),
        },
        rounds=7,
        calls=20,
    )
    report(
        "(b1) head/tail cap of ASCII str / bytes",
        times,
        "smolagents truncate_content (str)",
        5,
    )
    ascii_bytes = b""  # free it before the next inputs are built

    wide_text = "log \U0001f600 line é\n" * (size // 20)
    times = side_by_side(
        {
            "len(s.encode())": lambda: len(wide_text.encode()),
            "spillstore elide_middle (non-ASCII str)": lambda: elide_middle(
                wide_text, CAP, tool_name="t"
            ),
            "spillstore cap_content (non-ASCII str)": lambda: cap_content(
                [TextPart(wide_text)], CAP, tool_name="t"
            ),
            "naive encode-everything cut": lambda: naive_cut(wide_text, CAP),
            "smolagents truncate_content": lambda: truncate_content(wide_text, CAP),
        },
        rounds=5,
    )
    report("(b2) head/tail cap of a non-ASCII str", times, "len(s.encode())", 1.1)

    for label, text in (("ASCII", ascii_text), ("non-ASCII", wide_text)):
        times = side_by_side(
            {
                "encode + hashlib.sha256": lambda text=text: hashlib.sha256(
                    text.encode()
                ).hexdigest(),
                "spillstore cap_result": lambda text=text: cap_result(text, CAP),
            },
            rounds=5,
        )
        report(f"(c) cap_result of a {label} str", times, "encode + hashlib.sha256", 1.1)


if __name__ == "__main__":
    main()
