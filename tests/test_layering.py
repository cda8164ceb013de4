"""The dependency direction (docs/architecture.md): every import in holodeck_core points down

    defaults ← naming, terminal ← redaction, stats ← errors ← models ← config ← calls, files
    ← providers ← tools, metrics ← agents ← runner ← history, reports ← engine ← dashboard
    ← cli

with holodeck_pipelines on top (it imports the engine, never the CLI) and the loopback model
server (testing) beside, importing nothing of the engine. Every module belongs to a listed
layer (a new package must be placed), no import goes up, and no package reaches itself
through others. Lazy imports inside functions count too: they run as soon as the function
does."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS: dict[str, int] = {
    "holodeck_core.defaults": 0,
    "holodeck_core.naming": 1,
    "holodeck_core.terminal": 1,
    "holodeck_core.redaction": 2,
    "holodeck_core.stats": 2,
    "holodeck_core.errors": 3,
    "holodeck_core.models": 4,
    "holodeck_core.testing": 4,  # the loopback model server: beside, self-contained
    "holodeck_core.config": 5,
    "holodeck_core.calls": 6,
    "holodeck_core.files": 6,
    "holodeck_core.providers": 7,
    "holodeck_core.tools": 8,
    "holodeck_core.metrics": 8,
    "holodeck_core.agents": 9,
    "holodeck_core.runner": 10,
    "holodeck_core.history": 11,
    "holodeck_core.reports": 11,
    "holodeck_core.engine": 12,
    "holodeck_core.dashboard": 13,  # a reader of the history
    "holodeck_core.cli": 14,
    "holodeck_pipelines": 15,
}
EXACT: dict[str, int] = {"holodeck_core": 0}
"""Modules placed by their own name only: the package's ``__init__`` (its version) places
none of its submodules."""
FORBIDDEN_IN_CORE = ("dagster", "holodeck_pipelines")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p): p
    for package in ("holodeck_core", "holodeck_pipelines")
    for p in (REPO / package).rglob("*.py")
}


def owner(module: str) -> str | None:
    """The listed package or module ``module`` belongs to, if any."""
    if module in EXACT:
        return module
    name = module
    while name and name not in LAYERS:
        name = name.rpartition(".")[0]
    return name or None


def layer(module: str) -> int:
    name = owner(module)
    if name is None:
        raise AssertionError(f"no layer for {module!r}: place it in LAYERS")
    return EXACT.get(name, LAYERS.get(name, 0))


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


def unplaced(modules: dict[str, Path]) -> list[str]:
    return sorted(f"{path}: {m} is in no layer" for m, path in modules.items() if owner(m) is None)


def test_every_module_has_a_layer() -> None:
    assert unplaced(MODULES) == []


def test_an_unlisted_package_has_no_layer() -> None:
    """The check itself: a module of a new package is not placed by ``holodeck_core``."""
    assert unplaced({"holodeck_core.newthing.mod": Path("newthing/mod.py")}) == [
        "newthing/mod.py: holodeck_core.newthing.mod is in no layer"
    ]


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


def where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(REPO)}:{line}"


def upward_imports(modules: dict[str, Path]) -> list[str]:
    return [
        f"{where(module, line) if module in MODULES else f'{path}:{line}'}: {module} imports "
        f"{name} (layer {layer(module)} -> {layer(name)})"
        for module, path in modules.items()
        for line, name in imports(path, type_checking=True)
        if name.split(".")[0] in ("holodeck_core", "holodeck_pipelines")
        and layer(name) > layer(module)
    ]


def test_no_upward_import() -> None:
    assert upward_imports(MODULES) == []


def test_the_pipelines_import_the_engine_never_the_cli() -> None:
    offenders = [
        f"{where(module, line)}: {module} imports {name}"
        for module, path in MODULES.items()
        if module.startswith("holodeck_pipelines")
        for line, name in imports(path, type_checking=True)
        if name.startswith("holodeck_core.cli")
    ]
    assert offenders == []


DOOR = (
    "holodeck_core.engine",
    "holodeck_core.models",
    "holodeck_core.errors",
    "holodeck_core.defaults",
    "holodeck_core.naming",
    "holodeck_core.config.project",
    "holodeck_core.config.loader",
)
"""What the CLI and the pipelines may import of the domain (docs/architecture.md, "the engine
is the only door upward"): the engine's use cases and the vocabulary every layer shares."""
DOOR_EXCEPTIONS = {
    "holodeck_core.cli": ("holodeck_core.cli", "holodeck_core.terminal"),
    "holodeck_core.cli.model_server": ("holodeck_core.testing",),
    "holodeck_core.cli.dashboard": ("holodeck_core.dashboard", "holodeck_core.testing"),
    "holodeck_pipelines": ("holodeck_pipelines", "holodeck_core.dashboard.links"),
}
"""The few others, by importing module or package: the CLI's own modules and the terminal's
safe text; the two commands that start an application of their own (the loopback model
server; the dashboard, a layer above the engine, with the example's seed runs); and the
dashboard's deep links in the pipelines' metadata."""


def allowed_through_the_door(module: str) -> tuple[str, ...]:
    extra = [
        names
        for owner_, names in DOOR_EXCEPTIONS.items()
        if module == owner_ or module.startswith(f"{owner_}.")
    ]
    return DOOR + tuple(name for names in extra for name in names)


def side_doors(modules: dict[str, Path]) -> list[str]:
    """``file:line: module imports name`` for each import of the CLI or the pipelines that
    reaches the domain around the engine (lazy and type-only imports count)."""
    found = []
    for module, path in modules.items():
        if not module.startswith(("holodeck_core.cli", "holodeck_pipelines")):
            continue
        allowed = allowed_through_the_door(module)
        for line, name in imports(path, type_checking=True):
            if name.split(".")[0] in ("holodeck_core", "holodeck_pipelines") and not any(
                name == room or name.startswith(f"{room}.") for room in allowed
            ):
                shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                found.append(f"{shown}:{line}: {module} imports {name}")
    return found


def test_the_cli_and_the_pipelines_reach_the_domain_through_the_engine() -> None:
    assert side_doors(MODULES) == []


def test_a_side_door_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    """The check itself: an asset module importing the runner lazily, and a command importing
    the history under ``TYPE_CHECKING``, are each named where they are; the engine is not."""
    assets, command = tmp_path / "assets.py", tmp_path / "history.py"
    assets.write_text(
        "import dagster as dg\nfrom holodeck_core.engine.run import run_suite\n"
        "def build():\n    from holodeck_core.runner.suite import Suite\n"
    )
    command.write_text(
        "from typing import TYPE_CHECKING\nfrom holodeck_core.terminal import plain\n"
        "if TYPE_CHECKING:\n    from holodeck_core.history.store import History\n"
    )
    planted = {"holodeck_pipelines.assets": assets, "holodeck_core.cli.history": command}
    assert side_doors(planted) == [
        f"{assets}:4: holodeck_pipelines.assets imports holodeck_core.runner.suite",
        f"{command}:4: holodeck_core.cli.history imports holodeck_core.history.store",
    ]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            found.append([*trail[trail.index(node) :], node])
            return
        if node in done:
            return
        for name in sorted(graph.get(node, ())):
            visit(name, [*trail, node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the modules of holodeck_core/holodeck_pipelines it imports: at the top, inside
    functions or for the type checker alike (a package's ``__init__``, which every submodule
    import runs first anyway, is not an edge back)."""
    return {
        module: {
            name
            for _, name in imports(path, type_checking=True)
            if name in MODULES and not module.startswith(f"{name}.")
        }
        for module, path in modules.items()
    }


def test_no_import_circles() -> None:
    """No module reaches itself through the imports of others, lazy and type-only imports
    included: two modules that need each other are one meaning split in two."""
    assert cycles(module_graph(MODULES)) == []


def test_the_circle_check_sees_lazy_and_type_only_imports(tmp_path: Path) -> None:
    """The check itself: a circle closed by an import inside a function and one under
    ``TYPE_CHECKING`` is found."""
    lazy, typed = tmp_path / "lazy.py", tmp_path / "typed.py"
    lazy.write_text("def f():\n    from holodeck_core.defaults import LLM_TIMEOUT_S\n")
    typed.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from holodeck_core.naming import slugify\n"
    )
    graph = module_graph({"holodeck_core.naming": lazy, "holodeck_core.defaults": typed})
    assert cycles(graph) == [
        ["holodeck_core.defaults", "holodeck_core.naming", "holodeck_core.defaults"]
    ]


def test_no_package_circles() -> None:
    """No package of a layer reaches itself through another (agents → tools → agents was one),
    type-only imports included: each edge is named with its import line."""
    edges: dict[tuple[str, str], str] = {}
    for module, path in MODULES.items():
        for line, name in imports(path, type_checking=True):
            source, target = owner(module), owner(name)
            if source and target and source != target and target in LAYERS:
                edges.setdefault((source, target), where(module, line))
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    found = [
        " -> ".join(cycle) + " (" + ", ".join(edges[e] for e in itertools.pairwise(cycle)) + ")"
        for cycle in cycles(graph)
    ]
    assert found == []


def test_the_layering_test_sees_lazy_upward_imports(tmp_path: Path) -> None:
    """The check itself: an import inside a function is found, with its file and line."""
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from holodeck_core.history import store\n")
    assert list(imports(path, type_checking=True)) == [(2, "holodeck_core.history.store")]
    offenders = upward_imports({"holodeck_core.runner.planted": path})
    assert offenders == [
        f"{path}:2: holodeck_core.runner.planted imports holodeck_core.history.store "
        "(layer 10 -> 11)"
    ]
