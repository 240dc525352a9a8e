"""The layout's rules, read from the source so that a move that breaks one fails here.

Every module under ``spillstore/`` is parsed with :mod:`ast`; imports are collected
wherever they stand (module level, inside functions, under ``TYPE_CHECKING``). A
relative import is resolved against its package, and ``from pkg import name`` counts as
an import of the module ``pkg.name`` when that is a module, else of ``pkg``. Importing a
package does not count as importing its parents (``import spillstore._core.utf8`` is one
arrow, to ``spillstore._core.utf8``).

ARCHITECTURE.md explains the layers; :data:`ALLOWED` below is their definition.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import inspect
import itertools
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

import spillstore
from spillstore._errors import SpillstoreError

PACKAGE_DIR = Path(spillstore.__file__).resolve().parent
MAX_MODULE_LINES = 500

_BASE = frozenset({"_version", "_errors", "_content", "_core", "_twins"})
_BELOW_SHELLS = _BASE | {"_settings", "text", "_stores", "s3", "_tools", "_service"}

ALLOWED: dict[str, frozenset[str]] = {
    "_version": frozenset(),
    "_errors": frozenset(),
    "_content": frozenset({"_errors"}),
    "_core": frozenset({"_errors", "_content"}),
    "_twins": frozenset({"_errors"}),
    "_settings": frozenset({"_errors", "_core"}),
    "text": frozenset({"_errors", "_content", "_core"}),
    "_stores": _BASE,
    "s3": _BASE | {"_stores"},
    "_tools": _BASE | {"_stores"},
    "_service": _BASE | {"_settings", "_stores", "_tools"},
    "loop": _BELOW_SHELLS,
    "langchain": _BELOW_SHELLS | {"loop"},
    "openai_agents": _BELOW_SHELLS | {"loop"},
    "pydantic_ai": _BELOW_SHELLS | {"loop"},
    "mcp": _BELOW_SHELLS | {"loop"},
    "_clients": frozenset({"_errors", "_core"}),
    "_cli": _BELOW_SHELLS | {"loop", "mcp", "_clients"},
}
"""Layer -> the layers it may import (each may also import itself): the definition of the
layers. A layer is a top-level module or package of spillstore. Above all of them sit the
front door (``spillstore/__init__.py``) and the ``__main__`` entry points (``python -m``):
they may import anything, and nothing imports them."""

FRONT_DOOR = "spillstore"

IMPURE_MODULES = frozenset(
    {
        *("os", "io", "pathlib", "shutil", "tempfile", "glob", "time", "subprocess"),
        *("socket", "select", "signal", "asyncio", "anyio", "mmap", "fcntl", "sqlite3"),
        *("multiprocessing", "http", "urllib", "platformdirs", "aiofiles", "obstore"),
        *("random", "secrets", "uuid", "logging"),
    }
)
"""Modules that do I/O, read the clock, the environment or a random source: ``_core``
imports none."""

IMPURE_CALLS = frozenset({"open", "input", "print", "now", "utcnow", "today"})
"""Calls ``_core`` never makes (``open(...)``, ``datetime.now()``, ``date.today()``...)."""


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Import:
    """One import arrow: ``source`` imports ``target`` (a module), perhaps a ``name`` of it."""

    source: str
    target: str
    name: str | None
    line: int
    type_checking: bool

    def __str__(self) -> str:
        what = f"{self.target}.{self.name}" if self.name else self.target
        where = f"{module_path(self.source)}:{self.line}"
        return f"{where}: {self.source} -> {what}" + (
            " (TYPE_CHECKING)" if self.type_checking else ""
        )


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def module_path(module: str) -> str:
    """The module's file, relative to the repository root."""
    return str(modules()[module].relative_to(PACKAGE_DIR.parent))


@cache
def tree(module: str) -> ast.Module:
    """The parsed source of ``module``."""
    path = modules()[module]
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, type_checking: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under ``node``, with whether it sits in an ``if TYPE_CHECKING:`` body."""
    for child in ast.iter_child_nodes(node):
        yield child, type_checking
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield stmt, True
                yield from _walk(stmt, True)
            for stmt in child.orelse:
                yield stmt, type_checking
                yield from _walk(stmt, type_checking)
        else:
            yield from _walk(child, type_checking)


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


@cache
def imports(module: str) -> tuple[Import, ...]:
    """Every import of another spillstore module made by ``module``, anywhere in it."""
    found = []
    for node, type_checking in _walk(tree(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules():
                    found.append(Import(module, alias.name, None, node.lineno, type_checking))
        elif isinstance(node, ast.ImportFrom):
            origin = _absolute(module, node)
            if origin not in modules():
                continue
            for alias in node.names:
                submodule = f"{origin}.{alias.name}"
                if submodule in modules():
                    found.append(Import(module, submodule, None, node.lineno, type_checking))
                else:
                    found.append(Import(module, origin, alias.name, node.lineno, type_checking))
    return tuple(imp for imp in found if imp.target != module)


def layer(module: str) -> str:
    """The layer of a module: its top-level module or package under spillstore."""
    return module.split(".")[1] if module != FRONT_DOOR else FRONT_DOOR


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


# --------------------------------------------------------------------------- the graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``[]`` when it has none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(reversed(error.args[1]))
    return []


def test_the_runtime_import_graph_has_no_cycles() -> None:
    """No module imports itself through others at run time, not even from inside a function.

    Imports under ``TYPE_CHECKING`` are left out of this check: they never run, so they
    cannot leave a module half-imported. The layer test below still holds them.
    """
    graph = {
        module: {imp.target for imp in imports(module) if not imp.type_checking}
        for module in modules()
    }
    cycle = _cycle(graph)
    arrows = [
        str(imp)
        for source, target in itertools.pairwise(cycle)
        for imp in imports(source)
        if imp.target == target and not imp.type_checking
    ]
    assert not cycle, "an import cycle:\n  " + "\n  ".join(arrows)


def test_the_cycle_finder_finds_cycles() -> None:
    """The cycle check above can fail: it finds a two-module cycle and a longer one."""
    assert _cycle({"a": {"b"}, "b": {"a"}}) in (["a", "b", "a"], ["b", "a", "b"])
    assert len(_cycle({"c": {"d"}, "d": {"e"}, "e": {"c", "f"}, "f": set()})) == 4
    assert _cycle({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_a_private_name_of_another_module() -> None:
    """No module imports another spillstore module's ``_private`` names, or reaches them as
    ``module._name``; private modules and packages themselves may be imported."""
    offences = [
        str(imp)
        for module in modules()
        for imp in imports(module)
        if imp.name and _private(imp.name)
    ]
    offences += [
        f"{module_path(module)}:{line}: {module} uses {target}.{name}"
        for module in modules()
        for target, name, line in _module_attributes(module)
        if _private(name) and target != module
    ]
    assert not offences, "private names used across modules:\n  " + "\n  ".join(offences)


def _module_attributes(module: str) -> Iterator[tuple[str, str, int]]:
    """``(module, name, line)`` for each ``alias.name`` where alias is a spillstore module."""
    bound: dict[str, str] = {}
    for node, _ in _walk(tree(module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == FRONT_DOOR:
                    bound[alias.asname or FRONT_DOOR] = alias.name if alias.asname else FRONT_DOOR
        elif isinstance(node, ast.ImportFrom):
            origin = _absolute(module, node)
            for alias in node.names:
                if f"{origin}.{alias.name}" in modules():
                    bound[alias.asname or alias.name] = f"{origin}.{alias.name}"
    for node, _ in _walk(tree(module)):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        chain = [node.attr]
        base = node.value
        while isinstance(base, ast.Attribute):
            chain.insert(0, base.attr)
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in bound:
            continue
        target = bound[base.id]
        for name in chain:
            if f"{target}.{name}" not in modules():
                if node.attr == name:  # report each access once, at its own node
                    yield target, name, node.lineno
                break
            target = f"{target}.{name}"


def test_no_module_imports_a_private_module_or_name_of_a_dependency() -> None:
    """Nothing private of another distribution is imported (``typer._click``): a private
    module can change in any release, so only public paths are used."""
    offences = []
    for module in modules():
        for node, _ in _walk(tree(module)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] != FRONT_DOOR and any(map(_private, name.split("."))):
                    offences.append(f"{module_path(module)}:{node.lineno}: {name}")
    assert not offences, "private imports from dependencies:\n  " + "\n  ".join(offences)


def test_every_layer_imports_only_the_layers_below_it() -> None:
    """Arrows point down: each layer imports only what :data:`ALLOWED` lists for it; only
    the front door and the ``__main__`` entry points may import every layer."""
    offences = [
        str(imp)
        for module in modules()
        for imp in imports(module)
        if imp.target.endswith(".__main__")
    ]
    for module in modules():
        source = layer(module)
        if source == FRONT_DOOR or module.endswith(".__main__"):
            continue
        if source not in ALLOWED:
            offences.append(f"{module_path(module)}: layer {source!r} is missing from ALLOWED")
            continue
        offences += [
            str(imp)
            for imp in imports(module)
            if layer(imp.target) != source and layer(imp.target) not in ALLOWED[source]
        ]
    assert not offences, "imports against the layers:\n  " + "\n  ".join(offences)


def test_the_allowed_arrows_point_down() -> None:
    """The layer table is itself acyclic, so following allowed arrows never comes back."""
    assert _cycle({unit: set(allowed) for unit, allowed in ALLOWED.items()}) == []
    assert all(target in ALLOWED for allowed in ALLOWED.values() for target in allowed)


# --------------------------------------------------------------------------- modules


def test_no_module_is_over_500_lines() -> None:
    """Every module fits in :data:`MAX_MODULE_LINES` lines (counted as ``wc -l`` does)."""
    sizes = {
        module_path(module): path.read_bytes().count(b"\n") for module, path in modules().items()
    }
    over = {path: lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_the_core_is_pure() -> None:
    """``_core`` does no I/O and reads no clock or environment: it imports none of
    :data:`IMPURE_MODULES` and calls none of :data:`IMPURE_CALLS`."""
    offences = []
    for module in modules():
        if layer(module) != "_core":
            continue
        for node, _ in _walk(tree(module)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if not node.level else []
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                names = []
                if called in IMPURE_CALLS:
                    offences.append(f"{module_path(module)}:{node.lineno}: calls {called}()")
            else:
                continue
            offences += [
                f"{module_path(module)}:{node.lineno}: imports {name}"
                for name in names
                if name.split(".")[0] in IMPURE_MODULES
            ]
    assert not offences, "impure code in _core:\n  " + "\n  ".join(offences)


# --------------------------------------------------------------------------- errors


def _importable() -> list[str]:
    """The modules that can be imported without side effects (not ``__main__``)."""
    return [module for module in modules() if not module.endswith("__main__")]


def exception_classes() -> list[type[BaseException]]:
    """Every exception class defined in the package, nested classes included."""
    found: dict[str, type[BaseException]] = {}

    def collect(owner: ModuleType | type, module: str) -> None:
        for value in vars(owner).values():
            if inspect.isclass(value) and value.__module__ == module:
                if issubclass(value, BaseException):
                    found[f"{module}.{value.__qualname__}"] = value
                if value is not owner:
                    collect(value, module)

    for module in _importable():
        collect(importlib.import_module(module), module)
    return [found[name] for name in sorted(found)]


def test_every_exception_derives_from_spillstore_error() -> None:
    """Every exception class the package defines is a :class:`SpillstoreError`, so
    ``except SpillstoreError`` catches whatever spillstore raises on purpose."""
    strays = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in exception_classes()
        if not issubclass(cls, SpillstoreError)
    ]
    assert not strays, f"exceptions outside the error tree: {strays}"


def _instance(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` with a message and every required argument filled in."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    try:
        parameters = inspect.signature(cls).parameters.values()
    except ValueError:  # no __init__ of its own: it takes the message alone
        return cls("something went wrong")
    for number, param in enumerate(parameters):
        if param.default is not param.empty or param.kind in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            continue
        hint = param.annotation
        is_int = hint is int or "int" in str(hint).replace("|", " ").split()
        value: object = 40 + number if is_int else f"{param.name}-{number}"
        if param.kind is param.KEYWORD_ONLY:
            kwargs[param.name] = value
        else:
            args.append(value)
    if not args and not kwargs:
        args = ["something went wrong"]
    return cls(*args, **kwargs)


@pytest.mark.parametrize(
    "cls", exception_classes(), ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}"
)
def test_every_exception_survives_pickle(cls: type[BaseException]) -> None:
    """Each error comes back from a pickle round-trip as the same class, with the same
    message, args and attributes (errors cross process boundaries in worker pools)."""
    error = _instance(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert (str(copy), copy.args) == (str(error), error.args)
    assert vars(copy) == vars(error)


def test_the_error_finder_sees_the_error_tree() -> None:
    """The class finder above sees the errors of ``_errors``, so the checks cannot pass empty."""
    errors = importlib.import_module("spillstore._errors")
    found = set(exception_classes())
    expected = {
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    assert SpillstoreError in found
    assert expected <= found


# --------------------------------------------------------------------------- front door


def test_each_public_name_is_written_once_as_a_string() -> None:
    """The front door writes each public name once as a string (the map's key) and derives
    ``__all__`` from it, so the list cannot drift from the map."""
    written: dict[str, int] = {}
    for node in ast.walk(tree(FRONT_DOOR)):
        if isinstance(node, ast.Constant) and node.value in spillstore.__all__:
            written[node.value] = written.get(node.value, 0) + 1
    repeated = sorted(name for name, count in written.items() if count > 1)
    assert not repeated, f"public names written more than once in __init__.py: {repeated}"
