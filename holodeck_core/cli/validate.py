"""``holodeck validate AGENT_YAML`` (check a config and summarize it) and ``holodeck schema``
(the JSON Schema of agent.yaml, for editors)."""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from holodeck_core.cli.model_option import (
    add_model_option,
    candidate_lines,
    check_other_candidates,
)
from holodeck_core.cli.target_option import add_target_option, describe_target
from holodeck_core.errors import ExitCode

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent


def add_validate_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    validate = commands.add_parser("validate", help="check an agent.yaml and summarize it")
    validate.add_argument("agent", metavar="AGENT_YAML")
    validate.add_argument(
        "--fix",
        action="store_true",
        help="move our fields (variants, gates, case ids, our metrics...) out of agent.yaml "
        "into its sidecar <stem>.pipelines.yaml, keeping agent.yaml's comments, then validate",
    )
    add_target_option(validate)
    add_model_option(validate)
    validate.set_defaults(handler=_validate)


def add_schema_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    schema = commands.add_parser("schema", help="print the JSON Schema of agent.yaml")
    schema.set_defaults(handler=_schema)


def _validate(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.metrics.selection import suite_metrics
    from holodeck_core.models import MCPTool

    if args.fix:
        _fix(args.agent)
    loaded = load_agent(args.agent, target=args.target, model=args.model)
    check_other_candidates(args.agent, args.target, loaded)
    agent = loaded.agent
    metrics = suite_metrics(agent.evaluations.metrics if agent.evaluations else None, agent.cases)
    by_kind = Counter[str](metric.type for metric in metrics)
    by_type = Counter[str](tool.type for tool in agent.tools or [])
    _show(f"{loaded.display}: valid")
    _show(f"  agent:    {agent.name}")
    _show(f"  model:    {agent.model.provider.value} {agent.model.name}")
    for line in candidate_lines(loaded):
        _show(f"  candidate: {line}")
    if loaded.target is not None:
        _show(f"  target:   {describe_target(loaded.target)}")
    if loaded.sidecar is not None:
        _show(f"  sidecar:  {loaded.sidecar} (holodeck-pipelines' additions, merged in)")
    for path in loaded.config_files:
        _show(f"  config:   {path} (merged as HoloDeck 0.7.1 merges it)")
    for key, value, origin in _settings(loaded):
        _show(f"  setting:  {key} = {value} ({origin})")
    versions = ", ".join(p.version.version for p in loaded.active_prompts)
    _show(f"  prompt:   {versions} ({loaded.prompt.version.source})")
    _show(f"  cases:    {len(agent.cases)}")
    metric_names = ", ".join(m.display_name for m in metrics) or "none"
    _show(f"  metrics:  {len(metrics)} ({_counts(by_kind)}): {metric_names}")
    tool_names = ", ".join(tool.name for tool in agent.tools or [])
    _show(f"  tools:    {_counts(by_type)}" + (f" ({tool_names})" if tool_names else ""))
    tools = agent.tools or []
    for label, names in (
        ("run for real", [t.name for t in tools if t.runnable and t.mock is None]),
        ("mocked", [t.name for t in tools if t.mock is not None]),
        ("not runnable here without a `mock:` result", [t.name for t in tools if not t.runnable]),
    ):
        if names:
            _show(f"  {label}: {', '.join(names)}")
    for tool in tools:
        if (
            isinstance(tool, MCPTool)
            and "load_prompts" in tool.model_fields_set
            and tool.load_prompts
        ):
            _show(
                f"  warning:  tools ({tool.name}): load_prompts is not supported; the server's "
                "prompts are not offered to the model (its tools are)"
            )
    _show(f"  turns:    at most {agent.max_turns} model calls a turn ({agent.max_turns_source})")
    settings = agent.openai_settings
    if settings is not None and settings.effort is not None:
        _show(f"  effort:   {settings.effort} (openai.effort, sent as the request's reasoning)")
    if settings is not None and settings.disallowed & {t.name for t in tools}:
        blocked = ", ".join(sorted(settings.disallowed & {t.name for t in tools}))
        _show(f"  not offered to the model: {blocked} (openai: disallowed tools)")
    if agent.ignored_blocks():
        ignored = ", ".join(agent.ignored_blocks())
        _show(f"  ignored:  {ignored} (HoloDeck blocks this engine does not use)")
    for warning in [*loaded.relocations, *loaded.warnings]:
        _show(f"  warning:  {warning}")
    if any(t.type in ("vectorstore", "hierarchical_document") for t in agent.tools or []):
        from holodeck_core.tools.retrieval.settings import check_retrieval

        for note in check_retrieval(agent):
            _show(f"  note:     {note}")
    return ExitCode.OK


def _fix(agent: str) -> None:
    """``--fix``: move our fields into the sidecar (nothing written when it cannot)."""
    from pathlib import Path

    from holodeck_core.config.extensions import grouped
    from holodeck_core.config.migrate import plan_migration, write_migration
    from holodeck_core.errors import ConfigError

    agent_file = Path(agent).expanduser()
    if not agent_file.is_file():
        raise ConfigError(f"agent file not found: {agent_file}", file=agent)
    try:
        migration = plan_migration(agent_file)
    except ConfigError as exc:
        raise ConfigError([replace(p, file=p.file or agent) for p in exc.problems]) from None
    if migration is None:
        return
    write_migration(agent_file, migration)
    for label, paths in grouped(migration.moved).items():
        _show(f"moved to {migration.sidecar.name}: {label} ({len(paths)})")


MODEL_SETTINGS = (
    "provider",
    "name",
    "temperature",
    "max_tokens",
    "top_p",
    "endpoint",
    "api_version",
)


def _settings(loaded: LoadedAgent) -> list[tuple[str, str, str]]:
    """(setting, effective value, where it came from) of the agent's model, its judge model,
    its execution settings and its tools' databases; a secret's value is never shown."""
    from holodeck_core.redaction import REDACTED, redact_text

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


def _show(line: str) -> None:
    """A line that holds text from a config: terminal escapes are shown, not obeyed."""
    from holodeck_core.terminal import printable

    print(printable(line))


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counter.items())) or "none"


def _schema(args: argparse.Namespace) -> int:
    import json

    from holodeck_core.models import Agent

    schema = Agent.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HoloDeck agent.yaml (holodeck-pipelines)"
    print(json.dumps(schema, indent=2))
    return ExitCode.OK
