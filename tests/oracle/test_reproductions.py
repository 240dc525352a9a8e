"""The defects the oracle found, each as one minimal input through the oracle's checks.

Each test runs its input with every check on (:func:`~tests.oracle.known.enforcing_all`).
A defect still listed in :mod:`tests.oracle.known` is marked ``xfail(strict=True)``: the
day it is fixed the test passes, the strict marker fails, and the entry and the marker
must go. The names say the behaviour.
"""

from __future__ import annotations

import base64

import pytest

from spillstore import MediaPart, Settings, TextPart
from tests.oracle.cases import run_file, run_parts, run_stream, run_text
from tests.oracle.known import KNOWN, KNOWN_CHECKS, enforcing_all
from tests.oracle.strategies import StoreChoice

SMALL = Settings(max_bytes=2048, head_bytes=256, tail_bytes=256)


def _tiny(retention: int, tail: int, max_bytes: int = 2048) -> Settings:
    """One-byte previews, no line cut, and the retention cap ``retention``/``tail``."""
    return Settings(
        max_bytes=max_bytes,
        head_bytes=1,
        tail_bytes=1,
        max_line_bytes=None,
        retention_bytes=retention,
        retained_tail_bytes=tail,
    )


MEMORY = StoreChoice("memory")


def _known(name: str) -> pytest.MarkDecorator:
    """A strict xfail for the unfixed defect ``name`` (it must still be listed)."""
    listed = {k.name: k.reference for k in KNOWN} | KNOWN_CHECKS
    assert name in listed, f"{name!r} is no longer listed as unfixed: remove this marker"
    return pytest.mark.xfail(strict=True, reason=f"unfixed: {name} ({listed[name]})")


def test_a_suffix_with_a_lone_surrogate_is_stored_and_shown_as_strict_utf8() -> None:
    """A lone surrogate in the suffix reaches neither the model nor the sidecar raw."""
    with enforcing_all():
        run_text(SMALL, "x" * 3000, StoreChoice("local"), suffix="exit \ud800")


def test_a_suffix_too_large_to_show_is_stored_whole() -> None:
    """A suffix elided for the model is stored whole with the spill."""
    with enforcing_all():
        run_stream(SMALL, [b"x" * 1500], MEMORY, suffix="S" * 1000 + "END")


def test_an_empty_last_part_leaves_the_line_count_true() -> None:
    """Parts ``("x"*3000, "")`` join to one line ending in a newline: 1 line, not 0."""
    with enforcing_all():
        run_parts(SMALL, [TextPart("x" * 3000), TextPart("")], MEMORY)


def test_binary_output_within_the_budget_is_stored_raw() -> None:
    """2,000 bytes of 0xff (6,000 bytes once shown as U+FFFD) are stored as those bytes."""
    with enforcing_all():
        run_stream(SMALL, [b"\xff" * 2000], MEMORY)


def test_blob_notices_count_toward_the_budget() -> None:
    """A cut result with a blob stays within max_bytes, the blob's notice included."""
    blob = MediaPart("blob", "application/gzip", base64.b64encode(bytes(57)).decode(), "u" * 198)
    with enforcing_all():
        run_parts(SMALL, [TextPart("x" * 2048), blob, blob, blob, blob, blob], MEMORY)


def test_a_file_backed_output_on_a_dead_store_gets_a_preview() -> None:
    """The file is there: its head and tail are shown though the store failed."""
    log = b"step ok\n" * 2000 + b"FAILED test_x\n"
    with enforcing_all():
        run_file(SMALL, log, StoreChoice("failing", 0), suffix="exit code 1")


def test_line_pages_near_a_retention_gap_show_the_kept_part() -> None:
    """A line whose newline was not kept reads as its kept part, never an internal error;
    the first line after the gap says its start was not kept."""
    config = Settings(retention_bytes=65_536, retained_tail_bytes=16_384)
    text = "first line\n" + "x" * 100_000 + "\n" + "ok\n" * 10_000
    with enforcing_all():
        run_text(config, text, MEMORY)


def test_a_stream_to_a_dead_store_states_its_real_sha256() -> None:
    """The accumulator hashed every byte: the pointer states that hash, not "unknown"."""
    with enforcing_all():
        run_stream(SMALL, [b"x" * 3000], StoreChoice("failing", 0))


def test_byte_pages_show_stray_continuation_bytes_from_the_stated_start() -> None:
    """Read from the stated elided start shows the stray bytes there, marked invalid."""
    config = Settings(max_bytes=4096, head_bytes=1024, tail_bytes=512, max_line_bytes=None)
    with enforcing_all():
        run_stream(config, [b"a" * 1000 + b"\n" + b"\x80\x81\x82" + b"b" * 100_000], MEMORY)


def test_an_output_not_saved_still_says_it_is_not_utf8() -> None:
    """A stream of invalid bytes to a dead store: SpillInfo.invalid_utf8 is true."""
    with enforcing_all():
        run_stream(SMALL, [b"\xff" + b"x" * 3000], StoreChoice("failing", 0))


TINY_TAIL = _tiny(4096, 1)
"""A retained tail too small for the output's last character: nothing of the tail is kept."""


def test_line_pages_of_a_spill_without_its_tail_read_the_kept_part() -> None:
    """The pointer's Read hint works when the retention cap kept no tail bytes."""
    with enforcing_all():
        run_stream(TINY_TAIL, ["\u20ac" * 1366], MEMORY)


def test_byte_pages_name_the_unkept_end_exactly() -> None:
    """The byte page that reaches the unkept end names it as [end of kept, total)."""
    with enforcing_all():
        run_text(TINY_TAIL, "\u20ac" * 1366, MEMORY)


def test_small_invalid_output_cut_for_its_suffix_is_stored_raw() -> None:
    """One 0xff byte and a long suffix: the spill holds the byte, not U+FFFD."""
    with enforcing_all():
        run_file(SMALL, b"\xff", MEMORY, suffix="S" * 2042 + "END")


def test_a_gap_inside_one_line_gets_a_hint_that_moves_on() -> None:
    """Line 1 holds the whole retention gap: the hint past it is not the same call."""
    config = _tiny(4096, 2910, max_bytes=4098)
    with enforcing_all():
        run_parts(config, [TextPart("p" * 2500), TextPart("p" * 2500)], MEMORY, suffix="x")


def test_a_file_with_an_empty_retained_tail_is_saved_and_says_so() -> None:
    """The spill exists: the pointer says "saved in part", not "NOT saved"."""
    with enforcing_all():
        run_file(TINY_TAIL, "\u20ac".encode() * 1366, MEMORY)


def test_a_file_cut_by_retention_names_the_hidden_lines_exactly() -> None:
    """97 x and 4,000 newlines: the hidden bytes [1, 4096) are lines 1-3999, not 1-4000."""
    with enforcing_all():
        run_file(TINY_TAIL, b"x" * 97 + b"\n" * 4000, MEMORY)


def test_an_invalid_stream_on_a_dead_store_counts_its_lines() -> None:
    """``b"\\xff\\r\\n" + b"p" * 2045`` has 2 lines; the not-saved pointer says so too."""
    config = Settings(max_bytes=2048, head_bytes=1, tail_bytes=1, max_line_bytes=None)
    with enforcing_all():
        run_stream(config, [b"\xff\r\n" + b"p" * 2045], StoreChoice("failing", 0))


HEADLESS = _tiny(5110, 5107)
"""A retention head share (3 bytes) smaller than the first character (4 bytes)."""


@pytest.mark.parametrize("entry", ["text", "stream", "file"])
def test_a_head_share_smaller_than_a_character_keeps_only_the_tail(entry: str) -> None:
    """Retention cuts on characters: a 3-byte head share of 4-byte characters keeps no
    head, and the pointer names the one kept range (the tail) and reads back exactly."""
    text = "\U0001f600" * 1278
    with enforcing_all():
        if entry == "text":
            run_text(HEADLESS, text, MEMORY)
        elif entry == "stream":
            run_stream(HEADLESS, [text.encode()], StoreChoice("local"))
        else:
            run_file(HEADLESS, text.encode(), StoreChoice("local"))


def test_a_file_whose_kept_tail_is_empty_counts_its_last_line() -> None:
    """No tail kept (a 1-byte tail cannot hold a 3-byte character): the line index, not
    the head preview, says whether the output ends in a newline (here: 2 lines)."""
    config = _tiny(4096, 1)
    with enforcing_all():
        run_file(config, b"\n" + "\u20ac".encode() * 1366, MEMORY)


def test_a_line_cut_in_two_by_retention_is_found_once_by_grep() -> None:
    """The needle at both ends of one long line; retention keeps both ends: grep lists
    and counts line 1 once (found by the 100,000-example run)."""
    config = _tiny(4096, 10)
    text = "QzNeedLeQz" + "\U0001f600" * 1100 + "QzNeedLeQz"
    with enforcing_all():
        run_stream(config, [text], MEMORY)


@pytest.mark.parametrize("store", [MEMORY, StoreChoice("failing", 0)], ids=["memory", "dead"])
def test_a_result_over_the_budget_by_its_blobs_alone_keeps_its_text(store: StoreChoice) -> None:
    """Text, an image and blobs over the budget only by the blobs: the text and the image
    stay as they are, each blob is a spill of its own named by its notice (or said NOT
    saved on a dead store), and no empty text spill claims "0 bytes, too large"."""
    blob = MediaPart("blob", "application/octet-stream", bytes(range(256)) * 20)
    image = MediaPart("image", "image/png", base64.b64encode(bytes(300)).decode())
    parts = [TextPart("head line\n"), blob, image, TextPart("last \ud800"), blob]
    with enforcing_all():
        run_parts(SMALL, parts, store)
        run_parts(SMALL, [blob], store, suffix="exit 0")


def test_a_fitting_result_with_an_empty_blob_and_a_suffix_keeps_its_blob() -> None:
    """An empty blob, a lone surrogate and a suffix that fit: the suffix is folded in,
    the blob stays attached and the tool's text passes as it is."""
    blob = MediaPart("blob", "application/gzip", "")
    with enforcing_all():
        run_parts(SMALL, [TextPart("\ud800"), blob], MEMORY, suffix="exit code 1")


@pytest.mark.parametrize("store", [MEMORY, StoreChoice("failing", 0)], ids=["memory", "dead"])
def test_a_short_output_with_a_suffix_over_the_budget_keeps_its_text(store: StoreChoice) -> None:
    """100 bytes of output and a 3,000-byte suffix: the output is not called too large;
    the suffix shows its ends and is saved whole as a spill of its own (or said not
    saved), from a str, a stream and a file alike."""
    suffix = "S" * 3000 + "\ud800END"
    with enforcing_all():
        run_text(SMALL, "x" * 100, store, suffix=suffix)
        run_stream(SMALL, [b"x" * 100], store, suffix=suffix)
        run_file(SMALL, b"x" * 100, store, suffix=suffix)
