"""Byte-exact, UTF-8-safe cutting of text. Pure: no I/O, no clock, no environment.

Every size in spillstore is a count of UTF-8 bytes. A Python ``str`` may hold lone
surrogates (``"\\ud800"``), which have no UTF-8 encoding; spillstore encodes each one as
U+FFFD REPLACEMENT CHARACTER, three bytes, the same width ``surrogatepass`` would give
it. So the size of a string never depends on whether it holds surrogates, encoding never
raises, and every cut is valid UTF-8 that decodes strictly.

The cuts are O(n) in the bytes kept, not in the input: ``head(s, 4096)`` of a 100 MB
string looks at no more than 4,096 characters of it.
"""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = [
    "ENCODE_ERRORS",
    "continues_character",
    "encode",
    "hash_and_size",
    "head",
    "head_cut",
    "is_continuation",
    "iter_encoded",
    "strict",
    "tail",
    "tail_cut",
    "utf8_size",
]

ENCODE_ERRORS = "spillstore.replace"
"""The codec error handler that turns each lone surrogate into U+FFFD."""

ENCODE_CHUNK_CHARS = 1 << 15
"""Characters encoded at a time when a whole string must be measured or hashed.

Small enough that the slice and its encoding stay in a core's L2 cache (at most 128 KiB
of UTF-8), which measured up to 4x faster than 256Ki-character pieces while the other
core was busy; large enough that the per-chunk overhead is invisible."""

_T = TypeVar("_T", str, bytes)


_FFFD_UTF8 = "\ufffd".encode()


def _replace_with_fffd(exc: UnicodeError) -> tuple[bytes, int]:
    # The UTF-8 encoder refuses a non-ASCII *str* replacement, so hand it the bytes.
    if isinstance(exc, UnicodeEncodeError):
        return _FFFD_UTF8 * (exc.end - exc.start), exc.end
    raise exc


codecs.register_error(ENCODE_ERRORS, _replace_with_fffd)


def encode(text: str) -> bytes:
    """Encode ``text`` as UTF-8, lone surrogates becoming U+FFFD."""
    return text.encode("utf-8", ENCODE_ERRORS)


def strict(text: str) -> str:
    """``text`` as strict UTF-8: each lone surrogate becomes U+FFFD (same byte size);
    ``text`` itself when it has none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return encode(text).decode("utf-8")
    return text


def iter_encoded(text: str, chunk_chars: int = ENCODE_CHUNK_CHARS) -> Iterator[bytes]:
    """Yield the UTF-8 encoding of ``text`` in pieces, never holding a second full copy.

    Each piece is a whole number of characters, so no piece splits a code point.
    """
    if text.isascii() and len(text) <= chunk_chars:
        yield text.encode("ascii")
        return
    for start in range(0, len(text), chunk_chars):
        yield text[start : start + chunk_chars].encode("utf-8", ENCODE_ERRORS)


def utf8_size(value: str | bytes) -> int:
    """Return the size of ``value`` in UTF-8 bytes.

    ``bytes`` and ASCII ``str`` cost O(1) (CPython knows a string is ASCII without
    scanning it); other strings take one chunked pass with bounded extra memory.
    """
    if isinstance(value, bytes) or value.isascii():
        return len(value)
    return sum(map(len, iter_encoded(value)))


def hash_and_size(value: str | bytes | Iterable[str | bytes]) -> tuple[str, int]:
    """Return the hex sha256 and the UTF-8 size of ``value`` in one chunked pass.

    ``value`` may also be an iterable of pieces, hashed and counted as if joined.
    """
    digest = hashlib.sha256()
    size = 0
    for chunk in (value,) if isinstance(value, str | bytes) else value:
        for piece in (chunk,) if isinstance(chunk, bytes) else iter_encoded(chunk):
            digest.update(piece)
            size += len(piece)
    return digest.hexdigest(), size


def is_continuation(byte: int) -> bool:
    """Whether ``byte`` continues a UTF-8 sequence (``10xxxxxx``) rather than starting one."""
    return byte & 0xC0 == 0x80


def _sequence_length(lead: int) -> int:
    """Bytes of the UTF-8 sequence ``lead`` starts; 0 when it cannot start one."""
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _spanning(data: bytes | memoryview, cut: int) -> tuple[int, int] | None:
    """The character that begins before ``cut`` and ends after it, as ``(start, end)``.

    Only a *valid* UTF-8 sequence spans a cut: continuation bytes at ``cut`` that no
    lead byte before it validly starts are stray bytes, each an invalid byte of its
    own, and a cut before them splits nothing. A sequence that ``data`` ends before
    completing counts as spanning (the bytes that would tell are not there).
    """
    if cut >= len(data) or not is_continuation(data[cut]):
        return None
    for back in range(1, 4):
        start = cut - back
        if start < 0 or not is_continuation(data[start]):
            break
    else:
        return None
    if start < 0:
        return None
    length = _sequence_length(data[start])
    end = start + length
    if length <= back:
        return None
    try:  # a sequence data ends too soon to complete is judged by what is there
        codecs.getincrementaldecoder("utf-8")().decode(bytes(data[start:end]), final=False)
    except UnicodeDecodeError:
        return None
    return start, min(end, len(data))


def continues_character(before: bytes, after: bytes) -> int:
    """How many leading bytes of ``after`` finish a valid character begun in ``before``.

    ``before`` is the (up to 3) bytes just ahead of an offset, ``after`` the bytes from
    it. Continuation bytes at the offset are *inside a character* only when a lead byte
    in ``before`` and they form one valid UTF-8 sequence; otherwise they are stray
    (invalid) bytes of their own, and 0 is returned: they must be shown, not skipped.
    """
    span = _spanning(before + after, len(before))
    return 0 if span is None else span[1] - len(before)


def head_cut(data: bytes | memoryview, max_bytes: int) -> int:
    """Where to cut ``data`` so that ``data[:cut]`` is at most ``max_bytes`` whole chars.

    The cut moves back only to keep a valid character whole: stray continuation bytes
    are invalid bytes of their own, and cutting before or between them splits nothing.
    """
    if len(data) <= max_bytes:
        return len(data)
    span = _spanning(data, max_bytes)
    return max_bytes if span is None else span[0]


def tail_cut(data: bytes | memoryview, max_bytes: int) -> int:
    """Where to cut ``data`` so that ``data[cut:]`` is at most ``max_bytes`` whole chars."""
    if len(data) <= max_bytes:
        return 0
    cut = len(data) - max_bytes
    span = _spanning(data, cut)
    return cut if span is None else span[1]


def head(value: _T, max_bytes: int) -> _T:
    """Return the longest prefix of ``value`` that fits in ``max_bytes`` UTF-8 bytes.

    Never splits a code point. A ``str`` result is valid UTF-8 (lone surrogates become
    U+FFFD); a ``bytes`` result is a prefix of the input (invalid UTF-8 in the input is
    kept as it is, and a cut inside it lands at ``max_bytes``).
    """
    if max_bytes <= 0:
        return value[:0]
    if isinstance(value, bytes):
        return value[: head_cut(value, max_bytes)]
    prefix = value[:max_bytes]
    if prefix.isascii():
        return prefix
    data = encode(prefix)
    return _same_if_equal(value, data[: head_cut(data, max_bytes)].decode("utf-8"))


def tail(value: _T, max_bytes: int) -> _T:
    """Return the longest suffix of ``value`` that fits in ``max_bytes`` UTF-8 bytes.

    The mirror of :func:`head`, with the same guarantees.
    """
    if max_bytes <= 0:
        return value[:0]
    if isinstance(value, bytes):
        return value[tail_cut(value, max_bytes) :]
    suffix = value[-max_bytes:]
    if suffix.isascii():
        return suffix
    data = encode(suffix)
    return _same_if_equal(value, data[tail_cut(data, max_bytes) :].decode("utf-8"))


def _same_if_equal(value: str, cut: str) -> str:
    """``value`` itself when nothing was cut or replaced (no copy reaches the caller)."""
    return value if len(cut) == len(value) and cut == value else cut
