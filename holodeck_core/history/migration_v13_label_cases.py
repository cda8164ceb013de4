"""Schema version 13: judge agreement counts cases, not labels (docs/history.md).

Schema 6's ``v_judge_agreement`` (and schema 9's ``v_judge_control_agreement``, the same SQL
per run) counted each human label: a case labelled by many people weighed as many cases, and
``n`` counted labels. Here the labels of one judged case (run, case, metric) are one verdict
first: the majority of its labelers' pass/fail (a tie is no verdict, left out of κ and the
rates) and the mean of their scores; every measure and ``n`` then count cases. One labeler
gives one label per case (the table's key; ``holodeck labels import`` reports a file's
repeats). Same columns. Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.history import migration_v6_labels
from holodeck_core.history.migration_v9_verdicts import _per_run_control

_LABELS = """WITH labels AS (
    SELECT *, coalesce(judge_model, '') AS judge
    FROM v_judge_labels
),"""
assert migration_v6_labels.V_JUDGE_AGREEMENT.count(_LABELS) == 1, "the frozen SQL changed"

CASES = """WITH labels AS (
    SELECT run_id, case_id, agent_slug, metric_name, coalesce(judge_model, '') AS judge,
           any_value(judge_passed) AS judge_passed, any_value(judge_score) AS judge_score,
           CASE WHEN 2 * count(*) FILTER (WHERE human_passed) > count(human_passed) THEN true
                WHEN 2 * count(*) FILTER (WHERE NOT human_passed) > count(human_passed)
                THEN false END AS human_passed,
           avg(human_score) AS human_score
    FROM v_judge_labels
    GROUP BY ALL
),"""
"""One row per judged case: the judge's verdict and the people's (majority, mean score)."""

V_JUDGE_AGREEMENT = migration_v6_labels.V_JUDGE_AGREEMENT.replace(_LABELS, CASES)
V_JUDGE_CONTROL_AGREEMENT = _per_run_control(V_JUDGE_AGREEMENT)

STATEMENTS_V13: tuple[str, ...] = (V_JUDGE_AGREEMENT, V_JUDGE_CONTROL_AGREEMENT)
DESCRIPTION_V13 = (
    "v_judge_agreement and v_judge_control_agreement count cases: a case's labels are one "
    "verdict (the labelers' majority, a tie none; their mean score) before any measure"
)
