"""What the service's flow accepts: a clear ConfigError for anything else, never a
TypeError from deep inside the flow. Pure."""

from __future__ import annotations

import os
from collections.abc import Sequence

from spillstore._content import EmbeddedText, MediaPart, ResourceLink, TextPart, ToolResult
from spillstore._errors import ConfigError

__all__ = ["check_result"]


def check_result(result: object) -> None:
    """A ConfigError naming what the flow cannot read (not a TypeError from deep inside);
    a spill-exempt result passes untouched, whatever it holds."""
    if not isinstance(result, ToolResult | str):
        hint = (
            " (bytes: stream them through service.accumulator())"
            if isinstance(result, bytes | bytearray | memoryview)
            else ""
        )
        raise ConfigError(
            f"a tool result must be a str or a ToolResult; got {type(result).__name__}{hint}",
            field="result",
        )
    if isinstance(result, str) or result.spill_exempt:
        return
    content: object = result.content
    if isinstance(content, str | bytes) or not isinstance(content, Sequence):
        raise ConfigError(
            f"ToolResult.content must be a sequence of parts; got {type(content).__name__}",
            field="content",
        )
    for part in content:
        if not isinstance(part, TextPart | EmbeddedText | MediaPart | ResourceLink):
            raise ConfigError(
                f"ToolResult.content holds a {type(part).__name__}; parts are TextPart,"
                " EmbeddedText, MediaPart or ResourceLink",
                field="content",
            )
        if isinstance(part, MediaPart) and not isinstance(part.data, bytes | str):
            raise ConfigError(f"MediaPart.data: got {type(part.data).__name__}", field="content")
        if isinstance(part, TextPart | EmbeddedText) and not isinstance(part.text, str):
            raise ConfigError(
                f"{type(part).__name__}.text must be a str; got {type(part.text).__name__}",
                field="content",
            )
    for field, value, kinds, wanted in (
        ("suffix", result.suffix, str, "a str"),
        ("full_output_path", result.full_output_path, str | os.PathLike, "a path"),
    ):
        if value is not None and not isinstance(value, kinds):
            got = type(value).__name__
            raise ConfigError(
                f"ToolResult.{field} must be {wanted} or None; got {got}", field=field
            )
