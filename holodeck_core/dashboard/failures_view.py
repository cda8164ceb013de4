"""The Summary's cards of failures: infrastructure failures (docs/cli.md), runs whose cases
mostly ERROR, left out of the trend and the table, listed apart with a link that keeps them;
and orchestrated runs that failed before writing an EvalRun (``failed_runs``, docs/history.md),
each with its reason as text."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from dash import dcc, html

from holodeck_core.dashboard import ui
from holodeck_core.dashboard.data import Filters
from holodeck_core.dashboard.links import explorer_href
from holodeck_core.defaults import FAILED_RUNS_SHOWN
from holodeck_core.terminal import one_line

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]


def failures_card(failures: pd.DataFrame, filters: Filters) -> list[html.Div]:
    """Infrastructure failures, apart: not evidence about a prompt (docs/cli.md)."""
    if failures.empty:
        return []
    keep = replace(filters, include_failed=True).to_query()
    rows = [
        html.Li([
            dcc.Link(ui.short(row["run_id"]), href=explorer_href(row["run_id"])),
            f" {ui.when(row['finished_at'])} · {row['agent_name']} {row['prompt_version']}: "
            f"{row['errored']} of {row['total_tests']} cases ERROR",
        ])
        for row in failures.to_dict("records")
    ]  # fmt: skip
    return [
        html.Div(
            [
                html.H3("Infrastructure failures"),
                html.P(
                    [
                        "Runs whose cases mostly ERROR measured the infrastructure, not the "
                        "prompt: they are left out of the trend, the table, baselines and "
                        "comparisons. ",
                        dcc.Link("Include them", href=f"/{keep}"),
                    ],
                    className="muted",
                ),
                html.Ul(rows),
            ],
            className="card",
            id="infrastructure-failures",
        )
    ]


def failed_runs_card(failed: list[dict[str, Any]]) -> list[html.Div]:
    """Orchestrated runs that failed before writing an EvalRun, newest first, each with its
    reason: outside text on one line with control characters written out, shown as text."""
    if not failed:
        return []
    body = [
        [ui.short(str(r["dagster_run_id"])), ui.when(r["failed_at"]),
         one_line(str(r["job_name"])), one_line(str(r["configuration"])),
         one_line(str(r["trigger"] or "-")),
         html.Span(one_line(str(r["error"] or "no reason recorded")), className="failed-reason")]
        for r in failed
    ]  # fmt: skip
    header = ["Dagster run", "failed (UTC)", "job", "configuration", "trigger", "reason"]
    newest = f"the newest {FAILED_RUNS_SHOWN}" if len(failed) >= FAILED_RUNS_SHOWN else "all"
    note = (
        f"Orchestrated runs that failed before writing an EvalRun ({newest}, whatever the "
        "filters; `holodeck history runs` lists them too): they have no cases, so no pass rate "
        "or cost."
    )
    return [
        html.Div(
            [html.H3("FAILED runs (no EvalRun)"), html.P(note, className="muted"),
             ui.grid(header, body, table_id="failed-runs-table")],
            className="card", id="failed-runs",
        )
    ]  # fmt: skip
