"""The one way spillstore makes an async twin of a blocking function.

Local files have no real async I/O, so an async twin runs the sync code in a worker
thread, one hop per operation (house style 3: filelock does the same). :func:`in_thread`
keeps the wrapped function's signature for the type checker, takes the function
itself (a bound method, never a method *name*), and lets every exception of the
function surface unchanged in the caller's task. :func:`method_twin` is the same hop
for a class body (``astat = method_twin(stat)``), bound to the instance at call time.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio.to_thread

__all__ = ["in_thread", "method_twin"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")


def in_thread(func: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Return an async function that runs ``func`` in a worker thread.

    ``await in_thread(store.stat)(spill_id)`` is the async twin of
    ``store.stat(spill_id)``: same arguments, same result, same exceptions.
    """

    @functools.wraps(func)
    async def twin(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))

    return twin


def method_twin(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]:
    """Return the async twin of a method, for a class body: ``astat = method_twin(stat)``.

    The twin runs ``self.<name>`` in a worker thread, looked up on the instance at call
    time (the name comes from ``method`` itself, never from a string), so a subclass that
    overrides the sync method changes its twin too. It keeps the method's signature
    (``inspect.signature`` follows ``__wrapped__``), is named ``a<name>``, and its
    docstring points at ``<name>``.
    """
    name = method.__name__

    @functools.wraps(method)
    async def twin(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        bound = getattr(self, name)
        return await anyio.to_thread.run_sync(functools.partial(bound, *args, **kwargs))

    twin.__name__ = "a" + name
    twin.__qualname__ = method.__qualname__.removesuffix(name) + "a" + name
    twin.__doc__ = f"Async twin of :meth:`{name}`: the same call, run in a worker thread."
    return twin
