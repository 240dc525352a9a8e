"""What the service reads back once an output is saved: the JSON shape, the lines shaped
for append mode, and the ends of an adopted file (design.md §2-§4).

A stream and a handed-over file are known by their ends while they are saved; these
reads give them what :func:`~spillstore._service.decide.prepare` gets from a whole text,
so the same output reads the same on every path. Every read is a request of the flow
(from the store) or a blocking call (from the handed-over file); a failed read gives
less, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spillstore._core.json_doc import looks_like_json
from spillstore._core.json_shape import JsonShape, json_shape
from spillstore._core.shape import LineShaper, Shaped
from spillstore._service.files import (
    FIRST_SHAPE_READ,
    SHAPE_READ,
    read_ends_of,
    shape_file,
)
from spillstore._service.flow import SLACK, STORE_FAILURES, Flow, Host, Measure, blocking, call

if TYPE_CHECKING:
    from spillstore._settings import Settings
    from spillstore._stores.meta import SpillMeta

__all__ = [
    "JSON_SHAPE_MAX_CHARS",
    "adopted_ends",
    "file_shaped",
    "shape_of",
    "stored_shape",
    "stored_shaped",
]

JSON_SHAPE_MAX_CHARS = 32 * 1024 * 1024
"""Outputs longer than this get no shape summary: parsing one whole would hold the
parsed values (several times the text) in memory; ``query_spill`` still works on them."""

JSON_SHAPE_MAX_BYTES = 2048
"""The most bytes of the shape summary in the pointer."""

JSON_SHAPE_SHARE = 8
"""The shape summary takes at most this fraction (one eighth) of the budget."""


def file_shaped(
    host: Host, path: str, saved: SpillMeta | Exception, counted: Measure | None, room: int
) -> Flow[Shaped | None]:
    """A handed-over file with its long lines cut (append mode): read back from the store
    when it holds the whole output, else from the file itself (the retention cap cut the
    spill, or the store failed), as the whole text and a stream are shaped."""
    if not isinstance(saved, Exception) and saved.complete:
        return (yield from stored_shaped(host, saved, room))
    cap = host.settings.max_line_bytes
    measured = counted if isinstance(saved, Exception) else saved
    if cap is None or measured is None or measured.invalid_utf8:
        return None
    shaper = LineShaper(max_line_bytes=cap, budget=host.settings.max_bytes)
    try:
        shaped: Shaped | None = yield blocking(shape_file, path, shaper, measured.total_bytes, room)
    except OSError:  # the file went away since: replace mode, as before
        return None
    return shaped


def adopted_ends(host: Host, path: str, meta: SpillMeta) -> Flow[tuple[bytes, bytes, bool | None]]:
    """The first and last bytes of an adopted output for its previews, and whether it ends
    with a newline when no tail is read (None: the tail tells).

    From the file when the retention cap kept less than the previews show of a whole
    text or a stream (so every path shows the same previews), else from the store.
    """
    settings = host.settings
    store = host.store
    if not meta.complete:  # the file still holds what the store did not keep
        try:
            ends = yield blocking(
                read_ends_of,
                path,
                meta.total_bytes,
                settings.head_bytes + SLACK,
                settings.tail_bytes + SLACK,
            )
        except OSError:  # gone since: what the store kept
            ends = None
        if ends is not None:
            return ends[0], ends[1], None
    (h0, h1), (t0, t1) = end_ranges(meta, settings)
    head_raw = yield call(store.read_bytes, store.aread_bytes, meta.spill_id, h0, h1)
    if t0 < t1:
        tail_raw = yield call(store.read_bytes, store.aread_bytes, meta.spill_id, t0, t1)
        return head_raw, tail_raw, None
    if not meta.total_bytes:
        return head_raw, b"", None
    # No tail kept: only the line index knows the last byte.
    index = yield call(store.line_index, store.aline_index, meta.spill_id)
    return head_raw, b"", index.total_newlines == meta.total_lines


def stored_shaped(host: Host, saved: SpillMeta, room: int) -> Flow[Shaped | None]:
    """A saved output with its long lines cut, as :func:`prepare` shapes a text: read
    back a piece at a time through a :class:`~spillstore._core.shape.LineShaper`, which
    stops reading once the shaped text is over the budget (so an output of short lines
    costs one small read). None when it does not fit ``room``, no line is cut, the
    output is not valid UTF-8 or not saved whole, or a read fails."""
    cap = host.settings.max_line_bytes
    if cap is None or not saved.complete or saved.invalid_utf8:
        return None
    shaper = LineShaper(max_line_bytes=cap, budget=host.settings.max_bytes)
    store = host.store
    offset, size = 0, FIRST_SHAPE_READ
    while offset < saved.total_bytes and not shaper.over:
        end = min(offset + size, saved.total_bytes)
        try:
            data = yield call(store.read_bytes, store.aread_bytes, saved.spill_id, offset, end)
        except STORE_FAILURES:
            return None
        shaper.feed(data)
        offset, size = end, SHAPE_READ
    return shaper.finish(room)


def stored_shape(
    host: Host, saved: SpillMeta | Exception, head_raw: bytes
) -> Flow[JsonShape | None]:
    """The shape of an output known by its ends (a stream, a file), read back from the store.

    Only for a spill saved in full, of at most :data:`JSON_SHAPE_MAX_CHARS` bytes, whose
    first significant byte can start JSON; a failed read gives no shape, never an error.
    """
    if (
        isinstance(saved, Exception)
        or not saved.complete
        or saved.total_bytes > JSON_SHAPE_MAX_CHARS
        or not looks_like_json(head_raw[:64])
    ):
        return None
    store = host.store
    try:
        data = yield call(store.read_bytes, store.aread_bytes, saved.spill_id, 0, saved.total_bytes)
    except STORE_FAILURES:
        return None
    return shape_of([data.decode("utf-8", "replace")], host.settings.max_bytes)


def shape_of(texts: Sequence[str], budget: int) -> JsonShape | None:
    """The JSON shape for the pointer, or None for a document nested too deeply to walk
    (the decoders recurse per level): hostile JSON never fails a tool call."""
    try:
        return json_shape(texts, min(JSON_SHAPE_MAX_BYTES, budget // JSON_SHAPE_SHARE))
    except RecursionError:
        return None


def end_ranges(meta: SpillMeta, settings: Settings) -> tuple[tuple[int, int], tuple[int, int]]:
    """The stored byte ranges to read for the head and tail previews (with a little slack)."""
    first_start, first_end = meta.stored_ranges[0] if meta.stored_ranges else (0, 0)
    last_start, last_end = meta.stored_ranges[-1] if meta.stored_ranges else (0, 0)
    total = meta.total_bytes
    # The retention cap kept no head when its share could not hold the first character.
    head_range = (0, min(first_end, settings.head_bytes + SLACK) if first_start == 0 else 0)
    if last_end < total:  # the retention cap kept no tail (it could not hold a character)
        return head_range, (total, total)
    tail_range = (max(last_start, total - settings.tail_bytes - SLACK), total)
    return head_range, tail_range
