"""Schema version 12 (docs/dashboard.md: the dashboard's first request after a run is written, at
10,000 runs): ``holodeck_run_comparisons_raw(since)`` groups the trial rows of the paired runs
only.

Schema 10 filtered ``v_case_trials`` (a GROUP BY over every trial row) by the pairs' run ids,
expecting the filter to reach the rows; DuckDB 1.5 does not push an ``IN (subquery)`` below a
view's grouping, and it shared the two filtered reads as one materialised scan of the whole
view: 1,000,000 trial rows grouped for the 600 heads of the Summary's charts (0.6 s of the
macro's 0.7 s). Here the rows are filtered first, then grouped by ``v_case_trials``' own
select list, so the macro reads the rows of the runs it pairs (0.08 s); with ``since`` NULL
(the views) every row is read, without the filter. Same columns and rows (a test holds them
equal to schema 5's on a seeded history). Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.history import migration_v5_verdicts, migration_v10_comparisons
from holodeck_core.history.migration_v10_comparisons import _replaced

_GROUPED = "FROM case_trials\nGROUP BY run_id, case_id"
_SELECT = migration_v5_verdicts.V_CASE_TRIALS.split(" AS\n", 1)[1].strip()
assert _SELECT.startswith("SELECT") and _SELECT.count(_GROUPED) == 1, "the frozen SQL changed"

TRIALS = _SELECT.replace(
    _GROUPED,
    "FROM case_trials\nWHERE since IS NULL\n"
    "   OR run_id IN (SELECT base_run_id FROM pairs UNION ALL SELECT head_run_id FROM pairs)\n"
    "GROUP BY run_id, case_id",
)
"""``v_case_trials``' rows of the paired runs (every run's with ``since`` NULL)."""

RAW_MACRO = _replaced(
    migration_v10_comparisons.RAW_MACRO,
    ("\ncases AS (", f"\ntrials AS (\n{TRIALS}\n),\ncases AS ("),
    ("JOIN (SELECT * FROM v_case_trials WHERE run_id IN (SELECT base_run_id FROM pairs)) a ON",
     "JOIN trials a ON"),
    ("JOIN (SELECT * FROM v_case_trials WHERE run_id IN (SELECT head_run_id FROM pairs)) b ON",
     "JOIN trials b ON"),
)  # fmt: skip
"""Schema 10's raw comparisons, the paired runs' trial rows filtered before they are grouped."""

STATEMENTS_V12: tuple[str, ...] = (
    RAW_MACRO,
    migration_v10_comparisons.ADJUSTED_MACRO,
    migration_v10_comparisons.V_RUN_COMPARISONS_RAW,
    migration_v10_comparisons.V_RUN_COMPARISONS,
)
DESCRIPTION_V12 = (
    "the first request after a write: holodeck_run_comparisons_raw(since) groups only the "
    "paired runs' trial rows "
    "(schema 10 grouped every run's, then kept the pairs'); same rows"
)
