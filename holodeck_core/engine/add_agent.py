"""Adding an agent to a project (``holodeck agents add``): optionally copy an existing agent's
folder under a name of its own, check it loads and that its name is unique in the project,
list it in ``holodeck.yaml`` and register its prompt versions.

The edits keep what a person wrote: the agent is appended to ``holodeck.yaml``'s ``agents:``
and a copy's ``name:`` replaced in the text at the place the YAML parser reports (comments,
order and quoting elsewhere untouched), then checked by parsing the result; an edit that would
not give exactly the intended value is refused."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from holodeck_core.config.loader import LoadedAgent, load_agent
from holodeck_core.config.project import PROJECT_FILE, Project
from holodeck_core.config.prompts import PromptStore
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.files.cache import atomic_write
from holodeck_core.naming import dagster_name, slugify

_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./ -]*[A-Za-z0-9_./-]|[A-Za-z0-9_./]")
NEW_PROJECT_FILE = (
    "# The holodeck project: the agents the Dagster pipelines orchestrate.\nagents:\n"
)


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain when that reads back as the same string, else
    double-quoted (a JSON string is a YAML double-quoted scalar)."""
    plain = _PLAIN.fullmatch(value) and yaml.safe_load(value) == value
    return value if plain else json.dumps(value, ensure_ascii=False)


def _mapping_value(root: yaml.Node, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    if isinstance(root, yaml.MappingNode):
        for key_node, value_node in root.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node, value_node
    return None


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _appended_item(text: str, entry: str) -> str:
    """``text`` with ``entry`` appended to its top-level ``agents:`` sequence."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    found = _mapping_value(root, "agents") if root is not None else None
    if found is None:
        separator = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{separator}agents:\n  - {entry}\n"
    key, sequence = found
    if isinstance(sequence, yaml.ScalarNode) and sequence.value == "":  # `agents:` and no list
        at = _line_end(text, key.end_mark.index)
        return f"{text[:at]}\n  - {entry}{text[at:]}"
    if not isinstance(sequence, yaml.SequenceNode):
        raise ValueError("agents is not a list")
    if sequence.flow_style:
        close = sequence.end_mark.index - 1
        comma = ", " if sequence.value else ""
        return f"{text[:close].rstrip()}{comma}{entry}{text[close:]}"
    last_end = text[: sequence.value[-1].end_mark.index].rstrip()
    at = _line_end(text, len(last_end))
    indent = " " * sequence.start_mark.column
    return f"{text[:at]}\n{indent}- {entry}{text[at:]}"


def _listed(text: str) -> list[Any]:
    data = yaml.safe_load(text) or {}
    agents = data.get("agents") if isinstance(data, dict) else None
    return list(agents or [])


def append_agent(root: Path, entry: str) -> None:
    """Append ``entry`` (an agent.yaml path relative to ``root``) to ``root/holodeck.yaml``'s
    ``agents:``, creating the file if there is none."""
    path = root / PROJECT_FILE
    text = path.read_text(encoding="utf-8") if path.is_file() else NEW_PROJECT_FILE
    before = _listed(text)
    try:
        edited = _appended_item(text, yaml_scalar(entry))
        ok = _listed(edited) == [*before, entry]
    except (yaml.YAMLError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(
            [
                Problem(
                    file=str(path),
                    path="agents",
                    message=f"could not add {entry!r} to this list without changing the rest "
                    f"of the file; add the line `- {yaml_scalar(entry)}` under agents: yourself",
                )
            ]
        )
    atomic_write(path, edited.encode("utf-8"))


def rename_agent(agent_file: Path, name: str) -> None:
    """Replace the top-level ``name:`` value of ``agent_file`` with ``name``."""
    text = agent_file.read_text(encoding="utf-8")
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    found = _mapping_value(root, "name") if root is not None else None
    if found is None or not isinstance(found[1], yaml.ScalarNode):
        raise ConfigError(
            [Problem(file=str(agent_file), path="name", message="no name: to replace")]
        )
    node = found[1]
    edited = f"{text[: node.start_mark.index]}{yaml_scalar(name)}{text[node.end_mark.index :]}"
    data = yaml.safe_load(edited)
    if not isinstance(data, dict) or data.get("name") != name:
        raise ConfigError(
            [Problem(file=str(agent_file), path="name", message=f"set name: {name!r} yourself")]
        )
    atomic_write(agent_file, edited.encode("utf-8"))


@dataclass(frozen=True)
class AddedAgent:
    """What ``add_agent`` did, for the command to tell."""

    file: Path
    name: str
    entry: str
    newly_listed: bool
    versions: list[str]
    warnings: list[str]
    overridden: bool
    """``HOLODECK_AGENTS`` is set, so holodeck.yaml's list is not what the pipelines read."""

    @property
    def slug(self) -> str:
        return slugify(self.name)

    @property
    def dagster_name(self) -> str:
        return dagster_name(self.name)


def _not_copied(source_root: Path) -> Any:
    """What a copy leaves out: the source's own results and caches."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        left_out = {"__pycache__", ".holodeck"}
        if Path(folder) == source_root:
            left_out.add("results")
        return left_out & set(names)

    return ignore


def copy_agent(source: Path, destination: Path, name: str) -> None:
    """Copy ``source``'s folder (its prompts, tools, files, test cases, ``.env``) so that its
    agent.yaml becomes ``destination``, named ``name``; results and caches stay behind."""
    if not source.is_file():
        raise ConfigError(f"agent file not found: {source}")
    folder = destination.parent
    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(
            [
                Problem(
                    file=str(folder),
                    path="",
                    message="is not empty: a copy goes into a new folder; pick another path",
                )
            ]
        )
    shutil.copytree(source.parent, folder, ignore=_not_copied(source.parent), dirs_exist_ok=True)
    if destination.name != source.name:
        (folder / source.name).rename(destination)
    rename_agent(destination, name)


def _copied(source: Path, destination: Path, name: str | None) -> LoadedAgent:
    """The copy of ``source`` at ``destination``, loaded; removed again if it does not load."""
    if not name:
        raise ConfigError("a copy needs a name of its own: give --name")
    folder_existed = destination.parent.exists()
    copy_agent(source, destination, name)
    try:
        return load_agent(destination)
    except ConfigError:
        if folder_existed:
            _empty(destination.parent)
        else:
            shutil.rmtree(destination.parent)
        raise


def _empty(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def _entry(root: Path, agent_file: Path) -> str:
    try:
        return agent_file.relative_to(root).as_posix()
    except ValueError:
        return str(agent_file)


def add_agent(
    root: Path, agent_file: Path, *, copy_from: Path | None, name: str | None
) -> AddedAgent:
    """List ``agent_file`` in the project at ``root`` (a copy of ``copy_from`` named ``name``
    when given) and register its prompt versions. Nothing is listed unless the agent loads
    and its name is unique among the project's agents (a :class:`ConfigError` otherwise)."""
    agent_file = agent_file.expanduser().resolve()
    if copy_from is None:
        loaded = load_agent(agent_file)  # refuses a name another project agent has
    else:
        loaded = _copied(copy_from.expanduser().resolve(), agent_file, name)
    project = Project.discover(root)
    entry = _entry(project.root, agent_file)
    listed = [path.resolve() for path in project.agent_paths()]
    newly_listed = agent_file not in listed
    if newly_listed:
        append_agent(project.root, entry)
    store = PromptStore(project.prompts_dir, loaded.agent.name)
    registrations = [store.register(prompt) for prompt in loaded.active_prompts]
    return AddedAgent(
        file=agent_file,
        name=loaded.agent.name,
        entry=entry,
        newly_listed=newly_listed,
        versions=[registration.key for registration in registrations],
        warnings=[r.warning for r in registrations if r.warning],
        overridden=bool(os.environ.get("HOLODECK_AGENTS")),
    )
