"""``agent.yaml`` → a validated :class:`LoadedAgent`, or a :class:`ConfigError` listing every
problem (file, YAML path, line, what is allowed). Nothing is written while loading."""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from holodeck_core.config.candidates import Candidate, Candidates, project_candidates
from holodeck_core.config.env import environment_for, substitute
from holodeck_core.config.extensions import (
    LoadedSidecar,
    MergedAgentDocument,
    apply_sidecar,
    find_extensions,
    load_sidecar,
    relocation_warnings,
    sidecar_file,
)
from holodeck_core.config.graders import check_grader_reference
from holodeck_core.config.merge import MergedConfig, merge_config_files
from holodeck_core.config.prompts import Prompt, file_prompt, inline_prompt
from holodeck_core.config.slugs import check_unique_slug
from holodeck_core.config.targets import option_target, project_target
from holodeck_core.config.templates import template_problem
from holodeck_core.config.validation_errors import validation_problems
from holodeck_core.config.yaml_source import YamlDocument, YamlPath, read_yaml
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.models import Agent, CodeMetric, HierarchicalDocumentTool, VectorstoreTool
from holodeck_core.models.target import Target
from holodeck_core.models.tools import FunctionTool, MCPTool, PromptTool
from holodeck_core.redaction import MIN_SECRET_LENGTH


@dataclass
class LoadedAgent:
    """A validated agent plus what was resolved around it."""

    agent: Agent
    file: Path
    display: str
    prompt: Prompt
    variants: list[Prompt] = field(default_factory=list)
    response_schema: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    secrets: frozenset[str] = frozenset()
    target: Target | None = None
    """Where the agent runs, when not in-process (``holodeck.yaml`` or ``--target``)."""
    origins: dict[str, str] = field(default_factory=dict)
    """Where each model, execution and database setting came from (``agent.yaml``, a
    ``config.yaml``'s block, a variable); defaults are absent."""
    config_files: list[Path] = field(default_factory=list)
    relocations: list[str] = field(default_factory=list)
    """Our fields still in agent.yaml, one line per field (``holodeck validate``)."""
    sidecar: Path | None = None
    """The sidecar of our additions that was merged in (docs/agent-yaml.md)."""
    candidate: Candidate = field(default_factory=lambda: Candidates().own)
    """The model candidate loaded (``--model``; ``holodeck.yaml``'s ``models:``)."""
    candidates: Candidates = field(default_factory=Candidates)

    @property
    def base_dir(self) -> Path:
        return self.file.parent

    def resolve(self, path: str) -> Path:
        """A path from the config, relative to the agent file's folder."""
        candidate = Path(path).expanduser()
        return candidate if candidate.is_absolute() else (self.base_dir / candidate).resolve()

    @property
    def active_prompts(self) -> list[Prompt]:
        """The prompt versions of the current file and its variants (docs/architecture.md)."""
        return [self.prompt, *self.variants]


@dataclass
class _Sources:
    """The agent document as read: ``${VAR}``s resolved, the config files, the cases file and
    the sidecar merged in, with the files each part came from (for errors' lines)."""

    doc: YamlDocument
    data: dict[str, Any]
    secrets: set[str]
    candidate: Candidate
    merged: MergedConfig | None = None
    cases_doc: YamlDocument | None = None
    sidecar: LoadedSidecar | None = None
    added: MergedAgentDocument | None = None
    relocations: list[str] = field(default_factory=list)

    def locate(self, yaml_path: YamlPath, message: str) -> Problem:
        """A problem at ``yaml_path`` of the merged document, in the file it came from."""
        chosen = self.candidate.locate(yaml_path, message)
        if chosen is not None:
            return chosen
        message += self.candidate.suffix
        origin = self.added.origin(yaml_path) if self.added else None
        if self.sidecar and origin is not None:
            return self.sidecar.doc.problem(origin, message)
        if (
            self.cases_doc is not None
            and len(yaml_path) >= 2
            and yaml_path[0] == "test_cases"
            and isinstance(yaml_path[1], int)
        ):
            return self.cases_doc.problem(yaml_path[1:], message)
        return self.doc.problem(yaml_path, message)


def load_agent(
    path: str | Path, *, target: str | None = None, model: str | None = None
) -> LoadedAgent:
    """``target``: a ``--target`` value, which wins over the one ``holodeck.yaml`` declares;
    ``model``: a model candidate's name (``--model``; default: the agent's own model)."""
    display = str(path)
    file = _agent_file(path, display)
    env = environment_for(file)
    candidates = project_candidates(file)
    sources = _read_sources(file, display, env, candidates.pick(model, display))
    sources.secrets |= candidates.secrets
    _merge_sidecar(sources, file, display, env)
    try:
        agent = Agent.model_validate(sources.data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, Agent, sources.data, sources.locate)) from None
    merged = sources.merged
    loaded = LoadedAgent(
        agent=agent,
        file=file,
        display=display,
        prompt=inline_prompt(agent.instructions.inline or ""),
        warnings=[*agent.warnings, *(merged.warnings if merged else [])],
        secrets=frozenset(sources.secrets),
        origins={**(merged.origins if merged else {}), **sources.candidate.origins()},
        config_files=[f.path for f in merged.files] if merged else [],
        relocations=sources.relocations,
        sidecar=sources.sidecar.doc.file if sources.sidecar else None,
        candidate=sources.candidate,
        candidates=candidates,
    )
    _check_references(loaded, sources)
    check_unique_slug(agent.name, file)
    _load_prompt_files(loaded, sources.doc)
    loaded.response_schema = _response_schema(loaded, sources.doc)
    declared = project_target(file) if target is None else option_target(target, file)
    if declared is not None:
        loaded.target, target_secrets = declared
        loaded.secrets |= target_secrets
    if not agent.cases:
        loaded.warnings.append("the agent has no test cases")
    return loaded


def _agent_file(path: str | Path, display: str) -> Path:
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ConfigError(
            f"agent file not found: {file}"
            if not file.is_dir()
            else "this is a folder; pass the agent.yaml file",
            file=display,
        )
    return file


def _read_sources(file: Path, display: str, env: dict[str, str], candidate: Candidate) -> _Sources:
    """agent.yaml with its ``${VAR}``s and the model candidate's settings written in,
    HoloDeck's config.yaml files (docs/holodeck-fidelity.md) and its ``test_cases_file``;
    every problem at once."""
    doc = read_yaml(file, display)
    if not isinstance(doc.data, dict):
        raise ConfigError([doc.problem((), "the file must hold a YAML mapping (key: value)")])
    main = substitute(doc, env)
    sources = _Sources(
        doc=doc, data=candidate.apply(main.data), secrets=set(main.secrets), candidate=candidate
    )
    problems = list(main.problems)
    if not problems:
        sources.merged = merge_config_files(sources.data, file, env)
        sources.data, problems = sources.merged.data, sources.merged.problems
        sources.secrets |= sources.merged.secrets
    cases_file = sources.data.get("test_cases_file")
    if cases_file is not None and sources.data.get("test_cases") is not None:
        raise ConfigError(
            [
                doc.problem(
                    ("test_cases_file",),
                    "set either test_cases or test_cases_file, not both (HoloDeck 0.7.1 "
                    "refuses the file); move the inline cases into the file",
                )
            ]
        )
    if isinstance(cases_file, str) and not main.problems:
        sources.cases_doc, cases, cases_problems, cases_secrets = _load_cases_file(
            file.parent, cases_file, doc, env
        )
        problems += cases_problems
        sources.secrets |= cases_secrets
        if cases is not None:
            sources.data = {**sources.data, "test_cases": cases}
    if problems:
        raise ConfigError(problems)
    return sources


def _merge_sidecar(sources: _Sources, file: Path, display: str, env: dict[str, str]) -> None:
    """Our additions from the sidecar merged in (docs/agent-yaml.md), and a warning for each
    of ours still in agent.yaml."""
    sidecar = load_sidecar(file, env)
    sources.relocations = relocation_warnings(
        find_extensions(sources.data), display, sidecar_file(file, None).name
    )
    added = apply_sidecar(sources.data, sidecar.data) if sidecar else None
    if sidecar and added:
        sources.sidecar, sources.added = sidecar, added
        sources.data, sources.secrets = added.data, sources.secrets | sidecar.secrets
        if added.problems:
            raise ConfigError([sidecar.doc.problem(p, m) for p, m in added.problems])


def _check_references(loaded: LoadedAgent, sources: _Sources) -> None:
    """Secrets by name, the files, graders and templates the agent refers to."""
    locate = sources.locate
    problems = _secret_names(loaded, locate)
    problems += _missing_files(loaded, sources.doc, locate) + _bad_graders(loaded, locate)
    problems += _bad_templates(loaded, locate) if not problems else []
    if problems:
        raise ConfigError(problems)


def _load_prompt_files(loaded: LoadedAgent, doc: YamlDocument) -> None:
    """The instructions file and its variants, each a distinct prompt version."""
    instructions = loaded.agent.instructions
    if instructions.file is None:
        return
    loaded.prompt = file_prompt(loaded.resolve(instructions.file), instructions.file)
    loaded.variants = [file_prompt(loaded.resolve(v), v) for v in instructions.variants]
    labels = [p.version.version for p in loaded.active_prompts]
    if len(set(labels)) != len(labels):
        raise ConfigError(
            [
                doc.problem(
                    ("instructions", "variants"),
                    f"prompt versions must differ between the file and its variants; "
                    f"got {', '.join(labels)} (set 'version' in each file's frontmatter)",
                )
            ]
        )


def _load_cases_file(
    base_dir: Path, relative: str, agent_doc: YamlDocument, env: dict[str, str]
) -> tuple[YamlDocument | None, list[Any] | None, list[Problem], set[str]]:
    path = (base_dir / relative).resolve()
    if not path.is_file():
        problem = agent_doc.problem(
            ("test_cases_file",),
            f"file not found: {path} (paths are relative to the agent file's folder)",
        )
        return None, None, [problem], set()
    doc = read_yaml(path, relative)
    result = substitute(doc, env)
    cases = result.data
    if isinstance(cases, dict) and isinstance(cases.get("test_cases"), list):
        cases = cases["test_cases"]
    if not isinstance(cases, list):
        problem = doc.problem((), "a test_cases_file holds a YAML list of test cases")
        return doc, None, [problem, *result.problems], result.secrets
    return doc, cases, result.problems, result.secrets


def _referenced_files(agent: Agent) -> list[tuple[YamlPath, str]]:
    refs: list[tuple[YamlPath, str]] = []
    if agent.instructions.file:
        refs.append((("instructions", "file"), agent.instructions.file))
    refs += [
        (("instructions", "variants", i), v) for i, v in enumerate(agent.instructions.variants)
    ]
    if isinstance(agent.response_format, str):
        refs.append((("response_format",), agent.response_format))
    for i, tool in enumerate(agent.tools or []):
        if isinstance(tool, FunctionTool | PromptTool) and tool.file:
            refs.append((("tools", i, "file"), tool.file))
        elif isinstance(tool, VectorstoreTool | HierarchicalDocumentTool) and tool.mock is None:
            refs.append((("tools", i, "source"), tool.source))
        elif isinstance(tool, MCPTool) and tool.env_file:
            refs.append((("tools", i, "env_file"), tool.env_file))
    for c, case in enumerate(agent.cases):
        turns = case.turns or []
        for f, item in enumerate(case.files or []):
            if item.path:
                refs.append((("test_cases", c, "files", f, "path"), item.path))
        for t, turn in enumerate(turns):
            for f, item in enumerate(turn.files or []):
                if item.path:
                    refs.append((("test_cases", c, "turns", t, "files", f, "path"), item.path))
    return refs


def _missing_files(loaded: LoadedAgent, doc: YamlDocument, locate: Any) -> list[Problem]:
    problems: list[Problem] = []
    for yaml_path, relative in _referenced_files(loaded.agent):
        resolved = loaded.resolve(relative)
        if glob.has_magic(relative):  # a retrieval tool's glob source: checked when it opens
            continue
        if not resolved.exists():
            problems.append(
                locate(
                    yaml_path,
                    f"file not found: {resolved} (paths are relative to the agent file's folder)",
                )
            )
    return problems


def _bad_graders(loaded: LoadedAgent, locate: Any) -> list[Problem]:
    """``type: code`` graders that cannot be found (checked without running their code)."""
    agent = loaded.agent
    found: list[tuple[YamlPath, Any]] = []
    if agent.evaluations:
        found += [
            (("evaluations", "metrics", i), m) for i, m in enumerate(agent.evaluations.metrics)
        ]
    for c, case in enumerate(agent.cases):
        found += [
            (("test_cases", c, "evaluations", i), m) for i, m in enumerate(case.evaluations or [])
        ]
        for t, turn in enumerate(case.turns or []):
            found += [
                (("test_cases", c, "turns", t, "evaluations", i), m)
                for i, m in enumerate(turn.evaluations or [])
            ]
    graders = [(path, m) for path, m in found if isinstance(m, CodeMetric)]
    if not graders:
        return []
    problems = []
    for yaml_path, metric in graders:
        if isinstance(metric, CodeMetric):
            message = check_grader_reference(metric.grader, loaded.base_dir)
            if message:
                problems.append(locate((*yaml_path, "grader"), message))
    return problems


def _secret_names(loaded: LoadedAgent, locate: Any) -> list[Problem]:
    """Names and ids holding a secret (``name: "agent-${API_TOKEN}"``): they become folder
    names, prompt snapshots and report lines, where no redaction reaches (docs/agent-yaml.md)."""
    agent = loaded.agent
    # a value too short to be scrubbed (a placeholder key: `api_key: ollama`) leaks nothing
    scrubbed = [secret for secret in loaded.secrets if len(secret) >= MIN_SECRET_LENGTH]
    named: list[tuple[YamlPath, str | None]] = [(("name",), agent.name)]
    named += [(("tools", i, "name"), t.name) for i, t in enumerate(agent.tools or [])]
    for i, case in enumerate(agent.test_cases or []):
        named += [(("test_cases", i, "name"), case.name), (("test_cases", i, "id"), case.id)]
    return [
        locate(
            path,
            "holds a secret; names and ids end up in folder names, prompts and "
            "reports, so keep secrets (and ${VAR}s of secrets) out of them",
        )
        for path, value in named
        if value and any(secret in value for secret in scrubbed)
    ]


def _bad_templates(loaded: LoadedAgent, locate: Any) -> list[Problem]:
    """Prompt tools whose template reads attributes (docs/agent-yaml.md: data only) or is too
    long."""
    problems = []
    for i, tool in enumerate(loaded.agent.tools or []):
        if not isinstance(tool, PromptTool) or tool.mock is not None:
            continue
        field = "file" if tool.file else "template"
        try:
            source = loaded.resolve(tool.file).read_text("utf-8") if tool.file else tool.template
        except (OSError, UnicodeDecodeError):
            continue  # the runtime reports it, naming the file
        message = template_problem(source or "", tool.parameters)
        if message:
            problems.append(locate(("tools", i, field), message))
    return problems


def _response_schema(loaded: LoadedAgent, doc: YamlDocument) -> dict[str, Any] | None:
    value = loaded.agent.response_format
    if value is None or isinstance(value, dict):
        return value
    path = loaded.resolve(value)
    try:
        text = path.read_text(encoding="utf-8")
        schema = json.loads(text) if path.suffix == ".json" else read_yaml(path, value).data
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            [doc.problem(("response_format",), f"cannot read the schema file: {exc}")]
        ) from None
    if not isinstance(schema, dict):
        raise ConfigError(
            [doc.problem(("response_format",), "the schema file must hold a JSON Schema object")]
        )
    return schema
