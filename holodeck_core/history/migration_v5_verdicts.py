"""Schema version 5 (docs/cli.md): intervals that stay on their scale, and errors kept apart.

Intervals: the SQL macros compute the numbers of :mod:`holodeck_core.stats.intervals` with the same
closed forms (the tests hold the two to each other): Wilson's interval with continuity
correction on n (one trial per case) or on the effective n of the clustered SE (K trials, 0-1
scores); Student's t truncated at 0 for means in a unit (ms, USD).

Errors apart: ``eval_runs.max_error_share`` records the run's ``evaluations.max_error_share``
(NULL: the default, 0.5); a run with more than that share of its cases ERROR is an
*infrastructure failure* (``v_run_health``), not evidence about the prompt. ``v_counted_runs``
holds the other runs: the trend, regression, comparison and flaky views read it instead of
``eval_runs``, and ERROR trials or cases never count as disagreement or as a flip.

Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.defaults import MAX_ERROR_SHARE
from holodeck_core.history import migration_v2_views, migration_v4_stats

Z975 = "CAST(1.959963984540054 AS DOUBLE)"
Z2 = "CAST(3.841458820694124 AS DOUBLE)"
"""z(0.975) and its square."""

N_EFF = f"""
CREATE OR REPLACE MACRO holodeck_n_eff(p, se, n, max_n) AS
    CASE
        WHEN n IS NULL OR p IS NULL THEN NULL
        WHEN n < 2 OR se IS NULL OR p <= 0 OR p >= 1 THEN CAST(n AS DOUBLE)
        ELSE (CASE WHEN se <= 0 THEN coalesce(max_n, n)
                   ELSE least(p * (1 - p) / (se * se), coalesce(max_n, 'inf'::DOUBLE)) END)
             * pow({Z975} / holodeck_t975(n - 1), 2)
    END
"""
"""The effective n of a mean p in [0, 1] whose SE was estimated from n cases; ``max_n`` the
independent draws there are (n·K pass/fail trials), NULL for scores."""

WILSON_CC_LOW = f"""
CREATE OR REPLACE MACRO holodeck_wilson_cc_low(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p <= 0 THEN 0.0
        ELSE greatest(0.0, least(p, (2 * n * p + {Z2} - 1 - {Z975} * sqrt(greatest(0.0,
            {Z2} - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))) / (2 * (n + {Z2}))))
    END
"""

WILSON_CC_HIGH = f"""
CREATE OR REPLACE MACRO holodeck_wilson_cc_high(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p >= 1 THEN 1.0
        ELSE least(1.0, greatest(p, (2 * n * p + {Z2} + 1 + {Z975} * sqrt(greatest(0.0,
            {Z2} + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))) / (2 * (n + {Z2}))))
    END
"""

V_RUN_STATS = """
CREATE OR REPLACE VIEW v_run_stats AS
WITH per_run AS (
    SELECT run_id, count(*) AS n, max(trials) AS trials, avg(pass_fraction) AS p,
           stddev_samp(pass_fraction) AS sd,
           avg(CAST(passes > 0 AS DOUBLE)) AS pass_at_k,
           avg(CAST(passes = trials AS DOUBLE)) AS pass_hat_k,
           count(*) FILTER (WHERE trials_disagree) AS flaky_cases
    FROM v_case_trials
    GROUP BY run_id
),
sized AS (
    SELECT *,
           CASE WHEN trials = 1 THEN sqrt(p * (1 - p) / n) ELSE sd / sqrt(n) END AS se,
           CASE WHEN trials = 1 THEN CAST(n AS DOUBLE)
                ELSE holodeck_n_eff(p, sd / sqrt(n), n, n * trials) END AS n_effective
    FROM per_run
)
SELECT
    r.run_id, e.agent_slug, e.prompt_version, e.finished_at,
    r.n AS cases, r.trials, r.p AS pass_rate,
    CASE WHEN r.trials = 1 THEN 'wilson_cc' ELSE 'wilson_cc_effective_n' END AS method,
    r.se, r.n_effective,
    holodeck_wilson_cc_low(r.p, r.n_effective) AS ci95_low,
    holodeck_wilson_cc_high(r.p, r.n_effective) AS ci95_high,
    CASE WHEN r.trials > 1 THEN r.p END AS pass_at_1,
    CASE WHEN r.trials > 1 THEN r.pass_at_k END AS pass_at_k,
    CASE WHEN r.trials > 1 THEN r.pass_hat_k END AS pass_hat_k,
    r.flaky_cases
FROM sized r
JOIN eval_runs e USING (run_id)
"""
"""The pass rate with its 95% interval, inside [0, 1] (docs/cli.md); pass@1, pass@K, pass^K."""

V_METRIC_STATS = """
CREATE OR REPLACE VIEW v_metric_stats AS
WITH per_case AS (
    SELECT run_id, case_id, metric_name, avg(coalesce(score, raw_score)) AS x,
           bool_or(unit IS NOT NULL) AS in_unit
    FROM metric_results
    WHERE error IS NULL AND coalesce(score, raw_score) IS NOT NULL
    GROUP BY run_id, case_id, metric_name
),
per_run AS (
    SELECT run_id, metric_name, count(*) AS n, avg(x) AS mean, stddev_samp(x) AS sd,
           bool_or(in_unit) AS in_unit
    FROM per_case
    GROUP BY run_id, metric_name
),
sized AS (
    SELECT *, sd / sqrt(n) AS se,
           CASE WHEN NOT in_unit THEN holodeck_n_eff(mean, sd / sqrt(n), n, NULL) END
               AS n_effective
    FROM per_run
)
SELECT
    p.run_id, e.agent_slug, e.prompt_version, e.finished_at, p.metric_name, p.n, p.mean,
    p.se,
    CASE WHEN p.in_unit THEN 't_truncated_at_0' ELSE 'wilson_cc_effective_n' END AS method,
    p.n_effective,
    CASE WHEN p.in_unit THEN greatest(0.0, p.mean - holodeck_t975(p.n - 1) * p.se)
         ELSE holodeck_wilson_cc_low(p.mean, p.n_effective) END AS ci95_low,
    CASE WHEN p.in_unit THEN p.mean + holodeck_t975(p.n - 1) * p.se
         ELSE holodeck_wilson_cc_high(p.mean, p.n_effective) END AS ci95_high
FROM sized p
JOIN eval_runs e USING (run_id)
"""
"""Per run and metric: the mean of the per-case mean scores (over trials and turns), its
interval inside the metric's range: [0, 1] for scores, ≥ 0 for a unit."""

V_METRIC_TREND = """
CREATE OR REPLACE VIEW v_metric_trend AS
WITH per_run AS (
    SELECT
        m.run_id,
        m.metric_name,
        any_value(m.kind) AS kind,
        any_value(m.unit) AS unit,
        any_value(m.direction) AS direction,
        count(coalesce(m.score, m.raw_score)) AS n,
        avg(coalesce(m.score, m.raw_score)) AS mean,
        stddev_samp(coalesce(m.score, m.raw_score)) AS stddev,
        count(*) FILTER (WHERE m.passed) AS passed,
        count(*) FILTER (WHERE m.passed = false) AS failed,
        count(*) FILTER (WHERE m.error IS NOT NULL) AS errors
    FROM metric_results m
    GROUP BY m.run_id, m.metric_name
)
SELECT
    p.run_id, r.agent_slug, r.prompt_version, r.finished_at, p.metric_name, p.kind, p.unit,
    p.direction, p.n, p.mean, p.stddev, s.method, s.ci95_low, s.ci95_high,
    CAST(p.passed AS DOUBLE) / NULLIF(p.passed + p.failed, 0) AS metric_pass_rate,
    p.errors
FROM per_run p
JOIN eval_runs r USING (run_id)
LEFT JOIN v_metric_stats s USING (run_id, metric_name)
"""
"""v_metric_trend's interval is v_metric_stats's (one number per run and metric)."""

MAX_ERROR_SHARE_COLUMN = "ALTER TABLE eval_runs ADD COLUMN max_error_share DOUBLE"

V_RUN_HEALTH = f"""
CREATE OR REPLACE VIEW v_run_health AS
SELECT run_id, agent_slug, prompt_version, finished_at, total_tests, errored,
       CAST(errored AS DOUBLE) / NULLIF(total_tests, 0) AS error_share,
       coalesce(max_error_share, {MAX_ERROR_SHARE}) AS max_error_share,
       errored > coalesce(max_error_share, {MAX_ERROR_SHARE}) * total_tests
           AS infrastructure_failure
FROM eval_runs
"""
"""Per run: the share of its cases that ERROR and whether that makes it an infrastructure
failure (as :func:`holodeck_core.stats.health.infrastructure_failure` decides)."""

V_COUNTED_RUNS = """
CREATE OR REPLACE VIEW v_counted_runs AS
SELECT e.* FROM eval_runs e
WHERE e.run_id NOT IN (SELECT run_id FROM v_run_health WHERE infrastructure_failure)
"""
"""The runs that count as evidence: every run but the infrastructure failures."""

V_CASE_TRIALS = """
CREATE OR REPLACE VIEW v_case_trials AS
SELECT
    run_id, case_id,
    any_value(case_fingerprint) AS case_fingerprint,
    count(*) AS trials,
    count(*) FILTER (WHERE passed) AS passes,
    count(*) FILTER (WHERE status = 'ERROR') AS errors,
    avg(CAST(passed AS DOUBLE)) AS pass_fraction,
    count(*) FILTER (WHERE passed)
        BETWEEN 1 AND count(*) FILTER (WHERE status <> 'ERROR') - 1 AS trials_disagree
FROM case_trials
GROUP BY run_id, case_id
"""
"""Per run and case: xᵢ = passesᵢ / K; the trials disagree when the ones that ran (not
ERROR) both passed and failed."""

FLAKY_CASES_MACRO = """
CREATE OR REPLACE MACRO flaky_cases(last_n) AS TABLE
WITH recent AS (
    SELECT run_id, agent_slug, prompt_version, finished_at,
           row_number() OVER (PARTITION BY agent_slug, prompt_version
                              ORDER BY finished_at DESC, run_id DESC) AS recency
    FROM v_counted_runs
    WHERE trigger IS DISTINCT FROM 'rescore'
),
windowed AS (
    SELECT r.agent_slug, r.prompt_version, r.finished_at, r.run_id,
           t.case_id, t.test_name, t.status, c.case_fingerprint, c.trials_disagree,
           lag(CASE WHEN t.status <> 'ERROR'
                    THEN {'status': t.status, 'fingerprint': c.case_fingerprint} END
               IGNORE NULLS) OVER w AS previous
    FROM recent r
    JOIN test_results t ON t.run_id = r.run_id
    LEFT JOIN v_case_trials c ON c.run_id = t.run_id AND c.case_id = t.case_id
    WHERE r.recency <= last_n
    WINDOW w AS (PARTITION BY r.agent_slug, r.prompt_version, t.case_id
                 ORDER BY r.finished_at, r.run_id)
)
SELECT
    agent_slug,
    prompt_version,
    case_id,
    arg_max(test_name, finished_at) AS test_name,
    count(*) AS runs,
    count(*) FILTER (WHERE status = 'PASS') AS passes,
    count(*) FILTER (WHERE status = 'FAIL') AS fails,
    count(*) FILTER (WHERE status = 'ERROR') AS errors,
    count(*) FILTER (WHERE status <> 'ERROR' AND previous IS NOT NULL
                     AND previous.status <> status
                     AND previous.fingerprint IS NOT DISTINCT FROM case_fingerprint) AS flips,
    count(*) FILTER (WHERE trials_disagree) AS disagreeing_runs,
    CAST(count(*) FILTER (WHERE status = 'PASS') AS DOUBLE) / count(*) AS pass_fraction,
    string_agg(left(status, 1), '' ORDER BY finished_at, run_id) AS history,
    arg_max(status, finished_at) AS last_status,
    max(finished_at) AS last_seen
FROM windowed
GROUP BY agent_slug, prompt_version, case_id
HAVING flips > 0 OR disagreeing_runs > 0
"""
"""Flaky cases with errors apart (docs/cli.md): flaky when a run's trials disagree, or the status
changed between two runs where the case ran (PASS to FAIL or back, an ERROR in between skipped)
while its fingerprint did not. Infrastructure failures and rescores are left out."""


MCNEMAR_MIDP = """
CREATE OR REPLACE MACRO holodeck_mcnemar_midp(only_a, only_b) AS
    CASE
        WHEN only_a + only_b = 0 THEN 1.0
        ELSE least(1.0, list_sum(list_transform(
            range(0, CAST(least(only_a, only_b) AS BIGINT) + 1),
            lambda i: (CASE WHEN i = least(only_a, only_b) THEN 1 ELSE 2 END)
                      * exp(lgamma(only_a + only_b + 1) - lgamma(i + 1)
                            - lgamma(only_a + only_b - i + 1) - (only_a + only_b) * ln(2)))))
    END
"""
"""Two-sided McNemar mid-p value from the discordant pairs (docs/cli.md)."""

TICK = """
CREATE OR REPLACE MACRO holodeck_tick(agent_slug, trigger, finished_at, run_id) AS
    CASE WHEN trigger = 'nightly'
         THEN agent_slug || ':nightly:' || CAST(CAST(finished_at AS DATE) AS VARCHAR)
         ELSE run_id END
"""
"""The family of a run's verdicts: one schedule tick (an agent's nightly runs of one UTC day),
or the run alone."""

V_RUN_COMPARISONS = """
CREATE OR REPLACE VIEW v_run_comparisons AS
WITH family AS (
    SELECT c.*, holodeck_tick(e.agent_slug, e.trigger, e.finished_at, e.run_id) AS tick,
           count(c.p_value) OVER (PARTITION BY tick) AS family_size,
           row_number() OVER (PARTITION BY tick ORDER BY c.p_value) AS p_rank
    FROM v_run_comparisons_raw c
    JOIN eval_runs e ON e.run_id = c.head_run_id
),
adjusted AS (
    SELECT *, CASE WHEN p_value IS NOT NULL THEN least(1.0, min(p_value * family_size / p_rank)
                  OVER (PARTITION BY tick ORDER BY p_value DESC NULLS LAST
                        RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)) END AS p_adjusted
    FROM family
)
SELECT * EXCLUDE (verdict, p_rank, tick, family_size, p_adjusted),
       p_adjusted, family_size, tick,
       CASE WHEN p_adjusted < 0.05 AND mean_diff < 0 THEN 'regression'
            WHEN p_adjusted < 0.05 AND mean_diff > 0 THEN 'improvement'
            ELSE 'no significant change' END AS verdict
FROM adjusted
"""
"""v_run_comparisons_raw with the Benjamini-Hochberg p-value over the comparisons of one tick
(``p_adjusted``); the verdict is decided on it."""


def _counted(sql: str, occurrences: int) -> str:
    """A frozen view's SQL reading ``v_counted_runs`` where it read ``eval_runs``."""
    assert sql.count("FROM eval_runs\n") == occurrences, "the frozen SQL changed"
    return sql.replace("FROM eval_runs\n", "FROM v_counted_runs\n")


VIEWS_V5: tuple[str, ...] = (
    N_EFF,
    WILSON_CC_LOW,
    WILSON_CC_HIGH,
    V_RUN_STATS,
    V_METRIC_STATS,
    V_METRIC_TREND,
    MAX_ERROR_SHARE_COLUMN,
    V_RUN_HEALTH,
    V_COUNTED_RUNS,
    V_CASE_TRIALS,
    FLAKY_CASES_MACRO,
    _counted(migration_v2_views.V_PASS_RATE_TREND, 1),
    _counted(migration_v2_views.V_REGRESSIONS, 2),
    MCNEMAR_MIDP,
    TICK,
    _counted(migration_v4_stats.V_RUN_COMPARISONS, 1)
    .replace("VIEW v_run_comparisons AS", "VIEW v_run_comparisons_raw AS")
    .replace("holodeck_mcnemar_p(", "holodeck_mcnemar_midp(")
    .replace("'mcnemar_exact'", "'mcnemar_midp'"),
    V_RUN_COMPARISONS,
)
DESCRIPTION_V5 = (
    "intervals on their scale (macros holodeck_n_eff, holodeck_wilson_cc_low, "
    "holodeck_wilson_cc_high; v_run_stats, v_metric_stats, v_metric_trend use them); "
    "eval_runs.max_error_share, views v_run_health, v_counted_runs; infrastructure failures "
    "out of v_pass_rate_trend, v_regressions, v_run_comparisons, flaky_cases; ERROR trials "
    "never disagree (v_case_trials); McNemar mid-p (holodeck_mcnemar_midp), BH-adjusted p "
    "per schedule tick (holodeck_tick, v_run_comparisons_raw)"
)
