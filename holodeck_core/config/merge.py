"""The ``config.yaml`` files HoloDeck 0.7.1 merges into an agent (docs/holodeck-fidelity.md).

HoloDeck reads ``~/.holodeck/config.yml|yaml`` (user level) and ``config.yml|yaml`` beside the
agent file (project level; ``.yml`` wins when both exist), each with ``${VAR}`` resolved, and:

* merges them key by key, the project over the user: a provider or vector store named in
  both is the project's entry *whole* (HoloDeck deep-merges full dumps, so the fields the
  project leaves out take the model's defaults, not the user's values);
* fills the agent's ``model`` (and ``evaluations.model``) with the keys the agent does not set
  from the provider entry named by its ``provider`` (the entry of that key, else the first
  whose ``provider`` field is it);
* replaces a vector store tool's ``database: <name>`` by that named store (``postgresql`` is
  ``postgres``; ``options`` spread in); an unknown name means in-memory (``None``), with a
  warning; without a ``vectorstores`` block the name stays;
* appends the ``mcp_servers`` whose names no agent tool has, and merges ``deployment``;
* resolves ``execution`` field by field: agent, project, user, ``HOLODECK_*`` variables (our
  defaults after that, :mod:`holodeck_core.defaults`).

:func:`merge_config_files` returns the merged agent document and, for ``holodeck validate``,
where each effective model, execution and database setting came from."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from holodeck_core.config.env import substitute
from holodeck_core.config.validation_errors import validation_problems
from holodeck_core.config.yaml_source import read_yaml
from holodeck_core.errors import Problem
from holodeck_core.models.agent import ExecutionConfig
from holodeck_core.models.base import StrictModel
from holodeck_core.models.llm import LLMProvider

HOLODECK_EXECUTION = (
    "file_timeout", "llm_timeout", "download_timeout", "cache_enabled", "cache_dir", "verbose",
    "quiet", "parallel_test_cases",
)  # fmt: skip
"""HoloDeck 0.7.1's ``ExecutionConfig`` fields, the ones its files and variables set."""
EXECUTION_ENV = {
    "file_timeout": "HOLODECK_FILE_TIMEOUT",
    "llm_timeout": "HOLODECK_LLM_TIMEOUT",
    "download_timeout": "HOLODECK_DOWNLOAD_TIMEOUT",
    "cache_enabled": "HOLODECK_CACHE_ENABLED",
    "cache_dir": "HOLODECK_CACHE_DIR",
    "verbose": "HOLODECK_VERBOSE",
    "quiet": "HOLODECK_QUIET",
}
PROVIDER_ALIASES = {"postgresql": "postgres"}


class VectorstoreConfig(StrictModel):
    provider: str = Field(min_length=1)
    connection_string: str = Field(min_length=1)
    options: dict[str, Any] | None = None


class GlobalConfig(StrictModel):
    """A ``config.yaml`` HoloDeck reads (its ``GlobalConfig``: unknown keys are errors)."""

    providers: dict[str, LLMProvider] | None = None
    vectorstores: dict[str, VectorstoreConfig] | None = None
    execution: ExecutionConfig | None = None
    deployment: dict[str, Any] | None = None
    mcp_servers: list[dict[str, Any]] | None = None


@dataclass
class ConfigFile:
    """One config file read: its level (``user`` or ``project``), path, and its validated
    data (``${VAR}`` resolved; the keys written, as HoloDeck's ``exclude_unset`` dump)."""

    level: str
    path: Path
    data: dict[str, Any]


@dataclass
class MergedConfig:
    data: dict[str, Any]
    origins: dict[str, str] = field(default_factory=dict)
    files: list[ConfigFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)


def config_file_in(folder: Path) -> Path | None:
    """``config.yml`` over ``config.yaml``, as HoloDeck prefers."""
    for name in ("config.yml", "config.yaml"):
        if (folder / name).is_file():
            return folder / name
    return None


def user_config_dir() -> Path:
    return Path.home() / ".holodeck"


def _read(level: str, path: Path, env: Mapping[str, str], out: MergedConfig) -> ConfigFile | None:
    doc = read_yaml(path, str(path))
    result = substitute(doc, env)
    out.problems += result.problems
    out.secrets |= result.secrets
    if result.problems or not result.data:
        return None
    if not isinstance(result.data, dict):
        out.problems.append(doc.problem((), "a config.yaml holds a YAML mapping"))
        return None
    data = copy.deepcopy(result.data)
    while True:
        try:
            GlobalConfig.model_validate(data)
        except ValidationError as exc:
            unknown = [e["loc"] for e in exc.errors() if e["type"] == "extra_forbidden"]
            if not unknown or len(unknown) != exc.error_count():
                out.problems += validation_problems(exc, GlobalConfig, data, doc.problem)
                return None
            for loc in unknown:
                _drop(data, loc)
                out.warnings.append(
                    f"{path}: {'.'.join(map(str, loc))} is not a setting HoloDeck knows: "
                    "ignored (HoloDeck 0.7.1 refuses the whole file; remove or rename it)"
                )
            continue
        return ConfigFile(level, path, data)


def _drop(data: Any, loc: tuple[int | str, ...]) -> None:
    for part in loc[:-1]:
        data = data[part]
    del data[loc[-1]]


PROVIDER_DEFAULTS = {
    name: info.default for name, info in LLMProvider.model_fields.items() if not info.is_required()
}


def _full(data: dict[str, Any]) -> dict[str, Any]:
    """HoloDeck's ``model_dump()`` of a config: every field, defaults included."""
    out: dict[str, Any] = dict.fromkeys(GlobalConfig.model_fields)
    out.update(copy.deepcopy(data))
    if isinstance(out["providers"], dict):
        out["providers"] = {k: {**PROVIDER_DEFAULTS, **v} for k, v in out["providers"].items()}
    if isinstance(out["vectorstores"], dict):
        out["vectorstores"] = {k: {"options": None, **v} for k, v in out["vectorstores"].items()}
    if isinstance(out["execution"], dict):
        out["execution"] = {**dict.fromkeys(HOLODECK_EXECUTION), **out["execution"]}
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> None:
    """``override`` into ``base`` in place, mapping by mapping (HoloDeck's deep merge)."""
    for key, value in override.items():
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            deep_merge(base[key], value)
        else:
            base[key] = value


def _provider_entry(providers: dict[str, Any], provider: str) -> tuple[str, dict[str, Any]] | None:
    if provider in providers:
        return provider, providers[provider]
    return next(((k, e) for k, e in providers.items() if e.get("provider") == provider), None)


def _fill_model(
    model: dict[str, Any], where: str, merged: dict[str, Any], label: str, out: MergedConfig
) -> None:
    providers = merged.get("providers") or {}
    provider = model.get("provider")
    found = _provider_entry(providers, str(provider)) if provider and providers else None
    for key in model:
        out.origins[f"{where}.{key}"] = "agent.yaml"
    if found is None:
        return
    name, entry = found
    for key, value in entry.items():
        if key not in model:
            model[key] = value
            out.origins[f"{where}.{key}"] = f"{label} providers.{name}"


def _databases(tools: list[Any], merged: dict[str, Any], label: str, out: MergedConfig) -> None:
    stores = merged.get("vectorstores") or {}
    if not stores:
        return
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "vectorstore":
            continue
        database = tool.get("database")
        if not isinstance(database, str):
            continue
        where = f"tools.{tool.get('name')}.database"
        store = stores.get(database)
        if store is None:
            out.warnings.append(
                f"tools ({tool.get('name')}): database {database!r} is not in a config.yaml "
                f"(known: {', '.join(stores) or 'none'}); HoloDeck falls back to in-memory"
            )
            tool["database"] = None
            out.origins[where] = f"{label} (unknown name {database!r}: in-memory)"
            continue
        provider = str(store["provider"])
        resolved = {
            "provider": PROVIDER_ALIASES.get(provider.lower(), provider),
            "connection_string": store["connection_string"],
            **(store.get("options") or {}),
        }
        tool["database"] = resolved
        out.origins[where] = f"{label} vectorstores.{database}"


def _execution(
    data: dict[str, Any], files: list[ConfigFile], env: Mapping[str, str], out: MergedConfig
) -> None:
    execution = dict(data.get("execution") or {})
    for key in execution:
        out.origins[f"execution.{key}"] = "agent.yaml"
    levels = sorted(files, key=lambda f: f.level != "project")  # project, then user
    for key in HOLODECK_EXECUTION:
        if execution.get(key) is not None:
            continue
        for config in levels:
            value = (config.data.get("execution") or {}).get(key)
            if value is not None:
                execution[key] = value
                out.origins[f"execution.{key}"] = f"{config.path} execution"
                break
        else:
            variable = EXECUTION_ENV.get(key)
            if variable and variable in env:
                raw = env[variable]
                if key in ("cache_enabled", "verbose", "quiet"):
                    execution[key] = raw.lower() in ("true", "1", "yes", "on")
                elif key == "cache_dir":
                    execution[key] = raw
                elif raw.strip().lstrip("-").isdigit():
                    execution[key] = int(raw)
                else:
                    continue  # HoloDeck ignores a variable it cannot parse
                out.origins[f"execution.{key}"] = f"${variable}"
    if execution:
        data["execution"] = execution


def merge_config_files(
    data: dict[str, Any], agent_file: Path, env: Mapping[str, str] | None = None
) -> MergedConfig:
    """``data`` (the agent document, ``${VAR}`` resolved) with the config files merged in."""
    env = os.environ if env is None else env
    out = MergedConfig(data=copy.deepcopy(data))
    for level, folder in (("user", user_config_dir()), ("project", agent_file.parent)):
        path = config_file_in(folder)
        if path is not None:
            read = _read(level, path, env, out)
            if read is not None:
                out.files.append(read)
    if out.problems:
        return out
    if len(out.files) == 2:  # HoloDeck deep-merges the two full dumps, project over user
        merged = _full(out.files[0].data)
        deep_merge(merged, _full(out.files[1].data))
        label = f"{out.files[1].path} + {out.files[0].path}"
    elif out.files:
        merged, label = out.files[0].data, str(out.files[0].path)
    else:
        merged, label = {}, ""
    agent = out.data
    if isinstance(agent.get("model"), dict):
        _fill_model(agent["model"], "model", merged, label, out)
    evaluations = agent.get("evaluations")
    if isinstance(evaluations, dict) and isinstance(evaluations.get("model"), dict):
        _fill_model(evaluations["model"], "evaluations.model", merged, label, out)
    if isinstance(agent.get("tools"), list):
        _databases(agent["tools"], merged, label, out)
    servers = merged.get("mcp_servers") or []
    if servers:
        tools = agent["tools"] if isinstance(agent.get("tools"), list) else []
        names = {t.get("name") for t in tools if isinstance(t, dict)}
        tools += [s for s in servers if s.get("name") not in names]
        agent["tools"] = tools
    if merged.get("deployment"):
        deployment = copy.deepcopy(merged["deployment"])
        if isinstance(agent.get("deployment"), dict):
            deep_merge(deployment, agent["deployment"])
        agent["deployment"] = deployment
    _execution(agent, out.files, env, out)
    return out
