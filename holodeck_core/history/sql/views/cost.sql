-- What runs spent: per case and per run, one column per heading (agent, judge, prompt_tool,
-- embedding, reranker; an unknown price is NULL and makes its total NULL), the price table,
-- the estimate before the run and the budget verdict, the part batches answered at the batch
-- prices (batch_calls, batch_usd: NULL when nothing was batched); and the shared budgets' spend
-- (v_budget_spend, from budget_ledger).

CREATE VIEW v_cost_by_case AS
SELECT
    c.run_id, r.agent_slug, r.prompt_version, r.finished_at, c.case_id,
    t.status,
    CASE WHEN bool_or(c.heading = 'agent' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'agent') END AS agent_usd,
    CASE WHEN bool_or(c.heading = 'judge' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'judge') END AS judge_usd,
    CASE WHEN bool_or(c.heading = 'prompt_tool' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'prompt_tool') END AS prompt_tool_usd,
    CASE WHEN bool_or(c.heading = 'embedding' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'embedding') END AS embedding_usd,
    CASE WHEN bool_or(c.heading = 'reranker' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'reranker') END AS reranker_usd,
    CASE WHEN bool_or(c.cost_usd IS NULL) THEN NULL ELSE coalesce(sum(c.cost_usd), 0) END AS cost_usd,
    CAST(sum(c.calls) AS BIGINT) AS calls,
    CAST(sum(c.prompt_tokens) AS BIGINT) AS prompt_tokens,
    CAST(sum(c.completion_tokens) AS BIGINT) AS completion_tokens,
    CAST(sum(c.prompt_tokens + c.completion_tokens) AS BIGINT) AS tokens,
    CAST(sum(c.batch_calls) AS BIGINT) AS batch_calls,
    sum(c.batch_usd) AS batch_usd
FROM call_costs c
JOIN eval_runs r USING (run_id)
LEFT JOIN test_results t ON t.run_id = c.run_id AND t.case_id = c.case_id
WHERE c.case_id <> ''
GROUP BY c.run_id, r.agent_slug, r.prompt_version, r.finished_at, c.case_id, t.status;

CREATE VIEW v_cost_by_run AS
SELECT
    r.run_id, r.agent_slug, r.prompt_version, r.model_candidate, r.finished_at,
    CAST(r.finished_at AS DATE) AS day, r.total_tests, r.passed,
    CASE WHEN bool_or(c.heading = 'agent' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'agent') END AS agent_usd,
    CASE WHEN bool_or(c.heading = 'judge' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'judge') END AS judge_usd,
    CASE WHEN bool_or(c.heading = 'prompt_tool' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'prompt_tool') END AS prompt_tool_usd,
    CASE WHEN bool_or(c.heading = 'embedding' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'embedding') END AS embedding_usd,
    CASE WHEN bool_or(c.heading = 'reranker' AND c.cost_usd IS NULL) THEN NULL ELSE sum(c.cost_usd) FILTER (WHERE c.heading = 'reranker') END AS reranker_usd,
    CASE WHEN bool_or(c.cost_usd IS NULL) THEN NULL ELSE coalesce(sum(c.cost_usd), 0) END AS cost_usd,
    (CASE WHEN bool_or(c.cost_usd IS NULL) THEN NULL ELSE coalesce(sum(c.cost_usd), 0) END) / NULLIF(r.passed, 0) AS cost_per_pass,
    CAST(sum(c.calls) AS BIGINT) AS calls,
    CAST(sum(c.prompt_tokens + c.completion_tokens) AS BIGINT) AS tokens,
    any_value(k.price_table) AS price_table,
    any_value(k.budget_usd) AS budget_usd,
    any_value(k.budget_tokens) AS budget_tokens,
    any_value(k.spent_usd) AS spent_usd,
    any_value(k.spent_tokens) AS spent_tokens,
    any_value(k.budget_stopped_by) AS budget_stopped_by,
    any_value(k.estimate_usd) AS estimate_usd,
    any_value(k.estimate_source) AS estimate_source,
    any_value(k.estimate_calls) AS estimate_calls,
    any_value(k.estimate_tokens) AS estimate_tokens,
    any_value(k.batch_calls) AS batch_calls,
    any_value(k.batch_usd) AS batch_usd
FROM eval_runs r
JOIN run_costs k USING (run_id)
LEFT JOIN call_costs c USING (run_id)
GROUP BY r.run_id, r.agent_slug, r.prompt_version, r.model_candidate, r.finished_at,
         r.total_tests, r.passed;

CREATE VIEW v_budget_spend AS
SELECT
    scope, scope_key,
    sum(spent_usd) AS spent_usd,
    CAST(sum(spent_tokens) AS BIGINT) AS spent_tokens,
    count(*) AS holders,
    min(updated_at) AS first_at,
    max(updated_at) AS last_at
FROM budget_ledger
GROUP BY scope, scope_key;
