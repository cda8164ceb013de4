-- Trials and statistics: each case's trials (v_case_trials), per-run pass fractions with
-- their intervals (v_run_stats), per-run metric means with intervals on their scale
-- (v_metric_stats, v_metric_trend), and flaky cases (flaky_cases(last_n), v_flaky_cases over
-- the last defaults.HISTORY_FLAKY_WINDOW runs of each configuration: agent, prompt version,
-- model candidate).

CREATE VIEW v_case_trials AS
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
GROUP BY run_id, case_id;

CREATE VIEW v_run_stats AS
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
    r.run_id, e.agent_slug, e.prompt_version, e.model_candidate, e.finished_at,
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
JOIN eval_runs e USING (run_id);

CREATE VIEW v_metric_stats AS
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
moments AS (
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
    p.run_id, e.agent_slug, e.prompt_version, e.model_candidate, e.finished_at, p.metric_name,
    p.n, p.mean,
    p.se,
    CASE WHEN p.in_unit THEN 't_hall_skewness' ELSE 'wilson_cc_effective_n' END AS method,
    p.n_effective,
    CASE WHEN p.in_unit THEN holodeck_hall_low(p.mean, p.se, p.skewness, p.n)
         ELSE holodeck_wilson_cc_low(p.mean, p.n_effective) END AS ci95_low,
    CASE WHEN p.in_unit THEN holodeck_hall_high(p.mean, p.se, p.skewness, p.n)
         ELSE holodeck_wilson_cc_high(p.mean, p.n_effective) END AS ci95_high,
    CASE WHEN p.in_unit THEN p.skewness END AS skewness
FROM sized p
JOIN eval_runs e USING (run_id);

CREATE VIEW v_metric_trend AS
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
    p.run_id, r.agent_slug, r.prompt_version, r.model_candidate, r.finished_at, p.metric_name,
    p.kind, p.unit,
    p.direction, p.n, p.mean, p.stddev, s.method, s.ci95_low, s.ci95_high,
    CAST(p.passed AS DOUBLE) / NULLIF(p.passed + p.failed, 0) AS metric_pass_rate,
    p.errors
FROM per_run p
JOIN eval_runs r USING (run_id)
LEFT JOIN v_metric_stats s USING (run_id, metric_name);

CREATE MACRO flaky_cases(last_n) AS TABLE
WITH recent AS (
    SELECT run_id, agent_slug, prompt_version, model_candidate, finished_at,
           row_number() OVER (PARTITION BY agent_slug, prompt_version, model_candidate
                              ORDER BY finished_at DESC, run_id DESC) AS recency
    FROM v_counted_runs
    WHERE trigger IS DISTINCT FROM 'rescore'
),
windowed AS (
    SELECT r.agent_slug, r.prompt_version, r.model_candidate, r.finished_at, r.run_id,
           t.case_id, t.test_name, t.status, c.case_fingerprint, c.trials_disagree,
           lag(CASE WHEN t.status <> 'ERROR'
                    THEN {'status': t.status, 'fingerprint': c.case_fingerprint} END
               IGNORE NULLS) OVER w AS previous
    FROM recent r
    JOIN test_results t ON t.run_id = r.run_id
    LEFT JOIN v_case_trials c ON c.run_id = t.run_id AND c.case_id = t.case_id
    WHERE r.recency <= last_n
    WINDOW w AS (PARTITION BY r.agent_slug, r.prompt_version, r.model_candidate, t.case_id
                 ORDER BY r.finished_at, r.run_id)
)
SELECT
    agent_slug,
    prompt_version,
    model_candidate,
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
GROUP BY agent_slug, prompt_version, model_candidate, case_id
HAVING flips > 0 OR disagreeing_runs > 0;

CREATE VIEW v_flaky_cases AS
SELECT * FROM flaky_cases({{ flaky_window }});
