"""BoundedCache: at most max_entries items, the least recently *used* evicted first."""

from __future__ import annotations

import pytest

from spillstore._core.cache import BoundedCache
from spillstore._errors import ConfigError


def test_least_recently_used_goes_first() -> None:
    """Reading an entry keeps it; the entry neither read nor written longest is evicted."""
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_put_again_refreshes_and_pop_forgets() -> None:
    """Writing an existing key refreshes it; pop returns the value once."""
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b")) == (10, None)
    assert cache.pop("a") == 10
    assert cache.pop("a") is None


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_size_must_be_a_positive_int(size: object) -> None:
    """A cache that could hold nothing is a developer error."""
    with pytest.raises(ConfigError, match="max_entries"):
        BoundedCache(size)  # type: ignore[arg-type]
