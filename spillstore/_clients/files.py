"""Safe edits of a config file, and the backups ``install`` keeps.

:func:`read` takes a :class:`Snapshot` (the bytes as read, the text, its mode);
:func:`write` replaces the file with new text only if it still holds exactly those
bytes, through a temporary file in the same directory and an atomic rename, with the
file's mode kept (0600 for a new file: configs hold tokens), and its owner and group
where this process may set them. A config reached through a
symlink is written at the link's target, so the link stays. A UTF-8 byte-order mark is
kept. Nothing is written when the text did not change.

Backups (:func:`save_backup`, :func:`load_backup`) are small JSON files, 0600, in a 0700
directory, named after :func:`~spillstore._clients.ops.backup_key`.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spillstore._clients.errors import ClientConfigError
from spillstore._clients.ops import Backup

__all__ = ["Snapshot", "diff", "load_backup", "read", "save_backup", "write"]

_BOM = "\ufeff"
_BACKUP_VERSION = 1


@dataclass(frozen=True)
class Snapshot:
    """A config as read: where (``path`` as given, ``target`` after links), its bytes
    (None: no such file), its text without a BOM, and whether it had one."""

    path: Path
    target: Path
    data: bytes | None
    text: str
    bom: bool


def read(path: Path) -> Snapshot:
    """Read a config (a missing file reads as empty).

    Raises:
        ClientConfigError: not a regular file, unreadable, or not UTF-8.
    """
    target = Path(os.path.realpath(path))
    try:
        data = _read_regular(target)
    except FileNotFoundError:
        return Snapshot(path, target, None, "", bom=False)
    except OSError as exc:
        raise ClientConfigError(
            f"{path}: cannot read: {exc.strerror or exc}", path=str(path)
        ) from exc
    if data is None:
        raise ClientConfigError(f"{path}: not a regular file", path=str(path))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientConfigError(
            f"{path}: not UTF-8 ({exc.reason} at byte {exc.start})", path=str(path)
        ) from exc
    bom = text.startswith(_BOM)
    return Snapshot(path, target, data, text.removeprefix(_BOM), bom)


def _encoded(snapshot: Snapshot, text: str) -> bytes:
    return ((_BOM if snapshot.bom else "") + text).encode("utf-8", "surrogatepass")


def write(snapshot: Snapshot, text: str) -> bool:
    """Replace the file with ``text`` if it still holds the snapshot's bytes.

    Returns:
        whether the file was written (False: ``text`` is what it already holds).

    Raises:
        ClientConfigError: the file changed since it was read (it is left as it is), or
            the write failed (the file is left as it was).
    """
    data = _encoded(snapshot, text)
    if data == snapshot.data:
        return False
    target = snapshot.target
    where = str(snapshot.path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        old = target.stat() if snapshot.data is not None else None
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o600
        handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ClientConfigError(
            f"{where}: cannot write: {exc.strerror or exc}", path=where
        ) from exc
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        if old is not None and hasattr(os, "chown"):
            _keep_owner(temp, old)
        if _current(target) != snapshot.data:
            raise ClientConfigError(
                f"{where}: changed since it was read; nothing written (run the command again)",
                path=where,
            )
        os.replace(temp, target)
    except OSError as exc:
        raise ClientConfigError(
            f"{where}: cannot write: {exc.strerror or exc}", path=where
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return True


def _keep_owner(temp: str, old: os.stat_result) -> None:
    """Give the new file the old one's owner and group (``sudo spillstore install`` must
    not leave a user's config owned by root, where the client cannot read it); an owner
    this process may not set is left as it is."""
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(OSError):
            os.chown(temp, old.st_uid, old.st_gid)


def _read_regular(target: Path) -> bytes | None:
    """The bytes of a regular file; None for anything else (a FIFO, a device, a
    socket), which is never opened (opening a FIFO blocks until a writer comes).

    Raises:
        OSError: it cannot be read (``FileNotFoundError``: no such file).
    """
    if not stat.S_ISREG(target.stat().st_mode):
        return None
    return target.read_bytes()


def _current(target: Path) -> bytes | None:
    try:
        return _read_regular(target)
    except FileNotFoundError:
        return None


def diff(snapshot: Snapshot, text: str) -> str:
    """A unified diff from the file to ``text`` (``--dry-run``); empty when equal."""
    lines = difflib.unified_diff(
        snapshot.text.splitlines(keepends=True),
        text.splitlines(keepends=True),
        fromfile=str(snapshot.path),
        tofile=f"{snapshot.path} (after)",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def save_backup(folder: Path, backup: Backup, *, client: str, path: Path) -> None:
    """Keep ``backup`` in ``folder`` (made 0700), as a 0600 file written atomically.

    One file per key holds a copy per config path (two configs can wrap an entry of the
    same name to the same value, from originals written differently); the copy saved
    last comes last.

    Raises:
        ClientConfigError: it cannot be written (then the install must not go ahead).
    """
    copies = _copies(folder, backup.key)
    copies.pop(str(path), None)
    copies[str(path)] = {"original_text": backup.original_text, "original": backup.original}
    record = {"version": _BACKUP_VERSION, "client": client, "name": backup.name, "copies": copies}
    data = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8", "surrogatepass")
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, temp = tempfile.mkstemp(prefix=".backup.", dir=folder)
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.chmod(temp, 0o600)
            os.replace(temp, folder / f"{backup.key}.json")
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    except OSError as exc:
        raise ClientConfigError(
            f"{folder}: cannot keep a backup ({exc.strerror or exc}); nothing changed",
            path=str(folder),
        ) from exc


def _copies(folder: Path, key: str) -> dict[str, dict[str, Any]]:
    try:
        record = json.loads((folder / f"{key}.json").read_bytes().decode("utf-8", "surrogatepass"))
        copies = record["copies"]
        return {
            str(where): {"original_text": str(copy["original_text"]), "original": copy["original"]}
            for where, copy in copies.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def load_backup(folder: Path, key: str, *, path: Path) -> Backup | None:
    """The backup kept under ``key``: the copy made from ``path`` if there is one, else
    the copy saved last (the config was moved); None when there is none or it cannot be
    read (the entry is then rebuilt from its command line)."""
    copies = _copies(folder, key)
    if not copies:
        return None
    copy = copies.get(str(path)) or list(copies.values())[-1]
    return Backup(key, "", copy["original_text"], copy["original"])
