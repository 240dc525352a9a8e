"""The flow machinery: I/O requests, the two drivers, and the values the decisions pass on.

Every decision of the service is written once, as a generator (a *flow*) that yields
each piece of I/O it needs as a :class:`Request` and is sent the request's result
(house style: one planner, two thin shells). :func:`drive` runs a flow with blocking
calls, :func:`adrive` awaits the same requests; nothing else differs between the sync
and the async twin.

A request holds *bound* callables (``store.put`` and ``store.aput``), never a method's
name, so a typo fails where it is written. When a request raises, the driver throws
the exception into the flow at its ``yield``: the flow catches only
:data:`STORE_FAILURES` there (the store could not keep the output: the tool call must
not fail because of it); anything else, a programming error above all, surfaces as
itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from spillstore._content import Part, ToolResult
from spillstore._core.pointer import Preview, plan_preview_bytes
from spillstore._errors import RangeNotStored, SpillNotFound
from spillstore._twins import in_thread

if TYPE_CHECKING:
    from spillstore._core.json_shape import JsonShape
    from spillstore._core.shape import Shaped
    from spillstore._settings import Settings
    from spillstore._stores.base import Store

__all__ = [
    "SLACK",
    "STORE_FAILURES",
    "Flow",
    "Host",
    "Measure",
    "Prepared",
    "Request",
    "adrive",
    "blocking",
    "call",
    "drive",
    "step_from_ends",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)

SLACK = 4
"""Extra bytes kept or read at each end so cuts can land on a character and line boundary."""

STORE_FAILURES: tuple[type[Exception], ...] = (OSError, SpillNotFound, RangeNotStored)
"""What a store call may raise when the store, not the caller, is at fault.

``OSError`` covers :class:`~spillstore.StoreError` (every backend failure a store
translates: disk full, permissions, a dead S3 endpoint), the ``ConnectionError`` and
``TimeoutError`` of a backend that does not translate, and the OS errors of a file a
tool handed over. :class:`~spillstore.SpillNotFound` and
:class:`~spillstore.RangeNotStored`: a spill collected between two calls. A flow turns
these into "NOT saved"; a ``ConfigError``, ``UsageError``, ``TypeError`` or
``AttributeError`` is a bug of the caller and raises.
"""


class Host(Protocol):
    """What a flow reads from the service it runs for (a ``TruncationService`` is one)."""

    settings: Settings
    store: Store
    session: str
    read_tool: str
    grep_tool: str
    query_tool: str
    deliverable_media: frozenset[str]


class Request(Generic[_T_co]):
    """One I/O step of a flow: a function and its async twin, with their arguments.

    :func:`drive` calls :meth:`run`, :func:`adrive` awaits :meth:`arun`. Make one with
    :func:`call` or :func:`blocking`, which check the arguments against the function's
    signature. (A plain class: a request is made for every result that is capped.)
    """

    __slots__ = ("_args", "_kwargs", "_sync", "_twin")

    def __init__(
        self,
        sync: Callable[..., _T_co],
        twin: Callable[..., Awaitable[_T_co]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> None:
        self._sync, self._twin, self._args, self._kwargs = sync, twin, args, kwargs

    def run(self) -> _T_co:
        """Do the I/O and return its result."""
        return self._sync(*self._args, **self._kwargs)

    async def arun(self) -> _T_co:
        """Do the same I/O without blocking the event loop."""
        return await self._twin(*self._args, **self._kwargs)


def call(
    sync: Callable[_P, _T],
    twin: Callable[_P, Awaitable[_T]],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> Request[_T]:
    """A request for ``sync(*args, **kwargs)``, awaited as ``twin(*args, **kwargs)``.

    Both are bound methods (``store.put``, ``store.aput``), so a misspelt name raises
    ``AttributeError`` where the request is made, and mypy checks the arguments.
    """
    return Request(sync, twin, args, kwargs)


def blocking(func: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> Request[_T]:
    """A request for a blocking function: called in place, or in a worker thread."""
    return call(func, in_thread(func), *args, **kwargs)


Flow = Generator[Request[Any], Any, _T]
"""A flow: yields I/O requests, is sent their results, returns its answer."""


def drive(flow: Flow[_T]) -> _T:
    """Run ``flow`` to its answer, doing each request it yields right here."""
    reply: Any = None
    error: Exception | None = None
    while True:  # inlined, as in adrive: every tool result passes through here
        try:
            request = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, error = request.run(), None
        except Exception as exc:  # thrown into the flow, which decides what it means
            reply, error = None, exc


async def adrive(flow: Flow[_T]) -> _T:
    """Async twin of :func:`drive`: each request is awaited."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.send(reply) if error is None else flow.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            reply, error = await request.arun(), None
        except Exception as exc:
            reply, error = None, exc


@dataclass(frozen=True, slots=True)
class Measure:
    """The whole output's hash, size and newline count."""

    sha256: str
    total_bytes: int
    newlines: int
    invalid_utf8: bool = False


@dataclass(frozen=True, slots=True)
class Prepared:
    """An oversized output, measured, waiting to be persisted and rendered.

    It is made either from a result's text parts (``prepare`` in the decisions) or from
    an output's kept ends (:func:`step_from_ends`: a stream or an adopted file).
    Rendering needs ``plan`` to cut previews, and ``measure`` only when nothing was
    saved (when something was, the store's metadata holds the size, lines and hash, so
    a large output is not measured twice). ``measure`` is ``None`` for an output the
    store adopted: it is always measured by the store.

    ``json_shape`` is shown only for an output saved in full (it guides a query of the
    spill); otherwise ``shaped`` (append mode) applies if there is one. ``looks_json``:
    the output starts like JSON (the pointer says why a spill saved in part has no shape).
    """

    result: ToolResult
    ends_with_newline: bool
    plan: Callable[[int, int, Measure], Preview]
    measure: Callable[[], Measure] | None
    shaped: Shaped | None
    suffix: str
    others: list[Part]
    notes: list[str]
    tool_name: str
    tool_call_id: str
    json_shape: JsonShape | None = None
    looks_json: bool = False


def step_from_ends(
    settings: Settings,
    *,
    result: ToolResult,
    head_raw: bytes,
    tail_raw: bytes,
    counted: Measure | None,
    suffix: str,
    tool_name: str,
    tool_call_id: str,
    others: list[Part] | None = None,
    notes: list[str] | None = None,
    json_shape: JsonShape | None = None,
    ends_with_newline: bool | None = None,
    shaped: Shaped | None = None,
    looks_json: bool = False,
) -> Prepared:
    """An oversized output known only by its first and last bytes (a stream, a file).

    ``counted`` is what the caller measured itself, used when nothing could be saved
    (``None``: the output was adopted by the store, which measured it).
    ``ends_with_newline`` is given when ``tail_raw`` cannot tell (no tail was kept).
    ``shaped``: the output with its long lines cut, when that fits (append mode; a
    stream's :class:`~spillstore._core.shape.LineShaper`).
    """
    if ends_with_newline is None:
        ends_with_newline = tail_raw.endswith(b"\n")
    head_bytes, tail_bytes = settings.head_bytes, settings.tail_bytes

    def plan(head_room: int, tail_room: int, measured: Measure) -> Preview:
        return plan_preview_bytes(
            head_raw,
            tail_raw,
            total_bytes=measured.total_bytes,
            newlines=measured.newlines,
            head_bytes=min(head_bytes, head_room),
            tail_bytes=min(tail_bytes, tail_room),
            ends_with_newline=ends_with_newline,
        )

    return Prepared(
        result=result,
        ends_with_newline=ends_with_newline,
        plan=plan,
        measure=None if counted is None else (lambda: counted),
        shaped=shaped,
        suffix=suffix,
        others=[] if others is None else others,
        notes=[] if notes is None else notes,
        tool_name=tool_name,
        tool_call_id=tool_call_id,
        json_shape=json_shape,
        looks_json=looks_json,
    )
