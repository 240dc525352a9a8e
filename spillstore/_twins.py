"""The one way spillstore makes an async twin of a blocking function.

Local files have no real async I/O, so an async twin runs the sync code in a worker
thread, one hop per operation (house style 3: filelock does the same). :func:`in_thread`
keeps the wrapped function's signature for the type checker, takes the function
itself (a bound method, never a method *name*), and lets every exception of the
function surface unchanged in the caller's task.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread

__all__ = ["in_thread"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_thread(func: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Return an async function that runs ``func`` in a worker thread.

    ``await in_thread(store.stat)(spill_id)`` is the async twin of
    ``store.stat(spill_id)``: same arguments, same result, same exceptions. In a class
    body, ``astat = in_thread(stat)`` makes the method twin: it keeps ``stat``'s
    signature (``inspect.signature`` follows ``__wrapped__``) and is named ``astat``,
    with a docstring that points at ``stat``.
    """

    @functools.wraps(func)
    async def twin(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))

    name = getattr(func, "__name__", "function")
    qualname = getattr(func, "__qualname__", name)
    twin.__name__ = "a" + name
    twin.__qualname__ = qualname.removesuffix(name) + "a" + name
    twin.__doc__ = f"Async twin of :meth:`{name}`: the same call, run in a worker thread."
    return twin
