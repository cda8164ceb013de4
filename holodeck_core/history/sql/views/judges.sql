-- Judges: drift on the judge-control set (v_judge_drift), and agreement with people
-- (human_labels): each label beside the judge's verdict (v_judge_labels, and the control set's
-- v_judge_control_labels), and per agent, metric and judge model (v_judge_agreement; per run on
-- the control set: v_judge_control_agreement) Cohen's kappa, false pass/fail rates, Spearman's
-- rho and the mean bias, each with n and a 95% interval, both from one table macro
-- holodeck_judge_agreement(labels view, per run). A case's labels are one verdict first (the
-- labelers' majority, a tie none; their mean score).

CREATE VIEW v_judge_drift AS
WITH scored AS (
    SELECT s.*, e.finished_at,
           first_value(s.score) OVER (
               PARTITION BY s.agent_slug, s.control_id, s.metric_name
               ORDER BY e.finished_at, s.run_id) AS first_score
    FROM judge_control_scores s
    JOIN eval_runs e USING (run_id)
    WHERE s.error IS NULL AND s.score IS NOT NULL
)
SELECT run_id, agent_slug, metric_name, any_value(judge_model) AS judge_model,
       any_value(finished_at) AS finished_at, count(*) AS n,
       avg(score) AS mean_score, avg(score - first_score) AS drift,
       max(abs(score - first_score)) AS max_abs_change
FROM scored
GROUP BY run_id, agent_slug, metric_name;

CREATE VIEW v_judge_labels AS
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
JOIN judged j USING (run_id, case_id, metric_name);

CREATE VIEW v_judge_control_labels AS
SELECT s.run_id, s.agent_slug, e.prompt_version, s.control_id AS case_id, s.metric_name,
       'judge_control' AS labeler, s.judge_model, s.passed AS judge_passed,
       s.score AS judge_score, s.human_passed, s.human_score
FROM judge_control_scores s
JOIN eval_runs e USING (run_id)
WHERE s.error IS NULL AND (s.human_passed IS NOT NULL OR s.human_score IS NOT NULL);

CREATE MACRO holodeck_judge_agreement(labels, per_run) AS TABLE
WITH labels AS (
    SELECT CASE WHEN per_run THEN run_id ELSE '' END AS scope, run_id, case_id, agent_slug,
           metric_name, coalesce(judge_model, '') AS judge,
           any_value(judge_passed) AS judge_passed, any_value(judge_score) AS judge_score,
           CASE WHEN 2 * count(*) FILTER (WHERE human_passed) > count(human_passed) THEN true
                WHEN 2 * count(*) FILTER (WHERE NOT human_passed) > count(human_passed)
                THEN false END AS human_passed,
           avg(human_score) AS human_score
    FROM query_table(labels)
    GROUP BY ALL
),
verdicts AS (
    SELECT scope, agent_slug, metric_name, judge, count(*) AS n,
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
    SELECT scope, agent_slug, metric_name, judge, judge_score, human_score,
           rank() OVER g_j + (count(*) OVER (PARTITION BY scope, agent_slug, metric_name, judge,
                                                 judge_score) - 1) / 2.0 AS rank_j,
           rank() OVER g_h + (count(*) OVER (PARTITION BY scope, agent_slug, metric_name, judge,
                                                 human_score) - 1) / 2.0 AS rank_h
    FROM labels
    WHERE judge_score IS NOT NULL AND human_score IS NOT NULL
    WINDOW g_j AS (PARTITION BY scope, agent_slug, metric_name, judge ORDER BY judge_score),
           g_h AS (PARTITION BY scope, agent_slug, metric_name, judge ORDER BY human_score)
),
scores AS (
    SELECT scope, agent_slug, metric_name, judge, count(*) AS n_scores,
           corr(rank_j, rank_h) AS spearman_rho,
           avg(judge_score - human_score) AS mean_bias,
           stddev_samp(judge_score - human_score) AS sd_bias
    FROM scored
    GROUP BY ALL
)
SELECT
    coalesce(k.scope, s.scope) AS run_id,
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
FULL OUTER JOIN scores s USING (scope, agent_slug, metric_name, judge);

CREATE VIEW v_judge_agreement AS
SELECT * EXCLUDE (run_id) FROM holodeck_judge_agreement('v_judge_labels', false);

CREATE VIEW v_judge_control_agreement AS
SELECT * FROM holodeck_judge_agreement('v_judge_control_labels', true);
