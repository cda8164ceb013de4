"""The history steps of a single-run backfill (docs/scale-out.md): how long ``eval_history`` (every
version written, its checks asked) and ``processed_files`` (every version's estimate read from
the history) take for a ``--versions``-version backfill, on the DuckDB file and on a DuckLake
(local catalog file), read from the Dagster event log (step start to step success).

    .venv/bin/python bench/history_step.py [--versions 10] [--cases 20] [--repeat 3]

In process, on a temporary instance, against the loopback model server. The history is
written once (one version, untimed) before the timed backfills, each of which adds
``--versions`` runs. The first line says which tree ran. To measure another one (``main``
before a change), export it and put it ahead of the editable install, whose import hook
would otherwise win over ``PYTHONPATH``::

    git archive main holodeck_core holodeck_pipelines | tar -x -C /tmp/before
    .venv/bin/python -c 'import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path
        if "__editable__" not in getattr(f, "__module__", "")]; sys.path[:0] = ["/tmp/before",
        "bench"]; runpy.run_path("bench/history_step.py", run_name="__main__")' --versions 10

Ends with ``RATIOS``: each step's median per version."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import dagster as dg
import yaml
from common import ENDPOINT_VAR, RULES_YAML, machine_line, median, write_agent
from dagster_overhead import write_versions

import holodeck_core
from holodeck_core.config.project import Project
from holodeck_core.testing import run_model_server
from holodeck_pipelines.automation import register_versions
from holodeck_pipelines.builder import build_definitions, build_pipelines
from holodeck_pipelines.pools import apply_pools
from holodeck_pipelines.resources import HoloDeckProject

STEPS = ("processed_files", "eval_history")
GROUP = "bench_agent"


def step_seconds(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Each history step's time in the run, from its start and success events."""
    started: dict[str, float] = {}
    took: dict[str, float] = {}
    for record in instance.get_records_for_run(run_id).records:
        entry = record.event_log_entry
        step = (entry.step_key or "").removeprefix(f"{GROUP}__")
        if step not in STEPS:
            continue
        if entry.dagster_event_type == dg.DagsterEventType.STEP_START:
            started[step] = entry.timestamp
        elif entry.dagster_event_type == dg.DagsterEventType.STEP_SUCCESS:
            took[step] = entry.timestamp - started[step]
    return took


def backend_times(
    work: Path, backend: str, args: argparse.Namespace, url: str
) -> list[dict[str, float]]:
    root = work / backend
    agent = write_agent(root / "agent", args.cases)
    keys = write_versions(agent, args.versions)
    (root / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n", encoding="utf-8")
    os.environ["HOLODECK_HOME"] = str(root / ".home")
    os.environ[ENDPOINT_VAR] = url
    os.environ.pop("HOLODECK_HISTORY_URL", None)
    if backend == "ducklake":
        os.environ["HOLODECK_HISTORY_URL"] = f"ducklake:{root / 'lake' / 'catalog.ducklake'}"
    project = Project.discover(root)
    defs = build_definitions(project)
    [pipeline] = build_pipelines(project)
    job = defs.resolve_job_def("Bench_agent_eval")
    times = []
    with dg.instance_for_test() as instance:
        apply_pools(instance, project)
        _, registered = register_versions(pipeline.agent_file, HoloDeckProject(root=str(root)))
        instance.add_dynamic_partitions(pipeline.partitions.name, registered)
        job.execute_in_process(instance=instance, partition_key=keys[0])  # the history exists
        for attempt in range(args.repeat):
            tags = {
                "dagster/asset_partition_range_start": keys[0],
                "dagster/asset_partition_range_end": keys[-1],
            }
            result = job.execute_in_process(instance=instance, tags=tags)
            took = step_seconds(instance, result.run_id)
            times.append(took)
            shown = "  ".join(f"{step} {took[step]:.2f} s" for step in STEPS)
            print(f"  {backend:<8} backfill {attempt + 1}: {shown}", flush=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=10)
    parser.add_argument("--cases", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"code: {Path(holodeck_core.__file__).parents[1]}")
    print(machine_line())
    for name in ("HOLODECK_HISTORY_DB", "HOLODECK_AGENTS", "DAGSTER_HOME"):
        os.environ.pop(name, None)
    ratios = []
    with (
        tempfile.TemporaryDirectory(prefix="holodeck-bench-") as scratch,
        run_model_server(yaml.safe_load(RULES_YAML)) as server,
    ):
        for backend in ("duckdb", "ducklake"):
            times = backend_times(Path(scratch), backend, args, server.openai_base_url)
            for step in STEPS:
                value = median([t[step] for t in times])
                print(f"{backend} {step}: median {value:.2f} s for {args.versions} versions")
                ratios.append(f"{backend}-{step}-per-version-s={value / args.versions:.3f}")
    print("RATIOS " + " ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
