-- Scalar macros: the numbers of holodeck_core/stats/ in SQL, by the same closed forms (the
-- tests hold the two to each other: tests/test_stats.py). Student-t quantiles to 1e-6 (the
-- table of defaults.T975, then the Cornish-Fisher series); the t-test's p-value by Simpson's
-- rule; McNemar's exact and mid-p values; Wilson's interval with continuity correction on the
-- (effective) n; Hall's skewness-corrected t interval for means in a unit; a run's tick (one
-- agent's nightly runs of one UTC day, or one run) for Benjamini-Hochberg families.

CREATE MACRO holodeck_t95(df) AS
    CASE
        WHEN df IS NULL OR df < 1 THEN NULL
        WHEN df <= {{ t975_rows }} THEN {{ t975_table_3 }}[df]
        ELSE 1.96 + 2.4 / df
    END;

CREATE MACRO holodeck_t975(df) AS
    CASE
        WHEN df IS NULL OR df < 1 THEN NULL
        WHEN df <= {{ t975_rows }} THEN {{ t975_table }}[df]
        ELSE list_transform([CAST(1.959963984540054 AS DOUBLE)], lambda z:
            z + (pow(z, 3) + z) / (4 * df)
              + (5 * pow(z, 5) + 16 * pow(z, 3) + 3 * z) / (96 * pow(df, 2))
              + (3 * pow(z, 7) + 19 * pow(z, 5) + 17 * pow(z, 3) - 15 * z) / (384 * pow(df, 3))
              + (79 * pow(z, 9) + 776 * pow(z, 7) + 1482 * pow(z, 5) - 1920 * pow(z, 3)
                 - 945 * z) / (92160 * pow(df, 4)))[1]
    END;

CREATE MACRO holodeck_t_pvalue(t, df) AS
    CASE
        WHEN t IS NULL OR df IS NULL OR df < 1 THEN NULL
        WHEN isinf(t) THEN 0.0
        ELSE greatest(0.0, 1 - 2 * exp(lgamma((df + 1) / 2.0) - lgamma(df / 2.0)) / sqrt(pi())
            * atan(abs(t) / sqrt(df)) / 3000.0
            * list_sum(list_transform(range(0, 1001), lambda i:
                (CASE WHEN i = 0 OR i = 1000 THEN 1 WHEN i % 2 = 1 THEN 4 ELSE 2 END)
                * pow(cos(i * atan(abs(t) / sqrt(df)) / 1000.0), df - 1))))
    END;

CREATE MACRO holodeck_mcnemar_p(only_a, only_b) AS
    CASE
        WHEN only_a + only_b = 0 THEN 1.0
        ELSE least(1.0, 2 * list_sum(list_transform(
            range(0, CAST(least(only_a, only_b) AS BIGINT) + 1),
            lambda i: exp(lgamma(only_a + only_b + 1) - lgamma(i + 1)
                     - lgamma(only_a + only_b - i + 1) - (only_a + only_b) * ln(2)))))
    END;

CREATE MACRO holodeck_mcnemar_midp(only_a, only_b) AS
    CASE
        WHEN only_a + only_b = 0 THEN 1.0
        ELSE least(1.0, list_sum(list_transform(
            range(0, CAST(least(only_a, only_b) AS BIGINT) + 1),
            lambda i: (CASE WHEN i = least(only_a, only_b) THEN 1 ELSE 2 END)
                      * exp(lgamma(only_a + only_b + 1) - lgamma(i + 1)
                            - lgamma(only_a + only_b - i + 1) - (only_a + only_b) * ln(2)))))
    END;

CREATE MACRO holodeck_n_eff(p, se, n, max_n) AS
    CASE
        WHEN n IS NULL OR p IS NULL THEN NULL
        WHEN n < 2 OR se IS NULL OR p <= 0 OR p >= 1 THEN CAST(n AS DOUBLE)
        WHEN se <= 0 THEN CAST(coalesce(max_n, n) AS DOUBLE)
        ELSE least(p * (1 - p) / (se * se), coalesce(max_n, 'inf'::DOUBLE))
             * pow(CAST(1.959963984540054 AS DOUBLE) / holodeck_t975(n - 1), 2)
    END;

CREATE MACRO holodeck_wilson_cc_low(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p - 1 / (2 * n) <= 0 THEN 0.0
        ELSE greatest(0.0, least(p, (2 * n * p + CAST(3.841458820694124 AS DOUBLE) - 1 - CAST(1.959963984540054 AS DOUBLE) * sqrt(greatest(0.0,
            CAST(3.841458820694124 AS DOUBLE) - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))) / (2 * (n + CAST(3.841458820694124 AS DOUBLE)))))
    END;

CREATE MACRO holodeck_wilson_cc_high(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p + 1 / (2 * n) >= 1 THEN 1.0
        ELSE least(1.0, greatest(p, (2 * n * p + CAST(3.841458820694124 AS DOUBLE) + 1 + CAST(1.959963984540054 AS DOUBLE) * sqrt(greatest(0.0,
            CAST(3.841458820694124 AS DOUBLE) + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))) / (2 * (n + CAST(3.841458820694124 AS DOUBLE)))))
    END;

CREATE MACRO holodeck_hall_inverse(v, b) AS
    CASE WHEN b = 0 THEN v ELSE 3.0 / b * (cbrt(1.0 + b * (v - b / 6.0)) - 1.0) END;

CREATE MACRO holodeck_hall_low(mean, se, skew, n) AS
    CASE WHEN n IS NULL OR n < 2 OR se IS NULL THEN NULL
         ELSE greatest(0.0, least(mean, mean - se * holodeck_hall_inverse(
             holodeck_t975(n - 1), coalesce(skew, 0.0) / sqrt(n)))) END;

CREATE MACRO holodeck_hall_high(mean, se, skew, n) AS
    CASE WHEN n IS NULL OR n < 2 OR se IS NULL THEN NULL
         ELSE greatest(mean, mean - se * holodeck_hall_inverse(
             -holodeck_t975(n - 1), coalesce(skew, 0.0) / sqrt(n))) END;

CREATE MACRO holodeck_tick(agent_slug, trigger, finished_at, run_id) AS
    CASE WHEN trigger = 'nightly'
         THEN agent_slug || ':nightly:' || CAST(CAST(finished_at AS DATE) AS VARCHAR)
         ELSE run_id END;
