"""Servers in a YAML mapping (Goose's ``config.yaml``, ``extensions:``), edited in place.

The file is parsed with PyYAML's composer, which gives each node's place in the text.
Only the entries that change are rewritten; everything else (comments, quoting,
spacing, CRLF, the other settings) stays byte for byte:

- a changed entry written as a block mapping is patched key by key, like the JSON
  entries: a changed key's value is written anew in block style where it stands, a
  removed key goes, a new key comes after the last one, and the comments between its
  keys stay; any other entry (``{...}``, empty) has its value (from the colon after its
  name to the end of its last value) written anew in block style at the entry's
  indentation. The backup keeps the exact original text, and :meth:`YamlFormat.edit`
  puts it back;
- a new entry goes after the last one, at the same indentation.

Every edit is read back before it is returned: a text that does not parse to exactly
the intended entries is an error, never a file. Anchors and aliases inside the section
are refused (an entry that shares a node with another cannot be edited alone).

Values are read as Goose (serde_yaml 0.9) reads them, not as PyYAML's YAML 1.1 would:
booleans are only ``true``/``false`` (``yes``, ``on`` are text); integers are decimal
without leading zeros, or ``0x``/``0o``/``0b`` (``0755``, ``1_000`` and ``1:20`` are
text, not 493, 1000 and 80); floats as Rust parses them, finite, or ``.inf``/``.nan``;
null is ``~``, ``null`` or nothing; no timestamps, no merge keys. A field Goose types as
text (``cmd``, ``args``, ``envs``, ``uri``, ``headers``, ...) is a plain scalar's text
whatever it looks like: serde_yaml gives a string field the text as written, so
``args: [0o17, ~]`` is ``"0o17"``, ``"~"``. An entry rewritten whole (one written
inline) keeps the text of every single-line value it does not change.

Pure: text in, text out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from spillstore._clients.errors import ClientConfigError
from spillstore._clients.formats import Format, match_newlines

__all__ = ["YamlFormat"]

_Span = tuple[int, int]


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML has no types here
    """PyYAML's safe loader reading plain scalars as serde_yaml 0.9 does (see the module)."""


_TAG = "tag:yaml.org,2002:"
_STR = _TAG + "str"
_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(
    _TAG + "bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    _TAG + "int",
    re.compile(r"^[-+]?(?:0x[0-9a-fA-F]+|0o[0-7]+|0b[01]+|0|[1-9][0-9]*)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    _TAG + "float",
    re.compile(
        r"^(?:[-+]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
_Loader.add_implicit_resolver(_TAG + "null", re.compile(r"^(?:~|null|Null|NULL|)$"), [*"~nN", ""])


def _int(loader: Any, node: Any) -> int:
    return int(node.value, 0)


def _float(loader: Any, node: Any) -> float | str:
    """A float as serde_yaml reads one; a value Rust parses as infinite (``1e999``) is
    text to it."""
    value: str = node.value
    if value.lstrip("+-").lower() in (".inf", ".nan"):
        special = float(value.replace(".", ""))
        return special
    number = float(value)
    return number if math.isfinite(number) else value


_Loader.add_constructor(_TAG + "int", _int)
_Loader.add_constructor(_TAG + "float", _float)

_TEXT_FIELDS = frozenset(
    {
        "name",
        "type",
        "cmd",
        "args",
        "envs",
        "env_keys",
        "uri",
        "headers",
        "description",
        "display_name",
        "available_tools",
        "code",
        "dependencies",
    }
)
"""The fields of a Goose extension that are text (or lists and maps of text) to Goose."""


def _as_text(node: Any) -> None:
    """Make every plain scalar in ``node`` text, as serde_yaml gives a string field."""
    if isinstance(node, yaml.ScalarNode):
        if node.style is None:
            node.tag = _STR
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _as_text(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            _as_text(key)
            _as_text(value)


def _entry_value(node: Any) -> Any:
    """An entry's value as Goose reads it: its text fields as text."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value in _TEXT_FIELDS:
                _as_text(value)
    return _Loader("").construct_document(node)


def _end(node: Any, text: str) -> int:
    """Where ``node``'s own text ends: a block collection at its last value (PyYAML's end
    mark is at the next token, past comments and blank lines), a block scalar before its
    trailing line breaks."""
    block = isinstance(node, yaml.MappingNode | yaml.SequenceNode) and not node.flow_style
    if block and node.value:
        last = node.value[-1]
        return _end(last[1] if isinstance(node, yaml.MappingNode) else last, text)
    end: int = node.end_mark.index
    if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
        while end > node.start_mark.index and text[end - 1] in " \t\r\n":
            end -= 1
    return end


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _render(value: Any, indent: int) -> str:
    """``value`` in block style, each line indented by ``indent`` spaces."""
    dumped = yaml.safe_dump(
        value, default_flow_style=False, sort_keys=False, allow_unicode=True, width=1 << 30
    )
    lines = dumped.rstrip("\n").split("\n")
    return "\n".join(" " * indent + line if line else line for line in lines)


def _line_end(text: str, index: int) -> int:
    """The end of the line holding ``index`` (before its ``\r\n`` or ``\n``)."""
    end = text.find("\n", index)
    if end < 0:
        return len(text)
    return end - 1 if end > index and text[end - 1] == "\r" else end


def _patch(text: str, node: Any, old: Any, new: dict[str, Any]) -> list[tuple[_Span, str]] | None:
    """The pieces that turn entry ``node`` (whose value is ``old``) into ``new`` key by
    key, or None when it is not a block mapping of distinct text keys."""
    if not (isinstance(node, yaml.MappingNode) and not node.flow_style and node.value):
        return None
    keys = {k.value: (k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)}
    if not isinstance(old, dict) or len(keys) != len(node.value) or set(keys) != set(old):
        return None
    indent = node.value[0][0].start_mark.column
    pieces: list[tuple[_Span, str]] = []
    for name, (key, value) in keys.items():
        if name not in new:  # from the end of the line before to the end of the value
            start = text.rfind("\n", 0, key.start_mark.index)
            start -= 1 if start > 0 and text[start - 1] == "\r" else 0
            pieces.append(((start, _end(value, text)), ""))
        elif new[name] != old[name]:
            piece = _render({name: new[name]}, indent)[indent:]
            pieces.append(((key.start_mark.index, _end(value, text)), piece))
    added = {name: item for name, item in new.items() if name not in keys}
    if added:
        at = _line_end(text, _end(node.value[-1][1], text))
        pieces.append(((at, at), "\n" + _render(added, indent)))
    return pieces


def _rewrite(text: str, node: Any, old: Any, new: dict[str, Any], indent: int) -> str:
    """Entry ``node`` (whose value is ``old``) written anew as ``new`` in block style at
    ``indent``: a key whose value does not change keeps its text when that is one line
    (``timeout: 0755`` stays, not ``'0755'``)."""
    kept: dict[str, str] = {}
    if isinstance(node, yaml.MappingNode) and isinstance(old, dict):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if name not in new or name not in old or new[name] != old[name]:
                continue
            key_text = text[key.start_mark.index : key.end_mark.index]
            value_text = text[value.start_mark.index : _end(value, text)]
            if value_text and "\n" not in key_text + value_text:
                kept[name] = f"{key_text}: {value_text}"
    return "\n".join(
        " " * indent + kept[name] if name in kept else _render({name: value}, indent)
        for name, value in new.items()
    )


class YamlFormat(Format):
    """Servers as the members of one top-level YAML mapping (Goose: ``extensions``)."""

    def __init__(self, section: str) -> None:
        self.section = section

    def _load(self, text: str, where: str) -> Any:
        try:
            return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
        except (yaml.YAMLError, RecursionError) as exc:
            raise ClientConfigError(
                f"{where}: not valid YAML: {_one_line(exc)}", path=where
            ) from exc

    def _nodes(self, text: str, where: str = "config") -> tuple[Any, Any, Any]:
        """The root node, the section's key node and its value node (None when absent)."""
        try:
            root = yaml.compose(text, Loader=_Loader)
        except (yaml.YAMLError, RecursionError) as exc:
            raise ClientConfigError(
                f"{where}: not valid YAML: {_one_line(exc)}", path=where
            ) from exc
        if root is None or (isinstance(root, yaml.ScalarNode) and root.value == ""):
            return None, None, None
        if not isinstance(root, yaml.MappingNode):
            raise ClientConfigError(f"{where}: the file is not a mapping of settings", path=where)
        for key, value in root.value:
            if isinstance(key, yaml.ScalarNode) and key.value == self.section:
                self._no_anchors(text, value, where)
                return root, key, value
        return root, None, None

    def _no_anchors(self, text: str, node: Any, where: str) -> None:
        start, end = node.start_mark.index, _end(node, text)
        for event in yaml.parse(text, Loader=_Loader):
            if not start <= event.start_mark.index < end:
                continue
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise ClientConfigError(
                    f"{where}: {self.section} uses YAML anchors or aliases; edit it by hand",
                    path=where,
                )

    def _members(self, text: str, where: str = "config") -> dict[str, tuple[Any, Any]]:
        """Each entry's key node and value node, by name."""
        _, _, section = self._nodes(text, where)
        if section is None or (
            isinstance(section, yaml.ScalarNode) and section.tag.endswith("null")
        ):
            return {}
        if not isinstance(section, yaml.MappingNode):
            raise ClientConfigError(f"{where}: {self.section} is not a mapping", path=where)
        found: dict[str, tuple[Any, Any]] = {}
        for key, value in section.value:
            if not isinstance(key, yaml.ScalarNode) or not key.tag.endswith(":str"):
                raise ClientConfigError(
                    f"{where}: a name under {self.section} is not text", path=where
                )
            found[key.value] = (key, value)
        return found

    def _editable(self, text: str) -> None:
        """Refuse to edit inside flow style (``{...}``): block style is what can be
        spliced line by line."""
        root, _, section = self._nodes(text)
        for node, what in ((root, "the file"), (section, self.section)):
            if isinstance(node, yaml.MappingNode) and node.flow_style and node.value:
                raise ClientConfigError(
                    f"{what} is written inline ({{...}}); write it as a block (one key per "
                    "line) for spillstore to edit it",
                    path="config",
                )

    def entries(self, text: str, where: str) -> dict[str, Any]:
        members = self._members(text, where)  # the shape checks
        self._load(text, where)  # the whole file must load (no unknown tags anywhere)
        try:
            return {name: _entry_value(node) for name, (_, node) in members.items()}
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            raise ClientConfigError(
                f"{where}: not valid YAML: {_one_line(exc)}", path=where
            ) from exc

    def _span(self, text: str, key: Any, value: Any) -> _Span:
        return key.end_mark.index, _end(value, text)

    def entry_texts(self, text: str, names: Iterable[str]) -> dict[str, str]:
        members = self._members(text)
        spans = {name: self._span(text, *members[name]) for name in names}
        return {name: text[start:end] for name, (start, end) in spans.items()}

    def edit(
        self, text: str, values: Mapping[str, dict[str, Any]], originals: Mapping[str, str]
    ) -> str:
        self._editable(text)
        members = self._members(text)
        pieces: list[tuple[_Span, str]] = []
        current = self.entries(text, "config")
        for name, value in values.items():
            key, node = members[name]
            patch = _patch(text, node, current[name], value)
            if patch is not None:
                pieces += patch
                continue
            indent = key.start_mark.column + 2
            if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
                indent = node.value[0][0].start_mark.column  # the entry's own indentation
            rewritten = _rewrite(text, node, current[name], value, indent)
            pieces.append((self._span(text, key, node), ":\n" + rewritten))
        for name, original in originals.items():
            pieces.append((self._span(text, *members[name]), original))
        new = text
        for (start, end), piece in sorted(pieces, reverse=True):
            new = new[:start] + match_newlines(text, piece) + new[end:]
        expected = {**current, **values}
        for name in originals:
            expected.pop(name)
        self._check(new, expected, skip=set(originals))
        return new

    def _check(self, new: str, expected: Mapping[str, Any], skip: set[str]) -> None:
        """Refuse an edit that does not read back as the intended entries."""
        try:
            found = self.entries(new, "config")
        except ClientConfigError as exc:
            raise ClientConfigError(
                f"the edited YAML does not read back: {exc}", path="config"
            ) from exc
        if {k: v for k, v in found.items() if k not in skip} != expected:
            raise ClientConfigError("the edited YAML does not read back as intended", path="config")

    def add_entry(self, text: str, name: str, value: dict[str, Any]) -> str:
        self._editable(text)
        members = self._members(text)
        if name in members:
            raise ClientConfigError(f"a server named {name!r} is already configured", path=name)
        _, key, section = self._nodes(text)
        block = {name: value}
        if members:
            first, _ = next(iter(members.values()))
            start = _end(list(members.values())[-1][1], text)
            line_end = text.find("\n", start)  # after a comment on the last entry's line
            if line_end < 0:
                start = len(text)
            else:
                start = line_end - 1 if text[line_end - 1] == "\r" else line_end
            piece = "\n" + _render(block, first.start_mark.column)
        elif key is not None:  # present but empty: `extensions:`, `~` or `{}`
            start, end = key.end_mark.index, _end(section, text)
            piece = ":\n" + _render(block, key.start_mark.column + 2)
            new = text[:start] + match_newlines(text, piece) + text[end:]
            self._check(new, {**self.entries(text, "config"), name: value}, skip=set())
            return new
        else:
            start = len(text)
            lead = "" if not text or text.endswith("\n") else "\n"
            piece = lead + _render({self.section: block}, 0) + "\n"
        new = text[:start] + match_newlines(text, piece) + text[start:]
        self._check(new, {**self.entries(text, "config"), name: value}, skip=set())
        return new
