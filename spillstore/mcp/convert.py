"""Between MCP ``CallToolResult`` and spillstore's :class:`~spillstore.ToolResult`.

The conversion keeps every block that the service leaves alone as the very same object
(its annotations and ``_meta`` included): only text the service rewrote becomes a new
``TextContent``. A result the service passes through comes back as the original
``CallToolResult``, not a copy.

Structured content (the proxy's policy, design.md §7):

- the proxy strips ``output_schema`` from every upstream tool, because any result may be
  rewritten, and a client that validates (the SDK's ``Client.call_tool`` does) would
  reject a rewritten result whose structured content no longer matched;
- structured content whose JSON fits the budget is forwarded unchanged, even when the
  text beside it was cut (it is still valid JSON, and small);
- larger structured content is not forwarded: when the text already carries it (the
  ``{"result": text}`` wrapper the SDK's ``MCPServer`` adds to ``-> str`` tools, or text
  that is exactly its JSON) it is simply dropped; otherwise its JSON joins the text as
  one more part, so it is spilled with the text and can be read back with Read/Grep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core

from spillstore._content import (
    EmbeddedText,
    MediaPart,
    Part,
    ResourceLink,
    SpillInfo,
    TextPart,
    ToolResult,
)

__all__ = ["SPILL_META_KEY", "Converted", "from_tool_result", "to_tool_result"]

SPILL_META_KEY = "io.github.spillstore/spill"
"""``_meta`` key of a rewritten result: where the whole output went (for hosts and UIs)."""


@dataclass(frozen=True, slots=True)
class Converted:
    """A ``CallToolResult`` seen as a :class:`ToolResult`, with the way back.

    Attributes:
        result: what the service takes.
        original: the MCP result it came from.
        blocks: ``id(part) -> block`` for every part made from a block.
        keep_structured: forward ``structured_content`` unchanged.
    """

    result: ToolResult
    original: types.CallToolResult
    blocks: dict[int, types.ContentBlock]
    keep_structured: bool


def _part(block: Any) -> Part:
    if isinstance(block, types.TextContent):
        return TextPart(block.text)
    if isinstance(block, types.ImageContent):
        return MediaPart(kind="image", mime_type=block.mime_type, data=block.data)
    if isinstance(block, types.AudioContent):
        return MediaPart(kind="audio", mime_type=block.mime_type, data=block.data)
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return EmbeddedText(uri=resource.uri, text=resource.text, mime_type=resource.mime_type)
        return MediaPart(
            kind="blob",
            mime_type=resource.mime_type or "application/octet-stream",
            data=resource.blob,
            uri=resource.uri,
        )
    if isinstance(block, types.ResourceLink):
        return ResourceLink(
            uri=block.uri, name=block.name, mime_type=block.mime_type, size=block.size
        )
    kind = getattr(block, "type", type(block).__name__)
    return TextPart(f"[content dropped: content block of unknown type {str(kind)[:80]!r}]")


def _duplicates_text(structured: Any, texts: Sequence[str]) -> bool:
    """Is ``structured`` already in the text (without serializing it if avoidable)?"""
    if isinstance(structured, dict) and len(structured) == 1:
        value = next(iter(structured.values()))
        if isinstance(value, str) and any(text is value or text == value for text in texts):
            return True
    return False


def to_tool_result(result: types.CallToolResult, *, structured_budget: int) -> Converted:
    """Convert an MCP result for the service, deciding what happens to structured content.

    Args:
        result: the upstream's result.
        structured_budget: structured content whose compact JSON is larger than this
            many bytes is not forwarded (see the module docstring).
    """
    blocks: dict[int, types.ContentBlock] = {}
    parts: list[Part] = []
    for block in result.content:
        part = _part(block)
        blocks[id(part)] = block
        parts.append(part)
    structured = result.structured_content
    keep = True
    if structured is not None:
        texts = [p.text for p in parts if isinstance(p, TextPart | EmbeddedText)]
        if _duplicates_text(structured, texts):
            # Its JSON has at least as many bytes as the string has characters.
            value = next(iter(structured.values()))
            keep = (
                len(value) <= structured_budget
                and len(pydantic_core.to_json(structured)) <= structured_budget
            )
        else:
            encoded = pydantic_core.to_json(structured)
            keep = len(encoded) <= structured_budget
            if not keep:
                parts.append(TextPart(encoded.decode("utf-8")))
    tool_result = ToolResult(
        content=parts,
        is_error=result.is_error,
        metadata=dict(result.meta or {}),
        structured=structured if keep else None,
    )
    return Converted(result=tool_result, original=result, blocks=blocks, keep_structured=keep)


def _spill_meta(info: SpillInfo) -> dict[str, Any]:
    return {
        "mode": info.mode,
        "saved": info.saved,
        "spillId": info.spill_id,
        "path": info.path,
        "totalBytes": info.total_bytes,
        "totalLines": info.total_lines,
        "sha256": info.sha256,
        "storedRanges": [list(r) for r in info.stored_ranges],
        "elidedBytes": [list(r) for r in info.elided_bytes],
    }


def from_tool_result(converted: Converted, capped: ToolResult) -> types.CallToolResult:
    """The MCP result for what the service returned.

    The original object when nothing changed; otherwise a new result whose unchanged
    blocks are the original block objects.
    """
    original = converted.original
    if capped is converted.result and converted.keep_structured:
        return original
    content: list[types.ContentBlock] = []
    for part in capped.content:
        block = converted.blocks.get(id(part))
        if block is not None:
            content.append(block)
        elif isinstance(part, TextPart):
            content.append(types.TextContent(text=part.text))
        elif isinstance(part, EmbeddedText):
            resource = types.TextResourceContents(
                uri=part.uri, text=part.text, mime_type=part.mime_type
            )
            content.append(types.EmbeddedResource(resource=resource))
        else:  # the service only makes text; anything else is an original part
            content.append(types.TextContent(text=f"[content dropped: {type(part).__name__}]"))
    meta = dict(original.meta or {})
    if capped.spill is not None:
        meta[SPILL_META_KEY] = _spill_meta(capped.spill)
    return types.CallToolResult(
        content=content,
        structured_content=original.structured_content if converted.keep_structured else None,
        is_error=original.is_error,
        _meta=meta or None,
    )
