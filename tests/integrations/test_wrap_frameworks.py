"""Frameworks that introspect tools accept a wrapped callable as they accept the tool itself."""

from __future__ import annotations

import agents
import langchain_core.tools
import pydantic_ai

from spillstore import MemoryStore, TruncationService
from spillstore._service.wrap import wrap


def make_search() -> object:
    @wrap(service=TruncationService(MemoryStore()))
    def search(query: str, limit: int = 5) -> str:
        """Search the index.

        Args:
            query: what to look for.
            limit: how many hits.
        """
        return query * limit

    return search


def test_openai_agents_function_tool() -> None:
    """agents.function_tool reads the wrapped tool's name, docstring and parameters."""
    tool = agents.function_tool(make_search())
    assert tool.name == "search"
    assert tool.description == "Search the index."
    assert set(tool.params_json_schema["properties"]) == {"query", "limit"}


def test_langchain_tool_decorator() -> None:
    """langchain_core's @tool reads the wrapped tool's signature and runs it."""
    tool = langchain_core.tools.tool(make_search())
    assert tool.name == "search"
    assert list(tool.args) == ["query", "limit"]
    assert tool.invoke({"query": "ab", "limit": 2}) == "abab"


def test_pydantic_ai_tool() -> None:
    """pydantic-ai's Tool reads the wrapped tool's docstring and parameter types."""
    tool = pydantic_ai.Tool(make_search())
    assert tool.name == "search"
    assert tool.description == "Search the index."
    schema = tool.function_schema.json_schema
    assert schema["properties"]["limit"]["type"] == "integer"
