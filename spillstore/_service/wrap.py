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
any other dict, list or tuple    measured as its JSON text (``json.dumps``, non-ASCII kept):
                                 the value itself when that fits, else the pointer (a ``str``)
                                 to the saved JSON (its shape, and ``query_spill``)
anything else                    the value itself, untouched (numbers, ``None``, bytes, a
                                 dict JSON cannot write, ...)
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
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, ParamSpec, TypeVar, cast, overload

from spillstore._errors import ConfigError
from spillstore._service.capper import Capper
from spillstore._service.service import TruncationService

__all__ = ["UNKNOWN_CALL_ID", "call_context", "current_call_id", "wrap"]

P = ParamSpec("P")
R = TypeVar("R")

UNKNOWN_CALL_ID: Final = "unknown"
"""The call id a pointer shows when the host did not say which call produced the result."""

_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "spillstore_call_id", default=None
)
_MARKER: Final = "__spillstore_wrap__"


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
