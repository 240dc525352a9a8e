"""in_thread, the one way spillstore makes an async twin of a blocking function."""

from __future__ import annotations

import inspect
import threading

import pytest

from spillstore import MemoryStore, SpillTools
from spillstore._twins import in_thread


class Greeter:
    def greet(self, name: str, *, punctuation: str = "!") -> str:
        """Say hello."""
        if not name:
            raise ValueError("no name")
        return f"hello {name}{punctuation} from {threading.current_thread().name}"

    agreet = in_thread(greet)


@pytest.mark.anyio
async def test_twin_runs_in_a_worker_thread_with_the_same_arguments() -> None:
    """The twin takes the same arguments, returns the same value, computed off the loop."""
    answer = await Greeter().agreet("you", punctuation="?")
    assert answer.startswith("hello you? from ")
    assert answer != Greeter().greet("you", punctuation="?")  # another thread's name


@pytest.mark.anyio
async def test_twin_raises_the_functions_own_exception() -> None:
    """An exception of the function surfaces unchanged in the caller's task."""
    with pytest.raises(ValueError, match="no name"):
        await Greeter().agreet("")


@pytest.mark.parametrize(
    ("owner", "name", "qualname"),
    [
        (Greeter, "greet", "Greeter.agreet"),
        (SpillTools, "read", "SpillTools.aread"),
        (SpillTools, "grep", "SpillTools.agrep"),
        (MemoryStore, "stat", "Store.astat"),
    ],
)
def test_method_twin_is_named_for_itself(owner: type, name: str, qualname: str) -> None:
    """A class-body twin is a coroutine function called a<name>, with <name>'s signature."""
    twin = getattr(owner, "a" + name)
    assert inspect.iscoroutinefunction(twin)
    assert twin.__name__ == "a" + name
    assert twin.__qualname__.endswith(qualname)
    assert f":meth:`{name}`" in (twin.__doc__ or "")
    assert inspect.signature(twin) == inspect.signature(getattr(owner, name))
