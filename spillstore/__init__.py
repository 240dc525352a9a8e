"""spillstore: keep oversized LLM tool results out of the context without losing them.

The public API lives here; the ``_underscored`` modules are private.
"""

from __future__ import annotations

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
from spillstore._utf8 import head, tail, utf8_size

__all__ = [
    "MIN_CAP_BYTES",
    "PART_SEPARATOR",
    "AsyncSpillWriter",
    "ConfigError",
    "EmbeddedText",
    "GcEntry",
    "GcReport",
    "InvalidSpillId",
    "LinePage",
    "LocalStore",
    "MediaPart",
    "MemoryStore",
    "OutputAccumulator",
    "Part",
    "PathOutsideStore",
    "RangeNotStored",
    "ResourceLink",
    "Settings",
    "SpillExpired",
    "SpillInfo",
    "SpillMeta",
    "SpillNotFound",
    "SpillWriter",
    "SpillstoreError",
    "Store",
    "StoreError",
    "TextPart",
    "ToolResult",
    "TruncationService",
    "UnsafeStoreRoot",
    "cap_content",
    "cap_result",
    "elide_middle",
    "elision_marker",
    "head",
    "parse_duration",
    "parse_size",
    "tail",
    "utf8_size",
]

__version__ = "0.1.0.dev0"
