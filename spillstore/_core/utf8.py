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
    "encode",
    "hash_and_size",
    "head",
    "head_cut",
    "is_continuation",
    "iter_encoded",
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


def head_cut(data: bytes | memoryview, max_bytes: int) -> int:
    """Where to cut ``data`` so that ``data[:cut]`` is at most ``max_bytes`` whole chars."""
    if len(data) <= max_bytes:
        return len(data)
    cut = max_bytes
    # A code point is at most 4 bytes, so at most 3 continuation bytes need skipping.
    # More than that means the data is not UTF-8 there; cut at the limit then.
    for back in range(4):
        if cut - back < 0:
            break
        if not is_continuation(data[cut - back]):
            return cut - back
    return cut


def tail_cut(data: bytes | memoryview, max_bytes: int) -> int:
    """Where to cut ``data`` so that ``data[cut:]`` is at most ``max_bytes`` whole chars."""
    if len(data) <= max_bytes:
        return 0
    cut = len(data) - max_bytes
    for ahead in range(4):
        if cut + ahead >= len(data):
            return len(data)
        if not is_continuation(data[cut + ahead]):
            return cut + ahead
    return cut


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
    return data[: head_cut(data, max_bytes)].decode("utf-8")


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
    return data[tail_cut(data, max_bytes) :].decode("utf-8")
