"""Many comparisons (docs/cli.md): the verdicts of one family control the false
discovery rate (Benjamini-Hochberg; Holm as an option) and show raw and adjusted p; McNemar
is the mid-p test."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from scipy import stats as sps

from holodeck_core.history.regression import regression_check
from holodeck_core.stats import Verdict, paired_comparison
from holodeck_core.stats.multiple import Adjustment, adjust_pvalues
from holodeck_core.stats.paired import PairedComparison, adjust_family
from tests.history_helpers import day, ingest_runs, make_run, query

NIGHTS, CHECKS, CASES = 100, 20, 100


def night(rng: random.Random, drop: float = 0.0) -> list[PairedComparison]:
    """20 paired comparisons of runs from identical distributions (each case keeps its own
    difficulty in both runs); with ``drop``, the first one's B side passes that much less."""
    out = []
    for check in range(CHECKS):
        p = [rng.betavariate(4, 1.5) for _ in range(CASES)]
        shift = drop if check == 0 else 0.0
        a = {f"c{i}": float(rng.random() < pi) for i, pi in enumerate(p)}
        b = {f"c{i}": float(rng.random() < max(0.0, pi - shift)) for i, pi in enumerate(p)}
        out.append(paired_comparison(a, b, binary=True))
    return out


def flagged(comparisons: list[PairedComparison]) -> int:
    return sum(c.verdict is Verdict.REGRESSION for c in comparisons)


def test_twenty_null_checks_a_night_flag_at_most_one_and_a_planted_drop_is_found() -> None:
    rng = random.Random(30)
    raw = adjusted = 0
    for _ in range(NIGHTS):
        checks = night(rng)
        raw += flagged(checks)
        adjusted += flagged(adjust_family(checks, Adjustment.BH))
    # unadjusted, alpha = 0.05 over 20 two-sided checks: about half a false regression a night
    assert raw / NIGHTS > 0.2
    assert adjusted / NIGHTS <= 1.0 and adjusted / NIGHTS <= 0.1
    found = 0
    for _ in range(NIGHTS):
        checks = adjust_family(night(rng, drop=0.3), Adjustment.BH)
        found += checks[0].verdict is Verdict.REGRESSION
        assert all(c.p_adjusted is not None and c.p_value is not None for c in checks)
        assert all(c.p_adjusted >= c.p_value for c in checks)  # type: ignore[operator]
    assert found >= 0.9 * NIGHTS


def test_adjusted_p_values_equal_scipy_and_holm_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.2, 0.04]
    assert adjust_pvalues(p) == pytest.approx(list(sps.false_discovery_control(p)))
    # Holm: sorted 0.005, 0.01, 0.03, 0.04, 0.04, 0.2 times 6..1, running maximum
    assert adjust_pvalues(p, Adjustment.HOLM) == pytest.approx([0.05, 0.12, 0.12, 0.03, 0.2, 0.12])
    assert adjust_pvalues(p, Adjustment.NONE) == p
    one = paired_comparison({"a": 1.0, "b": 1.0}, {"a": 0.0, "b": 1.0}, binary=True)
    [alone] = adjust_family([one])
    assert alone.p_adjusted == alone.p_value and alone.family_size == 1
    assert "mid-p" in alone.render() and "Benjamini-Hochberg-adjusted p" in alone.render()


def test_the_checks_of_one_nightly_tick_are_one_family(tmp_path: Path) -> None:
    """Three prompt versions checked the same night: the view's p_adjusted is BH over the
    tick, and the no_regression check of the last run is decided on the same family."""
    db = tmp_path / "history.duckdb"
    cases = tuple(f"case-{i:02d}" for i in range(12))
    before, after = "P" * 12, {"v1": "P" * 12, "v2": "FFFFFPPPPPPP", "v3": "FFPPPPPPPPPP"}
    runs = []
    for k, version in enumerate(after):
        runs.append(make_run(before, day(0), run_id=f"old-{version}", prompt=version, cases=cases))
        runs.append(
            make_run(
                after[version],
                day(1).replace(hour=2, minute=k),
                run_id=f"new-{version}",
                prompt=version,
                cases=cases,
            )
        )
    ingest_runs(db, runs)
    rows = query(
        db,
        "SELECT head_run_id, p_value, p_adjusted, family_size, verdict FROM v_run_comparisons "
        "WHERE head_run_id LIKE 'new-%' ORDER BY head_run_id",
    )
    raw = [r[1] for r in rows]
    assert [r[2] for r in rows] == pytest.approx(list(sps.false_discovery_control(raw)))
    assert {r[3] for r in rows} == {3}
    check = regression_check(db, "new-v2")
    assert check.comparison is not None and check.comparison.paired is not None
    tested = check.comparison.paired.pass_fraction
    assert tested.family_size == 3 and tested.p_value == pytest.approx(raw[1])
    assert tested.p_adjusted == pytest.approx(rows[1][2])
    assert tested.verdict.value == rows[1][4]
