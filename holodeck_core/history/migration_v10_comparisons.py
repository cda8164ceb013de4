"""Schema version 10 (docs/dashboard.md: the Summary at 10,000 runs): the paired comparisons as
table macros that compute only the recent runs' verdicts, and the two views on top of them.

``holodeck_run_comparisons_raw(since)`` and ``holodeck_run_comparisons(since)`` have the rows
of schema 5's ``v_run_comparisons_raw`` and ``v_run_comparisons`` whose head run finished on
or after the UTC day of ``since`` (NULL: every row). Each head is still paired with the
previous run of its agent and prompt version, however old, and a tick's Benjamini-Hochberg
family is whole: a tick is one agent's nightly runs of one UTC day, or one run, and the bound
is a day's start. The cases of a pair are aggregated only for the runs paired (schema 5
aggregated every run's trials twice and joined them), which also makes the full views about
twice as fast. The views are the macros with NULL: their columns and rows are schema 5's (a
test holds them equal on a seeded history).

Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.history import migration_v5_verdicts

SINCE = "since IS NULL OR finished_at >= CAST(CAST(since AS DATE) AS TIMESTAMP)"
"""The heads kept: those of the UTC day of ``since`` and later (a nightly tick is one day)."""


def _replaced(sql: str, *pairs: tuple[str, str]) -> str:
    """``sql`` with each (old, new) replaced, each old text found exactly once."""
    for old, new in pairs:
        assert sql.count(old) == 1, f"the frozen SQL changed: {old!r}"
        sql = sql.replace(old, new)
    return sql


_V5_RAW = migration_v5_verdicts.VIEWS_V5[-2]
assert "VIEW v_run_comparisons_raw AS" in _V5_RAW, "the frozen SQL changed"

RAW_MACRO = _replaced(
    _V5_RAW,
    ("CREATE OR REPLACE VIEW v_run_comparisons_raw AS",
     "CREATE OR REPLACE MACRO holodeck_run_comparisons_raw(since) AS TABLE"),
    ("    FROM v_counted_runs\n),", f"    FROM v_counted_runs\n    QUALIFY {SINCE}\n),"),
    ("JOIN v_case_trials a ON",
     "JOIN (SELECT * FROM v_case_trials WHERE run_id IN (SELECT base_run_id FROM pairs)) a ON"),
    ("JOIN v_case_trials b ON",
     "JOIN (SELECT * FROM v_case_trials WHERE run_id IN (SELECT head_run_id FROM pairs)) b ON"),
)  # fmt: skip
"""Schema 5's raw comparisons of the heads since ``since``; only their runs' trials are read."""

ADJUSTED_MACRO = _replaced(
    migration_v5_verdicts.V_RUN_COMPARISONS,
    ("CREATE OR REPLACE VIEW v_run_comparisons AS",
     "CREATE OR REPLACE MACRO holodeck_run_comparisons(since) AS TABLE"),
    ("FROM v_run_comparisons_raw c", "FROM holodeck_run_comparisons_raw(since) c"),
)  # fmt: skip
"""Schema 5's BH-adjusted comparisons over the raw macro's rows (whole ticks)."""

V_RUN_COMPARISONS_RAW = """
CREATE OR REPLACE VIEW v_run_comparisons_raw AS
SELECT * FROM holodeck_run_comparisons_raw(NULL)
"""

V_RUN_COMPARISONS = """
CREATE OR REPLACE VIEW v_run_comparisons AS
SELECT * FROM holodeck_run_comparisons(NULL)
"""

STATEMENTS_V10: tuple[str, ...] = (
    RAW_MACRO,
    ADJUSTED_MACRO,
    V_RUN_COMPARISONS_RAW,
    V_RUN_COMPARISONS,
)
DESCRIPTION_V10 = (
    "the Summary at 10,000 runs: macros holodeck_run_comparisons_raw(since), "
    "holodeck_run_comparisons(since) "
    "(the comparisons of the heads since a UTC day, their ticks whole); v_run_comparisons_raw "
    "and v_run_comparisons read them (same rows, only the paired runs' trials aggregated)"
)
