"""Schema version 9 (docs/cli.md, "Trials and error bars"): a mean in a unit gets Hall's
skewness-corrected t interval, and the judge-control set is measured against people.

``holodeck_hall_low`` / ``holodeck_hall_high`` compute
:func:`holodeck_core.stats.intervals.hall_t` with the same closed form (the tests hold the two
to each other), and ``v_metric_stats`` uses them for latency and cost (its ``method`` is
``t_hall_skewness``; 0-1 scores keep schema 5's Wilson interval on the effective n).
``v_metric_trend`` reads ``v_metric_stats`` and so follows.

``judge_control_scores`` gains the judge's verdict (``passed``) and a person's
(``human_passed``, ``human_score``: the control file's ``human``). ``v_judge_control_labels``
has ``v_judge_labels``' columns (the control row's id as ``case_id``), and
``v_judge_control_agreement`` is schema 6's ``v_judge_agreement`` over it per run: drift is
then also measured against people, not only against the judge's own first scores.

Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.history import migration_v5_verdicts, migration_v6_labels

HALL_INVERSE = """
CREATE OR REPLACE MACRO holodeck_hall_inverse(v, b) AS
    CASE WHEN b = 0 THEN v ELSE 3.0 / b * (cbrt(1.0 + b * (v - b / 6.0)) - 1.0) END
"""
"""g⁻¹(v) of Hall's transform with b = g1/√n."""

HALL_LOW = """
CREATE OR REPLACE MACRO holodeck_hall_low(mean, se, skew, n) AS
    CASE WHEN n IS NULL OR n < 2 OR se IS NULL THEN NULL
         ELSE greatest(0.0, least(mean, mean - se * holodeck_hall_inverse(
             holodeck_t975(n - 1), coalesce(skew, 0.0) / sqrt(n)))) END
"""

HALL_HIGH = """
CREATE OR REPLACE MACRO holodeck_hall_high(mean, se, skew, n) AS
    CASE WHEN n IS NULL OR n < 2 OR se IS NULL THEN NULL
         ELSE greatest(mean, mean - se * holodeck_hall_inverse(
             -holodeck_t975(n - 1), coalesce(skew, 0.0) / sqrt(n))) END
"""

_CTES = migration_v5_verdicts.V_METRIC_STATS.split("sized AS (")
assert len(_CTES) == 2, "the frozen SQL changed"

V_METRIC_STATS = (
    _CTES[0]
    + """moments AS (
    SELECT run_id, metric_name,
           CASE WHEN any_value(r.sd) > 0
                THEN list_sum(list(power(c.x - r.mean, 3) ORDER BY c.case_id)) / count(*)
                     / power(any_value(r.sd), 3)
                ELSE 0.0 END AS skewness
    FROM per_case c
    JOIN per_run r USING (run_id, metric_name)
    GROUP BY run_id, metric_name
),
sized AS (
    SELECT p.*, m.skewness, p.sd / sqrt(p.n) AS se,
           CASE WHEN NOT p.in_unit THEN holodeck_n_eff(p.mean, p.sd / sqrt(p.n), p.n, NULL) END
               AS n_effective
    FROM per_run p
    JOIN moments m USING (run_id, metric_name)
)
SELECT
    p.run_id, e.agent_slug, e.prompt_version, e.finished_at, p.metric_name, p.n, p.mean,
    p.se,
    CASE WHEN p.in_unit THEN 't_hall_skewness' ELSE 'wilson_cc_effective_n' END AS method,
    p.n_effective,
    CASE WHEN p.in_unit THEN holodeck_hall_low(p.mean, p.se, p.skewness, p.n)
         ELSE holodeck_wilson_cc_low(p.mean, p.n_effective) END AS ci95_low,
    CASE WHEN p.in_unit THEN holodeck_hall_high(p.mean, p.se, p.skewness, p.n)
         ELSE holodeck_wilson_cc_high(p.mean, p.n_effective) END AS ci95_high,
    CASE WHEN p.in_unit THEN p.skewness END AS skewness
FROM sized p
JOIN eval_runs e USING (run_id)
"""
)
"""Per run and metric: the mean of the per-case mean scores (over trials and turns) and its
interval inside the metric's range: [0, 1] for scores (Wilson on the effective n), ≥ 0 for a
unit (Hall's t, with the sample ``skewness`` it corrects for; its third moment is summed in case
order, so the file and the lake, which scan in different orders, give the same digits)."""

CONTROL_COLUMNS = (
    "ALTER TABLE judge_control_scores ADD COLUMN passed BOOLEAN",
    "ALTER TABLE judge_control_scores ADD COLUMN human_passed BOOLEAN",
    "ALTER TABLE judge_control_scores ADD COLUMN human_score DOUBLE",
)

V_JUDGE_CONTROL_LABELS = """
CREATE OR REPLACE VIEW v_judge_control_labels AS
SELECT s.run_id, s.agent_slug, e.prompt_version, s.control_id AS case_id, s.metric_name,
       'judge_control' AS labeler, s.judge_model, s.passed AS judge_passed,
       s.score AS judge_score, s.human_passed, s.human_score
FROM judge_control_scores s
JOIN eval_runs e USING (run_id)
WHERE s.error IS NULL AND (s.human_passed IS NOT NULL OR s.human_score IS NOT NULL)
"""
"""Each labelled control row's judge verdict on a run beside the person's."""


def _per_run_control(sql: str) -> str:
    """Schema 6's agreement SQL over the control labels, grouped per run as well."""
    keys = "agent_slug, metric_name, judge"
    assert sql.count(keys) == 8 and sql.count("FROM v_judge_labels\n") == 1, "SQL changed"
    first = "    coalesce(k.agent_slug, s.agent_slug) AS agent_slug,\n"
    assert sql.count(first) == 1, "the frozen SQL changed"
    return (
        sql.replace(keys, f"run_id, {keys}")
        .replace("FROM v_judge_labels\n", "FROM v_judge_control_labels\n")
        .replace("VIEW v_judge_agreement AS", "VIEW v_judge_control_agreement AS")
        .replace(first, "    coalesce(k.run_id, s.run_id) AS run_id,\n" + first)
    )


V_JUDGE_CONTROL_AGREEMENT = _per_run_control(migration_v6_labels.V_JUDGE_AGREEMENT)
"""Per run, metric and judge model: how far the judge agrees with people on the control set."""

STATEMENTS_V9: tuple[str, ...] = (
    HALL_INVERSE,
    HALL_LOW,
    HALL_HIGH,
    V_METRIC_STATS,
    *CONTROL_COLUMNS,
    V_JUDGE_CONTROL_LABELS,
    V_JUDGE_CONTROL_AGREEMENT,
)
DESCRIPTION_V9 = (
    "means in a unit get Hall's skewness-corrected t interval (macros "
    "holodeck_hall_inverse, holodeck_hall_low, holodeck_hall_high; v_metric_stats gains "
    "skewness, and v_metric_trend follows it); judge_control_scores.passed, human_passed, "
    "human_score; views v_judge_control_labels, v_judge_control_agreement"
)
