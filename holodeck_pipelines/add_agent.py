"""``holodeck agents add``: an agent joins the project in one command (listed in
``holodeck.yaml``, its prompt versions registered and added as partitions on the instance in
``DAGSTER_HOME``), and the command says what to do next in Dagster."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from holodeck_core.defaults import OWN_MODEL_CANDIDATE
from holodeck_core.engine import loaded_agent
from holodeck_core.engine.add_agent import AddedAgent, add_agent
from holodeck_core.errors import HolodeckError
from holodeck_pipelines.cells import Cell
from holodeck_pipelines.partitions import sync_partitions


def run_add_agent(root: Path, args: argparse.Namespace) -> int:
    copy_from = Path(args.copy_from) if args.copy_from else None
    added = add_agent(root, Path(args.agent), copy_from=copy_from, name=args.name)
    _tell_added(added, copy_from)
    code = sync_partitions(root)
    _tell_next_steps(added, root)
    return code


def _tell_added(added: AddedAgent, copy_from: Path | None) -> None:
    if copy_from is not None:
        print(f"copied {copy_from} to {added.file} as {added.name!r} (its results left behind)")
    where = "added to" if added.newly_listed else "already in"
    print(
        f"{added.name!r} (slug {added.slug}, Dagster group {added.dagster_name}): {where} "
        f"holodeck.yaml; prompt versions {', '.join(added.versions) or '(none)'} registered"
    )
    for warning in added.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if added.overridden:
        print(
            "warning: HOLODECK_AGENTS is set and overrides holodeck.yaml's agents: add "
            f"{added.entry} to it too, or unset it",
            file=sys.stderr,
        )


def _tell_next_steps(added: AddedAgent, root: Path) -> None:
    home = os.environ.get("DAGSTER_HOME", str(root))
    group = added.dagster_name
    # the first cell: the first prompt version with the agent's own model (docs/dagster.md)
    try:
        own = loaded_agent(added.file).candidates.own.name
    except HolodeckError:  # already reported by the partitions' sync
        own = OWN_MODEL_CANDIDATE
    cell = Cell((added.versions or ["v1"])[0], own)
    print(
        "next:\n"
        "  - reload the definitions: the Dagster UI's Deployment page, Reload on the code "
        "location (or restart `dg dev`)\n"
        f"  - run it: Assets, group {group}, Materialize all, partition {cell.label}; or\n"
        f"    DAGSTER_HOME={home} {Path(sys.executable).parent / 'dagster'} asset materialize "
        f"-m holodeck_pipelines.definitions --select 'group:{group}' "
        f"--partition {shlex.quote(cell.key)}\n"
        f"  - nightly: the schedule {group}_nightly, once turned on (the UI's Automation page)"
    )
