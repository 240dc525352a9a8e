"""The ``max_turns`` guard for host loops, and a reference loop runner (design.md §7).

A host loop alternates model turns and tool calls, and may hold follow-up messages
queued by the user while the model works. :class:`TurnGuard` caps the model turns of
one run:

- it counts model turns across follow-ups (a follow-up does not reset the count);
- the host checks it **after a turn's tool results are appended** (so no tool call is
  left without its result) **and before queued follow-ups are polled** (so nothing
  queued is drained and then dropped);
- it stops with ``reason="max_turns"`` only when the model still had tool calls pending
  (it asked for tools and would need another turn to see their results); a model that
  stops on its own exactly at the limit has completed normally, and queued follow-ups
  stay queued for the host to run later;
- ``0`` or ``None`` means unlimited; negative numbers, floats (even ``5.0``), NaN,
  bools and non-numbers are rejected, whether they come from an argument or from the
  ``SPILLSTORE_MAX_TURNS`` environment variable, with a
  :class:`~spillstore.ConfigError` naming the field and the variable.

:func:`run_loop` (and :func:`arun_loop`) is the reference loop the tests and examples
drive with a scripted model: every tool result passes through the
:class:`~spillstore.TruncationService`, the spill tools are served spill-exempt, and
the guard is checked exactly where the rules above say.
"""

from __future__ import annotations

import inspect
import os
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, MutableSequence, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from spillstore._content import TextPart, ToolResult
from spillstore._errors import ConfigError, UsageError
from spillstore._service.capper import model_text, to_result
from spillstore._service.service import TruncationService
from spillstore._service.wrap import call_context
from spillstore._settings import env_var_name, field_label
from spillstore._tools.spill_tools import SpillTools

__all__ = [
    "MAX_TURNS_ENV",
    "UNSET",
    "AsyncModel",
    "LoopResult",
    "Message",
    "ModelTurn",
    "StopReason",
    "SyncModel",
    "ToolCall",
    "TurnGuard",
    "arun_loop",
    "max_turns_from_env",
    "parse_max_turns",
    "run_loop",
]

MAX_TURNS_ENV: Final = env_var_name("max_turns")
"""The environment variable read when no ``max_turns`` argument is given."""

StopReason = Literal["completed", "max_turns"]
"""Why a run stopped: the model finished, or the turn cap cut it while it wanted tools."""

_WHOLE: Final = re.compile(r"[0-9]+", re.ASCII)
_EXPECTED: Final = 'must be a whole number of model turns >= 0 (0, "off" or None: unlimited)'


class _Unset:
    """The type of :data:`UNSET`: "not passed" differs from ``None`` ("unlimited")."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()
"""Default of ``max_turns``: read ``SPILLSTORE_MAX_TURNS`` (unset: unlimited)."""


def _error(value: object, hint: str | None = None) -> ConfigError:
    message = f"{field_label('max_turns')}: {_EXPECTED}; got {value!r}" + (
        f" ({hint})" if hint else ""
    )
    return ConfigError(message, field="max_turns", env_var=MAX_TURNS_ENV)


def parse_max_turns(value: object) -> int | None:
    """Validate a ``max_turns`` value: an ``int >= 0`` or ``None``; ``0`` means unlimited.

    Returns:
        The cap, or ``None`` for unlimited.

    Raises:
        ConfigError: for negatives, bools, floats (even ``5.0``), NaN, strings and
            anything else, naming ``max_turns`` and ``SPILLSTORE_MAX_TURNS``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise _error(value, "a bool is not a number of turns")
    if isinstance(value, int):
        if value < 0:
            raise _error(value)
        return value or None
    if isinstance(value, float):
        raise _error(value, "turns are whole numbers, not floats")
    raise _error(value, f"a {type(value).__name__}")


def max_turns_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """Read ``SPILLSTORE_MAX_TURNS``: unset means unlimited, as do ``0`` and ``off``.

    Args:
        environ: the environment to read (default ``os.environ``).

    Raises:
        ConfigError: the variable holds anything but ASCII digits (or ``off``) with
            optional surrounding whitespace: ``-1``, ``1.5``, ``nan``, ``true``, ``""``.
    """
    env = os.environ if environ is None else environ
    raw = env.get(MAX_TURNS_ENV)
    if raw is None:
        return None
    text = raw.strip()
    if text.lower() == "off":
        return None
    if _WHOLE.fullmatch(text) is None:
        raise _error(raw)
    return int(text) or None


class TurnGuard:
    """Caps the model turns of one host run; see the module docstring for the rules.

    Usage in a host loop::

        guard = TurnGuard(max_turns=20)
        while True:
            turn = call_model(messages)
            guard.count_turn()
            messages.append(turn)
            messages.extend(run_tools(turn.tool_calls))     # every call gets its result
            reason = guard.check(tool_calls_pending=bool(turn.tool_calls))
            if reason is not None:
                break                                      # follow-ups stay queued
            if not turn.tool_calls:
                if not queue:
                    reason = "completed"
                    break
                messages.append(queue.popleft())

    Args:
        max_turns: the most model turns; ``0`` or ``None``: unlimited; not passed:
            ``SPILLSTORE_MAX_TURNS`` (unset: unlimited).

    Raises:
        ConfigError: an invalid ``max_turns`` (argument or environment).
    """

    def __init__(self, max_turns: int | _Unset | None = UNSET) -> None:
        self.max_turns: int | None = (
            max_turns_from_env() if isinstance(max_turns, _Unset) else parse_max_turns(max_turns)
        )
        self.turns = 0

    def __repr__(self) -> str:
        return f"TurnGuard(max_turns={self.max_turns!r}, turns={self.turns})"

    def count_turn(self) -> int:
        """Count one model turn (one model response); returns the turns so far."""
        self.turns += 1
        return self.turns

    @property
    def exhausted(self) -> bool:
        """Whether the turns so far reached the cap (never, when unlimited)."""
        return self.max_turns is not None and self.turns >= self.max_turns

    def check(self, *, tool_calls_pending: bool) -> StopReason | None:
        """Decide after a turn's tool results are appended, before follow-ups are polled.

        Args:
            tool_calls_pending: the last model turn asked for tools (so the model would
                need another turn to see their results).

        Returns:
            ``None``: go on (the next model turn, or the next queued follow-up).
            ``"max_turns"``: the cap is reached while the model still wanted tools: stop.
            ``"completed"``: the cap is reached as the model stopped on its own: a normal
            completion; queued follow-ups stay queued.
        """
        if not self.exhausted:
            return None
        return "max_turns" if tool_calls_pending else "completed"


# --------------------------------------------------------------------------- the reference loop

Message = dict[str, Any]
"""A chat message: ``{"role": "user" | "assistant" | "tool", "content": str, ...}``.

Assistant messages carry ``tool_calls`` (a list of ``{"id", "name", "arguments"}``);
tool messages carry ``tool_call_id``, ``name`` and ``is_error``."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a model asked for."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """One model response: some text, and the tool calls it asks for (none: it is done)."""

    text: str = ""
    tool_calls: Sequence[ToolCall] = ()


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How a run ended.

    Attributes:
        reason: ``"completed"`` or ``"max_turns"``.
        turns: model turns counted (across follow-ups).
        messages: the whole conversation, tool results included.
        text: the last assistant text.
    """

    reason: StopReason
    turns: int
    messages: list[Message]
    text: str


SyncModel = Callable[[Sequence[Message]], ModelTurn]
AsyncModel = Callable[[Sequence[Message]], Awaitable[ModelTurn]]


@dataclass
class _Run:
    """The decisions of one run, shared by :func:`run_loop` and :func:`arun_loop` (no I/O)."""

    tools: Mapping[str, Callable[..., Any]]
    service: TruncationService
    spill_tools: SpillTools | None
    guard: TurnGuard
    follow_ups: MutableSequence[str]
    messages: list[Message]
    last_text: str = ""

    def record(self, turn: ModelTurn) -> None:
        if not isinstance(turn, ModelTurn):
            raise UsageError(f"the model must return a ModelTurn; got {type(turn).__name__}")
        self.guard.count_turn()
        self.last_text = turn.text
        message: Message = {"role": "assistant", "content": turn.text}
        if turn.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": dict(c.arguments)}
                for c in turn.tool_calls
            ]
        self.messages.append(message)

    def is_spill_tool(self, name: str) -> bool:
        tools = self.spill_tools
        return tools is not None and name in tools.names

    def unknown(self, call: ToolCall) -> ToolResult | None:
        if call.name in self.tools or self.is_spill_tool(call.name):
            return None
        known = ", ".join([*self.tools, *self._spill_names()]) or "none"
        return _error_result(f"unknown tool {call.name!r}; the tools are {known}")

    def _spill_names(self) -> list[str]:
        tools = self.spill_tools
        return [] if tools is None else list(tools.names)

    def append_result(self, call: ToolCall, result: ToolResult) -> None:
        self.messages.append(
            {
                "role": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "content": model_text(result),
                "is_error": result.is_error,
            }
        )

    def after_tools(self, turn: ModelTurn) -> LoopResult | None:
        """The guard's check, then the follow-up queue: the end of the run, or None."""
        reason = self.guard.check(tool_calls_pending=bool(turn.tool_calls))
        if reason is None and not turn.tool_calls:
            if not self.follow_ups:
                reason = "completed"
            else:
                queue = self.follow_ups
                follow_up = queue.popleft() if isinstance(queue, deque) else queue.pop(0)
                self.messages.append({"role": "user", "content": follow_up})
        if reason is None:
            return None
        return LoopResult(reason, self.guard.turns, self.messages, self.last_text)


def _error_result(text: str) -> ToolResult:
    return ToolResult(content=(TextPart(text),), is_error=True)


def _as_tool_result(value: Any) -> ToolResult:
    """A tool's return value as a result: text shapes as :func:`spillstore.wrap` knows them,
    anything else as its ``str()``."""
    shaped = to_result(value)
    if shaped is not None:
        return shaped[0]
    return ToolResult(content=(TextPart("" if value is None else str(value)),))


def _failure(exc: Exception) -> ToolResult:
    return _error_result(f"error: {type(exc).__name__}: {exc}")


def _start(
    prompt: str | Sequence[Message],
    tools: Mapping[str, Callable[..., Any]] | None,
    *,
    max_turns: int | _Unset | None,
    guard: TurnGuard | None,
    follow_ups: MutableSequence[str] | None,
    service: TruncationService | None,
    spill_tools: SpillTools | None,
) -> _Run:
    messages: list[Message] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    )
    if guard is not None and not isinstance(max_turns, _Unset):
        raise ConfigError("pass either max_turns or guard, not both", field="max_turns")
    return _Run(
        tools=dict(tools or {}),
        service=service if service is not None else TruncationService(),
        spill_tools=spill_tools,
        guard=guard if guard is not None else TurnGuard(max_turns),
        follow_ups=follow_ups if follow_ups is not None else deque(),
        messages=messages,
    )


def run_loop(
    model: SyncModel,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    prompt: str | Sequence[Message] = "",
    *,
    max_turns: int | _Unset | None = UNSET,
    guard: TurnGuard | None = None,
    follow_ups: MutableSequence[str] | None = None,
    service: TruncationService | None = None,
    spill_tools: SpillTools | None = None,
) -> LoopResult:
    """Run a model/tool loop until the model stops, capped by a :class:`TurnGuard`.

    Each turn: call ``model`` with the messages so far; append its message; run every
    tool call it asked for (in order; a tool's exception or an unknown tool becomes an
    error result, so no call is left without its result), passing each result through
    ``service`` (spill tools are served by ``spill_tools`` and exempt); then check the
    guard; then, when the model stopped on its own, poll the next follow-up from the
    front of ``follow_ups`` (removed only when it is sent).

    Args:
        model: ``messages -> ModelTurn``.
        tools: tool callables by name, called with the call's arguments as keywords
            inside :func:`~spillstore.call_context` (so wrapped tools know the call id).
        prompt: the first user message, or the messages to start from.
        max_turns: the turn cap (see :class:`TurnGuard`); not with ``guard``.
        guard: a guard to use (and read afterwards) instead of ``max_turns``.
        follow_ups: queued user messages (a ``deque`` or ``list``), polled in order.
        service: the service tool results pass through (default ``TruncationService()``).
        spill_tools: serve Read/Grep/List/Query under their names.

    Raises:
        ConfigError: an invalid ``max_turns``, or both ``max_turns`` and ``guard``.
    """
    run = _start(
        prompt,
        tools,
        max_turns=max_turns,
        guard=guard,
        follow_ups=follow_ups,
        service=service,
        spill_tools=spill_tools,
    )
    while True:
        turn = model(list(run.messages))
        run.record(turn)
        for call in turn.tool_calls:
            run.append_result(call, _call_tool(run, call))
        done = run.after_tools(turn)
        if done is not None:
            return done


async def arun_loop(
    model: AsyncModel | SyncModel,
    tools: Mapping[str, Callable[..., Any]] | None = None,
    prompt: str | Sequence[Message] = "",
    *,
    max_turns: int | _Unset | None = UNSET,
    guard: TurnGuard | None = None,
    follow_ups: MutableSequence[str] | None = None,
    service: TruncationService | None = None,
    spill_tools: SpillTools | None = None,
) -> LoopResult:
    """Async twin of :func:`run_loop`: the model and the tools may be sync or async."""
    run = _start(
        prompt,
        tools,
        max_turns=max_turns,
        guard=guard,
        follow_ups=follow_ups,
        service=service,
        spill_tools=spill_tools,
    )
    while True:
        answer = model(list(run.messages))
        turn = await answer if inspect.isawaitable(answer) else answer
        run.record(turn)
        for call in turn.tool_calls:
            run.append_result(call, await _acall_tool(run, call))
        done = run.after_tools(turn)
        if done is not None:
            return done


def _call_tool(run: _Run, call: ToolCall) -> ToolResult:
    refused = run.unknown(call)
    if refused is not None:
        return refused
    if run.is_spill_tool(call.name):
        assert run.spill_tools is not None
        return run.spill_tools.call(call.name, dict(call.arguments))
    try:
        with call_context(call.id):
            value = run.tools[call.name](**call.arguments)
        result = _as_tool_result(value)
    except Exception as exc:  # a host loop answers every call, even a failed one
        result = _failure(exc)
    return run.service.truncate_for_model(result, tool_name=call.name, tool_call_id=call.id)


async def _acall_tool(run: _Run, call: ToolCall) -> ToolResult:
    refused = run.unknown(call)
    if refused is not None:
        return refused
    if run.is_spill_tool(call.name):
        assert run.spill_tools is not None
        return await run.spill_tools.acall(call.name, dict(call.arguments))
    try:
        with call_context(call.id):
            value = run.tools[call.name](**call.arguments)
            if inspect.isawaitable(value):
                value = await value
        result = _as_tool_result(value)
    except Exception as exc:
        result = _failure(exc)
    return await run.service.atruncate_for_model(result, tool_name=call.name, tool_call_id=call.id)
