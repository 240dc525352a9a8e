"""``install``, ``uninstall``, ``status`` and ``add`` on one config's text.

Each function takes the text and returns the new text plus what happened to each server
(:class:`Change`); the caller reads and writes the file (:mod:`~spillstore._clients.files`).
``install`` also returns the :class:`Backup` of every entry it wrapped: the entry's exact
original text, keyed by the wrapped entry's name and value (:func:`backup_key`), so ``uninstall``
finds it wherever the file has moved and whatever else changed in it. With a backup,
``uninstall`` puts the original text back byte for byte; without one, it rebuilds the
entry from the wrapped command line (:func:`~spillstore._clients.wrap.unwrap`: the same
values, possibly formatted differently) and says so.

Pure: text in, text out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spillstore._clients.errors import ClientConfigError
from spillstore._clients.formats import Format
from spillstore._clients.wrap import (
    Flavor,
    ProxyOptions,
    Remote,
    Skip,
    Wrapped,
    check_launcher,
    describe,
    migrated,
    new_entry,
    unwrap,
    wrap,
    wrapped_by,
)

__all__ = [
    "Backup",
    "Change",
    "Config",
    "add",
    "backup_key",
    "backup_keys",
    "install",
    "status",
    "uninstall",
]


@dataclass(frozen=True)
class Config:
    """One config file's text, its format, its client's flavor, and its name (``where``,
    for messages)."""

    fmt: Format
    flavor: Flavor
    text: str
    where: str


@dataclass(frozen=True)
class Change:
    """What happened to one server: ``action`` is ``wrapped``, ``restored``, ``added``,
    ``skipped`` or (``status``) ``seen``; ``detail`` says how or why."""

    name: str
    action: str
    detail: str = ""


@dataclass(frozen=True)
class Backup:
    """An entry's original text, kept by ``install`` under :func:`backup_key`."""

    key: str
    name: str
    original_text: str
    original: Any


def backup_key(name: str, entry: Any) -> str:
    """The key of a wrapped entry's backup: the SHA-256 of its name and value in canonical
    JSON (so neither formatting, nor the file's place, nor other entries change it)."""
    canonical = json.dumps([name, entry], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def backup_keys(name: str, entry: Any, flavor: Flavor) -> list[str]:
    """The keys a wrapped entry's backup is kept and looked for under: its value's, and,
    for an entry in Zed's older form, also the value Zed's migration makes of it (so a
    wrapped entry Zed migrated since still finds its backup, and comes back in the form
    it was found in)."""
    keys = [backup_key(name, entry)]
    flat = migrated(entry, flavor) if isinstance(entry, dict) else None
    if flat is not None:
        keys.append(backup_key(name, flat))
    return keys


def _chosen(entries: dict[str, Any], names: Sequence[str] | None, where: str) -> list[str]:
    if names is None:
        return list(entries)
    missing = [name for name in names if name not in entries]
    if missing:
        known = ", ".join(entries) or "none"
        raise ClientConfigError(
            f"{where}: no server named {', '.join(missing)} (servers: {known})", path=where
        )
    return list(dict.fromkeys(names))


def install(
    config: Config, names: Sequence[str] | None, *, launcher: list[str], options: ProxyOptions
) -> tuple[str, list[Change], list[Backup]]:
    """Wrap the named servers (every server with ``names=None``).

    Returns:
        the new text, one change per server, and the backups to keep (one per entry
        wrapped).

    Raises:
        ClientConfigError: the text does not parse, a named server is not there, or the
            launcher does not name spillstore.
    """
    check_launcher(launcher)
    fmt, flavor, text, where = config.fmt, config.flavor, config.text, config.where
    entries = fmt.entries(text, where)
    changes: list[Change] = []
    values: dict[str, dict[str, Any]] = {}
    for name in _chosen(entries, names, where):
        wrapped = wrap(entries[name], flavor, launcher, options)
        if isinstance(wrapped, Skip):
            changes.append(Change(name, "skipped", wrapped.reason))
            continue
        values[name] = wrapped
        changes.append(Change(name, "wrapped", describe(wrapped, flavor).removeprefix("wrapped ")))
    originals = fmt.entry_texts(text, values)
    backups = [
        Backup(key, name, originals[name], entries[name])
        for name, value in values.items()
        for key in backup_keys(name, value, flavor)
    ]
    text = fmt.edit(text, values, {}) if values else text
    return text, changes, backups


def uninstall(
    config: Config, names: Sequence[str] | None, *, backup: Callable[[str], Backup | None]
) -> tuple[str, list[Change]]:
    """Restore the named servers that spillstore wraps (every one with ``names=None``).

    Args:
        backup: the backup kept under a key, or None. A backup whose text does not
            read back as the value it recorded is not trusted: its value is written.
    """
    fmt, flavor, text, where = config.fmt, config.flavor, config.text, config.where
    entries = fmt.entries(text, where)
    changes: list[Change] = []
    rebuilt: dict[str, dict[str, Any]] = {}
    kept: dict[str, Backup] = {}
    for name in _chosen(entries, names, where):
        entry = entries[name]
        found = wrapped_by(entry, flavor) if isinstance(entry, dict) else None
        if not isinstance(found, Wrapped):
            if names is not None:
                changes.append(Change(name, "skipped", "not wrapped by spillstore"))
            continue
        saved = next(
            (held for key in backup_keys(name, entry, flavor) if (held := backup(key))), None
        )
        if saved is not None:
            kept[name] = saved
            changes.append(Change(name, "restored", "from its backup, as it was"))
            continue
        value = unwrap(entry, flavor)
        if value is None:
            changes.append(Change(name, "skipped", "no backup, and its command cannot be read"))
            continue
        rebuilt[name] = value
        changes.append(Change(name, "restored", "rebuilt from its command line (no backup found)"))
    if not (rebuilt or kept):
        return text, changes
    misfits = _misfits(config, rebuilt, kept)
    for name in misfits:  # a backup text that does not read back as its value: use the value
        rebuilt[name] = kept.pop(name).original
    changes = [
        Change(c.name, c.action, "from its backup's values (its text did not fit)")
        if c.name in misfits
        else c
        for c in changes
    ]
    originals = {name: saved.original_text for name, saved in kept.items()}
    return fmt.edit(text, rebuilt, originals), changes


def _misfits(
    config: Config, rebuilt: dict[str, dict[str, Any]], kept: dict[str, Backup]
) -> set[str]:
    """The backups whose text, put back, does not read as the value they recorded
    (edited by hand, or from another client's file)."""
    originals = {name: saved.original_text for name, saved in kept.items()}
    try:
        after = config.fmt.entries(config.fmt.edit(config.text, rebuilt, originals), config.where)
    except ClientConfigError:
        return set(kept)
    return {name for name, saved in kept.items() if after.get(name) != saved.original}


def status(config: Config) -> list[Change]:
    """One line per server: whether it is wrapped, and how."""
    return [
        Change(name, "seen", describe(entry, config.flavor))
        for name, entry in config.fmt.entries(config.text, config.where).items()
    ]


def add(
    config: Config,
    name: str,
    *,
    launcher: list[str],
    options: ProxyOptions,
    upstream: list[str] | Remote,
) -> tuple[str, Change]:
    """Add a new server, already behind the proxy: a command line, or a remote server.

    Raises:
        ClientConfigError: the text does not parse, or a server of that name exists.
    """
    check_launcher(launcher)
    fmt, flavor, text, where = config.fmt, config.flavor, config.text, config.where
    if text.strip() and name in fmt.entries(text, where):
        raise ClientConfigError(f"{where}: a server named {name!r} is already there", path=where)
    entry = new_entry(flavor, launcher, options, upstream, name)
    return fmt.add_entry(text, name, entry), Change(name, "added", describe(entry, flavor))
