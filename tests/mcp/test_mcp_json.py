"""A JSON result through ``spillstore mcp proxy``: the shape in the pointer, then one query.

The proxy runs as a subprocess in front of a real upstream server (``mcp_servers/big.py``)
and is driven by the SDK's own client, as a model's host would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.mcp.mcp_servers.big import make_users
from tests.mcp.test_mcp_subprocess import BIG, ROOT, proxy_command, texts

pytestmark = pytest.mark.anyio

RANGE = re.compile(r"^1\. (?:line (\d+), )?bytes \[(\d+), (\d+)\): (.*)$", re.MULTILINE)


def _client(store_dir: Path) -> Client:
    command = proxy_command(store_dir, *BIG)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    return Client(params, mode="legacy")


async def test_big_json_shape_then_one_query_then_the_exact_bytes(tmp_path: Path) -> None:
    """The pointer shows the shape; one query finds the needle; Read shows its exact bytes."""
    count = 20_000
    needle = make_users(count)["items"][count - 7]
    document = json.dumps(make_users(count)).encode()
    async with _client(tmp_path / "spills") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"read_spill", "grep_spill", "list_spills", "query_spill"} <= names
        [pointer] = texts(await client.call_tool("users", {"count": count}))
        assert f'items: array[{count}] of {{id: int (0), name: str ("user0")' in pointer
        spill = re.search(r'query_spill\(spill="([^"]+)"', pointer)
        assert spill is not None, pointer
        expression = f'.items[] | select(.name == "{needle["name"]}")'
        found = await client.call_tool("query_spill", {"spill": spill[1], "expression": expression})
        [page] = texts(found)
        assert not found.is_error, page
        assert len(page.encode()) <= 2048
        match = RANGE.search(page)
        assert match is not None, page
        start, end = int(match[2]), int(match[3])
        assert json.loads(match[4]) == needle
        assert document[start:end] == json.dumps(needle).encode()
        read = await client.call_tool(
            "read_spill", {"spill": spill[1], "byte_offset": start, "max_bytes": end - start}
        )
        [shown] = texts(read)
        assert f"bytes [{start}, {end})" in shown
        assert json.dumps(needle) in shown


async def test_structured_content_folded_into_a_spill_is_queryable(tmp_path: Path) -> None:
    """Large structured content joins the spill as its last line, and can be queried there."""
    count = 5_000
    async with _client(tmp_path / "spills") as client:
        result: types.CallToolResult = await client.call_tool(
            "users", {"count": count, "structured": True}
        )
        [pointer] = texts(result)
        assert "Its last part (structured content): JSON object, 2 keys:" in pointer
        spill = re.search(r'query_spill\(spill="([^"]+)"', pointer)
        assert spill is not None, pointer
        [page] = texts(
            await client.call_tool(
                "query_spill", {"spill": spill[1], "expression": ".items[42].email"}
            )
        )
        match = RANGE.search(page)
        assert match is not None, page
        assert match[1] == "2" and match[4] == '"user42@example.com"'
