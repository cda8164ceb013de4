"""Schema version 5 (DESIGN §8.7): intervals that stay on their scale.

The SQL macros compute the numbers of :mod:`holodeck_core.stats.intervals` with the same
closed forms (the tests hold the two to each other): Wilson's interval with continuity
correction on n (one trial per case) or on the effective n of the clustered SE (K trials, 0-1
scores); Student's t truncated at 0 for means in a unit (ms, USD).

Frozen once released, like every migration."""

from __future__ import annotations

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
"""The pass rate with its 95% interval, inside [0, 1] (DESIGN §8.7); pass@1, pass@K, pass^K."""

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

VIEWS_V5: tuple[str, ...] = (
    N_EFF,
    WILSON_CC_LOW,
    WILSON_CC_HIGH,
    V_RUN_STATS,
    V_METRIC_STATS,
    V_METRIC_TREND,
)
DESCRIPTION_V5 = (
    "intervals on their scale (DESIGN 8.7): macros holodeck_n_eff, holodeck_wilson_cc_low, "
    "holodeck_wilson_cc_high; v_run_stats, v_metric_stats, v_metric_trend use them"
)
