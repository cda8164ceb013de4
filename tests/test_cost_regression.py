"""Money, part 4 (docs/cost.md): the optional ``cost_regression`` check of ``eval_history`` on a
real Dagster instance. It exists only when ``evaluations.max_cost_increase`` is set; it compares the
cost per passing case with the run ``no_regression`` compares against, and an unknown cost is
skipped with its reason, not passed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.history.cost_check import CostCheck
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.pools import apply_pools
from tests.dagster_helpers import by_check
from tests.test_dagster_glance import skipped_reasons

PRICING = "pricing:\n  models:\n    house-model: {input: 0.0, output: 10.0}\n"
"""Output tokens only: the cost per passing case follows the length of the answers."""


def rules(words: int) -> dict[str, Any]:
    return {"rules": [{"match": {"user": "question"}, "reply": "Paris" + " indeed" * words}]}


def make_project(root: Path, url: str, *, model: str, limit: float | None) -> Path:
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "v1.md").write_text("---\nversion: v1\n---\nAnswer briefly.\n")
    cases = "".join(f"  - {{id: q{i}, input: 'question {i} ?'}}\n" for i in range(6))
    field = "" if limit is None else f", max_cost_increase: {limit}"
    (agent / "agent.yaml").write_text(
        "name: Geo Agent\n"
        f"model: {{provider: openai, name: {model}, endpoint: '{url}', api_key: sk-test-123456}}\n"
        "instructions: {file: prompts/v1.md}\n"
        "evaluations: {metrics: [{type: standard, metric: contains, pattern: Paris}]"
        f"{field}}}\n"
        "test_cases:\n" + cases
    )
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n" + PRICING)
    assert main(["prompts", "register", str(agent / "agent.yaml")]) == 0
    return agent / "agent.yaml"


def job(root: Path, instance: dg.DagsterInstance) -> Any:
    """The agent's job on ``instance``, with its partition and the pools a deployment sets."""
    instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v1"])
    project = Project.discover(root)
    apply_pools(instance, project)
    return build_definitions(project).resolve_job_def("Geo_agent_eval")


def meta(data: Any) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in data.metadata.items()}


def test_cost_per_passing_case_up_by_more_than_the_limit_fails_the_check(tmp_path: Path) -> None:
    with run_model_server(rules(2)) as server, dg.instance_for_test() as instance:
        make_project(tmp_path, server.openai_base_url, model="house-model", limit=0.2)
        eval_job = job(tmp_path, instance)
        found, reasons = [], []
        for words in (2, 2, 20):  # the same answers, then answers ten times longer
            server.set_rules(rules(words))
            result = eval_job.execute_in_process(partition_key="default|v1", instance=instance)
            assert result.success
            found.append(by_check(result).get("cost_regression"))
            reasons.append(skipped_reasons(result, "default|v1"))
    first, same, dearer = found
    # nothing to compare with yet: skipped (not evaluated), with the reason
    assert first is None and reasons[0]["cost_regression"] == "nothing to compare with yet"
    assert same is not None and dearer is not None
    assert same.description.startswith("prompt version v1 x model default: ")
    assert same.passed is True and "within evaluations.max_cost_increase 20%" in same.description
    assert meta(same)["increase"] == pytest.approx(0.0)
    assert dearer.passed is False and dearer.severity == dg.AssetCheckSeverity.WARN
    assert "up by more than evaluations.max_cost_increase 20%" in dearer.description
    values = meta(dearer)
    assert values["increase"] > 1.0 and values["status"] == "failed"
    assert meta(same)["status"] == "passed"
    assert values["cost_per_pass_usd"] > values["baseline_cost_per_pass_usd"] > 0
    assert values["partition"] == "default|v1" and values["baseline_run_id"]


def test_an_unknown_cost_is_skipped_with_its_reason_as_no_regression_is(
    tmp_path: Path,
) -> None:
    with run_model_server(rules(2)) as server, dg.instance_for_test() as instance:
        make_project(tmp_path, server.openai_base_url, model="unpriced-model", limit=0.2)
        result = job(tmp_path, instance).execute_in_process(
            partition_key="default|v1", instance=instance
        )
    assert result.success
    found = by_check(result)
    # a skip reads as no_regression's with nothing to compare: not evaluated, with the reason
    assert "cost_regression" not in found and "no_regression" not in found
    reason = skipped_reasons(result, "default|v1")["cost_regression"]
    assert reason.startswith("run ") and "cost is unknown: 6 agent call(s)" in reason
    assert "pricing: in holodeck.yaml" in reason


def test_the_check_is_off_when_max_cost_increase_is_unset(tmp_path: Path) -> None:
    with run_model_server(rules(2)) as server, dg.instance_for_test() as instance:
        make_project(tmp_path, server.openai_base_url, model="house-model", limit=None)
        eval_job = job(tmp_path, instance)
        specs = {
            key.name
            for asset in build_definitions(Project.discover(tmp_path)).assets or []
            if isinstance(asset, dg.AssetsDefinition)
            for key in asset.check_keys
        }
        assert "no_regression" in specs and "cost_regression" not in specs
        result = eval_job.execute_in_process(partition_key="default|v1", instance=instance)
    assert result.success and "cost_regression" not in by_check(result)


def test_a_free_baseline_makes_any_spend_a_rise_and_no_baseline_is_no_verdict() -> None:
    assert CostCheck(0.2, "base-run", before=0.0, after=0.01).passed is False
    assert CostCheck(0.2, "base-run", before=0.0, after=0.0).passed is True
    assert CostCheck(0.2, "base-run", before=0.01, after=0.0119).passed is True
    assert CostCheck(0.2, "base-run", before=0.01, after=0.0121).passed is False
    first = CostCheck(0.2, after=0.01)
    assert first.passed is True and first.render() == "skipped: nothing to compare with yet"
    assert first.status == "skipped" and CostCheck(0.2, skipped="why").status == "skipped"
