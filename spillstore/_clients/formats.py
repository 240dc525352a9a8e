"""The config file formats: where the servers are, and edits that touch nothing else.

A :class:`Format` reads a config's text into its server entries (name -> plain value)
and returns new text with one entry changed, restored or added. :class:`JsonFormat`
edits JSON and JSONC in place through :mod:`~spillstore._clients.jsonc` (comments,
spacing and escapes outside the changed values stay byte for byte); :class:`TomlFormat`
edits Codex's TOML through tomlkit, which keeps comments and layout.

Edits work entry by entry:

- :meth:`Format.edit` patches entries to new values, key by key (a changed key gets its
  new value where it stands, a removed key goes, a new key comes last), and puts exact
  original texts back, in one pass;
- :meth:`Format.entry_texts` gives entries' exact texts, kept in the backups before an
  install; putting them back is how ``uninstall`` gives back the file byte for byte;
- :meth:`Format.add_entry` adds a new entry, making the servers section if needed.

Pure: text in, text out.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items

from spillstore._clients import jsonc
from spillstore._clients.errors import ClientConfigError

__all__ = ["Format", "JsonFormat", "TomlFormat", "match_newlines"]


class Format(ABC):
    """Reads and edits the server entries of one config file's text."""

    @abstractmethod
    def entries(self, text: str, where: str) -> dict[str, Any]:
        """The server entries (name -> plain value), in file order.

        Raises:
            ClientConfigError: the text does not parse, or the section is not a table.
        """

    @abstractmethod
    def entry_texts(self, text: str, names: Iterable[str]) -> dict[str, str]:
        """The exact text of each named entry (what :meth:`edit` puts back)."""

    @abstractmethod
    def edit(
        self, text: str, values: Mapping[str, dict[str, Any]], originals: Mapping[str, str]
    ) -> str:
        """``text`` with each entry of ``values`` patched to its value key by key, and
        each entry of ``originals`` replaced by that exact text (an :meth:`entry_texts`
        text), in one pass."""

    @abstractmethod
    def add_entry(self, text: str, name: str, value: dict[str, Any]) -> str:
        """``text`` with a new entry ``name`` (the section is made when missing)."""


def match_newlines(before: str, after: str) -> str:
    """``after`` with lone ``\\n`` turned into ``\\r\\n`` when ``before`` used CRLF only."""
    return _with_crlf(after, _crlf_only(before))


def _crlf_only(text: str) -> bool:
    return "\r\n" in text and text.count("\n") == text.count("\r\n")


def _with_crlf(text: str, crlf: bool) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n") if crlf else text


class JsonFormat(Format):
    """Servers in a JSON/JSONC object found at the first of ``sections`` that exists
    (a path of keys: ``("mcpServers",)``, ``("projects", "/home/me/app", "mcpServers")``)
    and, unless it is the last, is not itself a server entry; a new section goes at
    ``sections[0]``.

    With ``mixed``, when the first section is found, the server entries directly in the
    second one count too (opencode: entries left under ``mcp`` in its v1 layout beside
    the v2 ``mcp.servers``, which opencode reads both, as its ``ConfigV2Compat.lower``
    does); each is edited where it stands, and a name in both is an error (opencode runs
    the one directly under ``mcp`` and reports a conflict; wrapping either would leave
    the other to confuse).

    The last text parsed is kept with its tree, so the reads and the edit of one command
    parse a large file (Claude Code's ``~/.claude.json`` holds the history) once.
    """

    def __init__(self, *sections: tuple[str, ...], mixed: bool = False) -> None:
        self.sections = sections
        self.mixed = mixed and len(sections) > 1
        self._last: tuple[str, jsonc.Node] | None = None

    def _root(self, text: str, where: str) -> jsonc.Node:
        if self._last is not None and self._last[0] == text:
            return self._last[1]
        root = jsonc.parse(text, where)
        if root.members is None:
            raise ClientConfigError(f"{where}: the top level is not an object", path=where)
        self._last = (text, root)
        return root

    def _section(self, text: str, where: str = "config") -> jsonc.Node | None:
        root = self._root(text, where)
        for number, path in enumerate(self.sections):
            node: jsonc.Node | None = root
            for key in path:
                member = node.member(key) if node is not None and node.members is not None else None
                node = member.value if member is not None else None
            if node is not None and number + 1 < len(self.sections) and _is_entry(node.value):
                continue  # a server named like a section (opencode's "servers" in v1)
            if node is not None:
                if node.members is None:
                    label = ".".join(path)
                    raise ClientConfigError(f"{where}: {label} is not an object", path=where)
                return node
        return None

    def _nodes(self, text: str, where: str = "config") -> dict[str, jsonc.Node]:
        section = self._section(text, where)
        if section is None:
            return {}
        nodes = {m.key: m.value for m in section.members or []}
        if self.mixed:
            outer: jsonc.Node | None = self._root(text, where)
            for key in self.sections[1]:
                member = outer.member(key) if outer is not None else None
                outer = member.value if member is not None else None
            beside = [
                m
                for m in (outer.members or [] if outer is not None and outer is not section else [])
                if m.value is not section and _is_entry(m.value.value)
            ]
            for member in beside:
                if member.key in nodes:
                    inner, label = ".".join(self.sections[0]), ".".join(self.sections[1])
                    raise ClientConfigError(
                        f"{where}: server {member.key!r} is both in {inner} and directly in "
                        f"{label} (the one directly in {label} is run); keep one",
                        path=where,
                    )
            nodes.update({m.key: m.value for m in beside})
        return nodes

    def entries(self, text: str, where: str) -> dict[str, Any]:
        if self.mixed:
            return {name: node.value for name, node in self._nodes(text, where).items()}
        section = self._section(text, where)  # without walking its members
        return {} if section is None else dict(section.value)

    def entry_texts(self, text: str, names: Iterable[str]) -> dict[str, str]:
        nodes = self._nodes(text)
        return {name: text[nodes[name].start : nodes[name].end] for name in names}

    def edit(
        self, text: str, values: Mapping[str, dict[str, Any]], originals: Mapping[str, str]
    ) -> str:
        nodes = self._nodes(text)
        crlf = _crlf_only(text)
        pieces = {name: _with_crlf(original, crlf) for name, original in originals.items()}
        for name, value in values.items():
            pieces[name] = _patched(text, nodes[name], value)
        parts: list[str] = []
        done = 0
        for name in sorted(pieces, key=lambda name: nodes[name].start):
            parts += [text[done : nodes[name].start], pieces[name]]
            done = nodes[name].end
        return "".join([*parts, text[done:]])

    def add_entry(self, text: str, name: str, value: dict[str, Any]) -> str:
        if not text.strip():
            text = "{}" + jsonc.newline_of(text) if text else "{}\n"
        if self._section(text) is None:
            root = self._root(text, "config")
            path = self.sections[0]
            node = root
            for depth, key in enumerate(path):
                member = node.member(key)
                if member is None:
                    nested: dict[str, Any] = {name: value}
                    for outer in reversed(path[depth + 1 :]):
                        nested = {outer: nested}
                    return jsonc.insert_member(text, node, key, nested)
                if member.value.members is None:
                    raise ClientConfigError(f"{key} is not an object", path=key)
                node = member.value
        section = self._section(text)
        assert section is not None
        if name in self._nodes(text):
            raise ClientConfigError(f"a server named {name!r} is already configured", path=name)
        return jsonc.insert_member(text, section, name, value)


def _is_entry(value: Any) -> bool:
    """Whether an object is a server entry rather than a section of them."""
    return isinstance(value, dict) and any(
        isinstance(value.get(key), str | list) for key in ("type", "command", "url")
    )


def _patched(text: str, node: jsonc.Node, value: dict[str, Any]) -> str:
    """The text of entry ``node`` patched to ``value``: changed keys rewritten where they
    stand, removed keys gone, new keys last; the rest of the entry as it was."""
    prefix = jsonc.leading_indent(text, node.start)
    piece = prefix + text[node.start : node.end]
    old: dict[str, Any] = dict(node.value)
    for key in old:
        if key not in value:
            piece = jsonc.remove_member(piece, jsonc.parse(piece), key)
    for key, item in value.items():
        if key not in old or old[key] != item:
            piece = jsonc.set_member(piece, jsonc.parse(piece), key, item)
    return piece[len(prefix) :]


class TomlFormat(Format):
    """Servers as the sub-tables of one TOML table (Codex: ``[mcp_servers.NAME]``)."""

    def __init__(self, table: str) -> None:
        self.table = table

    def _parse(self, text: str, where: str = "config") -> tomlkit.TOMLDocument:
        try:
            return tomlkit.parse(text)
        except tomlkit.exceptions.TOMLKitError as exc:
            raise ClientConfigError(f"{where}: not valid TOML: {exc}", path=where) from exc

    def _servers(self, doc: tomlkit.TOMLDocument, where: str = "config") -> Any:
        servers = doc.get(self.table)
        if servers is not None and not isinstance(servers, dict):
            raise ClientConfigError(f"{where}: {self.table} is not a table", path=where)
        return servers

    def entries(self, text: str, where: str) -> dict[str, Any]:
        servers = self._servers(self._parse(text, where), where)
        if servers is None:
            return {}
        return {str(name): _plain(entry) for name, entry in servers.items()}

    def entry_texts(self, text: str, names: Iterable[str]) -> dict[str, str]:
        servers = self._servers(self._parse(text))
        return {name: str(self._entry(servers, name).as_string()) for name in names}

    def _entry(self, servers: Any, name: str) -> Any:
        """The server ``name``, if it can be edited in place: an inline table, or one
        ``[TABLE.NAME]`` table (not dotted keys, not split around another table)."""
        entry = servers[name]
        if isinstance(entry, tomlkit.items.InlineTable) or (
            isinstance(entry, tomlkit.items.Table) and not entry.is_super_table()
        ):
            return entry
        raise ClientConfigError(
            f"server {name!r} is written in dotted keys or split in pieces; spillstore edits"
            f" only a [{self.table}.{name}] table or an inline table: write it as one",
            path=name,
        )

    def edit(
        self, text: str, values: Mapping[str, dict[str, Any]], originals: Mapping[str, str]
    ) -> str:
        doc = self._parse(text)
        servers = self._servers(doc)
        for name, value in values.items():
            entry = self._entry(servers, name)
            old = _plain(entry)
            for key in old:
                if key not in value:
                    del entry[key]
            for key, item in value.items():
                if key not in old or old[key] != item:
                    entry[key] = _toml_item(item, entry.get(key))
        for name, original in originals.items():
            try:
                _restore(servers, name, self._entry(servers, name), original)
            except tomlkit.exceptions.TOMLKitError as exc:
                raise ClientConfigError(
                    f"a backup of {name!r} is not TOML: {exc}", path=name
                ) from exc
        result = match_newlines(text, doc.as_string())
        if values and _headers(result) != _headers(text):
            raise ClientConfigError(
                f"this file's tables cannot stay in their order through the edit (a "
                f"[{self.table}.NAME] table between the parts of an array of tables?); "
                f"nothing written",
                path=next(iter(values)),
            )
        if originals and not values:
            exact = _exact_restore(text, self._servers(self._parse(text)), originals)
            if exact is not None and _plain(self._parse(exact)) == _plain(self._parse(result)):
                return exact  # the same values, and each table's own text (comments, order)
        return result

    def add_entry(self, text: str, name: str, value: dict[str, Any]) -> str:
        doc = self._parse(text)
        servers = self._servers(doc)
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc[self.table] = servers
        if name in servers:
            raise ClientConfigError(f"a server named {name!r} is already configured", path=name)
        table = tomlkit.table()
        for key, item in value.items():
            table[key] = item
        servers[name] = table
        return match_newlines(text, doc.as_string())


def _toml_item(value: Any, current: Any) -> Any:
    """A new value for a key: a table as an inline table (a key of the entry that
    :func:`_restore` can take out again), unless the key is a sub-table already."""
    if isinstance(value, dict) and not isinstance(current, tomlkit.items.Table):
        inline = tomlkit.inline_table()
        inline.update(value)
        return inline
    return value


def _restore(servers: Any, name: str, entry: Any, original: str) -> None:
    """Put back a TOML entry's original text: an inline table whole; a table's own keys,
    dotted ones (``env.K = ...``) included, in their order (its sub-tables with a header
    of their own, such as ``[mcp_servers.NAME.env]``, were never touched)."""
    if isinstance(entry, tomlkit.items.InlineTable):
        servers[name] = tomlkit.parse(f"x = {original}")["x"]
        return
    keep = tomlkit.parse(original)
    for key in [k for k, v in entry.value.body if k is not None and not _headed(k, v)]:
        del entry[key]
    for key, item in keep.body:
        if key is not None and not _headed(key, item):
            entry.append(key, item)  # the Key object: its quoting and spacing come back


def _headers(text: str) -> list[str]:
    """The table headers of a TOML text, in order."""
    return [line.strip() for line in text.splitlines() if line.lstrip().startswith("[")]


def _exact_restore(text: str, servers: Any, originals: Mapping[str, str]) -> str | None:
    """``text`` with each table entry's current text replaced by its original text, when
    each is found exactly once (None: an inline table, or not found once)."""
    for name, original in originals.items():
        entry = servers[name]
        if not isinstance(entry, tomlkit.items.Table):
            return None
        current = entry.as_string()
        if not current or text.count(current) != 1:
            return None
        text = text.replace(current, original)
    return text


def _headed(key: Any, item: Any) -> bool:
    """Whether a table's item is a sub-table under a header of its own."""
    return isinstance(item, tomlkit.items.Table) and not key.is_dotted()


def _plain(item: Any) -> Any:
    unwrap = getattr(item, "unwrap", None)
    return unwrap() if callable(unwrap) else item
