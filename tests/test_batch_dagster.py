"""Batches in Dagster (docs/dagster.md), on a real instance against the loopback model server's
batch APIs: the ``holodeck/batch`` run tag sends the agent's calls as batches (no ordinary
call), its progress in the step's log and its spend recorded as batch spend; a backfill batches
by default (its versions' requests in shared batches, estimated at the batch prices, held by
the backfill's budget), a manual materialization does not; a bad tag value:
tests/test_hardening_run_tags.py."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.test_pipelines import RULES, history_rows, make_project, materialize, register
from tests.test_shared_budgets import GEO_RULES, PARTITION_CASES, geo_project, ledger_rows
from tests.test_single_run_backfill import materialize_range, range_tags


def priced_project(root: Path, base_url: str) -> Project:
    """The pipelines' test project with a model the price table knows."""
    project = make_project(root, base_url, cases=3)
    agent = root / "agents" / "geo" / "agent.yaml"
    agent.write_text(agent.read_text().replace("name: m,", "name: gpt-4o-mini,"))
    return project


def log_lines(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult) -> list[str]:
    return [entry.user_message for entry in instance.all_logs(result.run_id)]


def test_the_batch_tag_sends_the_agents_calls_as_batches_recorded_as_batch_spend(
    tmp_path: Path,
) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = priced_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        result = materialize(defs, instance, "v1", tags={"holodeck/batch": "on"})
        stats = server.stats()
        lines = log_lines(instance, result)
    assert result.success
    assert stats["total_calls"] == 0  # not one ordinary agent call
    assert stats["batches"]["requests"]["submitted"] == 3
    assert any("requests submitted" in line for line in lines)  # the step's log
    assert any("the longest wait" in line for line in lines)
    [(calls, batch_calls, cost, batch_usd)] = history_rows(
        project, "SELECT calls, batch_calls, cost_usd, batch_usd FROM v_cost_by_run"
    )
    assert batch_calls == calls == 3
    assert batch_usd is not None and batch_usd > 0 and batch_usd == cost


def test_a_manual_run_does_not_batch_and_a_backfill_does_by_default(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = priced_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v1").success
        manual = server.stats()
        backfill = materialize_range(
            defs,
            instance,
            range_tags("default|v1", "default|v2", **{"dagster/backfill": "nightlyfill"}),
        )
        both = server.stats()
    assert manual["total_calls"] == 3 and manual["batches"]["requests"]["submitted"] == 0
    assert backfill.success
    assert both["total_calls"] == 3  # the backfill's two versions: batches only
    # the run's two versions ask together: one batch of both (tests/test_cells_shared.py)
    assert both["batches"]["requests"]["submitted"] == 6
    assert both["batches"]["submitted"] == 1
    rows = history_rows(
        project,
        "SELECT prompt_version, batch_calls, cost_usd, estimate_usd FROM v_cost_by_run "
        "ORDER BY finished_at",
    )
    assert [row[:2] for row in rows] == [("v1", None), ("v1", 3), ("v2", 3)]
    (_, _, manual_usd, _), (_, _, batched_usd, estimated_usd) = rows[:2]
    # the backfill's estimate: the manual run's measured spend, at the batch prices
    assert batched_usd == pytest.approx(manual_usd / 2)
    assert estimated_usd == pytest.approx(batched_usd)


def test_a_batched_backfill_is_held_by_its_backfill_budget(tmp_path: Path) -> None:
    """Each request of a batch is held against the shared budget before the batch is sent: a
    backfill's budget stops its batched run as it stops ordinary calls."""
    with run_model_server(GEO_RULES) as server, dg.instance_for_test() as instance:
        project = geo_project(
            tmp_path, server.openai_base_url, "budget: {backfill: {tokens: 40}}\n"
        )
        defs = build_definitions(project)
        register(defs, instance)
        tags = range_tags("default|v1", "default|v2", **{"dagster/backfill": "bf-batch"})
        stopped = materialize_range(defs, instance, tags)
        stats = server.stats()
    assert not stopped.success
    assert stats["total_calls"] == 0
    assert 0 < stats["batches"]["requests"]["submitted"] < PARTITION_CASES
    [failure] = [e for e in stopped.all_events if e.event_type_value == "STEP_FAILURE"]
    data = failure.step_failure_data.user_failure_data
    assert data is not None and "backfill budget of 40 tokens (backfill bf-batch)" in (
        data.description or ""
    )
    rows = ledger_rows(project.history_db)  # a row per version: they ran at once
    assert {(scope, key) for scope, key, *_ in rows} == {("backfill", "bf-batch")}
    assert sum(row[5] for row in rows) <= 40
