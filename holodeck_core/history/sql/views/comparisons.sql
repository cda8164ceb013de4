-- Paired comparisons of each run with the previous run of its configuration (agent, prompt
-- version, model candidate):
-- holodeck_run_comparisons_raw(since) and holodeck_run_comparisons(since) (Benjamini-Hochberg
-- adjusted per tick) compute only the heads of the UTC day of `since` and later, grouping the
-- paired runs' trial rows only; the views are the macros with NULL (every head).

CREATE MACRO holodeck_run_comparisons_raw(since) AS TABLE
WITH pairs AS (
    SELECT agent_slug, prompt_version, model_candidate,
           lag(run_id) OVER (PARTITION BY agent_slug, prompt_version, model_candidate
                             ORDER BY finished_at, run_id) AS base_run_id,
           run_id AS head_run_id
    FROM v_counted_runs
    QUALIFY since IS NULL OR finished_at >= CAST(CAST(since AS DATE) AS TIMESTAMP)
),
trials AS (
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
WHERE since IS NULL
   OR run_id IN (SELECT base_run_id FROM pairs UNION ALL SELECT head_run_id FROM pairs)
GROUP BY run_id, case_id
),
cases AS (
    SELECT p.agent_slug, p.prompt_version, p.model_candidate, p.base_run_id, p.head_run_id,
           a.pass_fraction AS xa, b.pass_fraction AS xb,
           b.pass_fraction - a.pass_fraction AS d,
           a.trials = 1 AND b.trials = 1 AS one_trial
    FROM pairs p
    JOIN trials a ON a.run_id = p.base_run_id
    JOIN trials b ON b.run_id = p.head_run_id AND b.case_id = a.case_id
),
agg AS (
    SELECT agent_slug, prompt_version, model_candidate, base_run_id, head_run_id, count(*) AS n,
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
           CASE WHEN one_trial THEN holodeck_mcnemar_midp(only_a, only_b)
                WHEN n < 2 THEN NULL
                WHEN se = 0 THEN CASE WHEN mean_diff = 0 THEN 1.0 ELSE 0.0 END
                ELSE holodeck_t_pvalue(mean_diff / se, n - 1) END AS p_value
    FROM agg
)
SELECT
    agent_slug, prompt_version, model_candidate, base_run_id, head_run_id, n, mean_a, mean_b,
    mean_diff, se,
    ci95_low, ci95_high, only_a, only_b,
    CASE WHEN one_trial THEN 'mcnemar_midp' WHEN n < 2 THEN 'none' ELSE 'paired_t' END AS test,
    p_value,
    CASE WHEN p_value < {{ alpha }} AND mean_diff < 0 THEN 'regression'
         WHEN p_value < {{ alpha }} AND mean_diff > 0 THEN 'improvement'
         ELSE 'no significant change' END AS verdict
FROM tested;

CREATE MACRO holodeck_run_comparisons(since) AS TABLE
WITH family AS (
    SELECT c.*, holodeck_tick(e.agent_slug, e.trigger, e.finished_at, e.run_id) AS tick,
           count(c.p_value) OVER (PARTITION BY tick) AS family_size,
           row_number() OVER (PARTITION BY tick ORDER BY c.p_value) AS p_rank
    FROM holodeck_run_comparisons_raw(since) c
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
FROM adjusted;

CREATE VIEW v_run_comparisons_raw AS
SELECT * FROM holodeck_run_comparisons_raw(NULL);

CREATE VIEW v_run_comparisons AS
SELECT * FROM holodeck_run_comparisons(NULL);
