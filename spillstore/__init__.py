"""spillstore: keep oversized LLM tool results out of the context without losing them.

The public API lives here; the ``_underscored`` modules are private. Names are imported
on first use (PEP 562), so ``import spillstore`` and the CLI's ``--help`` stay fast: the
pydantic models load only when something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillstore._content import (
        EmbeddedText,
        MediaPart,
        Part,
        ResourceLink,
        SpillInfo,
        TextPart,
        ToolResult,
    )
    from spillstore._core.cap import (
        MIN_CAP_BYTES,
        PART_SEPARATOR,
        cap_content,
        cap_result,
        elide_middle,
        elision_marker,
    )
    from spillstore._core.gc_plan import GcEntry, GcReport
    from spillstore._core.paging import LinePage
    from spillstore._core.utf8 import head, tail, utf8_size
    from spillstore._errors import (
        ConfigError,
        InvalidSpillId,
        PathOutsideStore,
        RangeNotStored,
        SpillExpired,
        SpillNotFound,
        SpillstoreError,
        StoreError,
        UnsafeStoreRoot,
    )
    from spillstore._service.accumulator import OutputAccumulator
    from spillstore._service.service import TruncationService
    from spillstore._service.wrap import call_context, wrap
    from spillstore._settings import Settings, parse_duration, parse_size
    from spillstore._stores.base import Store
    from spillstore._stores.local import LocalStore
    from spillstore._stores.memory import MemoryStore
    from spillstore._stores.meta import SpillMeta
    from spillstore._stores.writer import AsyncSpillWriter, SpillWriter
    from spillstore._tools.args import GrepArgs, ListArgs, ReadArgs
    from spillstore._tools.spill_tools import SpillTools, delegate_read
    from spillstore.loop import (
        LoopResult,
        Message,
        ModelTurn,
        ToolCall,
        TurnGuard,
        arun_loop,
        run_loop,
    )

__all__ = [
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
]

__version__ = "0.1.0.dev0"

_EXPORTS: dict[str, str] = {
    "AsyncSpillWriter": "spillstore._stores.writer",
    "ConfigError": "spillstore._errors",
    "EmbeddedText": "spillstore._content",
    "GcEntry": "spillstore._core.gc_plan",
    "GcReport": "spillstore._core.gc_plan",
    "GrepArgs": "spillstore._tools.args",
    "InvalidSpillId": "spillstore._errors",
    "LinePage": "spillstore._core.paging",
    "ListArgs": "spillstore._tools.args",
    "LocalStore": "spillstore._stores.local",
    "LoopResult": "spillstore.loop",
    "MIN_CAP_BYTES": "spillstore._core.cap",
    "MediaPart": "spillstore._content",
    "MemoryStore": "spillstore._stores.memory",
    "Message": "spillstore.loop",
    "ModelTurn": "spillstore.loop",
    "OutputAccumulator": "spillstore._service.accumulator",
    "PART_SEPARATOR": "spillstore._core.cap",
    "Part": "spillstore._content",
    "PathOutsideStore": "spillstore._errors",
    "RangeNotStored": "spillstore._errors",
    "ReadArgs": "spillstore._tools.args",
    "ResourceLink": "spillstore._content",
    "Settings": "spillstore._settings",
    "SpillExpired": "spillstore._errors",
    "SpillInfo": "spillstore._content",
    "SpillMeta": "spillstore._stores.meta",
    "SpillNotFound": "spillstore._errors",
    "SpillTools": "spillstore._tools.spill_tools",
    "SpillWriter": "spillstore._stores.writer",
    "SpillstoreError": "spillstore._errors",
    "Store": "spillstore._stores.base",
    "StoreError": "spillstore._errors",
    "TextPart": "spillstore._content",
    "ToolCall": "spillstore.loop",
    "ToolResult": "spillstore._content",
    "TruncationService": "spillstore._service.service",
    "TurnGuard": "spillstore.loop",
    "UnsafeStoreRoot": "spillstore._errors",
    "arun_loop": "spillstore.loop",
    "call_context": "spillstore._service.wrap",
    "cap_content": "spillstore._core.cap",
    "cap_result": "spillstore._core.cap",
    "delegate_read": "spillstore._tools.spill_tools",
    "elide_middle": "spillstore._core.cap",
    "elision_marker": "spillstore._core.cap",
    "head": "spillstore._core.utf8",
    "parse_duration": "spillstore._settings",
    "parse_size": "spillstore._settings",
    "run_loop": "spillstore.loop",
    "tail": "spillstore._core.utf8",
    "utf8_size": "spillstore._core.utf8",
    "wrap": "spillstore._service.wrap",
}
"""Where each public name is defined."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spillstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
