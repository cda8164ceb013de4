"""End to end through a real Dagster webserver and daemon (docs/dagster.md).

What it proves, headless and only on 127.0.0.1:

1. A backfill of three prompt versions (``v1``, ``v2``, ``v3``), launched through the GraphQL
   API (``launchPartitionBackfill``) and run by ``dagster-daemon``, is **one run** over the range
   ``v1...v3`` (``BackfillPolicy.single_run``: Dagster's launch paid once, docs/scale-out.md). When
   the loopback model server answers 503 for two of ``v3``'s cases (transient after the runner's
   retries and the asset's ``RetryPolicy``, docs/dagster.md), the agent step runs every version,
   then fails naming ``v3``'s cases; the run fails, and with it the range (a run's partitions
   materialize together).
2. After the outage is over, ``reexecutePartitionBackfill`` with ``FROM_FAILURE`` creates a
   backfill of what did not materialize: every asset after ``processed_files``
   (which materialized all three versions in the failed run, so it is left out; Dagster reports
   ``partitionNames`` as null and the test reads the targeted partitions per asset), again as
   one run; it succeeds.
3. The rerun resumes from the journal (docs/architecture.md): the model is called again only for
   the two cases that had failed, never for a case any version finished in the failed run
   (``v1``/``v2`` entirely from the journal).
4. The DuckDB history holds exactly three runs, one per partition, all with trigger ``backfill``;
   each version has its own materialization in the rerun.

It runs twice: on SQLite storage, and on PostgreSQL (the ``deploy/postgres/dagster.yaml``
profile's storage against a server the test starts, tests/services.py; docs/scale-out.md).

Run it (about two and a half minutes: the backfill daemon ticks every ~30 s)::

    make test-slow
    # or just this test:
    .venv/bin/python -m pytest -m slow tests/test_backfill_slow.py -q
"""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from holodeck_core.testing import run_model_server
from holodeck_pipelines.pools import HISTORY_POOL, LLM_POOL
from tests.backfill_helpers import (
    AGENT,
    ASSETS,
    CASES,
    HOST,
    LAUNCH_BACKFILL,
    MATERIALIZATIONS,
    REEXECUTE_BACKFILL,
    RUNS,
    STEP_FAILURES,
    GraphQL,
    background,
    case_key,
    launched,
    make_project,
    register_partitions,
    status_by_partition,
    targeted,
    wait_for_backfill,
    wait_for_webserver,
    write_instance,
)
from tests.services import free_port, postgres_server

pytestmark = pytest.mark.slow

VERSIONS = ["v1", "v2", "v3"]
CELLS = [f"default|{v}" for v in VERSIONS]  # the grid's one column (docs/dagster.md)
RANGE = "default|v1...default|v3"
FAILING_CASES = (4, 5)  # v3's cases that get a 503 until the outage is over

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

        # the partitions and pool limits (docs/dagster.md), on the same instance, before the daemon
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
                params={
                    "assetSelection": asset_selection,
                    "partitionNames": CELLS,
                    # ordinary calls, counted per case (a backfill batches by default:
                    # tests/test_batch_dagster.py)
                    "tags": [{"key": "holodeck/batch", "value": "off"}],
                },
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
        assert first["isAssetBackfill"] and sorted(first["partitionNames"]) == CELLS
        assert targeted(first) == dict.fromkeys(ASSETS, CELLS)
        assert status_by_partition(first["runs"]) == {RANGE: ["FAILURE"]}, (
            f"{first}\n{gql.context()}"
        )
        [failed_run] = first["runs"]
        events = gql(STEP_FAILURES, runId=failed_run["runId"])["logsForRun"]["events"]
        failures = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
        retries = [e for e in events if e["__typename"] == "ExecutionStepUpForRetryEvent"]
        assert [e["stepKey"] for e in failures] == [f"{AGENT}__agent_responses"], failures
        assert len(retries) == 2, retries  # RetryPolicy(max_retries=2): three attempts
        headline = failures[0]["error"]["message"]
        # the step failure's headline names the prompt version, the failing cases and why (not
        # Dagster's "Exceeded max_retries of 2": the last attempt is not retried)
        assert "Exceeded max_retries" not in headline, failures
        # (only v3 failed; in a run of several versions each case is named with its version)
        assert "prompt version v3 x model default: 2 cases hit transient errors: " in headline, (
            failures
        )
        assert "- default|v3/c4: server_error 503" in headline
        assert "- default|v3/c5: server_error 503" in headline

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
        materializations = gql(
            MATERIALIZATIONS, key={"path": [AGENT, "agent_responses"]}, partitions=CELLS
        )["assetOrError"]["assetMaterializations"]

    print(  # shown with -s: what the test observed
        f"first backfill {status_by_partition(first['runs'])}; re-execution "
        f"{status_by_partition(second['runs'])}"
        f"; calls per case before/after: "
        + ", ".join(f"({i}) {before[case_key(i)]}->{after[case_key(i)]}" for i in range(CASES))
    )

    # 3. what did not materialize reran, as one run
    # (processed_files had materialized every version before agent_responses failed)
    assert second["isAssetBackfill"] and targeted(second) == {
        asset: [] if asset == "processed_files" else CELLS for asset in ASSETS
    }, second
    assert status_by_partition(second["runs"]) == {RANGE: ["SUCCESS"]}, second
    assert status_by_partition(runs) == {RANGE: ["FAILURE", "SUCCESS"]}

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
    resumed = {
        m["partition"]: {entry["label"]: entry.get("intValue") for entry in m["metadataEntries"]}
        for m in materializations
        if m["runId"] == rerun["runId"]
    }
    assert sorted(resumed) == CELLS  # each cell its own materialization
    v1, v3 = resumed["default|v1"], resumed["default|v3"]
    assert v3["resumed_from_journal"] == CASES - len(FAILING_CASES), resumed
    assert v3["model_calls"] == len(FAILING_CASES), resumed
    assert v1["resumed_from_journal"] == CASES and v1["model_calls"] == 0

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
