"""What a finished partition shows in the Dagster UI: the numbers its Plots tab draws across
materializations (pass rate, costs, scores, statistics), the Markdown report, the failing
cases and links into the dashboard."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import dagster as dg

from holodeck_core.dashboard.links import dashboard_links
from holodeck_core.engine.launch import Estimator
from holodeck_core.engine.plan import CostEstimate
from holodeck_core.engine.summary import (
    cost_markdown,
    estimate_markdown,
    percent,
    render_markdown,
    rounded,
    usd_text,
)
from holodeck_core.models import EvalRun, ReportSummary, Status
from holodeck_core.models.cost import RunEstimate
from holodeck_pipelines.cells import prompts_of
from holodeck_pipelines.failures import MAX_FAILING_ROWS, case_table
from holodeck_pipelines.metric_table import metric_table
from holodeck_pipelines.run_tags import (
    COST_TAG,
    ESTIMATE_TAG,
    PASS_RATE_TAG,
    PROMPT_VERSION_TAG,
    versions_text,
)

SUMMARY_KEY = "estimate/summary"
"""The metadata the report step reads a version's estimate from."""
PASS_RATE_KEY = "pass rate (%)"
COST_KEY = "cost (USD)"
DASHBOARD_LABELS = {
    "dashboard_run": "this run",
    "dashboard_compare_previous": "compared with the previous run",
}
URL_SAFE = ":/?#[]@!$&'*+,;=%-._~"
"""What a dashboard link keeps unencoded: RFC 3986's reserved and unreserved characters
except the parentheses, which would end a Markdown link."""


def report_metadata(run: EvalRun, path: str, dashboard_url: str | None = None) -> dict[str, Any]:
    """What a partition's ``report_summary`` shows at a glance (docs/dagster.md): about a
    dozen entries, rounded and with their units; the numbers (pass rate, cost, wall time) are
    what the Plots tab draws across materializations, the per-metric statistics one table."""
    summary = run.report.summary
    metadata: dict[str, Any] = {PASS_RATE_KEY: dg.MetadataValue.float(percent(summary.pass_rate))}
    if summary.cost_usd is not None:
        metadata[COST_KEY] = dg.MetadataValue.float(rounded(summary.cost_usd))
    metadata |= {
        "cases": cases_text(summary),
        "wall time (s)": dg.MetadataValue.float(rounded((summary.wall_time_ms or 0) / 1000)),
        "metrics": metric_table(run),
    }
    breakdown = cost_markdown(summary)
    if breakdown is not None:
        metadata["cost breakdown"] = dg.MetadataValue.md(breakdown)
    failing = [r for r in run.report.results if r.status is not Status.PASS][:MAX_FAILING_ROWS]
    metadata["failing cases"] = case_table(
        [
            (r.test_id or "", r.status.value, r.errors[0] if r.errors else "below threshold")
            for r in failing
        ]
    )
    metadata |= {
        "report": dg.MetadataValue.md(render_markdown(run)),
        "EvalRun file": dg.MetadataValue.path(path),
        "run id": run.metadata.run_id or "",
    }
    if dashboard_url and run.metadata.run_id:
        metadata["dashboard"] = dg.MetadataValue.md(dashboard_markdown(dashboard_url, run))
    return metadata


def cases_text(summary: ReportSummary) -> str:
    """``46 passed, 3 failed, 1 errored of 50 cases x 2 trials; 2 flaky``."""
    stats = summary.statistics
    trials = stats.trials if stats is not None else 1
    text = (
        f"{summary.passed} passed, {summary.failed} failed, {summary.errored} errored of "
        f"{summary.total_tests} cases x {trials} trial{'s' if trials > 1 else ''}"
    )
    if stats is not None and stats.flaky_cases:
        text += f"; {len(stats.flaky_cases)} flaky"
    if stats is not None and stats.infrastructure_failure:
        text += "; an infrastructure failure (too many errored: see the report)"
    return text


def dashboard_markdown(base: str, run: EvalRun) -> str:
    """The run's pages in the dashboard as two named links (their targets percent-encoded, so
    no character of the configured URL can end the link early)."""
    links = dashboard_links(base, run.metadata.run_id or "")
    return " · ".join(
        f"[{label}]({quote(links[key], safe=URL_SAFE)})" for key, label in DASHBOARD_LABELS.items()
    )


def result_tags(reports: Mapping[str, EvalRun]) -> dict[str, str]:
    """The run's tags for its versions' results, for the Runs list: the pass rate in percent
    (a range over a backfill's versions) and the spend in USD (unknown when one is)."""
    rates = sorted(percent(r.report.summary.pass_rate) for r in reports.values())
    spent = [run.report.summary.cost_usd for run in reports.values()]
    known = [usd for usd in spent if usd is not None]
    rate = f"{rates[0]}%" if rates[0] == rates[-1] else f"{rates[0]}% to {rates[-1]}%"
    if len(rates) > 1:
        rate += f" ({len(rates)} versions)"
    return {
        PASS_RATE_TAG: rate,
        COST_TAG: usd_text(sum(known) if len(known) == len(spent) else None),
    }


def estimate_tags(estimates: Mapping[str, CostEstimate]) -> dict[str, str]:
    """The run's tags before its agent step: its cells' prompt versions, and their estimates' sum in
    USD (unknown when one is); each version's own estimate is on its ``processed_files``
    materialization, where the agent step reads it back."""
    spent = [estimate.total_usd for estimate in estimates.values()]
    known = [usd for usd in spent if usd is not None]
    return {
        PROMPT_VERSION_TAG: versions_text(prompts_of(list(estimates))),
        ESTIMATE_TAG: usd_text(sum(known) if len(known) == len(spent) else None),
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
    metadata["estimate"] = dg.MetadataValue.md(estimate_markdown(estimate))
    return metadata
