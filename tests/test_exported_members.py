"""The public surface is exactly what __all__ lists, and all of it imports."""

from __future__ import annotations

import spillstore

EXPECTED = {
    "MIN_CAP_BYTES",
    "PART_SEPARATOR",
    "AsyncSpillWriter",
    "ConfigError",
    "EmbeddedText",
    "GcEntry",
    "GcReport",
    "GrepArgs",
    "InvalidSpillId",
    "LinePage",
    "ListArgs",
    "LocalStore",
    "LoopResult",
    "MediaPart",
    "MemoryStore",
    "Message",
    "ModelTurn",
    "OutputAccumulator",
    "Part",
    "PathOutsideStore",
    "RangeNotStored",
    "ReadArgs",
    "ResourceLink",
    "Settings",
    "SpillExpired",
    "SpillInfo",
    "SpillMeta",
    "SpillNotFound",
    "SpillTools",
    "SpillWriter",
    "SpillstoreError",
    "Store",
    "StoreError",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "TruncationService",
    "TurnGuard",
    "UnsafeStoreRoot",
    "arun_loop",
    "call_context",
    "cap_content",
    "cap_result",
    "delegate_read",
    "elide_middle",
    "elision_marker",
    "head",
    "parse_duration",
    "parse_size",
    "run_loop",
    "tail",
    "utf8_size",
    "wrap",
}


def test_all_is_pinned() -> None:
    """__all__ lists exactly the expected public names, each of which exists."""
    assert set(spillstore.__all__) == EXPECTED
    for name in spillstore.__all__:
        assert getattr(spillstore, name) is not None


def test_public_names_live_in_private_modules_or_package() -> None:
    """Every exported class and function is defined in spillstore, not in a dependency."""
    import inspect

    for name in spillstore.__all__:
        value = getattr(spillstore, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("spillstore."), name


def test_lazy_exports_match_all() -> None:
    """Every lazily exported name is in __all__ and the other way round."""
    assert set(spillstore._EXPORTS) == set(spillstore.__all__)


def test_unknown_attribute_raises_attribute_error() -> None:
    """A name spillstore does not export raises AttributeError, as for any module."""
    import pytest

    with pytest.raises(AttributeError, match="no_such_name"):
        spillstore.no_such_name  # noqa: B018
