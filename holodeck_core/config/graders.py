"""Where a ``type: code`` metric's grader lives, checked without running it (config load).

``grader: module:callable`` names a module under the agent directory, else an importable one
(:mod:`holodeck_core.metrics.code_graders` runs it)."""

from __future__ import annotations

import ast
import importlib.machinery
from pathlib import Path


def parse_grader_reference(grader: str) -> tuple[str, str]:
    """``"graders.checks:exact"`` -> ``("graders.checks", "exact")``."""
    module, sep, name = grader.partition(":")
    if not sep or not module or not name.isidentifier() or ":" in name:
        raise ValueError(f"grader {grader!r} must look like module:callable")
    if not all(part.isidentifier() for part in module.split(".")):
        raise ValueError(f"grader {grader!r}: {module!r} is not a module name")
    return module, name


def find_grader_file(module: str, base_dir: Path) -> Path | None:
    """The source file of ``module`` under ``base_dir`` (a module or a package), if any."""
    stem = base_dir.joinpath(*module.split("."))
    for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def check_grader_reference(grader: str, base_dir: Path) -> str | None:
    """A human error message when ``grader`` cannot be resolved, else ``None``.

    Executes nothing: the module's file is found (under ``base_dir``, else on ``sys.path``
    through the import system's path finder) and parsed with :mod:`ast`, looking for a
    top-level ``def``, ``class``, assignment or import of the name. Modules without Python
    source, or with a ``*`` import or a module ``__getattr__``, are given the benefit of
    the doubt."""
    try:
        module, name = parse_grader_reference(grader)
    except ValueError as exc:
        return str(exc)
    path = find_grader_file(module, base_dir)
    if path is None:
        found, path = _find_on_sys_path(module)
        if not found:
            looked = base_dir.joinpath(*module.split(".")).with_suffix(".py")
            return (
                f"grader {grader!r}: module {module!r} not found (looked for {looked} "
                "and on sys.path)"
            )
        if path is None:
            return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        return f"grader {grader!r}: {path} has a syntax error at line {exc.lineno}: {exc.msg}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"grader {grader!r}: cannot read {path}: {exc}"
    names, open_ended = _top_level_names(tree.body)
    if name in names or open_ended:
        return None
    return f"grader {grader!r}: {path} has no top-level {name!r} (a def, class or assignment)"


def _find_on_sys_path(module: str) -> tuple[bool, Path | None]:
    """(found, Python source path or None) using path finders only (no module runs)."""
    parts = module.split(".")
    search: list[str] | None = None
    spec = None
    for index in range(len(parts)):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: index + 1]), search)
        if spec is None:
            return False, None
        locations = spec.submodule_search_locations
        search = list(locations) if locations is not None else None
        if index < len(parts) - 1 and search is None:
            return False, None
    origin = spec.origin if spec is not None else None
    if origin and origin.endswith(".py"):
        return True, Path(origin)
    return True, None


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], bool]:
    names: set[str] = set()
    open_ended = False
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            open_ended |= node.name == "__getattr__"
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(_target_names(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            names.update(_target_names(node.target))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    open_ended = True
                else:
                    names.add(alias.asname or alias.name.split(".")[0])
        nested: list[list[ast.stmt]] = []
        if isinstance(node, ast.If | ast.For | ast.While | ast.With):
            nested = [node.body, node.orelse] if not isinstance(node, ast.With) else [node.body]
        elif isinstance(node, ast.Try):
            nested = [node.body, node.orelse, node.finalbody]
            nested += [handler.body for handler in node.handlers]
        for block in nested:
            inner, inner_open = _top_level_names(block)
            names |= inner
            open_ended |= inner_open
    return names, open_ended


def _target_names(target: ast.expr) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, ast.Tuple | ast.List):
        return {name for element in target.elts for name in _target_names(element)}
    return set()
