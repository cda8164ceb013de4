"""The Summary's card of infrastructure failures (docs/cli.md): runs whose cases mostly ERROR,
left out of the trend and the table, listed apart with a link that keeps them."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from dash import dcc, html

from holodeck_core.dashboard import ui
from holodeck_core.dashboard.data import Filters
from holodeck_core.dashboard.links import explorer_href

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
