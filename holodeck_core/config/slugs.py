"""One slug, one agent: results, journal and prompt snapshots are stored by the slug of an
agent's name, so two agents of a project whose names slug alike (``Foo Bar`` and ``foo-bar``,
or a copied agent.yaml not yet renamed) would share them, and ``--prompt-version`` on one would
run the other's prompt. The agent listed first in ``holodeck.yaml`` keeps the slug; every later
one (and an agent the project does not list) is refused, naming both files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from holodeck_core.errors import ConfigError, Problem
from holodeck_core.naming import slugify


def collision(name: str, file: Path, others: Iterable[tuple[Path, str]]) -> Problem | None:
    """The problem if an agent named ``name`` in ``file`` shares its slug with another."""
    slug = slugify(name)
    for other_file, other_name in others:
        if other_file.resolve() != file.resolve() and slugify(other_name) == slug:
            return Problem(
                file=str(file),
                path="name",
                message=f"agent name {name!r} has the slug {slug!r}, as agent {other_name!r} "
                f"in {other_file}, which the project lists first, has; results, journals "
                f"and prompt versions are stored by slug, so give the agent in {file} a name "
                "of its own",
            )
    return None


def listed_before(file: Path, paths: list[Path]) -> list[Path]:
    """The project agents that take precedence over ``file``: those listed before it, or all
    of them when the project does not list it."""
    resolved = [path.resolve() for path in paths]
    wanted = file.resolve()
    return paths[: resolved.index(wanted)] if wanted in resolved else paths


def project_agent_names(paths: Iterable[Path]) -> list[tuple[Path, str]]:
    """``(file, name)`` of each project agent whose file parses (others are skipped: they
    are reported when they are loaded themselves)."""
    from holodeck_core.config.yaml_source import read_yaml

    names = []
    for path in paths:
        try:
            data = read_yaml(path).data
        except ConfigError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            names.append((path, data["name"]))
    return names


def check_unique_slug(name: str, file: Path) -> None:
    """:class:`ConfigError` when another agent of ``file``'s project slugs like ``name``."""
    from holodeck_core.config.project import Project

    project = Project.discover(file.parent)
    others = listed_before(file, project.agent_paths())
    problem = collision(name, file, project_agent_names(others))
    if problem is not None:
        raise ConfigError([problem])
