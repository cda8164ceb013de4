"""What a finished partition shows in the Dagster UI: the numbers its Plots tab draws across
materializations (pass rate, costs, scores, statistics), the Markdown report, the failing
cases and links into the dashboard."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import dagster as dg

from holodeck_core.dashboard.links import dashboard_links
from holodeck_core.defaults import REPORT_LINE_CHARS
from holodeck_core.engine.plan import CostEstimate
from holodeck_core.models import EvalRun, Status
from holodeck_core.models.cost import RunEstimate
from holodeck_core.reports import render_markdown
from holodeck_core.reports.cost import budget_verdict_text, cost_lines
from holodeck_core.reports.markdown import markdown_text
from holodeck_core.reports.statistics import statistics_methods, statistics_properties
from holodeck_core.runner.options import Estimator
from holodeck_pipelines.failures import MAX_FAILING_ROWS, case_table
from holodeck_pipelines.run_tags import ESTIMATE_JSON_TAG, ESTIMATE_TAG

SUMMARY_KEY = "estimate/summary"
"""The metadata the report step reads a version's estimate from."""


def report_metadata(run: EvalRun, path: str, dashboard_url: str | None = None) -> dict[str, Any]:
    """Numbers the UI plots across materializations, the Markdown report, failing cases."""
    summary = run.report.summary
    metadata: dict[str, Any] = {"pass_rate": dg.MetadataValue.float(summary.pass_rate / 100)}
    if summary.cost_usd is not None:
        metadata["cost_usd"] = dg.MetadataValue.float(summary.cost_usd)
    if summary.cost is not None:
        for heading, cost in summary.cost.headings.items():
            if cost.usd is not None:
                metadata[f"cost/{heading}"] = dg.MetadataValue.float(cost.usd)
        metadata["cost"] = dg.MetadataValue.md(
            "\n".join(
                markdown_text(line, REPORT_LINE_CHARS)
                for line in cost_lines(summary.cost, summary.passed)
            )
        )
        estimate = summary.cost.estimate
        if estimate is not None:
            metadata["estimate_source"] = estimate.source
            if estimate.usd is not None:
                metadata["estimate_usd"] = dg.MetadataValue.float(estimate.usd)
        if summary.cost.budget is not None:
            metadata["budget_verdict"] = budget_verdict_text(summary.cost.budget)
    metadata |= {
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "wall_time_s": dg.MetadataValue.float((summary.wall_time_ms or 0) / 1000),
        "total_tokens": summary.token_usage.total_tokens if summary.token_usage else 0,
        "prompt_version": run.metadata.prompt_version.version,
        "run_id": run.metadata.run_id or "",
        "eval_run_path": dg.MetadataValue.path(path),
        "report": dg.MetadataValue.md(render_markdown(run)),
    }
    if dashboard_url and run.metadata.run_id:
        for key, url in dashboard_links(dashboard_url, run.metadata.run_id).items():
            metadata[key] = dg.MetadataValue.url(url)
    for metric, score in summary.average_scores.items():
        metadata[f"score/{metric}"] = dg.MetadataValue.float(score)
    if summary.statistics is not None:
        for key, value in statistics_properties(summary.statistics).items():
            metadata[f"stats/{key}"] = (
                dg.MetadataValue.float(value) if isinstance(value, float) else value
            )
        for key, text in statistics_methods(summary.statistics).items():
            metadata[f"stats/{key}"] = text
    failing = [r for r in run.report.results if r.status is not Status.PASS][:MAX_FAILING_ROWS]
    metadata["failing_cases"] = case_table(
        [
            (r.test_id or "", r.status.value, r.errors[0] if r.errors else "below threshold")
            for r in failing
        ]
    )
    return metadata


def estimate_tags(estimates: Mapping[str, CostEstimate]) -> dict[str, str]:
    """The run's tags for its versions' estimates: their sum in USD (unknown when one is),
    and each version's summary by partition key, which the agent step reads back."""
    spent = [estimate.total_usd for estimate in estimates.values()]
    known = [usd for usd in spent if usd is not None]
    summaries = {
        key: estimate.summary().model_dump(mode="json") for key, estimate in estimates.items()
    }
    return {
        ESTIMATE_TAG: usd_text(sum(known) if len(known) == len(spent) else None),
        ESTIMATE_JSON_TAG: json.dumps(summaries, sort_keys=True),
    }


def recorded_estimate(
    context: dg.AssetExecutionContext, estimated: dg.AssetKey, partition_key: str
) -> Estimator:
    """A version's estimator in a Dagster step: the estimate ``processed_files`` recorded on its
    materialization of the version (this run's, else the latest, as in a re-execution from a
    later step). Never a run tag: those can be set by hand at launch."""

    def estimator(*_: object) -> RunEstimate | None:
        instance = context.instance
        mine = instance.get_records_for_run(
            context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
        ).records
        entries = [r.event_log_entry for r in mine]
        if not any(_is_version(e.asset_materialization, estimated, partition_key) for e in entries):
            latest = dg.AssetRecordsFilter(asset_key=estimated, asset_partitions=[partition_key])
            entries = [
                r.event_log_entry for r in instance.fetch_materializations(latest, 1).records
            ]
        for entry in entries:
            materialization = entry.asset_materialization
            if _is_version(materialization, estimated, partition_key) and materialization:
                found = materialization.metadata.get(SUMMARY_KEY)
                if isinstance(found, dg.JsonMetadataValue):
                    return RunEstimate.model_validate(found.value)
        return None

    return estimator


def _is_version(
    materialization: dg.AssetMaterialization | None, asset: dg.AssetKey, partition_key: str
) -> bool:
    return (
        materialization is not None
        and materialization.asset_key == asset
        and materialization.partition == partition_key
    )


def usd_text(usd: float | None) -> str:
    return "unknown" if usd is None else f"{usd:.4f}"


def estimate_metadata(estimate: CostEstimate) -> dict[str, Any]:
    """``holodeck plan``'s estimate of the run (docs/cost.md), shown before any model call."""
    headings = estimate.headings.values()
    metadata: dict[str, Any] = {
        "estimate/calls": sum(c.calls for c in headings),
        "estimate/tokens": sum(c.tokens for c in headings),
        "estimate/source": estimate.source,
        SUMMARY_KEY: dg.MetadataValue.json(estimate.summary().model_dump(mode="json")),
    }
    if estimate.total_usd is not None:
        metadata["estimate/usd"] = dg.MetadataValue.float(estimate.total_usd)
    rows = [
        f"| {markdown_text(heading)} | {c.calls} | {c.tokens} | {usd_text(c.usd)} |"
        for heading, c in estimate.headings.items()
    ]
    metadata["estimate"] = dg.MetadataValue.md(
        f"Estimate of prompt {markdown_text(estimate.prompt_version)}: {estimate.cases} cases x "
        f"{estimate.trials} trial(s), from {markdown_text(estimate.source)}; total "
        f"{usd_text(estimate.total_usd)} USD\n\n| heading | calls | tokens | USD |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )
    return metadata
