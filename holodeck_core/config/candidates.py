"""Model candidates (docs/agent-yaml.md): an ``agents:`` entry of ``holodeck.yaml`` names them
in ``models:``, each a partial ``model:`` block (with HoloDeck's ``openai:``/``claude:``
settings) written over the agent's own ``agent.yaml`` before HoloDeck's ``config.yaml`` merge,
exactly as the same values written into ``agent.yaml`` would be.

Every candidate is checked whichever one runs, its ``${VAR}``s substituted (a secret registered
at once); a problem names ``holodeck.yaml``, the field (``agents[0].models.large.provider``)
and the line. The agent's own model is the first candidate with an empty block, else
``default`` (:data:`~holodeck_core.defaults.OWN_MODEL_CANDIDATE`)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError, create_model

from holodeck_core.config.env import environment_for, substitute
from holodeck_core.config.merge import deep_merge
from holodeck_core.config.project import PROJECT_FILE, Project
from holodeck_core.config.validation_errors import validation_problems
from holodeck_core.config.yaml_source import ScopedDocument, YamlPath, format_path, read_yaml
from holodeck_core.defaults import MAX_CANDIDATE_NAME_LENGTH, OWN_MODEL_CANDIDATE
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.models.backends import ClaudeBlock, OpenAIBlock
from holodeck_core.models.base import StrictModel
from holodeck_core.models.llm import LLMProvider
from holodeck_core.naming import dagster_name

BLOCK_KEYS = ("openai", "claude")
"""A candidate's keys that are agent.yaml's backend blocks (deep-merged), not ``model:``'s."""
_NAME = re.compile(rf"[a-z0-9_]{{1,{MAX_CANDIDATE_NAME_LENGTH}}}")


def _optional(info: Any) -> tuple[Any, Any]:
    """A field of HoloDeck's model block, unset by default, its bounds kept."""
    loose = copy.copy(info)
    loose.default = None
    return info.annotation | None, loose


_FIELDS: dict[str, Any] = {
    **{name: _optional(info) for name, info in LLMProvider.model_fields.items()},
    "openai": (OpenAIBlock | None, None),
    "claude": (ClaudeBlock | None, None),
    "nightly": (bool, True),
}
ModelCandidate: type[StrictModel] = create_model(
    "ModelCandidate",
    __base__=StrictModel,
    __doc__="One ``models:`` entry: any of ``model:``'s fields, ``openai:``/``claude:``, and "
    "``nightly`` (false: the nightly schedule leaves it out).",
    **_FIELDS,
)


@dataclass(frozen=True)
class Candidate:
    """One candidate: its name, its block (``${VAR}`` resolved) and where it is declared."""

    name: str
    block: dict[str, Any] = field(default_factory=dict)
    doc: ScopedDocument | None = None
    nightly: bool = True
    """Whether the nightly schedule runs it (docs/dagster.md)."""

    @property
    def where(self) -> str:
        """``holodeck.yaml agents[0].models.large`` (or the agent's own model)."""
        if self.doc is None:
            return "the agent's own model"
        return f"{self.doc.display} {format_path(self.doc.prefix)}"

    def apply(self, data: dict[str, Any]) -> dict[str, Any]:
        """The agent document with this candidate's values written in, as if in agent.yaml."""
        out = dict(data)
        model = {k: v for k, v in self.block.items() if k not in BLOCK_KEYS}
        if model:
            own = out.get("model")
            out["model"] = {**own, **model} if isinstance(own, dict) else model
        for key in BLOCK_KEYS:
            if isinstance(self.block.get(key), dict):
                own = out.get(key)
                merged = copy.deepcopy(own) if isinstance(own, dict) else {}
                deep_merge(merged, copy.deepcopy(self.block[key]))
                out[key] = merged
        return out

    @property
    def suffix(self) -> str:
        """Said after a problem of the merged agent that this candidate may have caused."""
        return f" (with model candidate {self.name!r}, {self.where})" if self.block else ""

    def origins(self) -> dict[str, str]:
        """``model.<field>`` -> where this candidate set it (``holodeck validate``)."""
        return {f"model.{k}": self.where for k in self.block if k not in BLOCK_KEYS}

    def locate(self, path: YamlPath, message: str) -> Problem | None:
        """A problem of the merged agent at ``path`` that this candidate's value caused."""
        if self.doc is None or not path or path[0] not in ("model", *BLOCK_KEYS):
            return None
        inner = path[1:] if path[0] == "model" else path
        if not inner or inner[0] not in self.block:
            return None
        return self.doc.problem(inner, message)


@dataclass(frozen=True)
class Candidates:
    """The candidates of one agent, in declaration order, and the secrets they hold."""

    declared: tuple[Candidate, ...] = ()
    secrets: frozenset[str] = frozenset()
    where: str = ""

    @property
    def own(self) -> Candidate:
        """The agent's own model: the first empty candidate, else ``default``."""
        empty = (c for c in self.declared if not c.block)
        return next(empty, Candidate(OWN_MODEL_CANDIDATE))

    @property
    def names(self) -> list[str]:
        declared = [c.name for c in self.declared]
        return declared if self.own.name in declared else [self.own.name, *declared]

    @property
    def nightly(self) -> list[str]:
        """The candidates the nightly schedule runs (``nightly: false`` leaves one out)."""
        left_out = {c.name for c in self.declared if not c.nightly}
        return [name for name in self.names if name not in left_out]

    def pick(self, name: str | None, agent_display: str) -> Candidate:
        """The candidate ``--model`` names (None, or ``default`` whatever the own model's
        name: the agent's own model)."""
        if name is None or name in (self.own.name, OWN_MODEL_CANDIDATE):
            return self.own
        for candidate in self.declared:
            if candidate.name == name:
                return candidate
        declared = f" ({self.where})" if self.where else " (holodeck.yaml declares none)"
        raise ConfigError(
            f"--model {name!r} is not a model candidate of this agent; choose one of: "
            f"{', '.join(self.names)}{declared}",
            file=agent_display,
        )


def project_candidates(agent_file: Path) -> Candidates:
    """The candidates ``holodeck.yaml`` declares for ``agent_file``; every problem of every
    candidate at once, as a :class:`ConfigError`."""
    project = Project.discover(agent_file.parent)
    found = project.entry_of(agent_file)
    if found is None or not found[1].models:
        return Candidates()
    settings_file = project.root / PROJECT_FILE
    doc = read_yaml(settings_file, str(settings_file))
    prefix: YamlPath = ("agents", found[0], "models")
    env = {**environment_for(settings_file), **environment_for(agent_file)}
    problems: list[Problem] = []
    declared: list[Candidate] = []
    secrets: set[str] = set()
    for key, block in doc.data["agents"][found[0]]["models"].items():
        scoped = ScopedDocument.of(doc, {} if block is None else block, (*prefix, str(key)))
        candidate = _checked(key, scoped, env, problems, secrets)
        if candidate is not None:
            declared.append(candidate)
    if problems:
        raise ConfigError(problems)
    where = f"{doc.display} {format_path(prefix)}"
    return Candidates(tuple(declared), frozenset(secrets), where)


def _checked(
    key: object,
    doc: ScopedDocument,
    env: dict[str, str],
    problems: list[Problem],
    secrets: set[str],
) -> Candidate | None:
    name = key if isinstance(key, str) else ""
    if not _NAME.fullmatch(name):
        hint = dagster_name(str(key))[:MAX_CANDIDATE_NAME_LENGTH] or "large"
        problems.append(
            doc.problem(
                (),
                f"candidate name {str(key)!r} is not a partition key: use 1 to "
                f"{MAX_CANDIDATE_NAME_LENGTH} of a-z, 0-9 and _ (e.g. {hint!r})",
            )
        )
        return None
    if not isinstance(doc.data, dict):
        problems.append(
            doc.problem(
                (),
                "a candidate is a mapping of model settings (provider, name, endpoint, api_key, "
                "api_version, temperature, max_tokens, openai, claude...), or empty for the "
                "agent's own model",
            )
        )
        return None
    resolved = substitute(doc, env)
    secrets |= resolved.secrets
    if resolved.problems:
        problems += resolved.problems
        return None
    try:
        validated = ModelCandidate.model_validate(resolved.data)
        nightly = bool(validated.model_dump(include={"nightly"})["nightly"])
    except ValidationError as exc:
        problems += validation_problems(exc, ModelCandidate, resolved.data, doc.problem)
        return None
    block = {k: v for k, v in resolved.data.items() if k != "nightly"}
    if name == OWN_MODEL_CANDIDATE and block:
        problems.append(
            doc.problem(
                (),
                f"{OWN_MODEL_CANDIDATE!r} is the agent's own model: leave it empty, or give "
                "this candidate another name",
            )
        )
        return None
    return Candidate(name, block, doc, nightly)
