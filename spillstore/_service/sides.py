"""Side spills: what a cut result holds besides its text, saved so that nothing is lost.

A result that must be cut may carry blobs (media parts the model cannot take) and a
suffix too long to show whole. Neither belongs in the text spill, whose bytes and
ranges are the output's, so each becomes a spill of its own: a blob as its decoded
bytes, a long suffix as its UTF-8 text. The model sees a short notice naming that
spill, and reads it with the Read tool in byte mode from ``byte_offset=0``.

Everything here but :func:`side_flow` is pure, and every notice is bounded, so the
renderer can count the notices toward the budget.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spillstore._content import MediaPart, Part, TextPart, ToolResult
from spillstore._core.cap import strict_parts
from spillstore._core.pointer import DEFAULT_BYTE_PAGE, printable
from spillstore._core.ranges import format_ranges
from spillstore._core.utf8 import encode, head, strict, tail, utf8_size
from spillstore._service.flow import STORE_FAILURES, Flow, Host, call

if TYPE_CHECKING:
    from spillstore._stores.meta import SpillMeta

__all__ = [
    "blob_bytes",
    "blob_cost",
    "blob_room",
    "is_blob",
    "keep_text_flow",
    "side_flow",
    "spill_blobs",
    "suffix_cap",
    "suffix_flow",
    "suffix_view",
]

log = logging.getLogger("spillstore")

MAX_BLOB_NOTICES_SHARE = 4
"""Blob notices take at most ``max_bytes // 4``; further blobs share one closing notice."""

_REASON_BYTES = 120
"""The most bytes of a store error quoted in a notice."""


def is_blob(part: Part, host: Host) -> bool:
    """Whether ``part`` is media the model cannot take (a blob, or a kind not delivered)."""
    return isinstance(part, MediaPart) and part.kind not in host.deliverable_media


def blob_bytes(part: MediaPart) -> bytes:
    """A blob's decoded bytes: base64 text decoded, raw bytes as they are.

    Text that is not base64 is saved as its UTF-8 text: it is what the tool sent.
    """
    if not isinstance(part.data, str):
        return bytes(part.data)
    try:
        return base64.b64decode(part.data, validate=True)
    except (binascii.Error, ValueError):
        return encode(part.data)


def blob_cost(part: MediaPart) -> int:
    """What a blob weighs in the budget: its size as carried (base64 text for raw bytes)."""
    if isinstance(part.data, str):
        return utf8_size(part.data)
    return 4 * ((len(part.data) + 2) // 3)


def blob_room(max_bytes: int, blobs: int) -> int:
    """The room blob notices may take: none without blobs, else a quarter of the budget."""
    return max_bytes // MAX_BLOB_NOTICES_SHARE if blobs else 0


def side_flow(
    host: Host, data: bytes | str, args: Mapping[str, Any]
) -> Flow[SpillMeta | Exception]:
    """Save ``data`` as a spill of its own; the store's error when it could not be."""
    store = host.store
    try:
        meta: SpillMeta = yield call(store.put, store.aput, data, **args)
    except STORE_FAILURES as exc:  # a side spill must not fail the tool call either
        log.warning("spillstore: could not save part of %s: %s", args.get("tool_name"), exc)
        return exc
    return meta


def _where(host: Host, saved: SpillMeta | Exception) -> str:
    """How a notice names a side spill, or why there is none."""
    if isinstance(saved, Exception):
        reason = head(strict(f"{type(saved).__name__}: {saved}"), _REASON_BYTES)
        return f"NOT saved ({reason})"
    kept = "" if saved.complete else f" in part (bytes {format_ranges(saved.stored_ranges)})"
    read = f'{host.read_tool}(spill="{saved.spill_id}", byte_offset=0)'
    return f"saved{kept} as spill {saved.spill_id}; read it with {read}"


def blob_notice(host: Host, part: MediaPart, size: int, saved: SpillMeta | Exception) -> str:
    """The notice that stands where a blob was: its spill, MIME type and decoded size."""
    uri = f", uri {printable(part.uri, 100)}" if part.uri else ""
    mime = printable(part.mime_type, 60)
    return f"[{printable(part.kind, 20)} {mime}, {size} bytes{uri}, {_where(host, saved)}]"


def spill_blobs(host: Host, parts: list[Part], args: Mapping[str, Any]) -> Flow[list[Part]]:
    """Save each blob of ``parts`` as a spill; return the parts with notices in their place.

    The notices stay within ``max_bytes // MAX_BLOB_NOTICES_SHARE``: blobs past that
    are saved all the same and named together by one closing notice.
    """
    closing = _closing_notice(10**6, 10**6)
    room = blob_room(host.settings.max_bytes, 1) - utf8_size(closing) - 1
    out: list[Part] = []
    used = 0
    unnamed = [0, 0]  # blobs past the notices' room: saved, not saved
    for part in parts:
        if not (isinstance(part, MediaPart) and is_blob(part, host)):
            out.append(part)
            continue
        data = blob_bytes(part)
        saved = yield from side_flow(host, data, args)
        notice = blob_notice(host, part, len(data), saved)
        if used + utf8_size(notice) + 1 > room:
            unnamed[isinstance(saved, Exception)] += 1
            continue
        used += utf8_size(notice) + 1
        out.append(TextPart(notice))
    if any(unnamed):
        out.append(TextPart(_closing_notice(*unnamed)))
    return out


def _closing_notice(saved: int, failed: int) -> str:
    """The one notice for the blobs past the notices' room."""
    return (
        f"[{saved + failed} more blob(s), not named here: {saved} saved as spills of their"
        f" own (the spill list of this session shows them), {failed} NOT saved (the store"
        " failed)]"
    )


def suffix_cap(max_bytes: int) -> int:
    """The most bytes of a suffix shown: a quarter of the budget."""
    return max_bytes // 4


def suffix_view(
    suffix: str, max_bytes: int, host: Host | None, saved: SpillMeta | Exception | None
) -> str:
    """The suffix the model sees: whole when it fits its cap, else its ends and a notice.

    The notice names the elided bytes of the suffix and the spill holding the whole
    suffix (``saved``; ``None`` while not yet saved, when only the size matters), so
    the elided bytes read back with the Read tool in byte mode.
    """
    suffix = strict(suffix)
    data = encode(suffix)
    cap = suffix_cap(max_bytes)
    if len(data) <= cap:
        return suffix
    big = 10 ** len(str(len(data)))
    widest = max(
        utf8_size(_suffix_marker(big, big, big, "x" * 100, host)),
        utf8_size(_suffix_marker(big, big, big, OSError("x" * _REASON_BYTES), host)),
    )
    room = max(0, cap - widest - 2)
    first = head(data, room * 2 // 3)
    last = tail(data, room - len(first))
    marker = _suffix_marker(len(first), len(data) - len(last), len(data), saved, host)
    return f"{first.decode('utf-8')}\n{marker}\n{last.decode('utf-8')}"


def _suffix_marker(
    start: int, end: int, total: int, saved: SpillMeta | Exception | str | None, host: Host | None
) -> str:
    head_text = f"[... suffix bytes [{start}, {end}) of {total} not shown;"
    if saved is None or host is None:
        return f"{head_text} the whole suffix is saved with the output]"
    if isinstance(saved, Exception):
        reason = head(strict(f"{type(saved).__name__}: {saved}"), _REASON_BYTES)
        return f"{head_text} the whole suffix could not be saved ({reason})]"
    spill = saved if isinstance(saved, str) else saved.spill_id  # a str: sizing only
    read = f'{host.read_tool}(spill="{spill}", byte_offset={start}, max_bytes={DEFAULT_BYTE_PAGE})'
    return f"{head_text} the whole suffix is saved as spill {spill}: {read}]"


def suffix_flow(host: Host, suffix: str, args: Mapping[str, Any]) -> Flow[str]:
    """The suffix to show; a suffix over its cap is first saved whole as a spill."""
    if utf8_size(suffix) <= suffix_cap(host.settings.max_bytes):
        return strict(suffix)
    saved = yield from side_flow(host, strict(suffix), args)
    return suffix_view(suffix, host.settings.max_bytes, host, saved)


def keep_text_flow(host: Host, result: ToolResult, args: Mapping[str, Any]) -> Flow[ToolResult]:
    """A result whose text fits beside its notices: the text stays, the rest is spilled.

    Each blob becomes a spill of its own and a notice in its place, a suffix over its
    cap becomes its view (:func:`suffix_view`), at the end; the text parts stay as they
    are (made strict UTF-8). The caller checked that the text, the suffix's view and
    the notices' room fit the budget together.
    """
    parts = list(strict_parts(result.content))
    content = yield from spill_blobs(host, parts, args)
    suffix = yield from suffix_flow(host, result.suffix or "", args)
    if suffix:
        content.append(TextPart(suffix))
    return dataclasses.replace(result, content=tuple(content), suffix=None)
