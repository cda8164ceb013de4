"""Schema version 6 (docs/cli.md): human labels, and how far the judges agree with them.

``human_labels`` holds a person's verdict on one case's response for one metric of one run
(``holodeck labels import``). ``v_judge_labels`` pairs each label with the judge's verdict on
the same response; ``v_judge_agreement`` sums them up per agent, metric and judge model:

- Cohen's κ on pass/fail (as scikit-learn's ``cohen_kappa_score``), with Cohen's (1960)
  large-sample SE sqrt(pₒ(1 - pₒ) / (n(1 - pₑ)²)) and a 95% interval clipped to [-1, 1];
- the judge's false pass rate (passes among the cases people failed) and false fail rate
  (fails among the cases people passed), each with the Wilson interval (continuity-corrected)
  of schema 5;
- Spearman's rho on scores (Pearson's r on average ranks, as scipy's ``spearmanr``), with the
  Fisher-z interval of SE sqrt(1.06 / (n - 3)) (Fieller, Hartley & Pearson 1957);
- the mean bias of the judge's score over the person's, with its t interval clipped to [-1, 1].

Frozen once released, like every migration."""

from __future__ import annotations

HUMAN_LABELS = """
CREATE TABLE human_labels (
    run_id       VARCHAR NOT NULL,
    case_id      VARCHAR NOT NULL,
    metric_name  VARCHAR NOT NULL,
    labeler      VARCHAR NOT NULL,
    human_passed BOOLEAN,
    human_score  DOUBLE,
    note         VARCHAR,
    source_file  VARCHAR,
    imported_at  TIMESTAMP NOT NULL,
    CHECK (human_passed IS NOT NULL OR human_score IS NOT NULL),
    CHECK (human_score IS NULL OR human_score BETWEEN 0 AND 1),
    PRIMARY KEY (run_id, case_id, metric_name, labeler)
)
"""

V_JUDGE_LABELS = """
CREATE OR REPLACE VIEW v_judge_labels AS
WITH judged AS (
    SELECT run_id, case_id, metric_name, any_value(judge_model) AS judge_model,
           bool_and(passed) AS judge_passed, avg(score) AS judge_score
    FROM metric_results
    WHERE error IS NULL
    GROUP BY run_id, case_id, metric_name
)
SELECT h.run_id, e.agent_slug, e.prompt_version, h.case_id, h.metric_name, h.labeler,
       j.judge_model, j.judge_passed, j.judge_score, h.human_passed, h.human_score
FROM human_labels h
JOIN eval_runs e USING (run_id)
JOIN judged j USING (run_id, case_id, metric_name)
"""
"""Each human label beside the judge's verdict on the same response (means over trials)."""

V_JUDGE_AGREEMENT = """
CREATE OR REPLACE VIEW v_judge_agreement AS
WITH labels AS (
    SELECT *, coalesce(judge_model, '') AS judge
    FROM v_judge_labels
),
verdicts AS (
    SELECT agent_slug, metric_name, judge, count(*) AS n,
           avg(CAST(judge_passed = human_passed AS DOUBLE)) AS po,
           avg(CAST(judge_passed AS DOUBLE)) AS pj, avg(CAST(human_passed AS DOUBLE)) AS ph,
           count(*) FILTER (WHERE NOT human_passed) AS human_fails,
           count(*) FILTER (WHERE NOT human_passed AND judge_passed) AS false_passes,
           count(*) FILTER (WHERE human_passed) AS human_passes,
           count(*) FILTER (WHERE human_passed AND NOT judge_passed) AS false_fails
    FROM labels
    WHERE judge_passed IS NOT NULL AND human_passed IS NOT NULL
    GROUP BY ALL
),
kappa AS (
    SELECT *, pj * ph + (1 - pj) * (1 - ph) AS pe,
           CAST(false_passes AS DOUBLE) / NULLIF(human_fails, 0) AS false_pass_rate,
           CAST(false_fails AS DOUBLE) / NULLIF(human_passes, 0) AS false_fail_rate
    FROM verdicts
),
scored AS (
    SELECT agent_slug, metric_name, judge, judge_score, human_score,
           rank() OVER g_j + (count(*) OVER (PARTITION BY agent_slug, metric_name, judge,
                                                 judge_score) - 1) / 2.0 AS rank_j,
           rank() OVER g_h + (count(*) OVER (PARTITION BY agent_slug, metric_name, judge,
                                                 human_score) - 1) / 2.0 AS rank_h
    FROM labels
    WHERE judge_score IS NOT NULL AND human_score IS NOT NULL
    WINDOW g_j AS (PARTITION BY agent_slug, metric_name, judge ORDER BY judge_score),
           g_h AS (PARTITION BY agent_slug, metric_name, judge ORDER BY human_score)
),
scores AS (
    SELECT agent_slug, metric_name, judge, count(*) AS n_scores,
           corr(rank_j, rank_h) AS spearman_rho,
           avg(judge_score - human_score) AS mean_bias,
           stddev_samp(judge_score - human_score) AS sd_bias
    FROM scored
    GROUP BY ALL
)
SELECT
    coalesce(k.agent_slug, s.agent_slug) AS agent_slug,
    coalesce(k.metric_name, s.metric_name) AS metric_name,
    nullif(coalesce(k.judge, s.judge), '') AS judge_model,
    coalesce(k.n, 0) AS n,
    CASE WHEN k.pe < 1 THEN (k.po - k.pe) / (1 - k.pe) END AS kappa,
    CASE WHEN k.pe < 1 THEN greatest(-1.0, (k.po - k.pe) / (1 - k.pe)
        - 1.959963984540054 * sqrt(k.po * (1 - k.po) / k.n) / (1 - k.pe)) END AS kappa_low,
    CASE WHEN k.pe < 1 THEN least(1.0, (k.po - k.pe) / (1 - k.pe)
        + 1.959963984540054 * sqrt(k.po * (1 - k.po) / k.n) / (1 - k.pe)) END AS kappa_high,
    k.human_fails AS n_human_fails, k.false_pass_rate,
    holodeck_wilson_cc_low(k.false_pass_rate, k.human_fails) AS false_pass_low,
    holodeck_wilson_cc_high(k.false_pass_rate, k.human_fails) AS false_pass_high,
    k.human_passes AS n_human_passes, k.false_fail_rate,
    holodeck_wilson_cc_low(k.false_fail_rate, k.human_passes) AS false_fail_low,
    holodeck_wilson_cc_high(k.false_fail_rate, k.human_passes) AS false_fail_high,
    coalesce(s.n_scores, 0) AS n_scores, s.spearman_rho,
    CASE WHEN s.n_scores > 3 AND abs(s.spearman_rho) < 1
         THEN tanh(atanh(s.spearman_rho) - 1.959963984540054 * sqrt(1.06 / (s.n_scores - 3)))
    END AS spearman_rho_low,
    CASE WHEN s.n_scores > 3 AND abs(s.spearman_rho) < 1
         THEN tanh(atanh(s.spearman_rho) + 1.959963984540054 * sqrt(1.06 / (s.n_scores - 3)))
    END AS spearman_rho_high,
    s.mean_bias,
    greatest(-1.0, s.mean_bias - holodeck_t975(s.n_scores - 1) * s.sd_bias / sqrt(s.n_scores))
        AS mean_bias_low,
    least(1.0, s.mean_bias + holodeck_t975(s.n_scores - 1) * s.sd_bias / sqrt(s.n_scores))
        AS mean_bias_high
FROM kappa k
FULL OUTER JOIN scores s USING (agent_slug, metric_name, judge)
"""
"""Per agent, metric and judge model: how far the judge agrees with people (see above)."""

TABLES_V6 = ("human_labels",)
VIEWS_V6: tuple[str, ...] = (HUMAN_LABELS, V_JUDGE_LABELS, V_JUDGE_AGREEMENT)
DESCRIPTION_V6 = (
    "table human_labels; views v_judge_labels, v_judge_agreement (Cohen's kappa, "
    "false pass/fail rates, Spearman rho, mean bias, each with n and an interval)"
)
