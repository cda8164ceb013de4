"""Schema version 4: one row per trial, judge-control scores, and the views that compute the
statistics of docs/cli.md ("Trials and error bars") in SQL.

The numbers are those of :mod:`holodeck_core.stats` (the tests hold the two to each other):
Student-t quantiles to 1e-6 (a table to 30 degrees of freedom, then the Cornish-Fisher
series), the t-test's p-value by Simpson's rule on the t density after x = √nu·tan θ (a smooth
integrand on a finite interval), and McNemar's exact p-value from the binomial sum.

Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.defaults import ALPHA
from holodeck_core.defaults import T975 as T975_TABLE
from holodeck_core.history.migration_v2_views import V_FLAKY_CASES

CASE_TRIALS = """
CREATE TABLE case_trials (
    run_id            VARCHAR NOT NULL,
    case_id           VARCHAR NOT NULL,
    trial             INTEGER NOT NULL,
    case_fingerprint  VARCHAR,
    status            VARCHAR NOT NULL CHECK (status IN ('PASS', 'FAIL', 'ERROR')),
    passed            BOOLEAN NOT NULL,
    agent_response    VARCHAR,
    errors            VARCHAR[],
    execution_time_ms BIGINT,
    total_tokens      BIGINT,
    scores            JSON,
    PRIMARY KEY (run_id, case_id, trial)
)
"""

BACKFILL_TRIALS = """
INSERT INTO case_trials (run_id, case_id, trial, status, passed, agent_response, errors,
                         execution_time_ms, total_tokens)
SELECT run_id, case_id, 0, status, passed, agent_response, errors, execution_time_ms,
       total_tokens
FROM test_results
"""
"""Runs recorded before trials existed ran each case once."""

JUDGE_CONTROL = """
CREATE TABLE judge_control_scores (
    run_id      VARCHAR NOT NULL,
    agent_slug  VARCHAR NOT NULL,
    control_id  VARCHAR NOT NULL,
    metric_name VARCHAR NOT NULL,
    judge_model VARCHAR,
    score       DOUBLE,
    error       VARCHAR,
    recorded_at TIMESTAMP NOT NULL,
    PRIMARY KEY (run_id, control_id, metric_name)
)
"""

T975 = f"""
CREATE OR REPLACE MACRO holodeck_t975(df) AS
    CASE
        WHEN df IS NULL OR df < 1 THEN NULL
        WHEN df <= {len(T975_TABLE)} THEN [{", ".join(f"{t:.6f}" for t in T975_TABLE)}][df]
        ELSE list_transform([CAST(1.959963984540054 AS DOUBLE)], lambda z:
            z + (pow(z, 3) + z) / (4 * df)
              + (5 * pow(z, 5) + 16 * pow(z, 3) + 3 * z) / (96 * pow(df, 2))
              + (3 * pow(z, 7) + 19 * pow(z, 5) + 17 * pow(z, 3) - 15 * z) / (384 * pow(df, 3))
              + (79 * pow(z, 9) + 776 * pow(z, 7) + 1482 * pow(z, 5) - 1920 * pow(z, 3)
                 - 945 * z) / (92160 * pow(df, 4)))[1]
    END
"""
"""t(0.975, df), to 1e-6 (the Cornish-Fisher series in z = Φ⁻¹(0.975))."""

T_PVALUE = """
CREATE OR REPLACE MACRO holodeck_t_pvalue(t, df) AS
    CASE
        WHEN t IS NULL OR df IS NULL OR df < 1 THEN NULL
        WHEN isinf(t) THEN 0.0
        ELSE greatest(0.0, 1 - 2 * exp(lgamma((df + 1) / 2.0) - lgamma(df / 2.0)) / sqrt(pi())
            * atan(abs(t) / sqrt(df)) / 3000.0
            * list_sum(list_transform(range(0, 1001), lambda i:
                (CASE WHEN i = 0 OR i = 1000 THEN 1 WHEN i % 2 = 1 THEN 4 ELSE 2 END)
                * pow(cos(i * atan(abs(t) / sqrt(df)) / 1000.0), df - 1))))
    END
"""
"""Two-sided p-value of Student's t with ``df`` degrees of freedom."""

MCNEMAR_P = """
CREATE OR REPLACE MACRO holodeck_mcnemar_p(only_a, only_b) AS
    CASE
        WHEN only_a + only_b = 0 THEN 1.0
        ELSE least(1.0, 2 * list_sum(list_transform(
            range(0, CAST(least(only_a, only_b) AS BIGINT) + 1),
            lambda i: exp(lgamma(only_a + only_b + 1) - lgamma(i + 1)
                     - lgamma(only_a + only_b - i + 1) - (only_a + only_b) * ln(2)))))
    END
"""
"""Exact two-sided McNemar p-value from the discordant pairs."""

V_CASE_TRIALS = """
CREATE OR REPLACE VIEW v_case_trials AS
SELECT
    run_id, case_id,
    any_value(case_fingerprint) AS case_fingerprint,
    count(*) AS trials,
    count(*) FILTER (WHERE passed) AS passes,
    count(*) FILTER (WHERE status = 'ERROR') AS errors,
    avg(CAST(passed AS DOUBLE)) AS pass_fraction,
    count(*) FILTER (WHERE passed) BETWEEN 1 AND count(*) - 1 AS trials_disagree
FROM case_trials
GROUP BY run_id, case_id
"""
"""Per run and case: xᵢ = passesᵢ / K (docs/cli.md)."""

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
z AS (SELECT CAST(1.959963984540054 AS DOUBLE) AS z)
SELECT
    r.run_id, e.agent_slug, e.prompt_version, e.finished_at,
    r.n AS cases, r.trials, r.p AS pass_rate,
    CASE WHEN r.trials = 1 THEN 'wilson' ELSE 'clustered' END AS method,
    CASE WHEN r.trials = 1 THEN sqrt(r.p * (1 - r.p) / r.n) ELSE r.sd / sqrt(r.n) END AS se,
    CASE WHEN r.trials = 1
         THEN (r.p + z * z / (2 * r.n) - z * sqrt(r.p * (1 - r.p) / r.n + z * z / (4 * r.n * r.n)))
              / (1 + z * z / r.n)
         ELSE r.p - holodeck_t975(r.n - 1) * r.sd / sqrt(r.n) END AS ci95_low,
    CASE WHEN r.trials = 1
         THEN (r.p + z * z / (2 * r.n) + z * sqrt(r.p * (1 - r.p) / r.n + z * z / (4 * r.n * r.n)))
              / (1 + z * z / r.n)
         ELSE r.p + holodeck_t975(r.n - 1) * r.sd / sqrt(r.n) END AS ci95_high,
    CASE WHEN r.trials > 1 THEN r.p END AS pass_at_1,
    CASE WHEN r.trials > 1 THEN r.pass_at_k END AS pass_at_k,
    CASE WHEN r.trials > 1 THEN r.pass_hat_k END AS pass_hat_k,
    r.flaky_cases
FROM per_run r
CROSS JOIN z
JOIN eval_runs e USING (run_id)
"""
"""The pass rate with its 95% interval (Wilson for K = 1, clustered by case for K > 1);
pass@1, pass@K and pass^K."""

V_METRIC_STATS = """
CREATE OR REPLACE VIEW v_metric_stats AS
WITH per_case AS (
    SELECT run_id, case_id, metric_name, avg(coalesce(score, raw_score)) AS x
    FROM metric_results
    WHERE error IS NULL AND coalesce(score, raw_score) IS NOT NULL
    GROUP BY run_id, case_id, metric_name
),
per_run AS (
    SELECT run_id, metric_name, count(*) AS n, avg(x) AS mean, stddev_samp(x) AS sd
    FROM per_case
    GROUP BY run_id, metric_name
)
SELECT
    p.run_id, e.agent_slug, e.prompt_version, e.finished_at, p.metric_name, p.n, p.mean,
    p.sd / sqrt(p.n) AS se,
    p.mean - holodeck_t975(p.n - 1) * p.sd / sqrt(p.n) AS ci95_low,
    p.mean + holodeck_t975(p.n - 1) * p.sd / sqrt(p.n) AS ci95_high
FROM per_run p
JOIN eval_runs e USING (run_id)
"""
"""Per run and metric: the mean of the per-case mean scores (over trials and turns)."""

V_RUN_COMPARISONS = f"""
CREATE OR REPLACE VIEW v_run_comparisons AS
WITH pairs AS (
    SELECT agent_slug, prompt_version,
           lag(run_id) OVER (PARTITION BY agent_slug, prompt_version
                             ORDER BY finished_at, run_id) AS base_run_id,
           run_id AS head_run_id
    FROM eval_runs
),
cases AS (
    SELECT p.agent_slug, p.prompt_version, p.base_run_id, p.head_run_id,
           a.pass_fraction AS xa, b.pass_fraction AS xb,
           b.pass_fraction - a.pass_fraction AS d,
           a.trials = 1 AND b.trials = 1 AS one_trial
    FROM pairs p
    JOIN v_case_trials a ON a.run_id = p.base_run_id
    JOIN v_case_trials b ON b.run_id = p.head_run_id AND b.case_id = a.case_id
),
agg AS (
    SELECT agent_slug, prompt_version, base_run_id, head_run_id, count(*) AS n,
           avg(xa) AS mean_a, avg(xb) AS mean_b, avg(d) AS mean_diff,
           stddev_samp(d) / sqrt(count(*)) AS se,
           bool_and(one_trial) AS one_trial,
           count(*) FILTER (WHERE xa > xb) AS only_a,
           count(*) FILTER (WHERE xb > xa) AS only_b
    FROM cases
    GROUP BY ALL
),
tested AS (
    SELECT *,
           mean_diff - holodeck_t975(n - 1) * se AS ci95_low,
           mean_diff + holodeck_t975(n - 1) * se AS ci95_high,
           CASE WHEN one_trial THEN holodeck_mcnemar_p(only_a, only_b)
                WHEN n < 2 THEN NULL
                WHEN se = 0 THEN CASE WHEN mean_diff = 0 THEN 1.0 ELSE 0.0 END
                ELSE holodeck_t_pvalue(mean_diff / se, n - 1) END AS p_value
    FROM agg
)
SELECT
    agent_slug, prompt_version, base_run_id, head_run_id, n, mean_a, mean_b, mean_diff, se,
    ci95_low, ci95_high, only_a, only_b,
    CASE WHEN one_trial THEN 'mcnemar_exact' WHEN n < 2 THEN 'none' ELSE 'paired_t' END AS test,
    p_value,
    CASE WHEN p_value < {ALPHA} AND mean_diff < 0 THEN 'regression'
         WHEN p_value < {ALPHA} AND mean_diff > 0 THEN 'improvement'
         ELSE 'no significant change' END AS verdict
FROM tested
"""
"""Each run against the previous run of its agent and prompt version, paired over the cases
both ran (docs/architecture.md, alpha = :data:`holodeck_core.defaults.ALPHA`)."""

FLAKY_CASES_MACRO = """
CREATE OR REPLACE MACRO flaky_cases(last_n) AS TABLE
WITH recent AS (
    SELECT run_id, agent_slug, prompt_version, finished_at,
           row_number() OVER (PARTITION BY agent_slug, prompt_version
                              ORDER BY finished_at DESC, run_id DESC) AS recency
    FROM eval_runs
    WHERE trigger IS DISTINCT FROM 'rescore'
),
windowed AS (
    SELECT r.agent_slug, r.prompt_version, r.finished_at, r.run_id,
           t.case_id, t.test_name, t.status, c.case_fingerprint, c.trials_disagree,
           lag(t.status) OVER w AS previous_status,
           lag(c.case_fingerprint) OVER w AS previous_fingerprint
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
    count(*) FILTER (WHERE previous_status IS NOT NULL AND previous_status <> status
                     AND previous_fingerprint IS NOT DISTINCT FROM case_fingerprint) AS flips,
    count(*) FILTER (WHERE trials_disagree) AS disagreeing_runs,
    CAST(count(*) FILTER (WHERE status = 'PASS') AS DOUBLE) / count(*) AS pass_fraction,
    string_agg(left(status, 1), '' ORDER BY finished_at, run_id) AS history,
    arg_max(status, finished_at) AS last_status,
    max(finished_at) AS last_seen
FROM windowed
GROUP BY agent_slug, prompt_version, case_id
HAVING flips > 0 OR disagreeing_runs > 0
"""
"""Flaky when a run's trials disagree, or the status changed between runs while the
case fingerprint did not (runs recorded without fingerprints count as unchanged). Rescores are
left out: they re-judge old samples, often with changed metrics, and sample nothing new."""

V_JUDGE_DRIFT = """
CREATE OR REPLACE VIEW v_judge_drift AS
WITH scored AS (
    SELECT s.*, e.finished_at,
           first_value(s.score) OVER (
               PARTITION BY s.agent_slug, s.control_id, s.metric_name
               ORDER BY e.finished_at, s.run_id) AS first_score
    FROM judge_control_scores s
    JOIN eval_runs e USING (run_id)
    WHERE s.error IS NULL AND s.score IS NOT NULL
)
SELECT run_id, agent_slug, metric_name, any_value(judge_model) AS judge_model,
       any_value(finished_at) AS finished_at, count(*) AS n,
       avg(score) AS mean_score, avg(score - first_score) AS drift,
       max(abs(score - first_score)) AS max_abs_change
FROM scored
GROUP BY run_id, agent_slug, metric_name
"""
"""Per run and metric: the mean change of the judge-control scores against the first
recorded score of each row."""

VIEWS_V4: tuple[str, ...] = (
    CASE_TRIALS,
    BACKFILL_TRIALS,
    JUDGE_CONTROL,
    T975,
    T_PVALUE,
    MCNEMAR_P,
    V_CASE_TRIALS,
    V_RUN_STATS,
    V_METRIC_STATS,
    V_RUN_COMPARISONS,
    FLAKY_CASES_MACRO,
    V_FLAKY_CASES,
    V_JUDGE_DRIFT,
)

TABLES_V4 = ("case_trials", "judge_control_scores")
VIEWS = ("v_case_trials", "v_run_stats", "v_metric_stats", "v_run_comparisons", "v_judge_drift")
