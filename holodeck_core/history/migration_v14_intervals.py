"""Schema version 14: intervals of means with no spread, and of fewer than one effective
failure or pass (docs/cli.md#trials-and-error-bars).

Schema 5's ``holodeck_n_eff`` shrank n by (z / t(n - 1))² even when the cases showed no spread
(SE = 0), where no SE is estimated and the cases alone count: three scores of 0.2 got
n_eff = 0.6. Its Wilson macros, on such a fractional n, clamped an impossible upper bound to
the mean itself (a mean of 0.894 got "0.001 to 0.894"). Here an SE of 0 keeps n (n·K for pass
fractions), and a bound is 0 or 1 once the continuity correction 1/(2n) reaches past it, as it
does for 0 or n successes. Same names, same arguments; the views calling them are unchanged.
Frozen once released, like every migration."""

from __future__ import annotations

from holodeck_core.history.migration_v5_verdicts import Z2, Z975

N_EFF = f"""
CREATE OR REPLACE MACRO holodeck_n_eff(p, se, n, max_n) AS
    CASE
        WHEN n IS NULL OR p IS NULL THEN NULL
        WHEN n < 2 OR se IS NULL OR p <= 0 OR p >= 1 THEN CAST(n AS DOUBLE)
        WHEN se <= 0 THEN CAST(coalesce(max_n, n) AS DOUBLE)
        ELSE least(p * (1 - p) / (se * se), coalesce(max_n, 'inf'::DOUBLE))
             * pow({Z975} / holodeck_t975(n - 1), 2)
    END
"""

WILSON_CC_LOW = f"""
CREATE OR REPLACE MACRO holodeck_wilson_cc_low(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p - 1 / (2 * n) <= 0 THEN 0.0
        ELSE greatest(0.0, least(p, (2 * n * p + {Z2} - 1 - {Z975} * sqrt(greatest(0.0,
            {Z2} - 2 - 1 / n + 4 * p * (n * (1 - p) + 1)))) / (2 * (n + {Z2}))))
    END
"""

WILSON_CC_HIGH = f"""
CREATE OR REPLACE MACRO holodeck_wilson_cc_high(p, n) AS
    CASE
        WHEN p IS NULL OR n IS NULL THEN NULL
        WHEN n <= 0 OR p + 1 / (2 * n) >= 1 THEN 1.0
        ELSE least(1.0, greatest(p, (2 * n * p + {Z2} + 1 + {Z975} * sqrt(greatest(0.0,
            {Z2} + 2 - 1 / n + 4 * p * (n * (1 - p) - 1)))) / (2 * (n + {Z2}))))
    END
"""

STATEMENTS_V14: tuple[str, ...] = (N_EFF, WILSON_CC_LOW, WILSON_CC_HIGH)
DESCRIPTION_V14 = (
    "holodeck_n_eff keeps n when the cases show no spread; holodeck_wilson_cc_low/high are 0 "
    "or 1 once the continuity correction reaches past them"
)
