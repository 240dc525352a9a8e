"""The file layer on real files: what is written reads back as the same text, byte for
byte (a byte-order mark and CRLF kept), and the backups come back per config path."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spillstore._clients import files
from spillstore._clients.ops import Backup
from tests.strategies import valid_utf8_text


@settings(max_examples=50)
@given(before=valid_utf8_text, after=valid_utf8_text, bom=st.booleans())
def test_a_write_reads_back_as_the_same_text(before: str, after: str, bom: bool) -> None:
    """read, write new text, read again: the text comes back exactly, the BOM stays."""
    assume(not before.startswith("\ufeff") and not after.startswith("\ufeff"))  # a BOM itself
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + before.encode())
        snapshot = files.read(path)
        assert (snapshot.text, snapshot.bom) == (before, bom)
        assert files.write(snapshot, after) is (after != before)
        again = files.read(path)
        assert (again.text, again.bom) == (after, bom)
        assert [p.name for p in Path(folder).iterdir()] == ["config.json"]


def test_backups_keep_one_copy_per_config_path(tmp_path: Path) -> None:
    """The copy made from a path comes back for that path; another path (a moved
    config) gets the copy saved last; an unknown key gives None."""
    folder = tmp_path / "backups"
    files.save_backup(folder, Backup("k", "git", "A", {"a": 1}), client="cursor", path=Path("/one"))
    files.save_backup(folder, Backup("k", "git", "B", {"b": 2}), client="cursor", path=Path("/two"))
    one = files.load_backup(folder, "k", path=Path("/one"))
    moved = files.load_backup(folder, "k", path=Path("/moved"))
    assert one is not None and (one.original_text, one.original) == ("A", {"a": 1})
    assert moved is not None and moved.original_text == "B"
    assert files.load_backup(folder, "other", path=Path("/one")) is None
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
