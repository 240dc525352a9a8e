"""The registry of recovery tools (`_tools.args.SPECS`) is the one list integrations read."""

from __future__ import annotations

from spillstore import MemoryStore, SpillTools, TruncationService
from spillstore._service.adapters import ToolCappers
from spillstore._tools.args import SPECS
from spillstore.mcp.server import spill_tool_definitions


def _renamed() -> SpillTools:
    return SpillTools(MemoryStore(), read_name="r", grep_name="g", list_name="l", query_name="q")


def test_default_names_and_schemas_follow_the_registry() -> None:
    """Default tool names, schema order, descriptions and argument schemas come from SPECS."""
    tools = SpillTools(MemoryStore())
    assert list(tools.names) == [spec.default_name for spec in SPECS]
    schemas = tools.schemas("anthropic")
    assert [s["name"] for s in schemas] == [spec.default_name for spec in SPECS]
    for schema, spec in zip(schemas, SPECS, strict=True):
        assert schema["description"] == spec.description
        assert set(schema["input_schema"]["properties"]) == set(spec.args.model_fields)


def test_renamed_tools_keep_their_registry_entries() -> None:
    """Renaming a tool maps the new name to the same entry; the old name is unknown."""
    tools = _renamed()
    assert [tools.specs[name] for name in ("r", "g", "l", "q")] == list(SPECS)
    assert "r" in tools.names and "read_spill" not in tools.names
    assert tools.call("read_spill", {"spill": "x"}).is_error


def test_integrations_list_every_registered_tool() -> None:
    """The MCP definitions and the adapters' exempt set cover every tool."""
    tools = _renamed()
    definitions = spill_tool_definitions(tools)
    assert [(d.name, d.title) for d in definitions] == [
        (name, spec.title) for name, spec in tools.specs.items()
    ]
    cappers = ToolCappers(TruncationService(MemoryStore()), spill_tools=tools)
    assert set(tools.names) <= cappers.exempt


def test_query_spill_reaches_the_adapters_the_loop_and_the_schemas() -> None:
    """The fourth tool is served by the adapters' functions, the loop and both schema shapes."""
    import json as json_module

    from spillstore._service.adapters import spill_functions
    from spillstore.loop import ModelTurn, ToolCall, run_loop

    store = MemoryStore()
    service = TruncationService(store)
    tools = service.spill_tools()
    assert tools.names.query == "query_spill"
    assert "query_spill" in [s["function"]["name"] for s in tools.schemas("openai")]
    assert "query_spill" in [s["name"] for s in tools.schemas("anthropic")]
    assert "query_spill" in ToolCappers(service, spill_tools=tools).exempt
    spill = store.put('{"a": [5]}', session="default", tool_name="t", tool_call_id="c")
    functions = {f.name: f for f in spill_functions(tools=tools)}
    try:
        assert "1. bytes [7, 8): 5" in functions["query_spill"].call(
            {"spill": spill.spill_id, "expression": ".a[0]"}
        )

        def model(messages: list[dict[str, object]]) -> ModelTurn:
            if len(messages) == 1:
                arguments = {"spill": spill.spill_id, "expression": ".a[0]"}
                return ModelTurn("", [ToolCall("q1", "query_spill", arguments)])
            return ModelTurn("done")

        result = run_loop(model, {}, "go", service=service, spill_tools=tools, max_turns=3)
        [tool_message] = [m for m in result.messages if m["role"] == "tool"]
        assert "1. bytes [7, 8): 5" in str(tool_message["content"])
        json_module.dumps(tools.schemas("openai"))
    finally:
        tools.close()
