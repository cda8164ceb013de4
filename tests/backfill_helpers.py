"""The Dagster harness of tests/test_backfill_slow.py: the temp project (an agent with prompt
versions v1 to v3 and ``CASES`` cases), dagster.yaml and workspace.yaml on SQLite or on the
PostgreSQL profile's storage, the partitions registered as the sensor's first tick does, processes
started in their own group and stopped with it, and the GraphQL documents, client and waits the
test drives the webserver and daemon with."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from holodeck_core.config.project import Project
from holodeck_core.testing import request_key
from holodeck_pipelines.builder import build_definitions
from tests.test_postgres import PROFILE

HOST = "127.0.0.1"
AGENT = "geo_agent"
PARTITIONS_DEF = f"{AGENT}_prompt_versions"
ASSETS = ["processed_files", "agent_responses", "metric_results", "report_summary", "eval_history"]
CASES = 6
SERVER_START_TIMEOUT = 120.0
BACKFILL_TIMEOUT = 360.0  # per backfill; the daemon ticks every ~30 s
TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}

LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
    ... on PythonError { stack }
  }
}
"""
REEXECUTE_BACKFILL = """
mutation Reexecute($params: ReexecutionParams!) {
  reexecutePartitionBackfill(reexecutionParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
    ... on PythonError { stack }
  }
}
"""
TARGETED = "".join(  # the partitions a backfill targets, per asset (aliased by asset name)
    f'{asset}: partitionsTargetedForAssetKey(assetKey: {{path: ["{AGENT}", "{asset}"]}}) '
    "{ partitionKeys }\n"
    for asset in ASSETS
)
BACKFILL = f"""
query Backfill($id: String!) {{
  partitionBackfillOrError(backfillId: $id) {{
    __typename
    ... on PartitionBackfill {{
      id
      status
      isAssetBackfill
      partitionNames
      runs {{ runId status tags {{ key value }} }}
      {TARGETED}
    }}
    ... on Error {{ message }}
  }}
}}
"""
RUNS = """
query Runs($filter: RunsFilter) {
  runsOrError(filter: $filter) {
    __typename
    ... on Runs { results { runId status tags { key value } } }
    ... on Error { message }
  }
}
"""
LOCATIONS = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""
STEP_FAILURES = """
query Logs($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on ExecutionStepFailureEvent { stepKey error { message cause { message } } }
        ... on ExecutionStepUpForRetryEvent { stepKey error { message } }
      }
    }
  }
}
"""
MATERIALIZATIONS = """
query Materializations($key: AssetKeyInput!, $partitions: [String!]) {
  assetOrError(assetKey: $key) {
    __typename
    ... on Asset {
      assetMaterializations(partitions: $partitions) {
        runId
        partition
        metadataEntries { label ... on IntMetadataEntry { intValue } }
      }
    }
  }
}
"""


# --- the temp project and instance -------------------------------------------------------------


def make_project(root: Path, base_url: str) -> Project:
    """An agent with three prompt versions (the file and two variants) and ``CASES`` cases."""
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    prompts = {
        "v1": "Answer briefly.",
        "v2": "You are a geography expert.",
        "v3": "You are a geography expert. Be terse.",
    }
    for version, body in prompts.items():
        (agent / "prompts" / f"{version}.md").write_text(f"---\nversion: {version}\n---\n{body}\n")
    cases = "".join(
        f"  - {{name: c{i}, input: 'capital of France ({i})?', ground_truth: Paris}}\n"
        for i in range(CASES)
    )
    (agent / "agent.yaml").write_text(
        textwrap.dedent(f"""\
            name: Geo Agent
            model: {{provider: openai, name: m, endpoint: "{base_url}", api_key: sk-test-123456}}
            instructions: {{file: prompts/v1.md, variants: [prompts/v2.md, prompts/v3.md]}}
            evaluations:
              metrics: [{{type: standard, metric: equality}}]
            test_cases:
            """)
        + cases
    )
    # a yearly nightly schedule: the running daemon must launch nothing but the backfills
    (root / "holodeck.yaml").write_text(
        'agents: [agents/geo/agent.yaml]\nnightly_cron: "0 2 1 1 *"\n'
    )
    return Project.discover(root)


def write_instance(dagster_home: Path, project_root: Path, storage: str) -> Path:
    """dagster.yaml (storage in the temp dir, or the PostgreSQL profile's ``storage:`` block,
    telemetry off, ``concurrency:`` not ``run_queue:``, run retries off: docs/dagster.md) and
    workspace.yaml; returns the latter."""
    dagster_home.mkdir(parents=True)
    if storage == "postgres":
        profile = yaml.safe_load(PROFILE.read_text())
        storage_block = yaml.safe_dump({"storage": profile["storage"]})
    else:
        storage_block = f"storage:\n  sqlite:\n    base_dir: {dagster_home / 'storage'}\n"
    (dagster_home / "dagster.yaml").write_text(
        storage_block
        + textwrap.dedent(f"""\
            local_artifact_storage:
              module: dagster._core.storage.root
              class: LocalArtifactStorage
              config:
                base_dir: {dagster_home}
            compute_logs:
              module: dagster._core.storage.local_compute_log_manager
              class: LocalComputeLogManager
              config:
                base_dir: {dagster_home / "logs"}
            telemetry:
              enabled: false
            concurrency:
              pools:
                granularity: op
              runs:
                max_concurrent_runs: 4
            run_retries:
              enabled: false
            """)
    )
    workspace = dagster_home / "workspace.yaml"
    workspace.write_text(
        textwrap.dedent("""\
            load_from:
              - python_module:
                  module_name: holodeck_pipelines.definitions
                  location_name: holodeck_pipelines
            """)
    )
    return workspace


def register_partitions(project: Project, instance: dg.DagsterInstance) -> list[str]:
    """What the prompt-version sensor does on its first tick: snapshots + partitions."""
    defs = build_definitions(project)
    sensor = defs.resolve_sensor_def(PARTITIONS_DEF)
    with dg.build_sensor_context(instance=instance, resources=defs.resources) as context:
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    return sorted(instance.get_dynamic_partitions(PARTITIONS_DEF))


# --- processes and GraphQL ---------------------------------------------------------------------


@contextmanager
def background(command: list[str], env: dict[str, str], cwd: Path, log: Path) -> Iterator[Any]:
    """A subprocess in its own process group; terminated (then killed) on exit."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the process group we started (its children are the code servers and run
    workers), then kill what is left of it after a bounded wait."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=20)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # stragglers in the group
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


def tail(path: Path, lines: int = 40) -> str:
    if not path.is_file():
        return f"({path} absent)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class GraphQL:
    def __init__(self, url: str, logs: list[Path]) -> None:
        self.url = url
        self.logs = logs

    def __call__(self, query: str, **variables: Any) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert not answer.get("errors"), f"GraphQL errors: {answer['errors']}\n{self.context()}"
        return dict(answer["data"])

    def context(self) -> str:
        return "\n".join(f"--- {log.name} (tail)\n{tail(log)}" for log in self.logs)


def wait_for(
    what: str, probe: Callable[[], Any], timeout: float, interval: float, context: Callable[[], str]
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{context()}")
        time.sleep(interval)


def wait_for_webserver(process: subprocess.Popen[bytes], gql: GraphQL) -> None:
    def loaded() -> bool:
        if process.poll() is not None:
            pytest.fail(f"dagster-webserver exited with {process.returncode}\n{gql.context()}")
        try:
            data = gql(LOCATIONS)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False
        entries = data["workspaceOrError"].get("locationEntries") or []
        for entry in entries:
            located = entry["locationOrLoadError"] or {}
            if located.get("__typename") == "PythonError":
                pytest.fail(f"code location failed to load: {located['message']}")
        return any(
            (entry["locationOrLoadError"] or {}).get("__typename") == "RepositoryLocation"
            for entry in entries
        )

    wait_for("the webserver and its code location", loaded, SERVER_START_TIMEOUT, 1.0, gql.context)


def launched(result: dict[str, Any], field: str) -> str:
    answer = result[field]
    assert answer["__typename"] == "LaunchBackfillSuccess", answer
    return str(answer["backfillId"])


def wait_for_backfill(gql: GraphQL, backfill_id: str) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        backfill = gql(BACKFILL, id=backfill_id)["partitionBackfillOrError"]
        assert backfill["__typename"] == "PartitionBackfill", backfill
        done = backfill["status"] in TERMINAL and all(
            run["status"] in {"SUCCESS", "FAILURE", "CANCELED"} for run in backfill["runs"]
        )
        return backfill if done else None

    return dict(wait_for(f"backfill {backfill_id}", finished, BACKFILL_TIMEOUT, 2.0, gql.context))


def targeted(backfill: dict[str, Any]) -> dict[str, list[str]]:
    return {asset: sorted((backfill[asset] or {}).get("partitionKeys") or []) for asset in ASSETS}


def tag(run: dict[str, Any], key: str) -> str | None:
    return next((t["value"] for t in run["tags"] if t["key"] == key), None)


def partitions_of(run: dict[str, Any]) -> str:
    """A run's partition (``v2``), or its range (``v1...v3``: a single-run backfill's)."""
    start = tag(run, "dagster/asset_partition_range_start")
    end = tag(run, "dagster/asset_partition_range_end")
    return tag(run, "dagster/partition") or (f"{start}...{end}" if start and end else "?")


def status_by_partition(runs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each run's status by the partitions it covered (a backfill's, or any runs')."""
    statuses: dict[str, list[str]] = {}
    for run in runs:
        statuses.setdefault(partitions_of(run), []).append(run["status"])
    return {key: sorted(value) for key, value in sorted(statuses.items())}


def case_key(i: int) -> str:
    return request_key("responses", f"capital of France ({i})?")
