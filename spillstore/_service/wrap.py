"""The tool wrapper for plain Python: every result of a tool callable goes through the service.

:func:`wrap` decorates a sync or async tool callable. Its return value passes through
:meth:`TruncationService.truncate_for_model` (or the async twin) and comes back in the
shape the tool returned, so a framework that introspects the tool sees no difference:

===============================  ==============================================================
the tool returns                 the wrapper returns
===============================  ==============================================================
``str``                          ``str``: the model-facing text (the pointer when it was cut)
:class:`~spillstore.ToolResult`  a :class:`~spillstore.ToolResult` (``spill`` set when cut)
a mapping with a ``str`` text    a ``dict`` with the same keys, ``"text"`` the model-facing text
a list/tuple of ``str``          a ``list[str]`` of the model-facing text parts
a list/tuple of parts            a ``list`` of :data:`~spillstore.Part` (``str`` items become
                                 :class:`~spillstore.TextPart`), media kept in order
anything else                    the value itself, untouched (numbers, ``None``, bytes, ...)
===============================  ==============================================================

A result that fits comes back as the very same object. Exceptions pass through untouched:
an error is not a result. Wrapping a wrapped tool caps once (the outer options win).

The tool call id shown in the pointer comes from :func:`call_context`, which a host (or
an adapter) sets around the call when it knows the id; without one it is ``"unknown"``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, ParamSpec, TypeVar, cast, overload

from spillstore._content import EmbeddedText, MediaPart, Part, ResourceLink, TextPart, ToolResult
from spillstore._errors import ConfigError
from spillstore._service.service import TruncationService
from spillstore._settings import MIN_BUDGET_BYTES, POINTER_RESERVE_BYTES, Settings, parse_size

if TYPE_CHECKING:
    from spillstore._tools.spill_tools import SpillTools

__all__ = [
    "UNKNOWN_CALL_ID",
    "Capper",
    "ToolCappers",
    "call_context",
    "current_call_id",
    "wrap",
]

P = ParamSpec("P")
R = TypeVar("R")

UNKNOWN_CALL_ID: Final = "unknown"
"""The call id a pointer shows when the host did not say which call produced the result."""

_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "spillstore_call_id", default=None
)
_MARKER: Final = "__spillstore_wrap__"
_PART_TYPES: Final = (str, TextPart, MediaPart, EmbeddedText, ResourceLink)


@contextmanager
def call_context(tool_call_id: str) -> Iterator[None]:
    """Name the tool call that wrapped tools run inside, for their pointers.

    Example::

        with spillstore.call_context(call.id):
            output = my_wrapped_tool(**call.arguments)

    Raises:
        ConfigError: ``tool_call_id`` is not a non-empty ``str``.
    """
    if not isinstance(tool_call_id, str) or not tool_call_id:
        raise ConfigError(f"tool_call_id must be a non-empty str; got {tool_call_id!r}")
    token = _CALL_ID.set(tool_call_id)
    try:
        yield
    finally:
        _CALL_ID.reset(token)


def current_call_id() -> str:
    """The call id set by the innermost :func:`call_context`, else ``"unknown"``."""
    return _CALL_ID.get() or UNKNOWN_CALL_ID


# --------------------------------------------------------------------------- the capper


def _budget_settings(base: Settings, max_bytes: int) -> Settings:
    """``base`` with another inline budget; previews shrink (4:1) when they no longer fit."""
    head_bytes, tail_bytes = base.head_bytes, base.tail_bytes
    room = max_bytes - POINTER_RESERVE_BYTES
    if head_bytes + tail_bytes > room:
        head_bytes = room * 4 // 5
        tail_bytes = room - head_bytes
    values = base.model_dump()
    values.update(max_bytes=max_bytes, head_bytes=head_bytes, tail_bytes=tail_bytes)
    return Settings(**values)


def _check_budget(max_bytes: object) -> int | None:
    if max_bytes is None:
        return None
    size = parse_size(max_bytes)
    if size < MIN_BUDGET_BYTES:
        raise ConfigError(
            f"max_bytes must be at least {MIN_BUDGET_BYTES} bytes so the pointer fits; "
            f"got {max_bytes!r}",
            field="max_bytes",
        )
    return size


class Capper:
    """Caps one tool's results: a service (made on first use) and the per-tool overrides.

    Shared by :func:`wrap` and the framework adapters.

    Args:
        service: the service results go through; by default ``TruncationService()``
            (settings from the environment), made on the first result.
        max_bytes: this tool's inline budget instead of the service's (an int or a
            human size such as ``"20KB"``); previews shrink to fit a smaller budget.
        exempt: pass every result through untouched (a tool that pages spills itself).

    Raises:
        ConfigError: ``max_bytes`` is not a size of at least 2,048 bytes, or
            ``service`` is not a :class:`~spillstore.TruncationService`.
    """

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        max_bytes: int | str | None = None,
        exempt: bool = False,
    ) -> None:
        if service is not None and not isinstance(service, TruncationService):
            raise ConfigError(
                f"service must be a spillstore TruncationService; got {type(service).__name__}"
            )
        if not isinstance(exempt, bool):
            raise ConfigError(f"exempt must be a bool; got {exempt!r}", field="exempt")
        self.max_bytes = _check_budget(max_bytes)
        self.exempt = exempt
        self._service = service
        self._lock = threading.Lock()

    @property
    def service(self) -> TruncationService:
        """The service with this tool's budget (made and cached on first use)."""
        service = self._service
        if service is not None and (
            self.max_bytes is None or service.settings.max_bytes == self.max_bytes
        ):
            return service
        with self._lock:
            service = self._service
            if service is None:
                service = TruncationService()
            if self.max_bytes is not None and service.settings.max_bytes != self.max_bytes:
                service = TruncationService(
                    service.store,
                    _budget_settings(service.settings, self.max_bytes),
                    session=service.session,
                    read_tool=service.read_tool,
                    grep_tool=service.grep_tool,
                    deliverable_media=service.deliverable_media,
                )
            self._service = service
            return service

    def cap(self, result: ToolResult | str, *, tool_name: str, tool_call_id: str) -> ToolResult:
        """Pass ``result`` through the service (the same object when it fits or is exempt)."""
        if self.exempt:
            return result if isinstance(result, ToolResult) else _as_result(result)
        return self.service.truncate_for_model(
            result, tool_name=tool_name, tool_call_id=tool_call_id
        )

    async def acap(
        self, result: ToolResult | str, *, tool_name: str, tool_call_id: str
    ) -> ToolResult:
        """Async twin of :meth:`cap`."""
        if self.exempt:
            return result if isinstance(result, ToolResult) else _as_result(result)
        return await self.service.atruncate_for_model(
            result, tool_name=tool_name, tool_call_id=tool_call_id
        )

    def cap_value(self, value: Any, *, tool_name: str, tool_call_id: str) -> Any:
        """Cap a tool's return value and give it back in its own shape (see the module)."""
        shaped = to_result(value)
        if shaped is None:
            return value
        result, rebuild = shaped
        capped = self.cap(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return value if capped is result else rebuild(capped)

    async def acap_value(self, value: Any, *, tool_name: str, tool_call_id: str) -> Any:
        """Async twin of :meth:`cap_value`."""
        shaped = to_result(value)
        if shaped is None:
            return value
        result, rebuild = shaped
        capped = await self.acap(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return value if capped is result else rebuild(capped)

    def cap_items(
        self,
        items: Sequence[Any],
        *,
        text_of: Callable[[Any], str | None],
        make_text: Callable[[str], Any],
        tool_name: str,
        tool_call_id: str,
    ) -> list[Any] | None:
        """Cap a framework's content list: text items are the output, the others stay.

        Args:
            items: the framework's content items, in order.
            text_of: an item's text, or ``None`` for an item kept as it is (an image).
            make_text: a framework text item from model-facing text.

        Returns:
            The capped list (the pointer, then the kept items in order), or ``None``
            when the items fit (use them as they are).
        """
        result, kept = _items_result(items, text_of)
        capped = self.cap(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return None if capped is result else _items_back(capped, kept, make_text)

    async def acap_items(
        self,
        items: Sequence[Any],
        *,
        text_of: Callable[[Any], str | None],
        make_text: Callable[[str], Any],
        tool_name: str,
        tool_call_id: str,
    ) -> list[Any] | None:
        """Async twin of :meth:`cap_items`."""
        result, kept = _items_result(items, text_of)
        capped = await self.acap(result, tool_name=tool_name, tool_call_id=tool_call_id)
        return None if capped is result else _items_back(capped, kept, make_text)


_KEPT_MIME: Final = "application/x-spillstore-kept"
"""MIME type of the stand-ins for a framework's non-text items while a result is capped."""


def _items_result(
    items: Sequence[Any], text_of: Callable[[Any], str | None]
) -> tuple[ToolResult, dict[int, Any]]:
    """A content list as a result; non-text items become stand-ins (kept by identity)."""
    parts: list[Part] = []
    kept: dict[int, Any] = {}
    for item in items:
        text = text_of(item)
        if text is not None:
            parts.append(TextPart(text))
            continue
        stand_in = MediaPart(kind="image", mime_type=_KEPT_MIME, data=b"")
        kept[id(stand_in)] = item
        parts.append(stand_in)
    return ToolResult(content=tuple(parts)), kept


def _items_back(
    capped: ToolResult, kept: Mapping[int, Any], make_text: Callable[[str], Any]
) -> list[Any]:
    out: list[Any] = []
    for part in capped.content:
        if isinstance(part, TextPart | EmbeddedText):
            out.append(make_text(part.text))
        elif id(part) in kept:
            out.append(kept[id(part)])
    return out


def _as_result(text: str) -> ToolResult:
    return ToolResult(content=(TextPart(text),))


def model_text(result: ToolResult) -> str:
    """The text the model reads in ``result``: its text parts joined with newlines."""
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart | EmbeddedText))


def to_result(value: Any) -> tuple[ToolResult, Callable[[ToolResult], Any]] | None:
    """A tool's return value as a :class:`ToolResult`, and how to give a capped one back.

    Returns ``None`` for values the wrapper leaves alone (see the module's table).
    """
    if isinstance(value, ToolResult):
        return value, _same
    if isinstance(value, str):
        return _as_result(value), model_text
    if isinstance(value, Mapping):
        text = value.get("text")
        if not isinstance(text, str):
            return None
        mapping = cast("Mapping[str, Any]", value)
        return _as_result(text), lambda capped: {**mapping, "text": model_text(capped)}
    if isinstance(value, list | tuple) and value:
        items = cast("Sequence[object]", value)
        if all(isinstance(item, str) for item in items):
            parts: tuple[Part, ...] = tuple(TextPart(cast("str", item)) for item in items)
            return ToolResult(content=parts), _texts
        if all(isinstance(item, _PART_TYPES) for item in items):
            parts = tuple(
                TextPart(item) if isinstance(item, str) else cast("Part", item) for item in items
            )
            return ToolResult(content=parts), _parts
    return None


def _same(capped: ToolResult) -> ToolResult:
    return capped


def _texts(capped: ToolResult) -> list[str]:
    return [p.text for p in capped.content if isinstance(p, TextPart | EmbeddedText)]


def _parts(capped: ToolResult) -> list[Part]:
    return list(capped.content)


# --------------------------------------------------------------------------- wrap


@dataclasses.dataclass(frozen=True, slots=True)
class _Options:
    """What :func:`wrap` was asked for; kept on the wrapper so wrapping again caps once."""

    func: Callable[..., Any]
    service: TruncationService | None
    name: str | None
    max_bytes: int | str | None
    exempt: bool | None


def _is_async(func: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(type(func), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return not inspect.isroutine(func) and inspect.iscoroutinefunction(call)


def _tool_name(func: Callable[..., Any]) -> str:
    name = getattr(func, "__name__", None)
    return name if isinstance(name, str) and name else type(func).__name__


@overload
def wrap(
    func: Callable[P, R],
    /,
    *,
    service: TruncationService | None = None,
    name: str | None = None,
    max_bytes: int | str | None = None,
    exempt: bool | None = None,
) -> Callable[P, R]: ...
@overload
def wrap(
    func: None = None,
    /,
    *,
    service: TruncationService | None = None,
    name: str | None = None,
    max_bytes: int | str | None = None,
    exempt: bool | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...
def wrap(
    func: Callable[P, R] | None = None,
    /,
    *,
    service: TruncationService | None = None,
    name: str | None = None,
    max_bytes: int | str | None = None,
    exempt: bool | None = None,
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Cap a tool callable's results for the model: ``@wrap``, ``@wrap(...)`` or ``wrap(f)``.

    The wrapper has the tool's name, docstring, annotations and signature
    (``__wrapped__`` is the tool), is a coroutine function exactly when the tool is one,
    and returns the shape the tool returned (see the module docstring).

    Args:
        func: the tool, a sync or async callable.
        service: the service results go through; by default ``TruncationService()``,
            made on the first call (so settings come from the environment then).
        name: the tool name the pointer shows (default: the callable's ``__name__``).
        max_bytes: this tool's inline budget (an int or a size such as ``"20KB"``).
        exempt: return every result untouched (a tool that reads spills itself).

    Raises:
        ConfigError: a bad ``max_bytes``, ``service`` or ``exempt`` (when wrapping).
    """
    if func is None:
        decorator = functools.partial(
            wrap, service=service, name=name, max_bytes=max_bytes, exempt=exempt
        )
        return cast("Callable[[Callable[P, R]], Callable[P, R]]", decorator)
    if not callable(func):
        raise ConfigError(f"wrap needs a callable; got {type(func).__name__}")
    inner: _Options | None = getattr(func, _MARKER, None)
    if isinstance(inner, _Options):  # wrapping twice caps once: rewrap the tool itself
        options = _Options(
            func=inner.func,
            service=service if service is not None else inner.service,
            name=name if name is not None else inner.name,
            max_bytes=max_bytes if max_bytes is not None else inner.max_bytes,
            exempt=exempt if exempt is not None else inner.exempt,
        )
    else:
        options = _Options(func, service, name, max_bytes, exempt)
    return cast("Callable[P, R]", _build(options))


def _build(options: _Options) -> Callable[..., Any]:
    func = options.func
    capper = Capper(options.service, max_bytes=options.max_bytes, exempt=bool(options.exempt))
    tool_name = options.name if options.name is not None else _tool_name(func)
    if not isinstance(tool_name, str) or not tool_name:
        raise ConfigError(f"name must be a non-empty str; got {tool_name!r}", field="name")

    if _is_async(func):
        afunc = cast("Callable[..., Awaitable[Any]]", func)

        @functools.wraps(func)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            value = await afunc(*args, **kwargs)
            return await capper.acap_value(
                value, tool_name=tool_name, tool_call_id=current_call_id()
            )

        wrapper: Callable[..., Any] = async_tool
    else:

        @functools.wraps(func)
        def sync_tool(*args: Any, **kwargs: Any) -> Any:
            value = func(*args, **kwargs)
            return capper.cap_value(value, tool_name=tool_name, tool_call_id=current_call_id())

        wrapper = sync_tool
    setattr(wrapper, _MARKER, options)
    setattr(wrapper, "__spillstore_capper__", capper)  # noqa: B010 - for hosts and tests
    return wrapper


class ToolCappers:
    """The cappers a framework adapter applies, chosen by tool name.

    The service's budget by default, a per-tool budget where one is given, and none at
    all for exempt tools and for the spill tools themselves (reading a spill must never
    spill again). Shared by the LangChain middleware and the pydantic-ai capability.

    Args:
        service: the service results go through (default ``TruncationService()``).
        spill_tools: the Read/Grep/List tools (default ``service.spill_tools()``).
        budgets: per-tool inline budgets by tool name (ints or human sizes).
        exempt: tool names whose results pass through untouched.
    """

    def __init__(
        self,
        service: TruncationService | None = None,
        *,
        spill_tools: SpillTools | None = None,
        budgets: Mapping[str, int | str] | None = None,
        exempt: Collection[str] = (),
    ) -> None:
        self.service = service if service is not None else TruncationService()
        self.spill_tools = spill_tools if spill_tools is not None else self.service.spill_tools()
        names = self.spill_tools.names
        self.exempt = frozenset(exempt) | {names.read, names.grep, names.list}
        self._default = Capper(self.service)
        self._by_name = {
            name: Capper(self.service, max_bytes=size) for name, size in (budgets or {}).items()
        }

    def for_tool(self, name: str) -> Capper | None:
        """The capper for a tool's results, or None when they pass through untouched."""
        if name in self.exempt:
            return None
        return self._by_name.get(name, self._default)
