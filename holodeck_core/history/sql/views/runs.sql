-- Runs: one row each (v_runs), the daily trend, case flips between runs (v_regressions),
-- each of one configuration (agent, prompt version, model candidate; docs/history.md),
-- errors, and infrastructure failures kept apart (v_run_health: more than max_error_share of
-- a run's cases ERROR); v_counted_runs holds the other runs, which the trend, comparison and
-- flaky views read. Runs are ordered by finished_at, then run_id.

CREATE VIEW v_run_health AS
SELECT run_id, agent_slug, prompt_version, model_candidate, finished_at, total_tests, errored,
       CAST(errored AS DOUBLE) / NULLIF(total_tests, 0) AS error_share,
       coalesce(max_error_share, {{ max_error_share }}) AS max_error_share,
       errored > coalesce(max_error_share, {{ max_error_share }}) * total_tests
           AS infrastructure_failure
FROM eval_runs;

CREATE VIEW v_counted_runs AS
SELECT e.* FROM eval_runs e
WHERE e.run_id NOT IN (SELECT run_id FROM v_run_health WHERE infrastructure_failure);

CREATE VIEW v_runs AS
SELECT
    run_id, agent_name, agent_slug, prompt_version, prompt_label, prompt_body_hash,
    model_provider, model_name, model_candidate, model_fingerprint, judge_model, trigger,
    dagster_run_id, partition_key,
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
WINDOW w AS (PARTITION BY agent_slug, prompt_version, model_candidate
             ORDER BY finished_at, run_id);

CREATE VIEW v_pass_rate_trend AS
SELECT
    agent_slug,
    any_value(agent_name) AS agent_name,
    prompt_version,
    model_candidate,
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
FROM v_counted_runs
GROUP BY agent_slug, prompt_version, model_candidate, CAST(finished_at AS DATE);

CREATE VIEW v_regressions AS
WITH ordered AS (
    SELECT run_id, agent_slug,
           lag(run_id) OVER (PARTITION BY agent_slug, prompt_version, model_candidate
                             ORDER BY finished_at, run_id) AS base_run_id
    FROM v_counted_runs
),
latest AS (
    SELECT agent_slug, prompt_version, model_candidate, run_id, finished_at
    FROM v_counted_runs
    QUALIFY row_number() OVER (PARTITION BY agent_slug, prompt_version, model_candidate
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
     AND a.model_candidate = b.model_candidate
     AND a.prompt_version <> b.prompt_version
     AND (a.finished_at < b.finished_at
          OR (a.finished_at = b.finished_at AND a.run_id < b.run_id))
)
SELECT
    p.comparison,
    p.agent_slug,
    rb.prompt_version AS base_prompt_version,
    rh.prompt_version AS head_prompt_version,
    rh.model_candidate,
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
WHERE tb.status <> th.status;

CREATE VIEW v_errors AS
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
    e.run_id, r.agent_slug, r.prompt_version, r.model_candidate, r.finished_at,
    e.case_id, t.test_name, t.status AS case_status,
    e.source, e.name, e.turn_index, e.message
FROM all_errors e
JOIN eval_runs r ON r.run_id = e.run_id
JOIN test_results t ON t.run_id = e.run_id AND t.case_id = e.case_id;
