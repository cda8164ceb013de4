"""holodeck_core.stats against scipy and by hand, and the SQL macros against the module."""

from __future__ import annotations

import math

import duckdb
import pytest
from scipy import stats as sps

from holodeck_core.history import migration_v4_stats
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


def test_wilson_and_the_clustered_interval_equal_scipy() -> None:
    w = wilson(7, 20)
    ci = sps.binomtest(7, 20).proportion_ci(0.95, method="wilson")
    assert (w.low, w.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert wilson(20, 20).high == pytest.approx(1.0) and wilson(20, 20).low < 1.0
    x = [0.6, 1.0, 0.0, 0.4, 0.8, 1.0]
    e = mean_estimate(x, clustered=True)
    low, high = sps.t.interval(0.95, len(x) - 1, loc=sum(x) / len(x), scale=sps.sem(x))
    assert (e.se, e.low, e.high) == (
        pytest.approx(sps.sem(x)),
        pytest.approx(low),
        pytest.approx(high),
    )


def test_run_statistics_per_design_7_7() -> None:
    cases = [
        CaseOutcome("a", 3, 5, {"bleu": 0.5}),
        CaseOutcome("b", 5, 5, {"bleu": 0.9}),
        CaseOutcome("c", 0, 5, {"bleu": 0.1}),
    ]
    s = run_statistics(cases, trials=5, reducer=Reducer.MAJORITY)
    assert s.pass_rate.mean == pytest.approx(1.6 / 3) and s.pass_rate.method == "clustered"
    assert s.pass_at_k is not None and s.pass_hat_k is not None
    assert s.pass_at_k[1] == pytest.approx(1.6 / 3)
    assert s.pass_hat_k[5] == pytest.approx(1 / 3)
    assert s.pass_at_k[5] == pytest.approx(2 / 3)
    assert s.flaky_cases == ["a"]
    assert s.metrics["bleu"].mean == pytest.approx(0.5)
    one = run_statistics([CaseOutcome("a", 1, 1), CaseOutcome("b", 0, 1)])
    assert one.pass_rate.method == "wilson" and one.pass_at_k is None


def test_paired_comparison_mcnemar_and_t() -> None:
    a = {f"c{i}": 1.0 for i in range(100)}
    b = {**a, **{f"c{i}": 0.0 for i in range(30)}}
    drop = paired_comparison(a, b, binary=True)
    assert drop.test == "mcnemar_exact" and drop.discordant == (30, 0)
    assert drop.p_value == pytest.approx(sps.binomtest(0, 30, 0.5).pvalue)
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
    for sql in (migration_v4_stats.T975, migration_v4_stats.T_PVALUE, migration_v4_stats.MCNEMAR_P):
        con.execute(sql)
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
    assert math.isclose(
        con.execute("SELECT holodeck_t_pvalue('inf'::DOUBLE, 3)").fetchone()[0],  # type: ignore[index]
        0.0,
    )
