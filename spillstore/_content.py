"""The tool-result model: content parts and the result that carries them.

These are plain frozen dataclasses rather than pydantic models: every tool result in a
host passes through spillstore, and the pass-through path must cost next to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "EmbeddedText",
    "MediaPart",
    "Part",
    "ResourceLink",
    "SpillInfo",
    "TextPart",
    "ToolResult",
]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Plain text produced by a tool."""

    text: str


@dataclass(frozen=True, slots=True)
class MediaPart:
    """An image, audio clip or opaque blob, kept as it is.

    Attributes:
        kind: ``"image"``, ``"audio"`` or ``"blob"``.
        mime_type: the MIME type, e.g. ``"image/png"``.
        data: the payload (raw bytes, or base64 text as a protocol carries it).
        uri: where it came from, when known.
    """

    kind: Literal["image", "audio", "blob"]
    mime_type: str
    data: bytes | str
    uri: str | None = None


@dataclass(frozen=True, slots=True)
class EmbeddedText:
    """A text resource embedded in a result (MCP ``EmbeddedResource`` with text)."""

    uri: str
    text: str
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceLink:
    """A link to a resource the client may fetch itself."""

    uri: str
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class SpillInfo:
    """What happened to an oversized result, for hosts and UIs (no text parsing needed).

    Byte ranges are half-open ``[start, end)`` in the original output; line ranges are
    inclusive 1-based ``(first, last)``.

    Attributes:
        mode: ``"append"`` (long lines cut, pointer appended) or ``"replace"``.
        saved: ``"full"``, ``"partial"`` (retention cap) or ``"none"`` (store failed).
        total_bytes, total_lines: the size of the whole output.
        sha256: hex digest of the whole output.
        stored_ranges: original byte ranges the store kept.
        elided_bytes: byte ranges not shown to the model.
        elided_lines: line ranges not shown (whole or in part).
        spill_id, path: where the saved copy is (``None`` when not saved / not local).
        error: why the output could not be saved, when it could not.
        invalid_utf8: the output was not valid UTF-8.
    """

    mode: Literal["append", "replace"]
    saved: Literal["full", "partial", "none"]
    total_bytes: int
    total_lines: int
    sha256: str
    stored_ranges: tuple[tuple[int, int], ...]
    elided_bytes: tuple[tuple[int, int], ...]
    elided_lines: tuple[tuple[int, int], ...]
    spill_id: str | None
    path: str | None
    error: str | None = None
    invalid_utf8: bool = False


Part: TypeAlias = TextPart | MediaPart | EmbeddedText | ResourceLink


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result as spillstore sees it.

    Attributes:
        content: the parts, in order.
        is_error: whether the tool reported an error; always preserved.
        metadata: host metadata; always preserved, never read.
        structured: structured content (e.g. MCP ``structured_content``); preserved.
        suffix: text that must reach the model whatever happens (exit code, error).
        spill_exempt: pass through untouched (the recovery tools set this).
        full_output_path: a file that already holds the full output (e.g. a shell log).
        spill: set by the service when it cut the result: what was cut and where the
            whole output went. ``None`` on results that passed through.
    """

    content: Sequence[Part]
    is_error: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    structured: Any = None
    suffix: str | None = None
    spill_exempt: bool = False
    full_output_path: str | None = None
    spill: SpillInfo | None = None
