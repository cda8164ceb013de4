"""The dependency direction (issue 12): every import in holodeck_core points down the layers

    models ← config ← calls ← agents / tools / metrics ← runner ← history / reports ← commands, CLI

and holodeck_pipelines sits on top; no module imports itself back through others. Lazy
imports inside functions count too: they run as soon as the function does."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS: dict[str, int] = {
    "holodeck_core.errors": 0,
    "holodeck_core.naming": 0,
    "holodeck_core.models": 0,
    "holodeck_core.redaction": 0,
    "holodeck_core.config": 1,
    "holodeck_core.testing": 1,  # the loopback model server: self-contained
    "holodeck_core.calls": 2,
    "holodeck_core.files": 2,
    "holodeck_core.tools": 3,
    "holodeck_core.agents": 3,
    "holodeck_core.metrics": 3,
    "holodeck_core.runner": 4,
    "holodeck_core.history": 5,
    "holodeck_core.reports": 5,
    "holodeck_core.commands": 6,
    "holodeck_core.cli": 6,
    "holodeck_core.dashboard": 6,  # a reader of the history, like the CLI
    "holodeck_core": 0,  # the package itself: its version only
    "holodeck_pipelines": 7,
}
FORBIDDEN_IN_CORE = ("dagster", "holodeck_pipelines")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p): p
    for package in ("holodeck_core", "holodeck_pipelines")
    for p in (REPO / package).rglob("*.py")
}


def layer(module: str) -> int:
    while module not in LAYERS:
        module = module.rpartition(".")[0]
        if not module:
            raise AssertionError(f"no layer for {module!r}: add it to LAYERS")
    return LAYERS[module]


def imports(path: Path, *, type_checking: bool) -> Iterator[tuple[int, str]]:
    """(line, imported module) of every import; ``from pkg import sub`` names ``pkg.sub``."""
    tree = ast.parse(path.read_text())
    hidden: set[int] = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                hidden.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                yield node.lineno, sub if sub in MODULES else node.module


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer(module)


@pytest.mark.parametrize("package", ["holodeck_core"])
def test_holodeck_core_imports_neither_dagster_nor_the_pipelines(package: str) -> None:
    offenders = [
        f"{module}:{line} imports {name}"
        for module, path in MODULES.items()
        if module.startswith(package)
        for line, name in imports(path, type_checking=True)
        if name.split(".")[0] in FORBIDDEN_IN_CORE
    ]
    assert offenders == []


def test_no_upward_import() -> None:
    offenders = [
        f"{module}:{line} imports {name} (layer {layer(module)} -> {layer(name)})"
        for module, path in MODULES.items()
        for line, name in imports(path, type_checking=True)
        if name.split(".")[0] in ("holodeck_core", "holodeck_pipelines")
        and layer(name) > layer(module)
    ]
    assert offenders == []


def test_no_import_circles() -> None:
    """No module reaches itself through the imports of others (a package's ``__init__``,
    which every submodule import runs first anyway, is not an edge back)."""
    graph = {
        module: {
            name
            for _, name in imports(path, type_checking=False)
            if name in MODULES and not module.startswith(f"{name}.")
        }
        for module, path in MODULES.items()
    }
    circles: list[list[str]] = []
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            circles.append([*trail[trail.index(module) :], module])
            return
        if module in done:
            return
        for name in sorted(graph[module]):
            visit(name, [*trail, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert circles == []


def test_the_layering_test_sees_lazy_upward_imports(tmp_path: Path) -> None:
    """The check itself: an import inside a function is found, with its line."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from holodeck_core.history import store\n")
    assert list(imports(path, type_checking=True)) == [(2, "holodeck_core.history.store")]
    assert layer("holodeck_core.history.store") > layer("holodeck_core.runner.suite")
