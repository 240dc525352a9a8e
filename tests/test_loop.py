"""TurnGuard and the reference loop: max_turns counted, checked and reported per design.md §7."""

from __future__ import annotations

import asyncio
import math
import re
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from spillstore import ConfigError, MemoryStore, SpillTools, TruncationService, UsageError
from spillstore.loop import (
    MAX_TURNS_ENV,
    LoopResult,
    Message,
    ModelTurn,
    ToolCall,
    TurnGuard,
    arun_loop,
    max_turns_from_env,
    parse_max_turns,
    run_loop,
)

BIG = "".join(f"row {i:06d}: value={i * 7919 % 100_003}\n" for i in range(150_000))
"""About 4 MB of text."""

SPILL = re.compile(r'spill="([^"]+)"')


def always_tool() -> Callable[[Sequence[Message]], ModelTurn]:
    """A model that asks for a tool on every turn, forever."""
    count = 0

    def model(messages: Sequence[Message]) -> ModelTurn:
        nonlocal count
        count += 1
        return ModelTurn(f"turn {count}", [ToolCall(f"call_{count}", "ping", {"n": count})])

    return model


def ping(n: int) -> str:
    return f"pong {n}"


def assert_nothing_dangles(result: LoopResult) -> None:
    """Every tool call in the conversation has exactly one tool result, in order."""
    asked = [
        c["id"]
        for m in result.messages
        if m["role"] == "assistant"
        for c in m.get("tool_calls", [])
    ]
    answered = [m["tool_call_id"] for m in result.messages if m["role"] == "tool"]
    assert asked == answered


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(("value", "expected"), [(None, None), (0, None), (1, 1), (250, 250)])
def test_valid_values(value: int | None, expected: int | None) -> None:
    """0 and None mean unlimited; positive ints are the cap."""
    assert parse_max_turns(value) == expected
    assert TurnGuard(value).max_turns == expected


@pytest.mark.parametrize(
    "bad", [-1, True, False, 5.0, math.nan, math.inf, "5", b"5", [3], object()]
)
def test_invalid_arguments_are_rejected(bad: object) -> None:
    """Negatives, bools, floats, NaN and non-numbers raise ConfigError naming field and env var."""
    with pytest.raises(ConfigError) as caught:
        TurnGuard(bad)  # type: ignore[arg-type]
    assert caught.value.field == "max_turns"
    assert caught.value.env_var == MAX_TURNS_ENV
    assert MAX_TURNS_ENV in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "expected"), [("7", 7), (" 12 ", 12), ("0", None), ("off", None), ("OFF", None)]
)
def test_environment_values(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: int | None
) -> None:
    """SPILLSTORE_MAX_TURNS sets the cap when no argument is given; 0 and off: unlimited."""
    monkeypatch.setenv(MAX_TURNS_ENV, raw)
    assert max_turns_from_env() == expected
    assert TurnGuard().max_turns == expected


@pytest.mark.parametrize(
    "raw", ["-1", "1.5", "5.0", "nan", "NaN", "true", "", "ten", "+3", "٣", "1e3"]
)
def test_invalid_environment_values_are_rejected(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    """A bad SPILLSTORE_MAX_TURNS raises ConfigError naming the field and the variable."""
    monkeypatch.setenv(MAX_TURNS_ENV, raw)
    with pytest.raises(ConfigError) as caught:
        TurnGuard()
    assert caught.value.field == "max_turns"
    assert caught.value.env_var == MAX_TURNS_ENV


def test_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit argument (None included) wins over the environment, which is then not read."""
    monkeypatch.setenv(MAX_TURNS_ENV, "not a number")
    assert TurnGuard(3).max_turns == 3
    assert TurnGuard(None).max_turns is None
    assert max_turns_from_env({}) is None


def test_check_reports_only_pending_tool_calls_as_max_turns() -> None:
    """At the cap, pending tool calls mean max_turns; a natural stop means completed."""
    guard = TurnGuard(2)
    guard.count_turn()
    assert guard.check(tool_calls_pending=True) is None
    guard.count_turn()
    assert guard.exhausted
    assert guard.check(tool_calls_pending=True) == "max_turns"
    assert guard.check(tool_calls_pending=False) == "completed"
    unlimited = TurnGuard(0)
    for _ in range(1000):
        unlimited.count_turn()
    assert unlimited.check(tool_calls_pending=True) is None


# --------------------------------------------------------------------------- the loop


def test_model_that_always_calls_a_tool_stops_without_dangling_call(
    memory_service: TruncationService,
) -> None:
    """A model that never stops calling tools is cut at max_turns, every call answered."""
    result = run_loop(always_tool(), {"ping": ping}, "go", max_turns=4, service=memory_service)
    assert result.reason == "max_turns"
    assert result.turns == 4
    assert result.messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_4",
        "name": "ping",
        "content": "pong 4",
        "is_error": False,
    }
    assert_nothing_dangles(result)


def test_queued_follow_up_survives_the_stop(memory_service: TruncationService) -> None:
    """A follow-up queued while the model works is neither sent nor dropped by the cap."""
    queue = deque(["and then summarize"])
    result = run_loop(
        always_tool(), {"ping": ping}, "go", max_turns=2, follow_ups=queue, service=memory_service
    )
    assert result.reason == "max_turns"
    assert list(queue) == ["and then summarize"]
    assert all(m["content"] != "and then summarize" for m in result.messages)


def scripted(*turns: ModelTurn) -> Callable[[Sequence[Message]], ModelTurn]:
    """A model that plays ``turns`` in order."""
    script = iter(turns)
    return lambda messages: next(script)


def test_natural_stop_on_the_boundary_is_completion(memory_service: TruncationService) -> None:
    """A model that stops on its own exactly at max_turns completed; queued follow-ups stay."""
    queue = ["next"]
    model = scripted(ModelTurn("", [ToolCall("c1", "ping", {"n": 1})]), ModelTurn("done"))
    result = run_loop(
        model, {"ping": ping}, "go", max_turns=2, follow_ups=queue, service=memory_service
    )
    assert result.reason == "completed"
    assert result.text == "done"
    assert queue == ["next"]


def test_turns_are_counted_across_follow_ups(memory_service: TruncationService) -> None:
    """Follow-ups are polled after natural stops, and their turns count toward the same cap."""
    queue = deque(["second", "third"])
    model = scripted(
        ModelTurn("first answer"),
        ModelTurn("", [ToolCall("c1", "ping", {"n": 1})]),
        ModelTurn("", [ToolCall("c2", "ping", {"n": 2})]),
    )
    result = run_loop(
        model, {"ping": ping}, "first", max_turns=3, follow_ups=queue, service=memory_service
    )
    assert result.reason == "max_turns"
    assert result.turns == 3
    assert [m["content"] for m in result.messages if m["role"] == "user"] == ["first", "second"]
    assert list(queue) == ["third"]
    assert_nothing_dangles(result)


def test_follow_ups_drain_when_unlimited(memory_service: TruncationService) -> None:
    """With no cap the loop runs every queued follow-up and completes."""
    queue = deque(["two", "three"])
    result = run_loop(
        lambda m: ModelTurn("ok"), {}, "one", max_turns=0, follow_ups=queue, service=memory_service
    )
    assert result.reason == "completed"
    assert result.turns == 3
    assert not queue


def test_env_cap_applies_to_the_loop(
    monkeypatch: pytest.MonkeyPatch, memory_service: TruncationService
) -> None:
    """Without max_turns the loop's guard reads SPILLSTORE_MAX_TURNS."""
    monkeypatch.setenv(MAX_TURNS_ENV, "3")
    result = run_loop(always_tool(), {"ping": ping}, "go", service=memory_service)
    assert (result.reason, result.turns) == ("max_turns", 3)


def test_guard_and_max_turns_together_are_refused(memory_service: TruncationService) -> None:
    """Passing both a guard and max_turns is a developer error."""
    with pytest.raises(ConfigError):
        run_loop(always_tool(), {}, "go", max_turns=1, guard=TurnGuard(2), service=memory_service)


def test_failing_and_unknown_tools_answer_with_errors(memory_service: TruncationService) -> None:
    """A tool that raises, or a tool that does not exist, still gets an error result."""

    def broken() -> str:
        raise RuntimeError("disk on fire")

    model = scripted(
        ModelTurn("", [ToolCall("c1", "broken"), ToolCall("c2", "nope")]), ModelTurn("sorry")
    )
    result = run_loop(model, {"broken": broken}, "go", service=memory_service)
    errors = [m for m in result.messages if m["role"] == "tool"]
    assert [m["is_error"] for m in errors] == [True, True]
    assert "RuntimeError: disk on fire" in errors[0]["content"]
    assert "unknown tool 'nope'" in errors[1]["content"]
    assert result.reason == "completed"


def reader_model(spill_tools_name: str = "read_spill") -> Callable[[Sequence[Message]], ModelTurn]:
    """Turn 1 dumps the table; turn 2 reads bytes of the spill the pointer names; turn 3 stops."""

    def model(messages: Sequence[Message]) -> ModelTurn:
        last = messages[-1]
        if last["role"] == "user":
            return ModelTurn("", [ToolCall("call_dump", "dump")])
        if last["name"] == "dump":
            spill = SPILL.search(last["content"])
            assert spill is not None
            args = {"spill": spill.group(1), "byte_offset": 2_000_000, "max_bytes": 3000}
            return ModelTurn("", [ToolCall("call_read", spill_tools_name, args)])
        return ModelTurn("found it")

    return model


def test_big_result_pointer_then_read_spill_gets_exact_bytes(
    memory_service: TruncationService, memory_store: MemoryStore
) -> None:
    """A 4 MB tool result reaches the model as a pointer; read_spill returns the exact bytes."""
    result = run_loop(
        reader_model(),
        {"dump": lambda: BIG},
        "dump the table",
        service=memory_service,
        spill_tools=SpillTools(memory_store),
        max_turns=10,
    )
    assert result.reason == "completed"
    tool_messages = [m for m in result.messages if m["role"] == "tool"]
    pointer, page = tool_messages[0]["content"], tool_messages[1]["content"]
    assert len(pointer.encode()) <= memory_service.settings.max_bytes
    assert "(call call_dump)" in pointer
    body = page.split("\n", 1)[1].rsplit("\nnext: ", 1)[0]
    assert body == BIG[2_000_000:2_003_000]


def test_async_loop_has_the_same_rules(
    memory_service: TruncationService, memory_store: MemoryStore
) -> None:
    """arun_loop with an async model and async tools stops, answers and keeps the queue alike."""

    async def amodel(messages: Sequence[Message]) -> ModelTurn:
        await asyncio.sleep(0)
        turn = sum(m["role"] == "assistant" for m in messages) + 1
        return ModelTurn("", [ToolCall(f"c{turn}", "aping", {"n": turn})])

    async def aping(n: int) -> str:
        await asyncio.sleep(0)
        return f"pong {n}"

    queue = deque(["later"])
    result = asyncio.run(
        arun_loop(
            amodel, {"aping": aping}, "go", max_turns=3, follow_ups=queue, service=memory_service
        )
    )
    assert (result.reason, result.turns) == ("max_turns", 3)
    assert list(queue) == ["later"]
    assert_nothing_dangles(result)
    read = asyncio.run(
        arun_loop(
            reader_model(),
            {"dump": lambda: BIG},
            "go",
            service=memory_service,
            spill_tools=SpillTools(memory_store),
        )
    )
    page = [m for m in read.messages if m["role"] == "tool"][1]["content"]
    assert page.split("\n", 1)[1].rsplit("\nnext: ", 1)[0] == BIG[2_000_000:2_003_000]


def test_model_must_return_a_model_turn(memory_service: TruncationService) -> None:
    """A model returning something else is a developer error, not a silent stop."""

    def bad(messages: Sequence[Message]) -> Any:
        return "text"

    with pytest.raises(UsageError, match="must return a ModelTurn; got str"):
        run_loop(bad, {}, "go", service=memory_service)
