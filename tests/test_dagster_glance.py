"""Dagster pages read at a glance (docs/dagster.md), on real temporary instances: a dozen
``report_summary`` entries, rounded and with their units, the per-metric statistics in one
table, the dashboard's links; the Runs list's tags (the results of a finished run); checks
that cannot be evaluated shown as skipped, never as passed; and a materialization launched
from the asset graph running as the agent's job, not ``__ASSET_JOB``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_representation.external_data import asset_node_snaps_from_repo
from dagster._core.storage.asset_check_execution_record import (
    AssetCheckExecutionResolvedStatus,
)
from dagster._core.storage.asset_check_state import AssetCheckState, bulk_update_asset_check_state

from holodeck_core.config.project import Project
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.metadata import dashboard_markdown
from tests.dagster_helpers import by_check, instance_metadata, materialize, register
from tests.history_helpers import day, make_run
from tests.test_pipelines import RULES, make_project

METRICS = (
    "[{type: standard, metric: equality}, {type: standard, metric: latency, threshold: 60000}]"
)
HEADLINE = [
    "path",
    "pass rate (%)",
    "cost (USD)",
    "cases",
    "wall time (s)",
    "metrics",
    "cost breakdown",
    "failing cases",
    "report",
    "EvalRun file",
    "run id",
    "dashboard",
]
EVAL_HISTORY = dg.AssetKey(["geo_agent", "eval_history"])


def with_dashboard(project: Project, url: str) -> Project:
    (project.root / "holodeck.yaml").write_text(
        f"agents: [agents/geo/agent.yaml]\ndashboard_url: {url!r}\n"
    )
    return Project.discover(project.root)


def skipped_reasons(result: dg.ExecuteInProcessResult, partition: str) -> dict[str, str]:
    """The ``checks skipped`` table of ``eval_history``'s materialization of ``partition``."""
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == EVAL_HISTORY and e.partition == partition
    ]
    table = event.materialization.metadata["checks skipped"]
    assert isinstance(table, dg.TableMetadataValue)
    return {row.data["check"]: row.data["reason"] for row in table.records}


def evaluated(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {name: data.passed for name, data in by_check(result).items()}


def resolved(instance: dg.DagsterInstance, defs: dg.Definitions, check: str) -> dict[str, set[str]]:
    """What the UI shows of each prompt version of ``check``: Dagster's resolved status."""
    key = dg.AssetCheckKey(EVAL_HISTORY, check)
    partitions = defs.resolve_assets_def(EVAL_HISTORY).partitions_def
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        state = bulk_update_asset_check_state(
            instance, [(key, partitions)], {key: AssetCheckState.empty()}
        )[key]
    return {
        status.value: set(subset.subset_value.get_partition_keys())
        for status, subset in state.subsets.items()
        if not subset.is_empty
    }


def test_report_summary_reads_at_a_glance_and_the_run_carries_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.yaml"  # $0.0123456 a prompt token: an unrounded cost
    prices.write_text("version: test-1\nmodels: {m: {input: 12345.6, output: 23456.7}}\n")
    monkeypatch.setenv("HOLODECK_PRICES", str(prices))
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, cases=3, metrics=METRICS)
        defs = build_definitions(with_dashboard(project, "http://127.0.0.1:8501/"))
        register(defs, instance)
        result = materialize(defs, instance, "v1")  # "Answer briefly.": every case fails
        run = instance.get_run_by_id(result.run_id)
    assert result.success and run is not None
    metadata = instance_metadata(result, "report_summary")
    assert list(metadata) == HEADLINE  # a dozen, each named with its unit
    assert metadata["pass rate (%)"].value == 0.0
    cost = metadata["cost (USD)"].value
    assert cost > 0 and cost == float(f"{cost:.4g}")  # four significant digits
    assert metadata["cases"].value == "0 passed, 3 failed, 0 errored of 3 cases x 1 trial"
    seconds = metadata["wall time (s)"].value
    assert seconds == float(f"{seconds:.4g}")
    rows = {row.data["metric"]: row.data for row in metadata["metrics"].records}
    assert list(rows) == ["pass rate", "equality", "latency"]
    assert rows["pass rate"]["unit"] == "%" and rows["pass rate"]["mean"] == "0.0%"
    assert rows["pass rate"]["cases passing"] == "0 of 3" and rows["pass rate"]["n"] == 3
    low, high = rows["pass rate"]["95% CI"].split(" to ")
    assert low == "0.0%" and high.endswith("%") and len(high.split(".")[1]) == 2  # 1 decimal
    assert rows["equality"]["unit"] == "score 0-1" and rows["equality"]["mean"] == "0.000"
    assert rows["latency"]["unit"] == "ms" and rows["latency"]["mean"].endswith(" ms")
    assert rows["latency"]["cases passing"] == "100.0%"
    assert "Student t" in rows["latency"]["interval method"]
    run_id = metadata["run id"].value
    assert metadata["dashboard"].value == (
        f"[this run](http://127.0.0.1:8501/explorer?run={run_id}) · [compared with the "
        f"previous run](http://127.0.0.1:8501/compare?previous_of={run_id})"
    )
    tags = {k: v for k, v in run.tags.items() if k.startswith("holodeck/")}
    assert tags["holodeck/pass_rate"] == "0.0%"
    assert float(tags["holodeck/cost_usd"]) == pytest.approx(cost)
    assert tags["holodeck/prompt_version"] == "v1" and tags["holodeck/trials"] == "1"
    assert float(tags["holodeck/estimate_usd"]) > 0
    assert "holodeck/estimate" not in tags  # no raw JSON in the Runs list


@pytest.mark.parametrize(
    "base",
    [
        "http://dash.local:8501",
        "http://dash.local/a (b)/",  # a parenthesis would end the Markdown link
        "https://dash.local/x?y=1#frag",
        "http://dash.local/<b>x</b> [y]",
    ],
)
def test_the_dashboard_links_are_two_whole_markdown_links(base: str) -> None:
    text = dashboard_markdown(base, make_run("PPFP", day(0), run_id="r-1"))
    first, second = text.split(" · ")
    for link, page in ((first, "/explorer?run=r-1"), (second, "/compare?previous_of=r-1")):
        label, _, target = link.partition("](")
        assert label in ("[this run", "[compared with the previous run")
        assert target.endswith(page + ")") and target.count(")") == 1
        assert not {" ", "(", "<", ">"} & set(target)


def test_checks_that_cannot_be_evaluated_are_skipped_with_the_reason(tmp_path: Path) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        defs = build_definitions(make_project(tmp_path, server.openai_base_url, cases=2))
        register(defs, instance)
        first = materialize(defs, instance, "v2")
        first_status = {c: resolved(instance, defs, c) for c in ("no_regression", "pass_rate_gate")}
        second = materialize(defs, instance, "v2")
        second_status = resolved(instance, defs, "no_regression")
        logs = [e.message for e in instance.all_logs(first.run_id)]
    assert first.success and second.success
    # nothing to compare with, no labels, no control rows: not evaluated, so not "passed"
    assert evaluated(first) == {"pass_rate_gate": True, "no_errored_cases": True}
    assert first_status["no_regression"] == {"SKIPPED": {"default|v2"}}
    assert first_status["pass_rate_gate"] == {"SUCCEEDED": {"default|v2"}}
    reasons = skipped_reasons(first, "default|v2")
    assert reasons == {
        "no_regression": "no previous run of this cell to compare with",
        "matrix_vs_baseline": "no healthy run of the baseline cell (prompt version v1 x model "
        "default) yet",
        "judge_drift": "no evaluations.judge_control rows were scored",
        "judge_agreement": "no human labels of this agent's judged cases yet (holodeck "
        "labels import)",
    }
    for check, reason in reasons.items():
        assert f"prompt version v2 x model default: check {check} skipped: {reason}" in logs
    # the second run has a previous one: no_regression is evaluated, and passes
    assert evaluated(second)["no_regression"] is True
    assert second_status == {AssetCheckExecutionResolvedStatus.SUCCEEDED.value: {"default|v2"}}
    assert "no_regression" not in skipped_reasons(second, "default|v2")


def ui_job(defs: dg.Definitions, assets: list[dg.AssetKey]) -> str | None:
    """The job the asset graph's "Materialize" launches for ``assets`` (Dagster 1.13's
    ``getCommonJob`` without a preferred job): the first of the asset nodes' ``jobNames`` (as
    the webserver serves them) that every selected asset has."""
    snaps = {s.asset_key: s for s in asset_node_snaps_from_repo(defs.get_repository_def())}
    names: list[list[str]] = [list(snaps[key].job_names) for key in assets]
    common = [name for name in names[0] if all(name in other for other in names)]
    return common[0] if common else None


@pytest.mark.parametrize("agent", ["Geo Agent", "3D printer helper", "zeta"])
def test_the_asset_graph_launches_the_agents_job(tmp_path: Path, agent: str) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path, server.openai_base_url, cases=1)
        yaml = project.root / "agents" / "geo" / "agent.yaml"
        yaml.write_text(yaml.read_text().replace("name: Geo Agent", f"name: {agent}"))
        defs = build_definitions(Project.discover(project.root))
        [group] = {key.path[0] for key in defs.resolve_asset_graph().get_all_asset_keys()}
        keys: dict[str, list[dg.AssetKey]] = {
            "the whole group": [
                dg.AssetKey([group, a])
                for a in ("processed_files", "report_summary", "eval_history")
            ],
            "one asset": [dg.AssetKey([group, "eval_history"])],
        }
        chosen = {what: ui_job(defs, assets) for what, assets in keys.items()}
        assert set(chosen.values()) == {defs.resolve_job_def(chosen["one asset"] or "").name}
        name = chosen["one asset"] or ""
        assert not name.startswith("__") and name.lower() == f"{group}_eval"
        if agent != "Geo Agent":
            return
        register(defs, instance)
        result = defs.resolve_job_def(name).execute_in_process(
            partition_key="default|v2", instance=instance, raise_on_error=False
        )
        run = instance.get_run_by_id(result.run_id)
    assert result.success and run is not None and run.job_name == "Geo_agent_eval"
