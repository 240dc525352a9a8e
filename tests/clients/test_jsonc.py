"""The JSONC reader and its in-place edits: values like ``json.loads``, spans exact,
comments and formatting outside an edit untouched, malformed text refused with a place."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spillstore._clients import jsonc
from spillstore._clients.errors import ClientConfigError
from tests.strategies import hostile_text

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


@given(json_values, st.sampled_from([None, 0, 2, "\t"]), st.booleans())
def test_plain_json_reads_as_json_loads_reads_it(
    value: object, indent: object, ascii_: bool
) -> None:
    """Any JSON text, however indented or escaped, parses to what ``json.loads`` gives."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_)  # type: ignore[arg-type]
    assert jsonc.parse(text).value == json.loads(text)


def test_comments_and_trailing_commas_are_read() -> None:
    """Line and block comments and trailing commas (VS Code, Zed) are allowed anywhere."""
    text = '// head\n{ /* a */ "a": [1, 2,], // two\n "b": {"c": "//not a comment",}, }\n'
    node = jsonc.parse(text)
    assert node.value == {"a": [1, 2], "b": {"c": "//not a comment"}}
    member = node.member("b")
    assert member is not None
    assert text[member.value.start : member.value.end] == '{"c": "//not a comment",}'


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1,, "b": 2}', "line 1, column 9"),
        ('{\n  "a": tru\n}', "line 2, column 8"),
        ('{"a": 1} x', "line 1, column 10"),
        ('{"a": /* open', "line 1, column 7"),
        ("[" * 1000, "nested too deeply"),
        ("", "unexpected end of file"),
    ],
)
def test_malformed_text_is_refused_with_its_place(text: str, where: str) -> None:
    """Malformed JSON raises one ClientConfigError naming the line and column (or why)."""
    with pytest.raises(ClientConfigError, match=where):
        jsonc.parse(text, "cfg.json")


def test_set_member_replaces_only_the_value() -> None:
    """Setting a member rewrites its value's characters and nothing else."""
    text = '{\r\n  "a": 1, // keep\r\n  "b": "x"\r\n}\r\n'
    out = jsonc.set_member(text, jsonc.parse(text), "a", ["é", "\ud800"])
    assert out == '{\r\n  "a": ["é", "\\ud800"], // keep\r\n  "b": "x"\r\n}\r\n'
    assert jsonc.parse(out).value["a"] == ["é", "\ud800"]


def test_insert_member_follows_the_object_layout() -> None:
    """A new member goes last: on its own line with the same indent and line end, or on
    the same line for a one-line object, or alone in an empty one."""
    multi = '{\r\n\t"a": 1 // c\r\n}'
    assert jsonc.insert_member(multi, jsonc.parse(multi), "b", 2) == (
        '{\r\n\t"a": 1,\r\n\t"b": 2 // c\r\n}'
    )
    one = '{"a": 1}'
    assert jsonc.insert_member(one, jsonc.parse(one), "b", 2) == '{"a": 1, "b": 2}'
    empty = "{}"
    assert jsonc.parse(jsonc.insert_member(empty, jsonc.parse(empty), "b", {"c": 1})).value == {
        "b": {"c": 1}
    }


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ('{\n  "a": 1,\n  "b": 2,\n  "c": 3\n}', "b", '{\n  "a": 1,\n  "c": 3\n}'),
        ('{\n  "a": 1,\n  "b": 2\n}', "b", '{\n  "a": 1\n}'),
        ('{\n  "a": 1,\n  "b": 2,\n}', "b", '{\n  "a": 1\n}'),
        ('{"a": 1, "b": 2}', "a", '{"b": 2}'),
        ('{"a": 1}', "a", "{}"),
    ],
)
def test_remove_member_takes_its_comma_with_it(text: str, key: str, expected: str) -> None:
    """Removing a member leaves valid JSON with the other members as they were."""
    assert jsonc.remove_member(text, jsonc.parse(text), key) == expected
