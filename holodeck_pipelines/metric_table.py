"""The per-metric statistics of a run as one Dagster table (docs/dagster.md): the pass rate,
pass@k and each metric, its unit, mean, 95% interval, n and method, rounded as people read
them (holodeck_core/engine/summary.py)."""

from __future__ import annotations

import dagster as dg

from holodeck_core.engine.summary import METRIC_COLUMNS, metric_rows
from holodeck_core.models import EvalRun


def metric_table(run: EvalRun) -> dg.TableMetadataValue:
    """One row for the pass rate (and pass@k with trials), then one per metric."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord(row) for row in metric_rows(run)],
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn(name, "int" if name == "n" else "string") for name in METRIC_COLUMNS
            ]
        ),
    )
