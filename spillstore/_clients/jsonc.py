"""JSON with comments (JSONC), read with the position of every value, edited in place.

Client configs are JSON (Claude, Cursor, Windsurf, Gemini) or JSONC (VS Code, Zed: ``//``
and ``/* */`` comments, trailing commas). :func:`parse` reads either into a tree of
:class:`Node` values that know their ``[start, end)`` span in the text, so an edit
replaces exactly the characters it means to and every other character (comments,
spacing, key order, CRLF, escapes) stays as it was. Positions are ``str`` indices.

The edits (:func:`set_member`, :func:`remove_member`, :func:`insert_member`) take the
text and a parsed object and return new text; they never re-serialize what they do not
change. A new member goes after the last one, on its own line with the same indent
(or on the same line, for an object written on one line).

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from spillstore._clients.errors import ClientConfigError

__all__ = [
    "Member",
    "Node",
    "dumps",
    "insert_member",
    "leading_indent",
    "newline_of",
    "parse",
    "remove_member",
    "render",
    "set_member",
]

_SPACE = re.compile(r"(?:[ \t\r\n\ufeff]+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_MAX_DEPTH = 200


@dataclass
class Member:
    """One ``"key": value`` of an object: the key, where it starts, its value."""

    key: str
    start: int
    value: Node


class Node:
    """A parsed value and its span ``[start, end)`` in the text.

    ``value`` is the plain Python value of the whole node; ``members`` (an object's
    members in source order, else None) is read from the text the first time it is asked
    for, so a large file costs one C-speed decode plus the objects actually walked.
    """

    def __init__(self, parser: _Parser, start: int, end: int, value: Any) -> None:
        self._parser = parser
        self.start = start
        self.end = end
        self.value = value
        self._members: list[Member] | None = None

    @property
    def members(self) -> list[Member] | None:
        """The object's members in source order (None for anything but an object)."""
        if not isinstance(self.value, dict):
            return None
        if self._members is None:
            self._members = self._parser.members(self.start)
        return self._members

    def member(self, key: str) -> Member | None:
        """The last member named ``key`` (the one a JSON reader keeps), or None."""
        found = None
        for member in self.members or []:
            if member.key == key:
                found = member
        return found


_DECODER = json.JSONDecoder()


class _Parser:
    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> ClientConfigError:
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return ClientConfigError(
            f"{self.where}: not valid JSON at line {line}, column {column}: {message}",
            path=self.where,
        )

    def space(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()
        if self.text.startswith("/*", self.pos):
            raise self.fail("unterminated comment")

    def value(self, depth: int) -> Node:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deeply")
        self.space()
        start = self.pos
        char = self.text[start : start + 1]
        if char in ("{", "["):
            try:  # plain JSON (most configs): decoded in C, members read later if needed
                value, end = _DECODER.raw_decode(self.text, start)
            except (ValueError, RecursionError):
                value = self.object(depth) if char == "{" else self.array(depth)
                return Node(self, start, self.pos, value)
            self.pos = end
            return Node(self, start, end, value)
        if char == '"':
            end = self.string_end()
            return Node(self, start, end, self.string(start))
        number = _NUMBER.match(self.text, start)
        if number:
            self.pos = number.end()
            return Node(self, start, self.pos, json.loads(number.group()))
        for word, value in _LITERALS.items():
            if self.text.startswith(word, start):
                self.pos = start + len(word)
                return Node(self, start, self.pos, value)
        raise self.fail("expected a value" if char else "unexpected end of file")

    def string_end(self) -> int:
        match = _STRING.match(self.text, self.pos)
        if match is None:
            raise self.fail("bad string")
        self.pos = match.end()
        return self.pos

    def string(self, start: int) -> str:
        try:
            value = json.loads(self.text[start : self.pos])
        except ValueError as exc:
            raise self.fail(f"bad string ({exc})", start) from exc
        assert isinstance(value, str)
        return value

    def _sequence(self, close: str, depth: int, item: Any) -> None:
        """Read the items of an object or array up to ``close`` (trailing comma allowed)."""
        self.pos += 1
        first = True
        while True:
            self.space()
            if self.text.startswith(close, self.pos):
                break
            if not first:
                if not self.text.startswith(",", self.pos):
                    raise self.fail(f"expected ',' or '{close}'")
                self.pos += 1
                self.space()
                if self.text.startswith(close, self.pos):  # a trailing comma
                    break
            item(depth)
            first = False
        self.pos += 1

    def _members(self, depth: int) -> list[Member]:
        found: list[Member] = []

        def member(depth: int) -> None:
            key_start = self.pos
            if not self.text.startswith('"', key_start):
                raise self.fail("expected a quoted key")
            self.string_end()
            key = self.string(key_start)
            self.space()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            found.append(Member(key, key_start, self.value(depth + 1)))

        self._sequence("}", depth, member)
        return found

    def object(self, depth: int) -> dict[str, Any]:
        return {member.key: member.value.value for member in self._members(depth)}

    def array(self, depth: int) -> list[Any]:
        items: list[Any] = []
        self._sequence("]", depth, lambda depth: items.append(self.value(depth + 1).value))
        return items

    def members(self, start: int) -> list[Member]:
        """The members of the object that starts at ``start`` (already known valid)."""
        self.pos = start
        return self._members(0)


def parse(text: str, where: str = "config") -> Node:
    """Parse JSON or JSONC text (comments and trailing commas allowed).

    Args:
        text: the whole text (a leading BOM is skipped as space).
        where: the file's name, for error messages.

    Raises:
        ClientConfigError: the text is not JSON(C); the message names the line and column.
    """
    parser = _Parser(text, where)
    node = parser.value(0)
    parser.space()
    if parser.pos != len(text):
        raise parser.fail("unexpected text after the value")
    return node


def newline_of(text: str) -> str:
    """The text's line end: ``\\r\\n`` when its first line ends so, else ``\\n``."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """``value`` as one line of JSON, non-ASCII characters kept, except lone surrogates
    (which UTF-8 cannot hold): those are written as ``\\uXXXX`` escapes."""
    text = json.dumps(value, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def render(value: Any, indent: str = "", step: str = "  ", newline: str = "\n") -> str:
    """``value`` as JSON: objects one member a line (nested at ``indent + step``),
    arrays and scalars on one line; non-ASCII characters kept as they are."""
    if isinstance(value, dict) and value:
        inner = indent + step
        lines = [
            f"{inner}{dumps(key)}: {render(item, inner, step, newline)}"
            for key, item in value.items()
        ]
        return "{" + newline + ("," + newline).join(lines) + newline + indent + "}"
    return dumps(value)


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    prefix = text[line_start:pos]
    return prefix if not prefix.strip() else ""


def _on_own_line(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return not text[line_start:pos].strip()


def leading_indent(text: str, pos: int) -> str:
    """The spaces and tabs that start the line ``pos`` is on."""
    line_start = text.rfind("\n", 0, pos) + 1
    line = text[line_start:pos]
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_step(text: str, node: Node) -> tuple[str, str]:
    """The indent of ``node``'s members and one indent step, as written in ``text``."""
    outer = leading_indent(text, node.start)
    members = node.members or []
    if members and _on_own_line(text, members[0].start):
        inner = _line_indent(text, members[0].start)
        if inner.startswith(outer) and len(inner) > len(outer):
            return inner, inner[len(outer) :]
    return outer + "  ", "  "


def set_member(text: str, node: Node, key: str, value: Any) -> str:
    """``text`` with ``node``'s member ``key`` set to ``value`` (added when missing)."""
    member = node.member(key)
    if member is None:
        return insert_member(text, node, key, value)
    inner, step = _indent_step(text, node)
    rendered = render(value, inner, step, newline_of(text))
    return text[: member.value.start] + rendered + text[member.value.end :]


def insert_member(text: str, node: Node, key: str, value: Any) -> str:
    """``text`` with ``"key": value`` added as ``node``'s last member."""
    newline = newline_of(text)
    inner, step = _indent_step(text, node)
    pair = f"{dumps(key)}: {render(value, inner, step, newline)}"
    members = node.members or []
    if not members:
        closing = leading_indent(text, node.start)
        return (
            text[: node.start + 1]
            + newline
            + inner
            + pair
            + newline
            + closing
            + text[node.end - 1 :]
        )
    last = members[-1].value.end
    if _on_own_line(text, members[-1].start):
        return text[:last] + "," + newline + inner + pair + text[last:]
    return text[:last] + ", " + pair + text[last:]


def remove_member(text: str, node: Node, key: str) -> str:
    """``text`` without ``node``'s member ``key`` (and the comma that went with it)."""
    members = node.members or []
    index = next((i for i, m in enumerate(members) if m.key == key), None)
    if index is None:
        return text
    member = members[index]
    if index + 1 < len(members):  # up to the next member's start, on its line
        following = members[index + 1].start
        start = member.start
        if _on_own_line(text, member.start) and _on_own_line(text, following):
            start = text.rfind("\n", 0, member.start) + 1
            following = text.rfind("\n", 0, following) + 1
        return text[:start] + text[following:]
    if index > 0:  # the last one: from the end of the one before it
        return text[: members[index - 1].value.end] + _after_value(text, member.value.end)
    return text[: node.start + 1] + _after_value(text, member.value.end)


def _after_value(text: str, end: int) -> str:
    """The text after a removed last member: its trailing comma goes too."""
    match = _SPACE.match(text, end)
    assert match is not None
    after = match.end()
    if text.startswith(",", after):
        return text[match.start() : after] + text[after + 1 :]
    return text[end:]
