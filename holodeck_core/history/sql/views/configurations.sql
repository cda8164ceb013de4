-- Configurations: an agent, a prompt version and a model candidate (docs/history.md). The
-- cells (configuration_cells): the newest healthy run of each configuration (v_counted_runs)
-- with its statistics: the pass rate and its interval as v_run_stats computes it, cost per
-- case and per passing case, latency percentiles over its cases, errors and its age.

CREATE VIEW configuration_cells AS
WITH newest AS (
    SELECT *, count(*) OVER c AS healthy_runs
    FROM v_counted_runs
    WINDOW c AS (PARTITION BY agent_slug, prompt_version, model_candidate)
    QUALIFY row_number() OVER (PARTITION BY agent_slug, prompt_version, model_candidate
                               ORDER BY finished_at DESC, run_id DESC) = 1
),
latency AS (
    SELECT run_id,
           quantile_cont(execution_time_ms, 0.5) AS latency_p50_ms,
           quantile_cont(execution_time_ms, 0.95) AS latency_p95_ms
    FROM test_results
    WHERE run_id IN (SELECT run_id FROM newest)
    GROUP BY run_id
)
SELECT
    n.agent_name, n.agent_slug, n.prompt_version, n.prompt_label, n.model_candidate,
    n.model_fingerprint, n.model_provider, n.model_name,
    n.run_id, n.finished_at,
    date_trunc('second', now()::TIMESTAMP - n.finished_at) AS age,
    n.healthy_runs,
    n.total_tests, n.passed, n.failed, n.errored,
    coalesce(s.pass_rate, n.pass_rate) AS pass_rate,
    s.method AS pass_rate_method, s.ci95_low, s.ci95_high,
    n.cost_usd,
    n.cost_usd / NULLIF(n.total_tests, 0) AS cost_per_case,
    n.cost_usd / NULLIF(n.passed, 0) AS cost_per_pass,
    l.latency_p50_ms, l.latency_p95_ms
FROM newest n
LEFT JOIN v_run_stats s ON s.run_id = n.run_id
LEFT JOIN latency l ON l.run_id = n.run_id;
