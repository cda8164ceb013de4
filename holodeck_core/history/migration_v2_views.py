"""Analyst views over the history tables (schema version 2).

Ordering of runs is by ``finished_at`` (the report's timestamp, HoloDeck's own source of
truth for run order), with ``run_id`` as the tie-break so every ordering is deterministic.
``prompt_version`` is the registered prompt key (see ``docs/history.md``), so a label reused
with a different body never mixes two prompts in one trend.

Frozen: a later change to a view is a new migration with new SQL, not an edit here.
"""

from __future__ import annotations

from holodeck_core.defaults import T975

FLAKY_WINDOW = 10
"""``v_flaky_cases`` looks at the last this-many runs of each prompt version; call the table
macro ``flaky_cases(n)`` for another window."""

T95 = f"""
CREATE OR REPLACE MACRO holodeck_t95(df) AS
    CASE
        WHEN df IS NULL OR df < 1 THEN NULL
        WHEN df <= {len(T975)} THEN [{", ".join(f"{t:.3f}" for t in T975)}][df]
        ELSE 1.96 + 2.4 / df
    END
"""
"""Two-sided 95% Student-t critical value for ``df`` degrees of freedom (the table of
:mod:`holodeck_core.defaults` to three places up to 30, then a close approximation: 2.000 at
60, 1.980 at 120, 1.96 in the limit)."""

V_RUNS = """
CREATE OR REPLACE VIEW v_runs AS
SELECT
    run_id, agent_name, agent_slug, prompt_version, prompt_label, prompt_body_hash,
    model_provider, model_name, judge_model, trigger, dagster_run_id, partition_key,
    started_at, finished_at, CAST(finished_at AS DATE) AS day,
    wall_time_ms, total_duration_ms,
    total_tests, passed, failed, errored, failed + errored AS not_passed,
    pass_rate, weighted_pass_rate,
    prompt_tokens, completion_tokens, total_tokens,
    CAST(total_tokens AS DOUBLE) / NULLIF(total_tests, 0) AS tokens_per_case,
    cost_usd,
    cost_usd / NULLIF(passed, 0) AS cost_per_pass,
    git_commit, holodeck_version, config_hash, dataset_hash, source_path,
    row_number() OVER w AS run_seq,
    lag(run_id) OVER w AS previous_run_id,
    pass_rate - lag(pass_rate) OVER w AS pass_rate_change
FROM eval_runs
WINDOW w AS (PARTITION BY agent_slug, prompt_version ORDER BY finished_at, run_id)
"""

V_PASS_RATE_TREND = """
CREATE OR REPLACE VIEW v_pass_rate_trend AS
SELECT
    agent_slug,
    any_value(agent_name) AS agent_name,
    prompt_version,
    CAST(finished_at AS DATE) AS day,
    count(*) AS runs,
    sum(total_tests) AS total_tests,
    sum(passed) AS passed,
    sum(failed) AS failed,
    sum(errored) AS errored,
    CAST(sum(passed) AS DOUBLE) / NULLIF(sum(total_tests), 0) AS pass_rate,
    avg(pass_rate) AS mean_run_pass_rate,
    min(pass_rate) AS min_run_pass_rate,
    max(pass_rate) AS max_run_pass_rate,
    sum(total_tokens) AS total_tokens,
    sum(cost_usd) AS cost_usd
FROM eval_runs
GROUP BY agent_slug, prompt_version, CAST(finished_at AS DATE)
"""

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
    p.direction, p.n, p.mean, p.stddev,
    p.mean - holodeck_t95(p.n - 1) * p.stddev / sqrt(p.n) AS ci95_low,
    p.mean + holodeck_t95(p.n - 1) * p.stddev / sqrt(p.n) AS ci95_high,
    CAST(p.passed AS DOUBLE) / NULLIF(p.passed + p.failed, 0) AS metric_pass_rate,
    p.errors
FROM per_run p
JOIN eval_runs r USING (run_id)
"""

V_REGRESSIONS = """
CREATE OR REPLACE VIEW v_regressions AS
WITH ordered AS (
    SELECT run_id, agent_slug,
           lag(run_id) OVER (PARTITION BY agent_slug, prompt_version
                             ORDER BY finished_at, run_id) AS base_run_id
    FROM eval_runs
),
latest AS (
    SELECT agent_slug, prompt_version, run_id, finished_at
    FROM eval_runs
    QUALIFY row_number() OVER (PARTITION BY agent_slug, prompt_version
                               ORDER BY finished_at DESC, run_id DESC) = 1
),
pairs AS (
    SELECT 'previous_run' AS comparison, agent_slug, base_run_id, run_id AS head_run_id
    FROM ordered
    WHERE base_run_id IS NOT NULL
    UNION ALL
    SELECT 'prompt_version', a.agent_slug, a.run_id, b.run_id
    FROM latest a
    JOIN latest b
      ON a.agent_slug = b.agent_slug
     AND a.prompt_version <> b.prompt_version
     AND (a.finished_at < b.finished_at
          OR (a.finished_at = b.finished_at AND a.run_id < b.run_id))
)
SELECT
    p.comparison,
    p.agent_slug,
    rb.prompt_version AS base_prompt_version,
    rh.prompt_version AS head_prompt_version,
    p.base_run_id,
    p.head_run_id,
    rb.finished_at AS base_finished_at,
    rh.finished_at AS head_finished_at,
    tb.case_id,
    coalesce(th.test_name, tb.test_name) AS test_name,
    tb.status AS base_status,
    th.status AS head_status,
    CASE WHEN tb.status = 'PASS' THEN 'regression'
         WHEN th.status = 'PASS' THEN 'fix'
         ELSE 'change' END AS flip,
    tb.status = 'PASS' AS is_regression
FROM pairs p
JOIN eval_runs rb ON rb.run_id = p.base_run_id
JOIN eval_runs rh ON rh.run_id = p.head_run_id
JOIN test_results tb ON tb.run_id = p.base_run_id
JOIN test_results th ON th.run_id = p.head_run_id AND th.case_id = tb.case_id
WHERE tb.status <> th.status
"""

FLAKY_CASES_MACRO = """
CREATE OR REPLACE MACRO flaky_cases(last_n) AS TABLE
WITH recent AS (
    SELECT run_id, agent_slug, prompt_version, finished_at,
           row_number() OVER (PARTITION BY agent_slug, prompt_version
                              ORDER BY finished_at DESC, run_id DESC) AS recency
    FROM eval_runs
),
windowed AS (
    SELECT r.agent_slug, r.prompt_version, r.finished_at, r.run_id,
           t.case_id, t.test_name, t.status,
           lag(t.status) OVER (PARTITION BY r.agent_slug, r.prompt_version, t.case_id
                               ORDER BY r.finished_at, r.run_id) AS previous_status
    FROM recent r
    JOIN test_results t ON t.run_id = r.run_id
    WHERE r.recency <= last_n
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
    count(*) FILTER (WHERE previous_status IS NOT NULL AND previous_status <> status) AS flips,
    CAST(count(*) FILTER (WHERE status = 'PASS') AS DOUBLE) / count(*) AS pass_fraction,
    string_agg(left(status, 1), '' ORDER BY finished_at, run_id) AS history,
    arg_max(status, finished_at) AS last_status,
    max(finished_at) AS last_seen
FROM windowed
GROUP BY agent_slug, prompt_version, case_id
HAVING count(DISTINCT status) > 1
"""

V_FLAKY_CASES = f"""
CREATE OR REPLACE VIEW v_flaky_cases AS
SELECT * FROM flaky_cases({FLAKY_WINDOW})
"""

V_ERRORS = """
CREATE OR REPLACE VIEW v_errors AS
WITH case_errors AS (
    SELECT run_id, case_id, test_name, status, unnest(errors) AS message
    FROM test_results
    UNION ALL
    SELECT run_id, case_id, test_name, status, NULL
    FROM test_results
    WHERE status = 'ERROR' AND len(coalesce(errors, [])) = 0
),
all_errors AS (
    SELECT run_id, case_id, 'case' AS source, CAST(NULL AS VARCHAR) AS name,
           CAST(NULL AS INTEGER) AS turn_index, message
    FROM case_errors
    UNION ALL
    SELECT run_id, case_id, 'metric', metric_name, turn_index, error
    FROM metric_results WHERE error IS NOT NULL
    UNION ALL
    SELECT run_id, case_id, 'tool', name, turn_index, error
    FROM tool_invocations WHERE error IS NOT NULL
)
SELECT
    e.run_id, r.agent_slug, r.prompt_version, r.finished_at,
    e.case_id, t.test_name, t.status AS case_status,
    e.source, e.name, e.turn_index, e.message
FROM all_errors e
JOIN eval_runs r ON r.run_id = e.run_id
JOIN test_results t ON t.run_id = e.run_id AND t.case_id = e.case_id
"""

VIEWS_V2: tuple[str, ...] = (
    T95,
    V_RUNS,
    V_PASS_RATE_TREND,
    V_METRIC_TREND,
    V_REGRESSIONS,
    FLAKY_CASES_MACRO,
    V_FLAKY_CASES,
    V_ERRORS,
)

VIEWS = (
    "v_runs",
    "v_pass_rate_trend",
    "v_metric_trend",
    "v_regressions",
    "v_flaky_cases",
    "v_errors",
)
