"""A tool returns a 6 MB JSON listing; the model sees its shape and finds one item by query.

Shows the JSON path through the Python API: the pointer of a JSON output names its
shape (keys, array lengths, item keys with types and examples) and a ready
``query_spill`` call; one jq query finds the item whose name is asked for, with its
exact byte range, and a byte-mode ``read_spill`` of that range shows the item's bytes.

Run:  python examples/query_json.py      (uses a temporary store)
"""

from __future__ import annotations

import json
import re
import tempfile

from spillstore import LocalStore, TextPart, TruncationService


def listing(count: int) -> str:
    """``{"total": N, "items": [...]}``: N users on one line, as many APIs return them."""
    items = [
        {"id": i, "name": f"user{i}", "email": f"user{i}@example.com", "score": i / 2}
        for i in range(count)
    ]
    return json.dumps({"total": count, "items": items})


def text(result: object) -> str:
    """The first text part of a tool result."""
    part = result.content[0]  # type: ignore[attr-defined]
    assert isinstance(part, TextPart)
    return part.text


def main() -> None:
    service = TruncationService(LocalStore(tempfile.mkdtemp(prefix="spillstore-json-")))
    pointer = text(
        service.truncate_for_model(listing(60_000), tool_name="users", tool_call_id="c1")
    )
    print(pointer.split("--- head:")[0])
    spill = re.search(r'query_spill\(spill="([^"]+)"', pointer)
    assert spill is not None
    tools = service.spill_tools()
    try:
        found = text(tools.query(spill[1], '.items[] | select(.name == "user54321")'))
        print(found, end="\n\n")
        start, end = map(int, re.search(r"bytes \[(\d+), (\d+)\)", found).groups())  # type: ignore[union-attr]
        print(text(tools.read(spill[1], byte_offset=start, max_bytes=end - start)))
    finally:
        tools.close()


if __name__ == "__main__":
    main()
