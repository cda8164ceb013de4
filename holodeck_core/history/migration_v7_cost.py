"""Schema version 7: what runs spent (docs/cost.md). ``call_costs`` holds one row per run, case
and heading (agent, judge, prompt_tool, embedding, reranker; ``case_id`` is empty for calls
made outside any case, such as index builds), ``run_costs`` one row per run with the price
table and the budget verdict; ``v_cost_by_run`` and ``v_cost_by_case`` put the headings side
by side. An unknown price is NULL, never 0, and makes its total NULL.

(Version 5 is the intervals and errors apart.) Frozen once released, like every migration."""

from __future__ import annotations

CALL_COSTS = """
CREATE TABLE call_costs (
    run_id            VARCHAR NOT NULL,
    case_id           VARCHAR NOT NULL,
    heading           VARCHAR NOT NULL
        CHECK (heading IN ('agent', 'judge', 'prompt_tool', 'embedding', 'reranker')),
    calls             INTEGER NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost_usd          DOUBLE,
    unpriced_calls    INTEGER NOT NULL,
    PRIMARY KEY (run_id, case_id, heading)
)
"""

RUN_COSTS = """
CREATE TABLE run_costs (
    run_id             VARCHAR PRIMARY KEY,
    price_table        VARCHAR NOT NULL,
    prices_taken       VARCHAR,
    total_usd          DOUBLE,
    budget_usd         DOUBLE,
    budget_tokens      BIGINT,
    spent_usd          DOUBLE,
    spent_tokens       BIGINT,
    budget_stopped_by  VARCHAR,
    refused_calls      INTEGER
)
"""


def _by_heading() -> str:
    """One column per heading: its sum, NULL when a row of it has no price."""
    return ",\n    ".join(
        f"CASE WHEN bool_or(c.heading = '{h}' AND c.cost_usd IS NULL) THEN NULL "
        f"ELSE sum(c.cost_usd) FILTER (WHERE c.heading = '{h}') END AS {h}_usd"
        for h in ("agent", "judge", "prompt_tool", "embedding", "reranker")
    )


_TOTAL = "CASE WHEN bool_or(c.cost_usd IS NULL) THEN NULL ELSE coalesce(sum(c.cost_usd), 0) END"

V_COST_BY_CASE = f"""
CREATE OR REPLACE VIEW v_cost_by_case AS
SELECT
    c.run_id, r.agent_slug, r.prompt_version, r.finished_at, c.case_id,
    t.status,
    {_by_heading()},
    {_TOTAL} AS cost_usd,
    CAST(sum(c.calls) AS BIGINT) AS calls,
    CAST(sum(c.prompt_tokens) AS BIGINT) AS prompt_tokens,
    CAST(sum(c.completion_tokens) AS BIGINT) AS completion_tokens,
    CAST(sum(c.prompt_tokens + c.completion_tokens) AS BIGINT) AS tokens
FROM call_costs c
JOIN eval_runs r USING (run_id)
LEFT JOIN test_results t ON t.run_id = c.run_id AND t.case_id = c.case_id
WHERE c.case_id <> ''
GROUP BY c.run_id, r.agent_slug, r.prompt_version, r.finished_at, c.case_id, t.status
"""

V_COST_BY_RUN = f"""
CREATE OR REPLACE VIEW v_cost_by_run AS
SELECT
    r.run_id, r.agent_slug, r.prompt_version, r.finished_at,
    CAST(r.finished_at AS DATE) AS day, r.total_tests, r.passed,
    {_by_heading()},
    {_TOTAL} AS cost_usd,
    ({_TOTAL}) / NULLIF(r.passed, 0) AS cost_per_pass,
    CAST(sum(c.calls) AS BIGINT) AS calls,
    CAST(sum(c.prompt_tokens + c.completion_tokens) AS BIGINT) AS tokens,
    any_value(k.price_table) AS price_table,
    any_value(k.budget_usd) AS budget_usd,
    any_value(k.budget_tokens) AS budget_tokens,
    any_value(k.spent_usd) AS spent_usd,
    any_value(k.spent_tokens) AS spent_tokens,
    any_value(k.budget_stopped_by) AS budget_stopped_by
FROM eval_runs r
JOIN run_costs k USING (run_id)
LEFT JOIN call_costs c USING (run_id)
GROUP BY r.run_id, r.agent_slug, r.prompt_version, r.finished_at, r.total_tests, r.passed
"""

STATEMENTS_V7: tuple[str, ...] = (CALL_COSTS, RUN_COSTS, V_COST_BY_CASE, V_COST_BY_RUN)
TABLES_V7 = ("call_costs", "run_costs")
VIEWS = ("v_cost_by_run", "v_cost_by_case")
