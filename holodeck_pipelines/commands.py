"""Commands the pipelines add to ``holodeck`` (entry point group ``holodeck.commands``).

``holodeck_core`` never imports this package (docs/dagster.md): the CLI discovers these
registrations through the entry point, so a core install without Dagster simply has no
``demo`` command. This module stays light; Dagster is imported only when the demo runs."""

from __future__ import annotations

import argparse
from typing import Any

from holodeck_core.defaults import MODEL_SERVER_PORT


def _demo(args: argparse.Namespace) -> int:
    from holodeck_core.config.project import find_project_root
    from holodeck_pipelines.demo import run_demo

    return run_demo(find_project_root(), port=args.port)


def add_demo_parser(commands: argparse._SubParsersAction[Any]) -> None:
    demo = commands.add_parser(
        "demo", help="run the offline demo: every prompt version through Dagster into DuckDB"
    )
    demo.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"the loopback model server's port (default {MODEL_SERVER_PORT}, or a free one "
        "when it is taken; 0: a free one); the agents reach it through HOLODECK_MODEL_ENDPOINT",
    )
    demo.set_defaults(handler=_demo)


def _partitions(args: argparse.Namespace) -> int:
    from holodeck_core.config.project import find_project_root
    from holodeck_pipelines.partitions import sync_partitions

    return sync_partitions(find_project_root())


def add_partitions_parser(commands: argparse._SubParsersAction[Any]) -> None:
    partitions = commands.add_parser(
        "partitions",
        help="add the registered prompt versions as Dagster partitions (and remove partitions "
        "no prompt snapshot backs) on the instance in DAGSTER_HOME (default: the project root)",
    )
    partitions.set_defaults(handler=_partitions)


def _pools(args: argparse.Namespace) -> int:
    from holodeck_core.config.project import find_project_root
    from holodeck_pipelines.pools import set_pools

    return set_pools(find_project_root())


def add_pools_parser(commands: argparse._SubParsersAction[Any]) -> None:
    pools = commands.add_parser(
        "pools",
        help="set the limit of every Dagster pool the pipelines use (llm_api, history_db) on "
        "the instance in DAGSTER_HOME (default: the project root), from holodeck.yaml",
    )
    pools.set_defaults(handler=_pools)


def _agents_add(args: argparse.Namespace) -> int:
    from holodeck_core.config.project import find_project_root
    from holodeck_pipelines.add_agent import run_add_agent

    return run_add_agent(find_project_root(), args)


def add_agents_parser(commands: argparse._SubParsersAction[Any]) -> None:
    agents = commands.add_parser("agents", help="the agents of the project (holodeck.yaml)")
    agent_commands = agents.add_subparsers(dest="agents_command", required=True)
    add = agent_commands.add_parser(
        "add",
        help="add an agent to the project: list it in holodeck.yaml (its name must be unique "
        "in the project), register its prompt versions and add them as Dagster partitions",
        description="With --from, first copy that agent's folder (prompts, tools, files, "
        "test cases; not its results) to AGENT_YAML's folder, named --name.",
    )
    add.add_argument("agent", metavar="AGENT_YAML", help="the agent.yaml to add (or to create)")
    add.add_argument(
        "--from", dest="copy_from", metavar="AGENT_YAML", help="copy this agent's folder first"
    )
    add.add_argument("--name", help="the copy's name (required with --from)")
    add.set_defaults(handler=_agents_add)
