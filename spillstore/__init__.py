"""spillstore: keep oversized LLM tool results out of the context without losing them.

The public API lives here; the ``_underscored`` modules are private. Names are imported
on first use (PEP 562), so ``import spillstore`` and the CLI's ``--help`` stay fast: the
pydantic models load only when something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spillstore._accumulator import OutputAccumulator
    from spillstore._cap import (
        MIN_CAP_BYTES,
        PART_SEPARATOR,
        cap_content,
        cap_result,
        elide_middle,
        elision_marker,
    )
    from spillstore._content import (
        EmbeddedText,
        MediaPart,
        Part,
        ResourceLink,
        SpillInfo,
        TextPart,
        ToolResult,
    )
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
    from spillstore._gc import GcEntry, GcReport
    from spillstore._local import LocalStore
    from spillstore._memory import MemoryStore
    from spillstore._meta import LinePage, SpillMeta
    from spillstore._service import TruncationService
    from spillstore._settings import Settings, parse_duration, parse_size
    from spillstore._store import AsyncSpillWriter, SpillWriter, Store
    from spillstore._tools import GrepArgs, ListArgs, ReadArgs, SpillTools, delegate_read
    from spillstore._turns import (
        LoopResult,
        Message,
        ModelTurn,
        ToolCall,
        TurnGuard,
        arun_loop,
        run_loop,
    )
    from spillstore._utf8 import head, tail, utf8_size
    from spillstore._wrap import call_context, wrap

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
    "AsyncSpillWriter": "spillstore._store",
    "ConfigError": "spillstore._errors",
    "EmbeddedText": "spillstore._content",
    "GcEntry": "spillstore._gc",
    "GcReport": "spillstore._gc",
    "GrepArgs": "spillstore._tools",
    "InvalidSpillId": "spillstore._errors",
    "LinePage": "spillstore._meta",
    "ListArgs": "spillstore._tools",
    "LocalStore": "spillstore._local",
    "LoopResult": "spillstore._turns",
    "MIN_CAP_BYTES": "spillstore._cap",
    "MediaPart": "spillstore._content",
    "MemoryStore": "spillstore._memory",
    "Message": "spillstore._turns",
    "ModelTurn": "spillstore._turns",
    "OutputAccumulator": "spillstore._accumulator",
    "PART_SEPARATOR": "spillstore._cap",
    "Part": "spillstore._content",
    "PathOutsideStore": "spillstore._errors",
    "RangeNotStored": "spillstore._errors",
    "ReadArgs": "spillstore._tools",
    "ResourceLink": "spillstore._content",
    "Settings": "spillstore._settings",
    "SpillExpired": "spillstore._errors",
    "SpillInfo": "spillstore._content",
    "SpillMeta": "spillstore._meta",
    "SpillNotFound": "spillstore._errors",
    "SpillTools": "spillstore._tools",
    "SpillWriter": "spillstore._store",
    "SpillstoreError": "spillstore._errors",
    "Store": "spillstore._store",
    "StoreError": "spillstore._errors",
    "TextPart": "spillstore._content",
    "ToolCall": "spillstore._turns",
    "ToolResult": "spillstore._content",
    "TruncationService": "spillstore._service",
    "TurnGuard": "spillstore._turns",
    "UnsafeStoreRoot": "spillstore._errors",
    "arun_loop": "spillstore._turns",
    "call_context": "spillstore._wrap",
    "cap_content": "spillstore._cap",
    "cap_result": "spillstore._cap",
    "delegate_read": "spillstore._tools",
    "elide_middle": "spillstore._cap",
    "elision_marker": "spillstore._cap",
    "head": "spillstore._utf8",
    "parse_duration": "spillstore._settings",
    "parse_size": "spillstore._settings",
    "run_loop": "spillstore._turns",
    "tail": "spillstore._utf8",
    "utf8_size": "spillstore._utf8",
    "wrap": "spillstore._wrap",
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
