"""Schema version 8: the budgets runs share (docs/cost.md, ``holodeck.yaml`` ``budget:``).
``budget_ledger`` holds one row per holder (one process's runtime) of a shared budget: the
scope (``daily``, ``backfill``) and its key (the UTC day, the Dagster backfill id), what the
holder claimed and what it booked as spent, and until when its claim counts (a crashed
holder's claim expires; its booked spend stays). ``v_budget_spend`` sums them per budget.

Plain columns, no key or check constraints: the rows are kept by ``UPDATE``/``INSERT`` in one
transaction (``history/budget_ledger.py``), which DuckLake runs too. Frozen once released."""

from __future__ import annotations

DESCRIPTION_V8 = (
    "table budget_ledger (claims and spend of the budgets runs share, per holder); "
    "view v_budget_spend"
)

BUDGET_LEDGER = """
CREATE TABLE budget_ledger (
    scope          VARCHAR NOT NULL,
    scope_key      VARCHAR NOT NULL,
    holder         VARCHAR NOT NULL,
    label          VARCHAR,
    claimed_usd    DOUBLE NOT NULL,
    claimed_tokens BIGINT NOT NULL,
    spent_usd      DOUBLE NOT NULL,
    spent_tokens   BIGINT NOT NULL,
    expires_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL
)
"""

V_BUDGET_SPEND = """
CREATE OR REPLACE VIEW v_budget_spend AS
SELECT
    scope, scope_key,
    sum(spent_usd) AS spent_usd,
    CAST(sum(spent_tokens) AS BIGINT) AS spent_tokens,
    count(*) AS holders,
    min(updated_at) AS first_at,
    max(updated_at) AS last_at
FROM budget_ledger
GROUP BY scope, scope_key
"""

STATEMENTS_V8: tuple[str, ...] = (BUDGET_LEDGER, V_BUDGET_SPEND)
