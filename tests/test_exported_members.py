"""The public surface is exactly what each public module's __all__ lists, and all of it imports."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import spillstore
import spillstore.loop
import spillstore.text

EXPECTED = {
    # the service
    "TruncationService",
    "OutputAccumulator",
    "wrap",
    "call_context",
    # the stores, and the types their methods take and return
    "Store",
    "LocalStore",
    "MemoryStore",
    "USE_STORE_DEFAULT",
    "SpillWriter",
    "AsyncSpillWriter",
    "SpillMeta",
    "LinePage",
    "GcReport",
    "GcEntry",
    # the recovery tools
    "SpillTools",
    "delegate_read",
    "ReadArgs",
    "GrepArgs",
    "ListArgs",
    # settings
    "Settings",
    "parse_size",
    "parse_duration",
    # errors
    "SpillstoreError",
    "ConfigError",
    "UsageError",
    "InvalidSpillId",
    "PathOutsideStore",
    "SpillNotFound",
    "SpillExpired",
    "RangeNotStored",
    "StoreError",
    "UnsafeStoreRoot",
    # content types
    "ToolResult",
    "Part",
    "TextPart",
    "MediaPart",
    "EmbeddedText",
    "ResourceLink",
    "SpillInfo",
}

TEXT = {
    "MIN_CAP_BYTES",
    "PART_SEPARATOR",
    "cap_content",
    "cap_result",
    "elide_middle",
    "elision_marker",
    "head",
    "tail",
    "utf8_size",
}

LOOP = {
    "MAX_TURNS_ENV",
    "UNSET",
    "AsyncModel",
    "LoopResult",
    "Message",
    "ModelTurn",
    "StopReason",
    "SyncModel",
    "ToolCall",
    "TurnGuard",
    "arun_loop",
    "max_turns_from_env",
    "parse_max_turns",
    "run_loop",
}

MOVED_TO_LOOP = (
    "TurnGuard",
    "run_loop",
    "arun_loop",
    "Message",
    "ToolCall",
    "ModelTurn",
    "LoopResult",
)
MOVED = dict.fromkeys(TEXT, "spillstore.text") | dict.fromkeys(MOVED_TO_LOOP, "spillstore.loop")
"""The names that left the front door in this release, and where they went."""


def test_all_is_pinned() -> None:
    """__all__ lists exactly the expected public names, each of which exists."""
    assert set(spillstore.__all__) == EXPECTED
    assert len(spillstore.__all__) == len(EXPECTED)
    for name in spillstore.__all__:
        assert getattr(spillstore, name) is not None


@pytest.mark.parametrize(("module", "expected"), [(spillstore.text, TEXT), (spillstore.loop, LOOP)])
def test_public_modules_pin_their_all(module: object, expected: set[str]) -> None:
    """spillstore.text and spillstore.loop list exactly their public names, all importable."""
    names = module.__all__  # type: ignore[attr-defined]
    assert set(names) == expected
    for name in names:
        assert hasattr(module, name), name


def test_public_names_live_in_private_modules_or_package() -> None:
    """Every exported class and function is defined in spillstore, not in a dependency."""
    for name in spillstore.__all__:
        value = getattr(spillstore, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__.startswith("spillstore."), name


def test_every_name_of_the_map_is_defined_where_it_says() -> None:
    """Each name of the one map (_EXPORTS, whence __all__) is defined where the map says."""
    homes = [(module, name) for module, names in spillstore._EXPORTS.items() for name in names]
    for module, name in homes:
        assert hasattr(importlib.import_module(module), name), (module, name)


def _type_checking_imports() -> set[tuple[str, str]]:
    tree = ast.parse(Path(spillstore.__file__).read_text(encoding="utf-8"))
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    found = set()
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.module is not None
        if node.module == "typing":  # for annotations (typing is not imported at run time)
            continue
        for alias in node.names:
            assert alias.asname == alias.name, "re-export as `import X as X`"
            found.add((node.module, alias.name))
    return found


def test_type_checking_imports_match_the_map() -> None:
    """What type checkers and IDEs see is exactly what __getattr__ serves, from the same module."""
    exported = {(module, name) for module, names in spillstore._EXPORTS.items() for name in names}
    assert _type_checking_imports() == exported


def test_moved_names_are_pinned() -> None:
    """The deprecated names are exactly the text helpers and the loop types."""
    moved = {name: module for module, names in spillstore._MOVED.items() for name in names}
    assert moved == MOVED


@pytest.mark.parametrize("name", sorted(MOVED))
def test_moved_names_still_work_with_a_deprecation_warning(name: str) -> None:
    """Each moved name resolves from spillstore for one release, warning of its new home."""
    new_home = importlib.import_module(MOVED[name])
    with pytest.warns(DeprecationWarning, match=rf"spillstore\.{name} moved: .*{MOVED[name]}"):
        value = getattr(spillstore, name)
    assert value is getattr(new_home, name)
    assert name not in spillstore.__all__


def test_from_import_of_a_moved_name_warns() -> None:
    """``from spillstore import head`` warns too (the usual way old code imports it)."""
    with pytest.warns(DeprecationWarning, match="spillstore.text"):
        from spillstore import head
    assert head is spillstore.text.head


def test_unknown_attribute_raises_attribute_error() -> None:
    """A name spillstore does not export raises AttributeError, as for any module."""
    with pytest.raises(AttributeError, match="no_such_name"):
        spillstore.no_such_name  # noqa: B018


def test_dir_lists_the_front_door_not_the_moved_names() -> None:
    """dir(spillstore) shows the public names and leaves the deprecated ones out."""
    listed = set(dir(spillstore))
    assert listed >= EXPECTED
    assert not listed & set(MOVED)


def test_import_stays_lazy() -> None:
    """``import spillstore`` loads none of the implementation (the CLI's --help stays fast).

    Only ``spillstore._version`` (one string) comes with it, for ``__version__``.
    """
    code = (
        "import sys, spillstore; "
        "print(sorted(m for m in sys.modules if m.startswith('spillstore.') or m == 'pydantic'"
        " if m != 'spillstore._version'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
