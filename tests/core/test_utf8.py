"""Properties of the byte-exact UTF-8 cutting core."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spillstore._core.utf8 import (
    continues_character,
    encode,
    hash_and_size,
    head,
    head_cut,
    iter_encoded,
    tail,
    tail_cut,
    utf8_size,
)
from tests.strategies import hostile_text, raw_bytes

MANY = settings(max_examples=2000)
caps = st.integers(min_value=0, max_value=300)


def _width(ch: str) -> int:
    """UTF-8 width of one code point, lone surrogates counted as U+FFFD (3 bytes)."""
    return len(ch.encode("utf-8", "surrogatepass"))


@MANY
@given(hostile_text)
@example("\ud800")
@example("a\U0001f600")
def test_size_counts_surrogates_as_three_bytes(text: str) -> None:
    """utf8_size counts every code point by its UTF-8 width, a lone surrogate as 3."""
    assert utf8_size(text) == sum(map(_width, text)) == len(encode(text))


@MANY
@given(hostile_text)
def test_encode_is_strict_utf8_with_fffd_for_surrogates(text: str) -> None:
    """encode() never raises and gives strict UTF-8, surrogates becoming U+FFFD."""
    decoded = encode(text).decode("utf-8")
    assert decoded == "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


@MANY
@given(hostile_text, st.integers(min_value=1, max_value=7))
def test_chunked_encoding_equals_whole_encoding(text: str, chunk: int) -> None:
    """Encoding in pieces of any size gives the same bytes, and the hash of the whole."""
    assert b"".join(iter_encoded(text, chunk)) == encode(text)
    assert hash_and_size(text) == (hashlib.sha256(encode(text)).hexdigest(), len(encode(text)))


@MANY
@given(hostile_text, caps)
def test_str_head_is_longest_fitting_prefix(text: str, cap: int) -> None:
    """head() of a str is a strict-UTF-8 prefix within the cap that no longer prefix beats."""
    cut = head(text, cap)
    data = encode(cut)
    assert len(data) <= cap
    assert encode(text).startswith(data)
    data.decode("utf-8")  # strict: never a split code point
    if len(cut) < len(text):
        assert len(data) + _width(text[len(cut)]) > cap


@MANY
@given(hostile_text, caps)
def test_str_tail_is_longest_fitting_suffix(text: str, cap: int) -> None:
    """tail() of a str is a strict-UTF-8 suffix within the cap that no longer suffix beats."""
    cut = tail(text, cap)
    data = encode(cut)
    assert len(data) <= cap
    assert encode(text).endswith(data)
    data.decode("utf-8")
    if len(cut) < len(text):
        assert len(data) + _width(text[len(text) - len(cut) - 1]) > cap


@MANY
@given(hostile_text)
def test_str_edges_at_exact_size(text: str) -> None:
    """At cap = size the whole text is kept; at size - 1 something is cut; size + 1 keeps all."""
    size = utf8_size(text)
    whole = encode(text).decode("utf-8")
    for cut in (head, tail):
        assert cut(text, size) == whole
        assert cut(text, size + 1) == whole
        if size:
            assert utf8_size(cut(text, size - 1)) < size


@MANY
@given(raw_bytes, caps)
def test_bytes_head_and_tail_are_affixes_within_cap(data: bytes, cap: int) -> None:
    """On bytes, head is a prefix and tail a suffix, each within the cap."""
    first, last = head(data, cap), tail(data, cap)
    assert data.startswith(first) and len(first) <= cap
    assert data.endswith(last) and len(last) <= cap
    assert head(data, len(data)) == data == tail(data, len(data))


@MANY
@given(hostile_text, caps)
def test_bytes_cuts_of_valid_utf8_never_split_a_code_point(text: str, cap: int) -> None:
    """Cutting valid UTF-8 bytes always yields strict UTF-8, as long as the str cut."""
    data = encode(text)
    assert head(data, cap) == encode(head(text, cap))
    assert tail(data, cap) == encode(tail(text, cap))


@MANY
@given(st.one_of(hostile_text, raw_bytes), caps)
def test_cuts_are_deterministic(value: str | bytes, cap: int) -> None:
    """The same input and cap always give the same cut."""
    assert head(value, cap) == head(value, cap)
    assert tail(value, cap) == tail(value, cap)


@pytest.mark.parametrize("cap", [-5, 0])
def test_non_positive_cap_gives_empty(cap: int) -> None:
    """A cap of zero or less keeps nothing, of the input's own type."""
    assert head("abc", cap) == "" == tail("abc", cap)
    assert head(b"abc", cap) == b"" == tail(b"abc", cap)


def test_cut_of_invalid_bytes_backs_off_at_most_three() -> None:
    """In bytes that are not UTF-8 (a run of continuation bytes), the cut lands at the cap."""
    data = b"\x80" * 10
    assert head(data, 5) == b"\x80" * 5
    assert tail(data, 5) == b"\x80" * 5


def test_head_of_huge_string_looks_only_at_the_prefix() -> None:
    """Cutting 10 bytes off a 10-million-character string returns the right 10 bytes."""
    text = "\u00e9" * 10_000_000
    assert head(text, 11) == "\u00e9" * 5
    assert tail(text, 11) == "\u00e9" * 5


@MANY
@given(st.lists(st.one_of(hostile_text, raw_bytes), max_size=5))
def test_hash_of_pieces_equals_hash_of_joined(pieces: list[str | bytes]) -> None:
    """Hashing pieces gives the digest and size of their joined UTF-8 bytes."""
    joined = b"".join(p if isinstance(p, bytes) else encode(p) for p in pieces)
    assert hash_and_size(pieces) == (hashlib.sha256(joined).hexdigest(), len(joined))


def test_cuts_keep_valid_characters_whole_but_do_not_back_off_over_stray_bytes() -> None:
    """A cut moves only to keep a valid character whole; stray continuation bytes are shown."""
    assert head_cut("€".encode() + b"\x80", 3) == 3  # the stray byte after € splits nothing
    assert head_cut(b"a\x80\x81\x82b", 2) == 2
    assert head_cut("a€".encode(), 2) == 1  # inside €: back to its start
    assert tail_cut(b"a\x80\x81\x82b", 3) == 2
    assert tail_cut("a€b".encode(), 2) == 4  # inside €: forward to its end
    assert continues_character(b"\xe2\x82", b"\xac") == 1
    assert continues_character(b"a", b"\x80\x81") == 0
    assert continues_character(b"\xf0\x80", b"\x80") == 0  # an invalid sequence
