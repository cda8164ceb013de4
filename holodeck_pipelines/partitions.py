"""The agents' grids on a Dagster instance, by hand: ``holodeck partitions`` does what the
prompt-version sensor does on a tick (snapshot the active prompt files, add every registered
version as a row, remove the rows no snapshot backs) and says each grid (rows x the model
candidates, a static dimension: nothing to add), so ``dagster asset materialize --partition
default|v2`` works on a fresh ``DAGSTER_HOME`` without the daemon or the UI (docs/dagster.md)."""

import sys
from pathlib import Path

from holodeck_core.config.project import Project
from holodeck_pipelines.automation import partition_changes, register_versions
from holodeck_pipelines.builder import build_pipelines
from holodeck_pipelines.instance import project_instance
from holodeck_pipelines.resources import HoloDeckProject


def sync_partitions(root: Path) -> int:
    """Bring every agent's prompt-version rows on the instance in ``DAGSTER_HOME`` (default: the
    project root) in line with its registered prompt versions; prints its grid and what
    changed. An agent that does not load (a config error, a name another agent listed before it
    has) is named with the reason on stderr and makes the exit code 2; the others are still
    synced."""
    project = Project.discover(root)
    resource = HoloDeckProject(root=str(project.root))
    skipped: dict[str, str] = {}
    pipelines = build_pipelines(project, skipped)
    with project_instance(root) as instance:
        for pipeline in pipelines:
            name = pipeline.partitions.name or ""
            _, registered = register_versions(pipeline.agent_file, resource)
            new, stale = partition_changes(instance.get_dynamic_partitions(name), registered)
            if new:
                instance.add_dynamic_partitions(name, new)
            for key in stale:
                instance.delete_dynamic_partition(name, key)
            print(
                f"{pipeline.name}: prompt versions {', '.join(registered) or '(none)'}"
                f" x models {', '.join(pipeline.candidates)}"
                f" ({len(registered) * len(pipeline.candidates)} cells)"
                + (f"; added {', '.join(new)}" if new else "")
                + (f"; removed {', '.join(stale)} (no prompt snapshot)" if stale else "")
            )
    for path, reason in skipped.items():
        print(f"holodeck partitions: agent {path} is not loaded: {reason}", file=sys.stderr)
    return 2 if skipped else 0
