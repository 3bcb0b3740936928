"""The package's import structure: no import cycles between gymloop's modules, no name shadowing a module.

The graph is read from the source with :mod:`ast` (nothing is imported to build it), so imports inside
functions count as much as module-level ones: a lazy import hides a cycle from the interpreter's
start-up, not from the design.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import gymloop

SRC = Path(gymloop.__file__).resolve().parent
ROOT = "gymloop"


def _modules() -> dict[str, Path]:
    """Every module of the package: ``{dotted name: file}`` (a package is its ``__init__.py``)."""
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        parts = (ROOT, *f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """All import statements, at any depth, except those under ``if TYPE_CHECKING:`` (never run)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of the package's modules."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def _targets(mod: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``node``, a statement of module ``mod``, executes."""
    is_pkg = modules[mod].name == "__init__.py"
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = mod.split(".") if is_pkg else mod.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            pkg = ".".join(base + ([node.module] if node.module else []))
        else:
            pkg = node.module or ""
        for a in node.names:
            sub = f"{pkg}.{a.name}"
            names.append(sub if sub in modules else pkg)  # `from . import x`: the submodule x, else the package
    out = set()
    for n in names:
        target = _known(n, modules)
        if target is None:
            continue
        out.add(target)
        # Importing a.b.c first runs the package a.b unless it is already running: the importer is inside it,
        # or it is the root package (every gymloop module is imported after gymloop/__init__ has started).
        parts = target.split(".")
        for i in range(2, len(parts)):
            parent = ".".join(parts[:i])
            if mod != parent and not mod.startswith(parent + "."):
                out.add(parent)
    out.discard(mod)
    return out


def import_graph() -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``, module-level and function-level imports alike."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[mod] = set()
        for node in _imports(tree):
            graph[mod] |= _targets(mod, node, modules)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return path[path.index(v) :] + [v]
            if v not in state:
                found = dfs(v)
                if found:
                    return found
        path.pop()
        state[u] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = dfs(m)
            if found:
                return found
    return None


def test_the_graph_sees_lazy_relative_and_parent_package_imports():
    graph = import_graph()
    assert "gymloop.errors" in graph["gymloop.spaces"]  # a module-level relative import
    assert "gymloop.games" in graph["gymloop.cli"]  # imported inside a function, as part of gymloop.games.x
    assert "gymloop.actions" in graph["gymloop"]  # the package's re-exports are edges too
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles_inside_the_package():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle between gymloop's modules: " + " -> ".join(cycle or [])


def _shadowing(pkg: ModuleType) -> list[str]:
    """Public names of package ``pkg`` that are a submodule's name but not that submodule (a function, say)."""
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    public = set(getattr(pkg, "__all__", ())) | {n for n in vars(pkg) if not n.startswith("_")}
    return sorted(n for n in public if n in submodules and not inspect.ismodule(getattr(pkg, n)))


@pytest.mark.parametrize(
    "package", ["gymloop", "gymloop.enn", "gymloop.runtime", "gymloop.nn", "gymloop.train", "gymloop.games", "gymloop.render"]
)
def test_no_public_name_shadows_a_submodule(package):
    if package == "gymloop.render":
        pytest.importorskip("pygame")
    pkg = importlib.import_module(package)
    shadowing = _shadowing(pkg)
    assert not shadowing, (
        f"{package}.{shadowing[0]} is not the module {package}.{shadowing[0]} (a public name hides it); rename the module"
    )


def test_shadowing_is_detected():
    fake = ModuleType("gymloop")
    fake.__path__ = [str(SRC)]  # the real package's submodules
    fake.checker = lambda: None  # a function named like gymloop/checker.py
    fake.actions = importlib.import_module("gymloop.actions")  # the module itself: fine
    assert _shadowing(fake) == ["checker"]


def test_tests_mirror_the_package_layout():
    """A test file in ``tests/<folder>/`` tests the subpackage ``gymloop/<folder>`` (or the example
    ``examples/<folder>``, such as the web page's ``tests/web``): no stray folders."""
    tests = Path(__file__).resolve().parent
    examples = tests.parent / "examples"
    stray = [
        str(p.relative_to(tests))
        for p in tests.rglob("test_*.py")
        if p.parent != tests and "fixtures" not in p.parts and not (SRC / p.parent.relative_to(tests)).is_dir()
        and not (examples / p.parent.relative_to(tests)).is_dir()
    ]
    assert not stray, f"test files outside a folder that mirrors a gymloop subpackage: {stray}"


#: the most lines a module may have (``docs/architecture.md``: a file that grows past it has taken on a second job)
MAX_LINES = 800
#: the most for a module of ``train/`` (one job each: collection, update, normalizers, run folder, ...)
MAX_TRAIN_LINES = 500


def test_no_module_outgrows_its_job() -> None:
    too_long = []
    for name, f in _modules().items():
        limit = MAX_TRAIN_LINES if name.startswith(f"{ROOT}.train.") else MAX_LINES
        n = len(f.read_text(encoding="utf-8").splitlines())
        if n > limit:
            too_long.append(f"{f.relative_to(SRC)}: {n} lines (at most {limit})")
    assert not too_long, "split these modules by job: " + "; ".join(too_long)
