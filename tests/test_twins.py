"""in_thread and method_twin: how spillstore makes the async twin of a blocking call."""

from __future__ import annotations

import inspect
import threading
from typing import Any

import pytest

from spillstore import MemoryStore, SpillTools
from spillstore._errors import SpillNotFound
from spillstore._twins import in_thread, method_twin


class Greeter:
    def greet(self, name: str, *, punctuation: str = "!") -> str:
        """Say hello."""
        if not name:
            raise ValueError("no name")
        return f"hello {name}{punctuation} from {threading.current_thread().name}"

    agreet = method_twin(greet)


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


class Shouting(Greeter):
    def greet(self, name: str, *, punctuation: str = "!") -> str:
        return super().greet(name.upper(), punctuation=punctuation)


@pytest.mark.anyio
async def test_method_twin_runs_the_subclass_override() -> None:
    """A subclass that overrides the sync method changes its twin too (bound at call time)."""
    assert (await Shouting().agreet("you")).startswith("hello YOU!")


class ForgetfulStore(MemoryStore):
    """A store whose stat of one id always says the spill is gone."""

    def stat(self, spill_id: str) -> Any:
        raise SpillNotFound(f"forgot {spill_id}", spill_id=spill_id)


@pytest.mark.anyio
async def test_store_twins_see_a_backend_override() -> None:
    """A store subclass's override of a sync method is what its async twin runs."""
    store = ForgetfulStore()
    meta = store.put("x" * 10, session="default", tool_name="t", tool_call_id="c")
    with pytest.raises(SpillNotFound, match="forgot"):
        await store.astat(meta.spill_id)


@pytest.mark.anyio
async def test_in_thread_takes_a_bound_function() -> None:
    """in_thread of a bound method is its async twin, with the same result."""
    greeter = Greeter()
    assert (await in_thread(greeter.greet)("me")).startswith("hello me! from ")
