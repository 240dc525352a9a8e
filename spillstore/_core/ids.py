"""Spill ids and session names: what may name a spill, and how ids are made. Pure.

An id is ``<stem>-<20 hex digits>``: a readable stem from the tool name and a digest of
everything the spill records except the time. Names are validated on every read, so an
id or a session can never carry ``/``, ``..``, NUL or anything else into a path or key.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import TypeGuard

from spillstore._errors import ConfigError, InvalidSpillId

__all__ = [
    "ID_DIGEST_HEX",
    "SPILL_ID_PATTERN",
    "STEM_MAX_CHARS",
    "is_session",
    "is_spill_id",
    "make_spill_id",
    "sanitize_stem",
    "validate_session",
    "validate_spill_id",
]

STEM_MAX_CHARS = 32
"""Longest readable stem of a spill id (the sanitized tool name)."""

ID_DIGEST_HEX = 20
"""Hex digits of the content-derived part of a spill id (80 bits)."""

SPILL_ID_PATTERN = rf"[a-z0-9_]{{1,{STEM_MAX_CHARS}}}-[0-9a-f]{{{ID_DIGEST_HEX}}}"
"""The regular expression of a spill id (stores check many ids in one match)."""
_SPILL_ID_RE = re.compile(SPILL_ID_PATTERN)
_SESSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_STEM_DROP = re.compile(r"[^a-z0-9_]+")
_STEM_RUNS = re.compile(r"_{2,}")


def is_spill_id(value: object) -> TypeGuard[str]:
    """Return whether ``value`` is a string spillstore could have issued as a spill id."""
    return isinstance(value, str) and _SPILL_ID_RE.fullmatch(value) is not None


def validate_spill_id(value: object) -> str:
    """Return ``value`` if it is a well-formed spill id.

    Raises:
        InvalidSpillId: it is not a string of the form ``<stem>-<20 hex digits>``
            (so it can never carry ``/``, ``..``, NUL or anything else into a path).
    """
    if is_spill_id(value):
        return value
    shown = repr(value)[:80]
    raise InvalidSpillId(
        f"{shown} is not a spill id (expected <stem>-<{ID_DIGEST_HEX} hex digits>, "
        f"e.g. bash-0123456789abcdef0123)",
        spill_id=str(value)[:200],
    )


def is_session(value: object) -> TypeGuard[str]:
    """Return whether ``value`` is an acceptable session name (see :func:`validate_session`)."""
    return isinstance(value, str) and bool(_SESSION_RE.fullmatch(value)) and ".." not in value


def validate_session(value: object) -> str:
    """Return ``value`` if it is an acceptable session name.

    A session is 1-64 characters of ``[A-Za-z0-9._-]`` starting with a letter or digit,
    and never contains ``..``.

    Raises:
        ConfigError: it is not.
    """
    if is_session(value):
        return value
    raise ConfigError(
        f"invalid session name {repr(value)[:80]}: use 1-64 characters of "
        "[A-Za-z0-9._-], starting with a letter or digit, without '..'",
        field="session",
    )


def sanitize_stem(tool_name: str) -> str:
    """Turn a tool name into the readable stem of a spill id: ``[a-z0-9_]{1,32}``.

    Anything outside ``[a-z0-9_]`` becomes ``_`` (runs collapsed, ends stripped); an empty
    result becomes ``"tool"``. The stem is for humans only: uniqueness comes from the
    digest part of the id.
    """
    stem = _STEM_RUNS.sub("_", _STEM_DROP.sub("_", tool_name.lower())).strip("_")
    stem = stem[:STEM_MAX_CHARS].rstrip("_")
    return stem or "tool"


def make_spill_id(
    *,
    session: str,
    tool_name: str,
    tool_call_id: str,
    sha256: str,
    total_bytes: int,
    stored_ranges: Sequence[tuple[int, int]],
    suffix: str | None,
    media_notes: Sequence[str],
) -> str:
    """Derive a spill id from everything a spill records, except the time.

    Content-derived ids keep the model-facing pointer deterministic (the same result in
    the same session gives the same id and path, so prompt caches keep hitting), and make
    a second identical put idempotent: one id names one content, never two.
    """
    material = json.dumps(
        [
            session,
            tool_name,
            tool_call_id,
            sha256,
            total_bytes,
            [list(r) for r in stored_ranges],
            suffix,
            list(media_notes),
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(material.encode("ascii")).hexdigest()[:ID_DIGEST_HEX]
    return f"{sanitize_stem(tool_name)}-{digest}"
