"""holodeck_core.stats against scipy and by hand, and the SQL macros against the module."""

from __future__ import annotations

import math
import statistics

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from holodeck_core.history import schema
from holodeck_core.stats import (
    Reducer,
    Verdict,
    mean_estimate,
    paired_comparison,
    pass_at_k,
    pass_hat_k,
    plan_power,
    reduce_status,
    run_statistics,
    wilson,
)
from holodeck_core.stats.estimates import CaseOutcome, t975, t_quantile
from holodeck_core.stats.intervals import effective_n, hall_t, skewness, wilson_cc
from holodeck_core.stats.paired import mcnemar_midp
from holodeck_core.stats.power import paired_power


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (
            ["PASS", "PASS", "PASS", "FAIL", "FAIL"],
            {"all": "FAIL", "majority": "PASS", "any": "PASS"},
        ),
        (["PASS", "PASS", "FAIL", "FAIL"], {"all": "FAIL", "majority": "FAIL", "any": "PASS"}),
        (["PASS"] * 3, {"all": "PASS", "majority": "PASS", "any": "PASS"}),
        (["FAIL"] * 3, {"all": "FAIL", "majority": "FAIL", "any": "FAIL"}),
        (["PASS", "ERROR", "PASS"], {"all": "ERROR", "majority": "ERROR", "any": "ERROR"}),
    ],
)
def test_reducers(statuses: list[str], expected: dict[str, str]) -> None:
    assert {r.value: reduce_status(statuses, r) for r in Reducer} == expected


def test_pass_at_k_and_pass_hat_k_are_the_unbiased_estimators() -> None:
    assert pass_at_k(3, 5, 1) == pytest.approx(0.6)
    assert pass_hat_k(3, 5, 1) == pytest.approx(0.6)
    assert pass_hat_k(3, 5, 5) == 0.0
    assert pass_at_k(3, 5, 5) == 1.0
    assert pass_at_k(0, 5, 3) == 0.0
    # pass@2 = 1 - C(2,2)/C(5,2) = 0.9; pass^2 = C(3,2)/C(5,2) = 0.3
    assert (pass_at_k(3, 5, 2), pass_hat_k(3, 5, 2)) == (pytest.approx(0.9), pytest.approx(0.3))


def test_wilson_equals_scipy_wilsoncc_and_the_clustered_interval_uses_the_effective_n() -> None:
    w = wilson(7, 20)
    ci = sps.binomtest(7, 20).proportion_ci(0.95, method="wilsoncc")
    assert (w.low, w.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert wilson(20, 20).high == 1.0 and wilson(20, 20).low < 1.0
    assert wilson(0, 3).low == 0.0 and wilson(0, 3).high < 1.0
    x = [0.6, 1.0, 0.0, 0.4, 0.8, 1.0]
    e = mean_estimate(x, trials=5)
    p, se, n = sum(x) / len(x), sps.sem(x), len(x)
    # Korn & Graubard: n_eff = p(1-p)/SE², shrunk by (z / t(n-1))²
    n_eff = p * (1 - p) / se**2 * (sps.norm.ppf(0.975) / sps.t.ppf(0.975, n - 1)) ** 2
    assert (e.se, e.n_effective) == (pytest.approx(se), pytest.approx(n_eff))
    low, high = wilson_cc(p, n_eff, 1.959963984540054)
    assert (e.low, e.high) == (pytest.approx(low), pytest.approx(high))
    assert 0.0 <= e.low <= p <= e.high <= 1.0  # type: ignore[operator]
    assert "n = 6, interval method: Wilson score with continuity correction" in e.render()


def test_the_issue_30_examples_stay_on_their_scale() -> None:
    """4 cases x 5 trials at 0.9 gave "0.58 to 1.22"; a regex metric "-0.066 to 0.923"; a
    latency "-1.8 to 116.3 ms"."""
    rate = mean_estimate([1.0, 1.0, 0.6, 1.0], trials=5)
    assert rate.mean == pytest.approx(0.9) and rate.high is not None and rate.high <= 1.0
    assert rate.low is not None and 0.0 <= rate.low < 0.9
    regex = mean_estimate([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    assert regex.low is not None and regex.low >= 0.0
    ms = [1.0, 2.0, 120.0, 3.0, 160.0]
    latency = mean_estimate(ms, bounded=False)
    assert latency.method == "t_hall_skewness" and 0.0 <= latency.low < latency.mean  # type: ignore[operator]
    assert "n = 5, interval method: Student t with Hall's skewness correction" in latency.render()
    # by hand (Hall 1992): b = g1/√n, g⁻¹(v) = (3/b)(∛(1 + b(v - b/6)) - 1), x̄ - SE·g⁻¹(±t)
    m, se, t = sum(ms) / 5, sps.sem(ms), sps.t.ppf(0.975, 4)
    b = sps.skew(ms) * (4 / 5) ** 1.5 / math.sqrt(5)  # scipy's is over n, ours over s (n - 1)

    def g_inv(v: float) -> float:
        return 3 / b * (math.copysign(abs(1 + b * (v - b / 6)) ** (1 / 3), 1 + b * (v - b / 6)) - 1)

    assert latency.high == pytest.approx(m - se * g_inv(-t))
    assert latency.high > m + t * se  # right skew: longer above than the plain t interval


@given(
    st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=100),
)
@settings(max_examples=400, deadline=None)
def test_every_pass_rate_interval_is_inside_0_1_and_holds_the_estimate(
    passes: list[int], trials: int
) -> None:
    cases = [CaseOutcome(f"c{i}", min(c, trials), trials) for i, c in enumerate(passes)]
    e = run_statistics(cases, trials=trials).pass_rate
    assert e.low is not None and e.high is not None
    assert 0.0 <= e.low <= e.mean <= e.high <= 1.0


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=60))
@settings(max_examples=300, deadline=None)
def test_every_score_interval_is_inside_0_1_and_holds_the_mean(scores: list[float]) -> None:
    e = mean_estimate(scores)
    assert e.low is not None and e.high is not None
    assert 0.0 <= e.low <= e.mean + 1e-12 and e.mean - 1e-12 <= e.high <= 1.0


@given(
    st.lists(
        st.floats(min_value=0.0, max_value=1e6, allow_subnormal=False), min_size=1, max_size=60
    )
)
@settings(max_examples=300, deadline=None)
def test_every_unit_interval_is_at_least_0_and_holds_the_mean(values: list[float]) -> None:
    e = mean_estimate(values, bounded=False)
    if len(values) < 2:
        assert e.low is None and e.high is None  # one case: no spread to measure
        return
    assert e.low is not None and e.high is not None and e.method == "t_hall_skewness"
    assert 0.0 <= e.low <= e.mean * (1 + 1e-12) and e.mean * (1 - 1e-12) <= e.high


def test_run_statistics_per_design_7_7() -> None:
    cases = [
        CaseOutcome("a", 3, 5, {"bleu": 0.5}),
        CaseOutcome("b", 5, 5, {"bleu": 0.9}),
        CaseOutcome("c", 0, 5, {"bleu": 0.1}),
    ]
    s = run_statistics(cases, trials=5, reducer=Reducer.MAJORITY)
    assert s.pass_rate.mean == pytest.approx(1.6 / 3)
    assert s.pass_rate.method == "wilson_cc_effective_n"
    assert s.pass_at_k is not None and s.pass_hat_k is not None
    assert s.pass_at_k[1] == pytest.approx(1.6 / 3)
    assert s.pass_hat_k[5] == pytest.approx(1 / 3)
    assert s.pass_at_k[5] == pytest.approx(2 / 3)
    assert s.flaky_cases == ["a"]
    assert s.metrics["bleu"].mean == pytest.approx(0.5)
    one = run_statistics([CaseOutcome("a", 1, 1), CaseOutcome("b", 0, 1)])
    assert one.pass_rate.method == "wilson_cc" and one.pass_at_k is None


def test_paired_comparison_mcnemar_and_t() -> None:
    a = {f"c{i}": 1.0 for i in range(100)}
    b = {**a, **{f"c{i}": 0.0 for i in range(30)}}
    drop = paired_comparison(a, b, binary=True)
    assert drop.test == "mcnemar_midp" and drop.discordant == (30, 0)
    # mid-p: the exact binomial p-value less the probability of the observed count
    exact = sps.binomtest(0, 30, 0.5).pvalue
    assert drop.p_value == pytest.approx(exact - sps.binom.pmf(0, 30, 0.5))
    assert drop.verdict is Verdict.REGRESSION and drop.mean_diff == pytest.approx(-0.3)
    assert drop.high is not None and drop.high < 0
    mixed_a = {"x": 0.2, "y": 0.6, "z": 0.4, "w": 0.8}
    mixed_b = {"x": 0.4, "y": 0.6, "z": 0.2, "w": 1.0}
    t = paired_comparison(mixed_a, mixed_b)
    keys = sorted(mixed_a)
    ref = sps.ttest_rel([mixed_b[k] for k in keys], [mixed_a[k] for k in keys])
    assert t.test == "paired_t" and t.p_value == pytest.approx(ref.pvalue)
    assert t.verdict is Verdict.NO_CHANGE
    slower = paired_comparison(
        {"a": 100.0, "b": 110.0}, {"a": 200.0, "b": 211.0}, higher_is_better=False
    )
    assert slower.verdict is Verdict.REGRESSION  # every case got slower by ~100 ms


def test_power_plan_shrinks_with_trials_and_states_its_assumptions() -> None:
    plan = plan_power([0.6, 0.4, 1.0, 0.0, 0.8] * 10, 5, 0.05)
    by_k = {row.trials: row.cases_needed for row in plan.rows}
    assert by_k[1] is not None and by_k[10] is not None and by_k[1] > by_k[5] > by_k[10]
    row = next(r for r in plan.rows if r.trials == 5)
    assert row.cases_needed is not None
    assert paired_power(row.cases_needed, row.sd_diff, 0.05) >= 0.8
    assert paired_power(row.cases_needed - 1, row.sd_diff, 0.05) < 0.8
    assert any("paired" in line for line in plan.assumptions)
    with pytest.raises(ValueError, match="fraction"):
        plan_power([1.0], 1, 5)


def test_t975_equals_scipy_without_importing_it() -> None:
    for df in (1, 2, 5, 29, 30, 31, 99, 500, 1999, 10**6):
        assert t975(df) == pytest.approx(sps.t.ppf(0.975, df), rel=3e-7), df
    assert t_quantile(0.9, 7) == pytest.approx(sps.t.ppf(0.95, 7))  # other levels: scipy


def test_sql_macros_equal_scipy() -> None:
    con = duckdb.connect()
    schema.create(con)
    for df in (1, 2, 5, 29, 30, 31, 99, 500):
        (t,) = con.execute("SELECT holodeck_t975(?)", [df]).fetchone() or (None,)
        assert t == pytest.approx(sps.t.ppf(0.975, df), abs=1e-6)
        for stat in (0.0, 0.5, 1.96, 3.0, -4.2, 12.0):
            (p,) = con.execute("SELECT holodeck_t_pvalue(?, ?)", [stat, df]).fetchone() or (None,)
            assert p == pytest.approx(2 * sps.t.sf(abs(stat), df), abs=1e-7), (stat, df)
    for b, c in ((0, 0), (3, 1), (30, 0), (10, 12), (41, 37)):
        (p,) = con.execute("SELECT holodeck_mcnemar_p(?, ?)", [b, c]).fetchone() or (None,)
        expected = sps.binomtest(min(b, c), b + c, 0.5).pvalue if b + c else 1.0
        assert p == pytest.approx(expected, abs=1e-12), (b, c)
    for b, c in ((0, 0), (3, 1), (1, 3), (30, 0), (10, 12), (41, 37), (5, 5)):
        (p,) = con.execute("SELECT holodeck_mcnemar_midp(?, ?)", [b, c]).fetchone() or (None,)
        low, n = min(b, c), b + c
        by_hand = (
            min(1.0, 2 * sps.binom.cdf(low, n, 0.5) - sps.binom.pmf(low, n, 0.5)) if n else 1.0
        )
        assert p == pytest.approx(by_hand, abs=1e-12) and mcnemar_midp(b, c) == pytest.approx(p)
    assert math.isclose(
        con.execute("SELECT holodeck_t_pvalue('inf'::DOUBLE, 3)").fetchone()[0],  # type: ignore[index]
        0.0,
    )


def test_sql_interval_macros_equal_the_module() -> None:
    con = duckdb.connect()
    schema.create(con)
    z = 1.959963984540054
    for n in (1, 2, 3, 7, 12, 30, 31, 250):
        for p in (0.0, 0.01, 0.25, 0.5, 0.9, 0.999, 1.0):
            for se in (0.0, 1e-4, 0.05, 0.3):
                for max_n in (float(n), 5.0 * n, None):
                    got = con.execute(
                        "SELECT holodeck_n_eff(?, ?, ?, ?)", [p, se, n, max_n]
                    ).fetchone()
                    expected = float(n) if n < 2 else effective_n(p, se, n, max_n, t975(n - 1), z)
                    assert got is not None and got[0] == pytest.approx(expected, rel=1e-6)
                    low, high = wilson_cc(p, expected, z)
                    row = con.execute(
                        "SELECT holodeck_wilson_cc_low(?, ?), holodeck_wilson_cc_high(?, ?)",
                        [p, expected, p, expected],
                    ).fetchone()
                    assert row == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


def test_sql_hall_macros_equal_the_module() -> None:
    con = duckdb.connect()
    schema.create(con)
    samples = (
        [1.0, 2.0, 120.0, 3.0, 160.0],
        [57.0, 61.0, 55.0, 59.0],
        [0.0, 0.0, 0.0, 0.0012],
        [5.0, 5.0, 5.0],
        [900.0, 820.0, 3100.0, 760.0, 2900.0, 810.0, 870.0, 3050.0, 790.0, 840.0, 880.0],
        [10.0, 9.0, 9.5, 1.0],  # skewed to the left
    )
    for values in samples:
        n = len(values)
        e = mean_estimate(values, bounded=False)
        sd = statistics.stdev(values)
        skew = skewness(values, e.mean, sd)
        assert (e.low, e.high) == pytest.approx(
            hall_t(e.mean, sd / math.sqrt(n), skew, n, t975(n - 1))
        )
        row = con.execute(
            "SELECT holodeck_hall_low(?, ?, ?, ?), holodeck_hall_high(?, ?, ?, ?)",
            [e.mean, e.se, skew, n] * 2,
        ).fetchone()
        assert row == (pytest.approx(e.low, abs=1e-9), pytest.approx(e.high, rel=1e-9)), values
    assert con.execute("SELECT holodeck_hall_low(1.0, 0.5, 0.0, 1)").fetchone() == (None,)


@pytest.mark.parametrize("n", [0.3, 0.6, 0.9, 1.0, 1.5, 2.0, 3.0, 4.8, 21.6])
def test_wilson_on_a_fractional_n_holds_the_mean_strictly(n: float) -> None:
    """On an effective n below 2 the closed form has no root for a bound near 0 or 1: it
    gave the mean itself (a mean of 0.894 with "CI 0.001 to 0.894"); the SQL macros agree."""
    con = duckdb.connect()
    schema.create(con)
    z = 1.959963984540054
    for p in (0.01, 0.202, 0.5, 0.894, 0.99):
        low, high = wilson_cc(p, n, z)
        assert 0.0 <= low < p < high <= 1.0, (p, n, low, high)
        row = con.execute(
            "SELECT holodeck_wilson_cc_low(?, ?), holodeck_wilson_cc_high(?, ?)", [p, n, p, n]
        ).fetchone()
        assert row == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))


@pytest.mark.parametrize("score", [0.2023, 0.5, 0.894])
@pytest.mark.parametrize("cases", [2, 3, 8])
def test_scores_without_spread_count_every_case(score: float, cases: int) -> None:
    """Every case scoring alike estimates no SE, so no degrees of freedom shrink n: three
    scores of 0.2023 are n_eff 3, not 0.6, and the interval holds the mean inside."""
    e = mean_estimate([score] * cases)
    assert e.n_effective == pytest.approx(cases)
    assert (e.low, e.high) == pytest.approx(wilson_cc(score, cases, 1.959963984540054))
    assert e.low is not None and e.high is not None and e.low < score < e.high <= 1.0
