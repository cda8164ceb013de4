"""``holodeck validate AGENT_YAML`` (check a config and summarize it) and ``holodeck schema``
(the JSON Schema of agent.yaml, for editors)."""

from __future__ import annotations

import argparse

from holodeck_core.cli.model_option import add_model_option
from holodeck_core.cli.target_option import add_target_option
from holodeck_core.errors import ExitCode


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
    from holodeck_core.engine.validate import check_other_candidates, describe_agent, fix_agent

    if args.fix:  # nothing is written when it cannot be done
        for line in fix_agent(args.agent):
            _show(line)
    loaded = load_agent(args.agent, target=args.target, model=args.model)
    check_other_candidates(args.agent, args.target, loaded)
    for line in describe_agent(loaded):
        _show(line)
    return ExitCode.OK


def _show(line: str) -> None:
    """A line that holds text from a config: terminal escapes are shown, not obeyed."""
    from holodeck_core.terminal import printable

    print(printable(line))


def _schema(args: argparse.Namespace) -> int:
    import json

    from holodeck_core.models import Agent

    schema = Agent.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "HoloDeck agent.yaml (holodeck-pipelines)"
    print(json.dumps(schema, indent=2))
    return ExitCode.OK
