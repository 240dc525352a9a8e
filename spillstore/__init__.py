"""spillstore: keep oversized LLM tool results out of the context without losing them.

This is the front door: the service, the stores, the recovery tools, the settings, the
errors and the content types. The ``_underscored`` modules are private. Two public
modules sit beside it: :mod:`spillstore.text` (capping text without spilling) and
:mod:`spillstore.loop` (the turn cap and a reference host loop); the integrations are
``spillstore.mcp``, ``spillstore.s3``, ``spillstore.langchain``,
``spillstore.openai_agents`` and ``spillstore.pydantic_ai``.

Names are imported on first use (PEP 562), so ``import spillstore`` and the CLI's
``--help`` stay fast: the pydantic models load only when something needs them.

Deprecated: the names that moved to :mod:`spillstore.text` and :mod:`spillstore.loop`
still work from here for one release, with a ``DeprecationWarning`` naming their new
home.
"""

from __future__ import annotations

import importlib
import warnings

from spillstore._version import __version__ as __version__

TYPE_CHECKING = False  # not typing's: `spillstore mcp proxy` starts its upstream before
# anything imports typing (about 17 ms), see spillstore/_cli/early.py

if TYPE_CHECKING:  # for type checkers and IDEs: exactly _EXPORTS (a test holds them equal)
    from typing import Any

    from spillstore._content import EmbeddedText as EmbeddedText
    from spillstore._content import MediaPart as MediaPart
    from spillstore._content import Part as Part
    from spillstore._content import ResourceLink as ResourceLink
    from spillstore._content import SpillInfo as SpillInfo
    from spillstore._content import TextPart as TextPart
    from spillstore._content import ToolResult as ToolResult
    from spillstore._core.gc_plan import GcEntry as GcEntry
    from spillstore._core.gc_plan import GcReport as GcReport
    from spillstore._core.paging import LinePage as LinePage
    from spillstore._errors import ConfigError as ConfigError
    from spillstore._errors import InvalidSpillId as InvalidSpillId
    from spillstore._errors import PathOutsideStore as PathOutsideStore
    from spillstore._errors import RangeNotStored as RangeNotStored
    from spillstore._errors import SpillExpired as SpillExpired
    from spillstore._errors import SpillNotFound as SpillNotFound
    from spillstore._errors import SpillstoreError as SpillstoreError
    from spillstore._errors import StoreError as StoreError
    from spillstore._errors import UnsafeStoreRoot as UnsafeStoreRoot
    from spillstore._errors import UsageError as UsageError
    from spillstore._service.accumulator import OutputAccumulator as OutputAccumulator
    from spillstore._service.service import TruncationService as TruncationService
    from spillstore._service.wrap import call_context as call_context
    from spillstore._service.wrap import wrap as wrap
    from spillstore._settings import Settings as Settings
    from spillstore._settings import parse_duration as parse_duration
    from spillstore._settings import parse_size as parse_size
    from spillstore._stores.backend import USE_STORE_DEFAULT as USE_STORE_DEFAULT
    from spillstore._stores.base import Store as Store
    from spillstore._stores.local import LocalStore as LocalStore
    from spillstore._stores.memory import MemoryStore as MemoryStore
    from spillstore._stores.meta import SpillMeta as SpillMeta
    from spillstore._stores.writer import AsyncSpillWriter as AsyncSpillWriter
    from spillstore._stores.writer import SpillWriter as SpillWriter
    from spillstore._tools.args import GrepArgs as GrepArgs
    from spillstore._tools.args import ListArgs as ListArgs
    from spillstore._tools.args import ReadArgs as ReadArgs
    from spillstore._tools.spill_tools import SpillTools as SpillTools
    from spillstore._tools.spill_tools import delegate_read as delegate_read

_EXPORTS: dict[str, tuple[str, ...]] = {
    "spillstore._service.service": ("TruncationService",),
    "spillstore._service.accumulator": ("OutputAccumulator",),
    "spillstore._service.wrap": ("wrap", "call_context"),
    "spillstore._stores.base": ("Store",),
    "spillstore._stores.backend": ("USE_STORE_DEFAULT",),
    "spillstore._stores.writer": ("SpillWriter", "AsyncSpillWriter"),
    "spillstore._stores.local": ("LocalStore",),
    "spillstore._stores.memory": ("MemoryStore",),
    "spillstore._stores.meta": ("SpillMeta",),
    "spillstore._core.paging": ("LinePage",),
    "spillstore._core.gc_plan": ("GcReport", "GcEntry"),
    "spillstore._tools.spill_tools": ("SpillTools", "delegate_read"),
    "spillstore._tools.args": ("ReadArgs", "GrepArgs", "ListArgs"),
    "spillstore._settings": ("Settings", "parse_size", "parse_duration"),
    "spillstore._errors": (
        "SpillstoreError",
        "ConfigError",
        "UsageError",
        "InvalidSpillId",
        "PathOutsideStore",
        "SpillNotFound",
        "SpillExpired",
        "RangeNotStored",
        "StoreError",
        "UnsafeStoreRoot",
    ),
    "spillstore._content": (
        "ToolResult",
        "Part",
        "TextPart",
        "MediaPart",
        "EmbeddedText",
        "ResourceLink",
        "SpillInfo",
    ),
}
"""The public names, by the module that defines them: the one list ``__all__`` comes from."""

_MOVED: dict[str, tuple[str, ...]] = {
    "spillstore.text": (
        "head",
        "tail",
        "utf8_size",
        "cap_result",
        "cap_content",
        "elide_middle",
        "elision_marker",
        "MIN_CAP_BYTES",
        "PART_SEPARATOR",
    ),
    "spillstore.loop": (
        "TurnGuard",
        "run_loop",
        "arun_loop",
        "Message",
        "ToolCall",
        "ModelTurn",
        "LoopResult",
    ),
}
"""Names that left the front door, by their new public module (deprecated here)."""

_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
_NEW_HOME = {name: module for module, names in _MOVED.items() for name in names}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    new_home = _NEW_HOME.get(name)
    if new_home is None:
        raise AttributeError(f"module 'spillstore' has no attribute {name!r}")
    warnings.warn(
        f"spillstore.{name} moved: import it from {new_home} (the old path goes in the next"
        " release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(new_home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
