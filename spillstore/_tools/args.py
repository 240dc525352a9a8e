"""The arguments of the recovery tools: pydantic models, limits and JSON schemas.

Every argument a model sends is validated strictly (no bool, float or numeric string
where an int is expected) against these models; their field descriptions are what the
model reads in the tools' schemas, and the CLI reads its defaults and help from them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

from spillstore._core.pointer import DEFAULT_BYTE_PAGE, DEFAULT_READ_LIMIT

__all__ = [
    "DEFAULT_BYTE_PAGE",
    "DEFAULT_HEAD_LIMIT",
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_QUERY_LIMIT",
    "DEFAULT_READ_LIMIT",
    "GREP_DESCRIPTION",
    "LIST_DESCRIPTION",
    "MAX_CONTEXT_LINES",
    "MAX_EXPRESSION_CHARS",
    "MAX_PATTERN_CHARS",
    "MAX_QUERY_LIMIT",
    "MAX_READ_BYTES",
    "MAX_READ_LIMIT",
    "MAX_SAFE_INT",
    "MAX_SPILL_CHARS",
    "QUERY_DESCRIPTION",
    "READ_DESCRIPTION",
    "SPECS",
    "GrepArgs",
    "ListArgs",
    "QueryArgs",
    "ReadArgs",
    "ToolArgs",
    "ToolSpec",
    "parameters",
]

MAX_SAFE_INT = 2**53 - 1
"""The largest integer every JSON parser reads exactly; larger offsets are refused."""

MAX_READ_LIMIT = 2000
"""The most lines one Read page may ask for."""

MAX_READ_BYTES = 1_000_000
"""The most bytes a model may ask for (pages are bounded by ``max_page_bytes`` anyway)."""

DEFAULT_HEAD_LIMIT = 100
"""Matching lines (or spills, or counts) per Grep page by default."""

MAX_CONTEXT_LINES = 50
"""The most context lines before or after a match."""

MAX_PATTERN_CHARS = 2000
"""The longest pattern accepted."""

MAX_SPILL_CHARS = 4096
"""The longest spill id or path accepted (``PATH_MAX`` on Linux)."""

DEFAULT_LIST_LIMIT = 50
"""Spills per List page by default."""

DEFAULT_QUERY_LIMIT = 20
"""Results per Query page by default."""

MAX_QUERY_LIMIT = 1000
"""The most results one Query page may ask for (the page size bounds it too)."""

MAX_EXPRESSION_CHARS = 4000
"""The longest jq expression accepted."""


_Count = Annotated[StrictInt, Field(ge=0, le=MAX_SAFE_INT)]


class ToolArgs(BaseModel):
    """Base of the tools' argument models: strict, frozen, no unknown fields."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ReadArgs(ToolArgs):
    """Arguments of ``read_spill`` (validated strictly: no bool, float or numeric string)."""

    spill: StrictStr = Field(
        min_length=1,
        max_length=MAX_SPILL_CHARS,
        description="The spill id (e.g. bash-0123456789abcdef0123) or its path.",
    )
    offset: StrictInt = Field(
        default=1,
        ge=-MAX_SAFE_INT,
        le=MAX_SAFE_INT,
        description="First line to show, 1-based; negative counts from the end "
        "(-1 is the last line). Ignored when byte_offset is given.",
    )
    limit: StrictInt = Field(
        default=DEFAULT_READ_LIMIT,
        ge=1,
        le=MAX_READ_LIMIT,
        description=f"How many lines to show (at most {MAX_READ_LIMIT}).",
    )
    byte_offset: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_SAFE_INT,
        description="Read by bytes from this 0-based byte offset instead of by lines "
        "(for very long lines).",
    )
    max_bytes: StrictInt | None = Field(
        default=None,
        ge=4,
        le=MAX_READ_BYTES,
        description=f"With byte_offset: how many bytes to show (default {DEFAULT_BYTE_PAGE}). "
        "With offset: the most bytes of lines to show.",
    )

    @field_validator("offset")
    @classmethod
    def _not_zero(cls, value: int) -> int:
        if value == 0:
            raise ValueError("offset is 1-based: use 1 for the first line, -1 for the last")
        return value


class GrepArgs(ToolArgs):
    """Arguments of ``grep_spill``."""

    pattern: StrictStr = Field(
        min_length=1,
        max_length=MAX_PATTERN_CHARS,
        description="RE2 regular expression (no lookaround or backreferences), or a "
        "literal string with literal=true. ^ and $ match at line boundaries.",
    )
    spill: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SPILL_CHARS,
        description="Search only this spill (id or path); default: every spill of the session.",
    )
    ignore_case: StrictBool = Field(default=False, description="Match case-insensitively.")
    context: StrictInt = Field(
        default=0,
        ge=0,
        le=MAX_CONTEXT_LINES,
        description="Lines of context before and after each matching line.",
    )
    before: StrictInt | None = Field(
        default=None, ge=0, le=MAX_CONTEXT_LINES, description="Lines before (overrides context)."
    )
    after: StrictInt | None = Field(
        default=None, ge=0, le=MAX_CONTEXT_LINES, description="Lines after (overrides context)."
    )
    output_mode: Literal["content", "spills", "count"] = Field(
        default="content",
        description='"content": matching lines with line numbers; "spills": the spills '
        'that match; "count": matching lines per spill.',
    )
    head_limit: StrictInt | None = Field(
        default=DEFAULT_HEAD_LIMIT,
        ge=0,
        le=MAX_SAFE_INT,
        description="Show at most this many results (matching lines, spills or counts); "
        "0 or null: no limit (the page size still bounds the output).",
    )
    offset: _Count = Field(default=0, description="Skip this many results (for paging).")
    literal: StrictBool = Field(
        default=False, description="Treat the pattern as a literal string, not a regex."
    )


class ListArgs(ToolArgs):
    """Arguments of ``list_spills``."""

    session: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="The session to list; default: this session.",
    )
    offset: _Count = Field(
        default=0, description="Skip this many of the newest spills (for paging back)."
    )
    limit: StrictInt = Field(
        default=DEFAULT_LIST_LIMIT, ge=1, le=1000, description="How many spills to show."
    )


class QueryArgs(ToolArgs):
    """Arguments of ``query_spill``."""

    spill: StrictStr = Field(
        min_length=1,
        max_length=MAX_SPILL_CHARS,
        description="The spill id (e.g. fetch-0123456789abcdef0123) or its path; it must "
        "hold JSON or JSON Lines.",
    )
    expression: StrictStr = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_CHARS,
        description="A jq expression, e.g. '.items[] | select(.name == \"x\")', "
        "'.items | length', 'keys'. JSON Lines: it runs on each line.",
    )
    offset: _Count = Field(default=0, description="Skip this many results (for paging).")
    limit: StrictInt = Field(
        default=DEFAULT_QUERY_LIMIT,
        ge=1,
        le=MAX_QUERY_LIMIT,
        description=f"Show at most this many results (at most {MAX_QUERY_LIMIT}).",
    )

    @field_validator("expression")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a jq expression never contains a NUL character")
        return value


READ_DESCRIPTION = (
    "Read a saved tool output (a spill) that was too large to show in full. Page it by "
    "lines (offset: 1-based first line, negative from the end; limit: line count) or, "
    "for very long lines, by bytes (byte_offset, max_bytes). The result names the exact "
    "line and byte range shown and ends with the exact next call to make."
)
GREP_DESCRIPTION = (
    "Search saved tool outputs (spills) with an RE2 regular expression or a literal "
    "string: one spill, or every spill of this session. Returns matching lines with "
    "their line numbers (context lines optional), the spills that match, or counts. "
    "Results are paged with head_limit and offset; the result says the next call."
)
LIST_DESCRIPTION = (
    "List the saved tool outputs (spills) of this session, newest last: id, tool, call "
    "id, size in bytes and lines, whether it was saved in full, and its first line."
)

QUERY_DESCRIPTION = (
    "Query a saved tool output (a spill) that holds JSON or JSON Lines with a jq "
    "expression. Each result comes back as compact JSON on its own line, with its exact "
    "[start, end) byte range in the spill when it is a value of the document (the Read "
    "tool with byte_offset shows those bytes), and its line number for JSON Lines. Results "
    "are paged with offset and limit; the result says the next call."
)


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


@functools.cache
def parameters(model: type[ToolArgs]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, without pydantic's titles."""
    schema: dict[str, Any] = _strip_titles(model.model_json_schema())
    return schema


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One recovery tool, as every integration presents it.

    The registry :data:`SPECS` is the one list of the recovery tools: ``SpillTools``
    builds its schemas and dispatch from it, and the MCP server, the proxy, the adapters
    and the loop ask ``SpillTools`` for the names, so a new tool is added here (and in
    ``SpillTools``'s dispatch), not in every integration.

    Attributes:
        default_name: the tool's name unless the host renames it (``read_spill``).
        title: a short human title (MCP shows it).
        description: what the model reads about the tool.
        args: the argument model (its JSON schema is the tool's input schema).
    """

    default_name: str
    title: str
    description: str
    args: type[ToolArgs]


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("read_spill", "Read a saved tool output", READ_DESCRIPTION, ReadArgs),
    ToolSpec("grep_spill", "Search saved tool outputs", GREP_DESCRIPTION, GrepArgs),
    ToolSpec("list_spills", "List saved tool outputs", LIST_DESCRIPTION, ListArgs),
    ToolSpec("query_spill", "Query a saved JSON tool output", QUERY_DESCRIPTION, QueryArgs),
)
"""The recovery tools, in the order their schemas are listed."""
