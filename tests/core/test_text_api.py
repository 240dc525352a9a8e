"""The public ``spillstore.text`` helpers refuse bad sizes and values with a ConfigError.

``head``/``tail``/``utf8_size`` are the pure ``_core.utf8`` functions behind a check:
a negative size, a bool, a float or ``None`` (and a value that is not ``str``/``bytes``)
is the caller's mistake, named in a ``ConfigError``, never a silent empty string or a
bare ``TypeError`` from inside a slice.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore import text
from spillstore._core import utf8
from spillstore._errors import ConfigError
from tests.strategies import hostile_text


@pytest.mark.parametrize("function", [text.head, text.tail])
@pytest.mark.parametrize("size", [-1, True, False, 1.5, float("nan"), None, "10", 2**0.5])
def test_a_bad_size_is_a_config_error_naming_max_bytes(function: object, size: object) -> None:
    """-1, True, 1.5, NaN, None and "10" are refused, naming max_bytes and the value."""
    with pytest.raises(ConfigError, match=r"max_bytes must be an int >= 0; got") as caught:
        function("abc", size)  # type: ignore[operator]
    assert caught.value.field == "max_bytes"


@pytest.mark.parametrize("function", [text.head, text.tail])
@pytest.mark.parametrize("value", [None, 12, bytearray(b"ab"), memoryview(b"ab"), ["a"]])
def test_a_value_that_is_not_str_or_bytes_is_a_config_error(
    function: object, value: object
) -> None:
    """Only str and bytes are cut; anything else is named in the error."""
    with pytest.raises(ConfigError, match="value must be a str or bytes"):
        function(value, 3)  # type: ignore[operator]
    with pytest.raises(ConfigError, match="value must be a str or bytes"):
        text.utf8_size(value)  # type: ignore[arg-type]


@given(value=hostile_text | st.binary(max_size=64), size=st.integers(0, 80))
def test_the_checked_helpers_cut_exactly_as_the_core_does(value: str | bytes, size: int) -> None:
    """For valid arguments the public helpers are the core functions (same result)."""
    assert text.head(value, size) == utf8.head(value, size)
    assert text.tail(value, size) == utf8.tail(value, size)
    assert text.utf8_size(value) == utf8.utf8_size(value)


def test_a_value_that_fits_comes_back_as_the_same_object() -> None:
    """No cut needed: the very same object, as the module promises."""
    value = "short é"
    assert text.head(value, 100) is value and text.tail(value, 100) is value


def test_fitting_text_with_lone_surrogates_comes_back_as_strict_utf8() -> None:
    """Design 0b: the model's text is strict UTF-8 in every mode. A ``str`` that fits
    comes back itself unless it holds a lone surrogate, then with U+FFFD for each; the
    same for the text parts of ``cap_content`` (other parts untouched)."""
    from spillstore._content import MediaPart, TextPart, ToolResult
    from spillstore.text import cap_content, elide_middle

    clean = "héllo wörld"
    assert elide_middle(clean, 1_000, tool_name="t") is clean
    for given_text in ("a\ud800b", "\udfff" * 100, "é\ud83d"):
        expected = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in given_text)
        assert elide_middle(given_text, 1_000, tool_name="t") == expected
    media = MediaPart(kind="image", mime_type="image/png", data=b"x")
    result = ToolResult(content=(TextPart("ok"), TextPart("x\udc80"), media))
    capped = cap_content(result, 1_000, tool_name="t")
    assert isinstance(capped, ToolResult)
    assert [getattr(p, "text", None) for p in capped.content] == ["ok", "x\ufffd", None]
    assert capped.content[2] is media
    untouched = ToolResult(content=(TextPart("ok"), media))
    assert cap_content(untouched, 1_000, tool_name="t") is untouched


def test_cap_result_of_a_fitting_text_with_lone_surrogates_is_strict_utf8() -> None:
    """cap_result gives back a fitting value itself, unless its text holds a lone
    surrogate: then the text (or a dict of the mapping) with U+FFFD for each."""
    from spillstore.text import cap_result

    clean = {"text": "héllo", "k": 1}
    assert cap_result(clean, 100) is clean
    assert cap_result("a\ud800b", 100) == "a\ufffdb"
    assert cap_result({"text": "x\udc80", "k": 1}, 100) == {"text": "x\ufffd", "k": 1}
