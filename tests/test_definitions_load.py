"""Loading the code location (``workspace.yaml`` → ``holodeck_pipelines.definitions``) has no
side effects (docs/dagster.md): no prompt snapshot registered, no file created or changed under
the project, HOLODECK_HOME or DAGSTER_HOME. Snapshots are the sensor's, ``holodeck partitions``'
and the runs' work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_pipelines import make_project

LOAD = """
import json
import holodeck_pipelines.definitions as d
repo = d.defs.get_repository_def()
print(json.dumps(sorted(job.name for job in repo.get_all_jobs())))
"""


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` with its size and modification time."""
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in [root, *root.rglob("*")]
    }


def test_loading_the_definitions_writes_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", "http://127.0.0.1:9/v1")
    home = tmp_path / "holodeck-home"
    dagster_home = tmp_path / "dagster-home"
    for folder in (home, dagster_home):
        folder.mkdir(exist_ok=True)
    before = tree(tmp_path)
    env = {
        **os.environ,
        "HOLODECK_PROJECT_ROOT": str(project.root),
        "HOLODECK_HOME": str(home),
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", LOAD],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Geo_agent_eval" in json.loads(done.stdout.splitlines()[-1])  # the agent did load
    after = tree(tmp_path)
    changed = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    assert not changed, f"loading the definitions wrote {changed}"
