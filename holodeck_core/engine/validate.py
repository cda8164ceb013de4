"""``holodeck validate``: what a loaded agent amounts to, in lines (its model and where each
setting came from, its prompt versions, cases, metrics and tools, what is mocked, ignored or
not supported), and ``--fix``, which moves our fields out of ``agent.yaml`` into its sidecar
(docs/agent-yaml.md). The lines hold text from configs: the CLI makes it printable."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError
from holodeck_core.models import MCPTool
from holodeck_core.redaction import REDACTED, redact_text

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.models import Agent
    from holodeck_core.models.target import Target

MODEL_SETTINGS = (
    "provider",
    "name",
    "temperature",
    "max_tokens",
    "top_p",
    "endpoint",
    "api_version",
)
RETRIEVAL_TOOLS = ("vectorstore", "hierarchical_document")


def fix_agent(agent: str) -> list[str]:
    """``--fix``: move our fields into the sidecar (nothing written when it cannot); what was
    moved, one line per kind of field."""
    from holodeck_core.config.extensions import grouped
    from holodeck_core.config.migrate import plan_migration, write_migration

    agent_file = Path(agent).expanduser()
    if not agent_file.is_file():
        raise ConfigError(f"agent file not found: {agent_file}", file=agent)
    try:
        migration = plan_migration(agent_file)
    except ConfigError as exc:
        raise ConfigError([replace(p, file=p.file or agent) for p in exc.problems]) from None
    if migration is None:
        return []
    write_migration(agent_file, migration)
    return [
        f"moved to {migration.sidecar.name}: {label} ({len(paths)})"
        for label, paths in grouped(migration.moved).items()
    ]


def describe_agent(loaded: LoadedAgent) -> Iterator[str]:
    """The summary ``holodeck validate`` prints, line by line."""
    from holodeck_core.metrics.selection import suite_metrics

    agent = loaded.agent
    metrics = suite_metrics(agent.evaluations.metrics if agent.evaluations else None, agent.cases)
    yield f"{loaded.display}: valid"
    yield f"  agent:    {agent.name}"
    yield f"  model:    {agent.model.provider.value} {agent.model.name}"
    for line in candidate_lines(loaded):
        yield f"  candidate: {line}"
    if loaded.target is not None:
        yield f"  target:   {describe_target(loaded.target)}"
    if loaded.sidecar is not None:
        yield f"  sidecar:  {loaded.sidecar} (holodeck-pipelines' additions, merged in)"
    for path in loaded.config_files:
        yield f"  config:   {path} (merged as HoloDeck 0.7.1 merges it)"
    for key, value, origin in settings(loaded):
        yield f"  setting:  {key} = {value} ({origin})"
    versions = ", ".join(p.version.version for p in loaded.active_prompts)
    yield f"  prompt:   {versions} ({loaded.prompt.version.source})"
    yield f"  cases:    {len(agent.cases)}"
    metric_names = ", ".join(m.display_name for m in metrics) or "none"
    by_kind = Counter[str](metric.type for metric in metrics)
    yield f"  metrics:  {len(metrics)} ({_counts(by_kind)}): {metric_names}"
    yield from _tool_lines(agent)
    yield from _loop_lines(agent)
    for warning in [*loaded.relocations, *loaded.warnings]:
        yield f"  warning:  {warning}"
    if any(t.type in RETRIEVAL_TOOLS for t in agent.tools or []):
        from holodeck_core.tools.retrieval.settings import check_retrieval

        for note in check_retrieval(agent):
            yield f"  note:     {note}"


def check_other_candidates(agent: str, target: str | None, loaded: LoadedAgent) -> None:
    """Every other model candidate loads too (its merged agent validated), else a
    :class:`~holodeck_core.errors.ConfigError` with all their problems."""
    from holodeck_core.config.loader import load_agent

    problems = []
    for name in loaded.candidates.names:
        if name != loaded.candidate.name:
            try:
                load_agent(agent, target=target, model=name)
            except ConfigError as exc:
                problems += exc.problems
    if problems:
        raise ConfigError(problems)


def candidate_lines(loaded: LoadedAgent) -> list[str]:
    """A line per model candidate: what it changes and where it is declared, the one loaded
    marked (its settings' sources are the ``setting:`` lines)."""
    candidates = loaded.candidates
    shown = [candidates.own, *(c for c in candidates.declared if c.name != candidates.own.name)]
    lines = []
    for candidate in shown:
        changes = ", ".join(f"{k}={_shown(k, v)}" for k, v in candidate.block.items())
        mark = " (loaded)" if candidate.name == loaded.candidate.name else ""
        where = "the agent's own model" if not candidate.block else candidate.where
        lines.append(f"{candidate.name}{mark}: {changes + '; ' if changes else ''}{where}")
    return lines


def _shown(key: str, value: object) -> str:
    return REDACTED if key == "api_key" else redact_text(str(value))


def _tool_lines(agent: Agent) -> Iterator[str]:
    """The tools by type, which run for real, which are mocked, which cannot run here."""
    tools = agent.tools or []
    tool_names = ", ".join(tool.name for tool in tools)
    by_type = Counter[str](tool.type for tool in tools)
    yield f"  tools:    {_counts(by_type)}" + (f" ({tool_names})" if tool_names else "")
    for label, names in (
        ("run for real", [t.name for t in tools if t.runnable and t.mock is None]),
        ("mocked", [t.name for t in tools if t.mock is not None]),
        ("not runnable here without a `mock:` result", [t.name for t in tools if not t.runnable]),
    ):
        if names:
            yield f"  {label}: {', '.join(names)}"
    for tool in tools:
        if (
            isinstance(tool, MCPTool)
            and "load_prompts" in tool.model_fields_set
            and tool.load_prompts
        ):
            yield (
                f"  warning:  tools ({tool.name}): load_prompts is not supported; the server's "
                "prompts are not offered to the model (its tools are)"
            )


def _loop_lines(agent: Agent) -> Iterator[str]:
    """The tool loop's bounds and HoloDeck's blocks: turns, effort, disallowed, ignored."""
    tools = {t.name for t in agent.tools or []}
    yield f"  turns:    at most {agent.max_turns} model calls a turn ({agent.max_turns_source})"
    block = agent.openai_settings
    if block is not None and block.effort is not None:
        yield f"  effort:   {block.effort} (openai.effort, sent as the request's reasoning)"
    if block is not None and block.disallowed & tools:
        blocked = ", ".join(sorted(block.disallowed & tools))
        yield f"  not offered to the model: {blocked} (openai: disallowed tools)"
    if agent.ignored_blocks():
        ignored = ", ".join(agent.ignored_blocks())
        yield f"  ignored:  {ignored} (HoloDeck blocks this engine does not use)"


def describe_target(target: Target) -> str:
    """``http POST https://host/chat (limit 8, timeout 30 s)``, credentials scrubbed."""
    spec = target.spec
    shown = [
        f"{name} {value}{' s' if name == 'timeout' else ''}"
        for name in ("limit", "timeout", "attempts")
        if (value := getattr(spec, name)) is not None
    ]
    headers = sorted(getattr(spec, "headers", {}) or {})
    if headers:
        shown.append(f"headers {', '.join(headers)} (secret)")
    return redact_text(target.label) + (f" ({'; '.join(shown)})" if shown else "")


def settings(loaded: LoadedAgent) -> list[tuple[str, str, str]]:
    """(setting, effective value, where it came from) of the agent's model, its judge model,
    its execution settings and its tools' databases; a secret's value is never shown."""
    agent = loaded.agent
    rows: list[tuple[str, object, str]] = []
    models = [("model", agent.model)]
    if agent.evaluations and agent.evaluations.model:
        models.append(("evaluations.model", agent.evaluations.model))
    for prefix, model in models:
        for name in (*MODEL_SETTINGS, "api_key"):
            key = f"{prefix}.{name}"
            value = getattr(model, name)
            if key in loaded.origins or value is not None:
                shown = REDACTED if name == "api_key" else getattr(value, "value", value)
                rows.append((key, shown, loaded.origins.get(key, "default")))
    execution = agent.execution.model_dump(exclude_none=True) if agent.execution else {}
    rows += [
        (f"execution.{k}", v, loaded.origins.get(f"execution.{k}", "?"))
        for k, v in execution.items()
    ]
    for tool in agent.tools or []:
        key = f"tools.{tool.name}.database"
        if key in loaded.origins:
            database = getattr(tool, "database", None)
            rows.append((key, getattr(database, "provider", database), loaded.origins[key]))
    return [(key, redact_text(str(value)), origin) for key, value, origin in rows]


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counter.items())) or "none"
