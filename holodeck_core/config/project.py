"""The project: ``holodeck.yaml``, ``HOLODECK_HOME`` and where state lives (docs/cli.md).

Every module asks here for a location instead of building paths itself."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import Field

from holodeck_core.config import remote
from holodeck_core.defaults import PROJECT_HOME_DIR
from holodeck_core.models.agent import BatchMode
from holodeck_core.models.base import StrictModel
from holodeck_core.models.cost import SharedBudgets

if TYPE_CHECKING:
    from typing import TypeAlias

    from upath import UPath

    Location: TypeAlias = Path | UPath
    """A file or folder on local disk or on object storage."""

RESULTS_URL_ENV = "HOLODECK_RESULTS_URL"
ARTIFACTS_URL_ENV = "HOLODECK_ARTIFACTS_URL"

PROJECT_FILE = "holodeck.yaml"


LAKE_ENV = "HOLODECK_HISTORY_URL"  # a history lake instead of the DuckDB file (docs/history.md)


class AgentEntry(StrictModel):
    """One orchestrated agent: its ``agent.yaml`` and, optionally, where it runs (a target,
    ``holodeck_core.models.target``; validated with its ``${VAR}``s when the agent loads)."""

    path: str = Field(min_length=1)
    target: dict[str, Any] | None = None
    extensions: str | None = Field(
        None,
        min_length=1,
        description="The sidecar file of our additions to agent.yaml, relative to its folder "
        "(default <stem>.pipelines.yaml; docs/agent-yaml.md).",
    )
    models: dict[Any, Any] | None = Field(
        None,
        description="Model candidates: name -> a partial model block (provider, name, "
        "endpoint, api_key, ..., openai:, claude:) merged over the agent's model "
        "(docs/agent-yaml.md); checked with its ${VAR}s when the agent loads.",
    )
    batch: BatchMode | None = Field(
        None,
        description="This agent's calls through the providers' batch APIs when its sidecar's "
        "execution.batch does not say (docs/cost.md).",
    )


class ProjectSettings(StrictModel):
    """``holodeck.yaml``: the agents the pipelines orchestrate and project settings."""

    agents: list[str | AgentEntry] = Field(
        default_factory=list, description="agent.yaml paths, or {path, target} entries."
    )
    nightly_cron: str = Field("0 2 * * *", description="Nightly schedule, UTC.")
    history_db: str | None = None
    history_url: str | None = Field(
        None, description="A DuckLake URL (docs/history.md) instead of the DuckDB file."
    )
    artifacts_url: str | None = Field(None, description="IO manager base (a path or a URL).")
    results_url: str | None = Field(
        None, description="Where EvalRuns go instead of <agent dir>/results (a path or a URL)."
    )
    llm_api_pool_limit: int = Field(4, ge=1, description="Steps calling models at once.")
    history_db_pool_limit: int | None = Field(
        None,
        ge=1,
        description="History writes at once: 1 for the DuckDB file (one writer); a lake may "
        "take more, and by default takes llm_api_pool_limit (docs/scale-out.md).",
    )
    executor: Literal["in_process", "multiprocess"] = Field(
        "in_process",
        description="Dagster executor: steps in the run's process, or each in its own "
        "(docs/scale-out.md).",
    )
    backfill_versions_per_run: int | None = Field(
        None,
        ge=1,
        description="A Dagster backfill's prompt versions per run: all in one run (unset, "
        "Dagster's launch paid once), or runs of this many, spread over run workers "
        "(docs/scale-out.md).",
    )
    launch_new_versions: bool = Field(
        False, description="The prompt-version sensor also launches a run for a new version."
    )
    dashboard_url: str | None = Field(
        None, description="Base URL of `holodeck dashboard`; report_summary links to it."
    )
    pricing: dict[str, Any] | None = Field(
        None,
        description="Prices over the packaged table, in its shape (holodeck_core/calls/"
        "prices.yaml): providers: {openai: {models: {m: {input, output}}}}, or models: {...}.",
    )
    budget: SharedBudgets | None = Field(
        None,
        description="Budgets all runs share, kept in the history: daily: {usd, tokens} per UTC "
        "day, backfill: {usd, tokens} per Dagster backfill.",
    )


def find_project_root(start: Path | None = None) -> Path:
    """The nearest folder upward from ``start`` (default: the working directory) that holds
    ``holodeck.yaml``; else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file():
            return folder
    return here


@dataclass(frozen=True)
class Project:
    """A project root and its state folders."""

    root: Path
    settings: ProjectSettings = field(default_factory=ProjectSettings)

    @classmethod
    def discover(cls, start: Path | None = None) -> Project:
        from holodeck_core.config.yaml_source import load_yaml_model

        root = find_project_root(start)
        settings_file = root / PROJECT_FILE
        settings = (
            load_yaml_model(settings_file, ProjectSettings)
            if settings_file.is_file()
            else ProjectSettings()
        )
        return cls(root=root, settings=settings)

    @property
    def home(self) -> Path:
        configured = os.environ.get("HOLODECK_HOME")
        if configured:
            return Path(configured).expanduser().resolve()
        return self.root / PROJECT_HOME_DIR

    @property
    def history_db(self) -> Path:
        configured = os.environ.get("HOLODECK_HISTORY_DB") or self.settings.history_db
        if configured:
            path = Path(configured).expanduser()
            return path if path.is_absolute() else (self.root / path)
        return self.home / "history.duckdb"

    @property
    def history_url(self) -> str | None:
        """A history lake's URL when ``HOLODECK_HISTORY_URL`` or ``history_url`` is set
        (docs/history.md); None means the DuckDB file :attr:`history_db`. The history package
        turns it into a store (:func:`holodeck_core.history.backend.resolve_history`)."""
        return os.environ.get(LAKE_ENV) or self.settings.history_url

    @property
    def prompts_dir(self) -> Path:
        return self.home / "prompts"

    @property
    def journal_dir(self) -> Path:
        return self.home / "journal"

    @property
    def cache_dir(self) -> Path:
        """Every cache: ``files/``, ``judge/``, and the retrieval tools' ``embeddings/`` and
        ``indexes/`` (docs/agent-yaml.md)."""
        return self.home / "cache"

    @property
    def file_cache_dir(self) -> Path:
        return self.cache_dir / "files"

    @property
    def judge_cache_dir(self) -> Path:
        return self.cache_dir / "judge"

    @property
    def artifacts_url(self) -> str:
        """The IO manager's base: ``HOLODECK_ARTIFACTS_URL``, else ``artifacts_url``, else
        ``HOLODECK_HOME/artifacts``."""
        configured = os.environ.get(ARTIFACTS_URL_ENV) or self.settings.artifacts_url
        return configured or str(self.home / "artifacts")

    def agent_paths(self) -> list[Path]:
        """The orchestrated agents: ``HOLODECK_AGENTS`` (``os.pathsep``-separated) overrides
        ``holodeck.yaml``'s ``agents``; relative paths are from the project root."""
        override = os.environ.get("HOLODECK_AGENTS")
        raw = (
            [p for p in override.split(os.pathsep) if p]
            if override
            else [entry if isinstance(entry, str) else entry.path for entry in self.settings.agents]
        )
        return [self._path(p) for p in raw]

    def _path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    def extensions_of(self, agent_file: Path) -> str | None:
        """The sidecar the ``agents:`` entry of ``agent_file`` names, if any."""
        wanted = agent_file.resolve()
        for entry in self.settings.agents:
            if isinstance(entry, AgentEntry) and self._path(entry.path).resolve() == wanted:
                return entry.extensions
        return None

    def batch_of(self, agent_file: Path) -> BatchMode | None:
        """The ``batch:`` of the ``agents:`` entry of ``agent_file``, if any."""
        wanted = agent_file.resolve()
        for entry in self.settings.agents:
            if isinstance(entry, AgentEntry) and self._path(entry.path).resolve() == wanted:
                return entry.batch
        return None

    def agent_entry(self, agent_file: Path) -> tuple[int, AgentEntry] | None:
        """The ``agents:`` entry (its index and itself) that declares a target for
        ``agent_file``, if any."""
        found = self.entry_of(agent_file)
        return found if found is not None and found[1].target is not None else None

    def entry_of(self, agent_file: Path) -> tuple[int, AgentEntry] | None:
        """The first ``agents:`` mapping entry (its index and itself) of ``agent_file``."""
        wanted = agent_file.resolve()
        for index, entry in enumerate(self.settings.agents):
            if isinstance(entry, AgentEntry) and self._path(entry.path).resolve() == wanted:
                return index, entry
        return None


def location(value: str) -> Path | UPath:
    """A local path, or a ``UPath`` for a URL (``s3://bucket/prefix``; credentials from the
    environment)."""
    if "://" not in value or value.startswith("file://"):
        return Path(value.removeprefix("file://")).expanduser()
    from upath import UPath

    if not remote.on_s3(value):
        return UPath(value)
    path = UPath(value, **remote.s3_options())
    remote.bounded(path.fs)
    return cast("UPath", path)


def results_dir(agent_file: Path, agent_name: str) -> Path | UPath:
    """Where EvalRuns of an agent go: ``<agent dir>/results/<slug>/`` (docs/cli.md), or
    ``<results_url>/<slug>/`` when ``HOLODECK_RESULTS_URL`` or ``results_url`` in
    ``holodeck.yaml`` sets one (workers on many machines, docs/scale-out.md)."""
    from holodeck_core.naming import slugify

    project = Project.discover(agent_file.parent)
    url = os.environ.get(RESULTS_URL_ENV) or project.settings.results_url
    if url:
        base = location(url)
        if isinstance(base, Path) and not base.is_absolute():
            base = project.root / base
        return base / slugify(agent_name)
    return agent_file.resolve().parent / "results" / slugify(agent_name)


SUPERSET_FOLDER = "holodeck-pipelines"
"""Our superset EvalRun of ``results/<slug>/<name>.json`` lives at
``results/<slug>/holodeck-pipelines/<name>.json``, where HoloDeck's loader (which globs
``*.json`` in the slug folder, not below) does not look (docs/holodeck-fidelity.md)."""


_L = TypeVar("_L", bound="Path | UPath")


def superset_of(path: _L) -> _L:
    """The superset beside a HoloDeck-shaped EvalRun file if there is one, else ``path``:
    every reader of ours prefers it and accepts either."""
    if path.parent.name == SUPERSET_FOLDER:
        return path
    candidate = path.with_name(SUPERSET_FOLDER) / path.name
    return cast("_L", candidate) if candidate.is_file() else path


def results_folder_of(path: _L) -> _L:
    """``results/<slug>/`` of a run file at either of its two places."""
    return cast("_L", path.parent.parent if path.parent.name == SUPERSET_FOLDER else path.parent)
