"""A tool returns ~3 MB; the model sees a short, honest pointer, and nothing is lost.

Shows the whole idea through the Python API: a fake `pytest` run prints 60,000 lines
with one failure buried in the middle. spillstore saves the output to a private
directory, hands the model a head/tail preview with the exact elided byte and line
ranges, and the saved copy is then read back exactly where the pointer says.

Run:  python examples/spill_big_output.py            (uses a temporary store)
      python examples/spill_big_output.py --keep      (uses the default store dir)
"""

from __future__ import annotations

import sys
import tempfile

from spillstore import LocalStore, TextPart, TruncationService


def fake_test_run() -> str:
    """A ~3 MB test log with one failure in the middle and a summary at the end."""
    lines = [f"tests/test_mod_{n // 100:03d}.py::test_case_{n:05d} PASSED" for n in range(60_000)]
    lines[31_337] = "tests/test_mod_313.py::test_case_31337 FAILED - AssertionError: 41 != 42"
    lines.append("==== 1 failed, 59999 passed in 812.40s ====")
    return "\n".join(lines) + "\n"


def main() -> None:
    root = None if "--keep" in sys.argv else tempfile.mkdtemp(prefix="spillstore-demo-")
    store = LocalStore(root)
    service = TruncationService(store)
    output = fake_test_run()

    result = service.truncate_for_model(output, tool_name="bash", tool_call_id="call_0001")
    text = "\n".join(p.text for p in result.content if isinstance(p, TextPart))
    sizes = f"{len(output.encode()):,} bytes. The model sees {len(text.encode()):,}"
    print(f"The tool returned {sizes}:")
    print("=" * 88)
    print(text)
    print("=" * 88)

    info = result.spill
    assert info is not None and info.spill_id is not None
    failure_line = 31_338
    page = store.read_lines(info.spill_id, failure_line - 1, 3)
    print(f"Reading lines {page.first_line}-{page.last_line} back from spill {info.spill_id}:")
    print(page.data.decode())
    print(f"Hosts get the same facts without parsing text: elided bytes {info.elided_bytes},")
    print(f"lines {info.elided_lines}, sha256 {info.sha256[:16]}..., stored at {info.path}")


if __name__ == "__main__":
    main()
