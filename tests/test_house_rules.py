"""Rules of the house that a reader relies on (docs/architecture.md): a name starting with
``_`` stays in its module, every default lives in ``holodeck_core/defaults.py`` and a class
name means one class."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("holodeck_core", "holodeck_pipelines")


def python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((REPO / folder).rglob("*.py"))


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: Path) -> list[str]:
    """``from holodeck_core… import _name`` lines of ``path``, as ``file:line: name``."""
    tree = ast.parse(path.read_text())
    return [
        f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno}: "
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level or (node.module or "").split(".")[0] in PACKAGES)
        for alias in node.names
        if private(alias.name)
    ]


def test_no_private_name_is_imported_from_another_module() -> None:
    """A helper two modules share is public where it lives (tests and benchmarks included)."""
    offenders = [
        line for path in python_files(*PACKAGES, "tests", "bench") for line in private_imports(path)
    ]
    assert offenders == []


def defaults_outside(path: Path) -> list[str]:
    """Module-level ``DEFAULT_*`` names ``path`` defines (assigned, annotated or imported as)."""
    tree = ast.parse(path.read_text())
    names: list[tuple[int, str]] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [(node.lineno, t.id) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append((node.lineno, node.target.id))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names += [(node.lineno, a.asname) for a in node.names if a.asname]
    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return [f"{where}:{line}: {name}" for line, name in names if name.startswith("DEFAULT_")]


def test_every_default_lives_in_defaults_py() -> None:
    """A default is named once, in holodeck_core/defaults.py (without ``DEFAULT_``: the module
    says it), and read from there; no module keeps its own or an alias of one."""
    offenders = [
        line
        for path in python_files(*PACKAGES)
        if path != REPO / "holodeck_core" / "defaults.py"
        for line in defaults_outside(path)
    ]
    assert offenders == []


def test_the_defaults_check_sees_a_constant_and_an_alias(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "from holodeck_core.defaults import TRIALS as DEFAULT_TRIALS\n"
        "DEFAULT_PORT: int = 8501\n"
        "def f() -> None:\n    DEFAULT_LOCAL = 1\n"
    )
    assert defaults_outside(path) == [f"{path}:1: DEFAULT_TRIALS", f"{path}:2: DEFAULT_PORT"]


def classes(paths: Iterator[Path]) -> dict[str, list[str]]:
    """Class name → where each class of that name is defined (``file:line``)."""
    found: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_one_class_per_name() -> None:
    """A class name in a traceback, a docstring or a grep finds one class."""
    twice = {
        name: where for name, where in classes(python_files(*PACKAGES)).items() if len(where) > 1
    }
    assert twice == {}


MAX_FUNCTION_LINES = 80


def long_functions(paths: Iterator[Path]) -> list[str]:
    """``file::name`` of every function longer than :data:`MAX_FUNCTION_LINES` lines."""
    return [
        f"{path.relative_to(REPO)}::{node.name}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]


def test_no_function_is_longer_than_a_screen() -> None:
    assert long_functions(python_files(*PACKAGES)) == []


def test_the_private_import_check_sees_a_multi_line_import(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("from holodeck_core.stats.estimates import (\n    t975,\n    _hidden,\n)\n")
    assert private_imports(path) == [f"{path}:1: holodeck_core.stats.estimates._hidden"]
