"""End to end through a real Dagster webserver and daemon (issue 8, acceptance bullet 2).

What it proves, headless and only on 127.0.0.1:

1. A backfill of three prompt versions (``v1``, ``v2``, ``v3``), launched through the GraphQL
   API (``launchPartitionBackfill``) and run by ``dagster-daemon``, ends with ``v3`` failed and
   ``v1``/``v2`` succeeded when the loopback model server answers 503 for two of ``v3``'s cases
   (they stay transient after the runner's retries and the asset's ``RetryPolicy``, DESIGN §6.8).
2. After the outage is over, ``reexecutePartitionBackfill`` with ``FROM_FAILURE`` creates a
   backfill of ``v3`` only (DESIGN §5); it succeeds, ``v1``/``v2`` are not run again. (This holds
   for an *asset* backfill, which is what the UI launches for asset partitions: it targets what
   did not materialize, so ``processed_files[v3]`` is left out and Dagster reports
   ``partitionNames`` as null; the test reads the targeted partitions per asset. A *job*
   backfill re-executed from failure would copy all partition names and skip the successful
   ones when submitting.)
3. The rerun resumes from the journal (DESIGN §3.5, §6.9): the model is called again only for
   the two cases that had failed, never for ``v3``'s cases that finished in the failed run.
4. The DuckDB history holds exactly three runs, one per partition, all with trigger ``backfill``.

It runs twice: on SQLite storage, and on PostgreSQL (the ``deploy/postgres/dagster.yaml``
profile's storage against a server the test starts, tests/services.py; issue 19).

Run it (about two and a half minutes: the backfill daemon ticks every ~30 s)::

    make test-slow
    # or just this test:
    .venv/bin/python -m pytest -m slow tests/test_backfill_slow.py -q
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest
import yaml

from holodeck_core.config.project import Project
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.assets import HISTORY_POOL, LLM_POOL
from holodeck_pipelines.builder import build_definitions
from tests.services import free_port, postgres_server
from tests.test_postgres import PROFILE

pytestmark = pytest.mark.slow

HOST = "127.0.0.1"
AGENT = "geo_agent"
PARTITIONS_DEF = f"{AGENT}_prompt_versions"
ASSETS = ["processed_files", "agent_responses", "metric_results", "report_summary", "eval_history"]
VERSIONS = ["v1", "v2", "v3"]
CASES = 6
FAILING_CASES = (4, 5)  # v3's cases that get a 503 until the outage is over
SERVER_START_TIMEOUT = 120.0
BACKFILL_TIMEOUT = 360.0  # per backfill; the daemon ticks every ~30 s
TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}

HEALTHY: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        {"match": {"user": "capital", "system": "geography"}, "reply": "Paris"},
        {"match": {"user": "capital"}, "reply": "Lyon"},
    ],
}
OUTAGE: dict[str, Any] = {
    **HEALTHY,
    "rules": [
        # only v3's prompt says "terse"; only its cases (4) and (5) fail, on every attempt
        {
            "match": {"system": "terse", "user": r"\((4|5)\)"},
            "fault": {"kind": "503"},
        },
        *HEALTHY["rules"],
    ],
}

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
    telemetry off, ``concurrency:`` not ``run_queue:``, run retries off: DESIGN §5, §6.8) and
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


def status_by_partition(backfill: dict[str, Any]) -> dict[str, list[str]]:
    statuses: dict[str, list[str]] = {}
    for run in backfill["runs"]:
        statuses.setdefault(tag(run, "dagster/partition") or "?", []).append(run["status"])
    return {key: sorted(value) for key, value in sorted(statuses.items())}


def case_key(i: int) -> str:
    return request_key("chat", f"capital of France ({i})?")


# --- the test ----------------------------------------------------------------------------------


@pytest.mark.parametrize("storage", ["sqlite", "postgres"])
def test_backfill_reexecuted_from_failure_reruns_only_the_failed_partition_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: str
) -> None:
    dagster_home = tmp_path / "dagster-home"
    holodeck_home = tmp_path / "holodeck-home"
    history_db = tmp_path / "history.duckdb"
    bin_dir = Path(sys.executable).parent
    port = free_port()
    with ExitStack() as stack:
        if storage == "postgres":  # a real server; the profile reads it from the environment
            for variable, value in stack.enter_context(postgres_server()).env().items():
                monkeypatch.setenv(variable, value)
        server = stack.enter_context(run_model_server(OUTAGE))
        project_root = tmp_path / "project"
        project_root.mkdir()
        project = make_project(project_root, server.openai_base_url)
        workspace = write_instance(dagster_home, project_root, storage)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(dagster_home),
            "HOLODECK_PROJECT_ROOT": str(project_root),
            "HOLODECK_HOME": str(holodeck_home),
            "HOLODECK_HISTORY_DB": str(history_db),
            "NO_PROXY": HOST,
            "no_proxy": HOST,
        }
        for variable in ("HOLODECK_AGENTS", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
            env.pop(variable, None)
        for variable in ("DAGSTER_HOME", "HOLODECK_HOME", "HOLODECK_HISTORY_DB"):
            monkeypatch.setenv(variable, env[variable])

        # the partitions and pool limits (DESIGN §6.15), on the same instance, before the daemon
        with dg.DagsterInstance.get() as instance:
            assert register_partitions(project, instance) == VERSIONS
            instance.event_log_storage.set_concurrency_slots(LLM_POOL, 4)
            instance.event_log_storage.set_concurrency_slots(HISTORY_POOL, 1)

        webserver_log = tmp_path / "webserver.log"
        daemon_log = tmp_path / "daemon.log"
        gql = GraphQL(f"http://{HOST}:{port}/graphql", [webserver_log, daemon_log])
        webserver = stack.enter_context(
            background(
                [
                    str(bin_dir / "dagster-webserver"),
                    *("-h", HOST, "-p", str(port), "-w", str(workspace)),
                ],
                env,
                tmp_path,
                webserver_log,
            )
        )
        wait_for_webserver(webserver, gql)

        # 1. a backfill of the three partitions, every asset of the agent's group
        asset_selection = [{"path": [AGENT, asset]} for asset in ASSETS]
        first_id = launched(
            gql(
                LAUNCH_BACKFILL,
                params={"assetSelection": asset_selection, "partitionNames": VERSIONS},
            ),
            "launchPartitionBackfill",
        )
        # started after the launch, so its first backfill tick (at start) picks the backfill up
        stack.enter_context(
            background(
                [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)],
                env,
                tmp_path,
                daemon_log,
            )
        )
        first = wait_for_backfill(gql, first_id)
        assert first["isAssetBackfill"] and sorted(first["partitionNames"]) == VERSIONS
        assert targeted(first) == dict.fromkeys(ASSETS, VERSIONS)
        assert status_by_partition(first) == {
            "v1": ["SUCCESS"],
            "v2": ["SUCCESS"],
            "v3": ["FAILURE"],
        }, f"{first}\n{gql.context()}"
        [failed_run] = [run for run in first["runs"] if run["status"] == "FAILURE"]
        events = gql(STEP_FAILURES, runId=failed_run["runId"])["logsForRun"]["events"]
        failures = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
        retries = [e for e in events if e["__typename"] == "ExecutionStepUpForRetryEvent"]
        assert [e["stepKey"] for e in failures] == [f"{AGENT}__agent_responses"], failures
        assert len(retries) == 2, retries  # RetryPolicy(max_retries=2): three attempts
        cause = str(failures[0]["error"]["cause"])
        # the step failure names the prompt version, the failing cases and why
        assert "prompt version v3: 2 cases failed transiently after retries" in cause, failures
        assert "- c4: server_error 503" in cause and "- c5: server_error 503" in cause

        # 2. the outage is over; re-execute the backfill from failure
        server.set_rules(HEALTHY)
        before = server.stats()["by_key"]
        second_id = launched(
            gql(
                REEXECUTE_BACKFILL,
                params={"parentRunId": first_id, "strategy": "FROM_FAILURE"},
            ),
            "reexecutePartitionBackfill",
        )
        second = wait_for_backfill(gql, second_id)
        after = server.stats()["by_key"]
        runs = gql(RUNS, filter={})["runsOrError"]["results"]
        v3_materializations = gql(
            MATERIALIZATIONS, key={"path": [AGENT, "agent_responses"]}, partitions=["v3"]
        )["assetOrError"]["assetMaterializations"]

    print(  # shown with -s: what the test observed
        f"first backfill {status_by_partition(first)}; re-execution {status_by_partition(second)}"
        f"; calls per case before/after: "
        + ", ".join(f"({i}) {before[case_key(i)]}->{after[case_key(i)]}" for i in range(CASES))
    )

    # 3. only the failed partition reran
    # (its processed_files[v3] had materialized before agent_responses failed: not targeted)
    assert second["isAssetBackfill"] and targeted(second) == {
        asset: [] if asset == "processed_files" else ["v3"] for asset in ASSETS
    }, second
    assert status_by_partition(second) == {"v3": ["SUCCESS"]}, second
    runs_per_partition: dict[str, list[str]] = {}
    for run in runs:
        runs_per_partition.setdefault(tag(run, "dagster/partition") or "?", []).append(
            run["status"]
        )
    assert {k: sorted(v) for k, v in runs_per_partition.items()} == {
        "v1": ["SUCCESS"],
        "v2": ["SUCCESS"],
        "v3": ["FAILURE", "SUCCESS"],
    }

    # 4. no second payment. In the failed run, each finished case was called once per version
    # (the key is route + user text, shared by the versions), also across the step's retries
    # (which resume from the journal); in the rerun, only the failed cases were called again.
    for i in range(CASES):
        if i in FAILING_CASES:
            assert before[case_key(i)] > len(VERSIONS), (i, before)
            assert after[case_key(i)] > before[case_key(i)], (i, before, after)
        else:
            assert before[case_key(i)] == len(VERSIONS), (i, before)
            assert after[case_key(i)] == before[case_key(i)], (i, before, after)
    [rerun] = second["runs"]
    [resumed] = [m for m in v3_materializations if m["runId"] == rerun["runId"]]
    metadata = {entry["label"]: entry.get("intValue") for entry in resumed["metadataEntries"]}
    assert metadata["resumed_from_journal"] == CASES - len(FAILING_CASES), metadata
    assert metadata["model_calls"] == len(FAILING_CASES), metadata

    # 5. the history holds all three runs, one per partition
    with duckdb.connect(str(history_db), read_only=True) as con:
        rows = con.execute(
            "SELECT partition_key, count(*), min(trigger), max(total_tests) FROM eval_runs "
            "GROUP BY partition_key ORDER BY partition_key"
        ).fetchall()
        dagster_run_ids = {
            row[0] for row in con.execute("SELECT dagster_run_id FROM eval_runs").fetchall()
        }
    assert rows == [(version, 1, "backfill", CASES) for version in VERSIONS]
    successes = {run["runId"] for run in runs if run["status"] == "SUCCESS"}
    assert dagster_run_ids == successes
