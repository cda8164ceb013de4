"""The ``history`` and ``labels`` commands reach the run history through the engine
(docs/architecture.md: the engine is the only door upward): besides the engine they import
only the contracts, the errors, the defaults, naming, the project and agent loaders, and for
their own presentation the terminal helpers and the CLI. Lazy and type-only imports count.
Their functions stay short, and none imports another module's private name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layering import REPO, imports

COMMANDS = (
    "holodeck_core/cli/history.py",
    "holodeck_core/cli/history_render.py",
    "holodeck_core/cli/labels.py",
)
ALLOWED = (
    "holodeck_core.engine",
    "holodeck_core.models",
    "holodeck_core.errors",
    "holodeck_core.defaults",
    "holodeck_core.naming",
    "holodeck_core.config.project",
    "holodeck_core.config.loader",
    "holodeck_core.terminal",
    "holodeck_core.cli",
)
MAX_FUNCTION_LINES = 80
"""A function longer than this is split by meaning (one per subcommand, one per table)."""


def allowed(name: str) -> bool:
    return any(name == room or name.startswith(f"{room}.") for room in ALLOWED)


def outside_imports(path: Path) -> list[str]:
    return [
        f"{path.name}:{line} imports {name}"
        for line, name in imports(path, type_checking=True)
        if name.split(".")[0] == "holodeck_core" and not allowed(name)
    ]


@pytest.mark.parametrize("module", COMMANDS)
def test_the_history_commands_import_only_the_engine_and_the_allowed_modules(
    module: str,
) -> None:
    assert outside_imports(REPO / module) == []


def test_an_import_of_the_history_package_is_found(tmp_path: Path) -> None:
    """The check itself: a lazy import of the history package from a command is refused."""
    path = tmp_path / "planted.py"
    path.write_text(
        "from holodeck_core.engine import history\n"
        "def f():\n    from holodeck_core.history import store\n"
    )
    assert outside_imports(path) == ["planted.py:3 imports holodeck_core.history.store"]


@pytest.mark.parametrize("module", [*COMMANDS, "holodeck_core/engine/history.py"])
def test_no_function_of_the_history_commands_is_long(module: str) -> None:
    tree = ast.parse((REPO / module).read_text())
    long = [
        f"{module}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


@pytest.mark.parametrize("module", [*COMMANDS, "holodeck_core/engine/history.py"])
def test_the_history_commands_import_no_private_name(module: str) -> None:
    tree = ast.parse((REPO / module).read_text())
    private = [
        f"{module}:{node.lineno} imports {alias.name} from {node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []
