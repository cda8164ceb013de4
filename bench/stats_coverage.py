"""Simulated coverage of the run statistics' intervals (docs/cli.md).

    .venv/bin/python bench/stats_coverage.py [--reps 4000] [--seed 30] [--only pass|unit|score]

**Pass rate.**
For n cases and K trials per case, each case's true pass probability is drawn from a Beta
distribution with mean μ (concentration 2: cases differ a lot in difficulty, as real suites
do), its K trials are Bernoulli draws, and the run's 95% interval comes from
``holodeck_core.stats.pass_rate_estimate`` (the one implementation the CLI, reports and views
use). Coverage = the share of simulated runs whose interval holds μ. Prints one Markdown table
(rows n x K, columns μ) and the minimum; the figures go into docs/benchmarks.md. Seeded: every
run prints the same numbers.

**Means in a unit** (latency, cost; Hall's skewness-corrected t): each case's true mean is
drawn from a right-skewed distribution (lognormal, gamma, or two modes: fast answers and slow
tool-calling ones), its K trials scatter around it (lognormal, sigma 0.3, mean 1 times the
case's), the interval comes from ``mean_estimate(..., bounded=False)`` on the per-case means
and covers when it holds the distribution's mean.

**0-1 scores** (Wilson on the effective n): each case's true score is drawn from a Beta with
mean μ (concentration 10, and 2 as the hard case of scores piled against 1), its K trial
scores from a Beta of concentration 20 around it; ``mean_estimate`` on the per-case means.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from holodeck_core.stats import mean_estimate, pass_rate_estimate  # noqa: E402
from holodeck_core.stats.estimates import CaseOutcome  # noqa: E402

CASES = (10, 30, 100)
TRIALS = (1, 5)
MEANS = (0.5, 0.7, 0.8, 0.9, 0.95)
CONCENTRATION = 2.0
TRIAL_SIGMA = 0.3
UNITS: dict[str, tuple[Callable[[random.Random], float], float]] = {
    "lognormal sigma 0.5": (lambda r: r.lognormvariate(0.0, 0.5), math.exp(0.125)),
    "exponential": (lambda r: r.expovariate(1.0), 1.0),
    "gamma shape 2": (lambda r: r.gammavariate(2.0, 1.0), 2.0),
    "two modes": (
        lambda r: r.gauss(3000.0, 300.0) if r.random() < 0.3 else r.gauss(800.0, 100.0),
        0.3 * 3000.0 + 0.7 * 800.0,
    ),
    "lognormal sigma 1 (limit)": (lambda r: r.lognormvariate(0.0, 1.0), math.exp(0.5)),
}
"""name → (draw one case's true mean, the distribution's mean)."""
SCORE_MEANS = (0.5, 0.8, 0.95)
SCORE_CONCENTRATIONS = (10.0, 2.0)
TRIAL_CONCENTRATION = 20.0


def coverage(rng: random.Random, n: int, k: int, mu: float, reps: int) -> float:
    a, b = mu * CONCENTRATION, (1 - mu) * CONCENTRATION
    hits = 0
    for _ in range(reps):
        cases = []
        for i in range(n):
            p = rng.betavariate(a, b)
            cases.append(CaseOutcome(f"c{i}", sum(rng.random() < p for _ in range(k)), k))
        estimate = pass_rate_estimate(cases)
        assert estimate.low is not None and estimate.high is not None
        hits += estimate.low <= mu <= estimate.high
    return hits / reps


def unit_coverage(rng: random.Random, n: int, k: int, name: str, reps: int) -> float:
    draw, truth = UNITS[name]
    hits = 0
    for _ in range(reps):
        means = []
        for _ in range(n):
            m = max(draw(rng), 1e-9)
            shift = -(TRIAL_SIGMA**2) / 2  # trials average to the case's mean
            trials = (
                [m * rng.lognormvariate(shift, TRIAL_SIGMA) for _ in range(k)] if k > 1 else [m]
            )
            means.append(sum(trials) / k)
        e = mean_estimate(means, bounded=False)
        assert e.low is not None and e.high is not None
        hits += e.low <= truth <= e.high
    return hits / reps


def score_coverage(rng: random.Random, n: int, k: int, mu: float, c: float, reps: int) -> float:
    hits = 0
    for _ in range(reps):
        means = []
        for _ in range(n):
            p = min(max(rng.betavariate(mu * c, (1 - mu) * c), 1e-6), 1 - 1e-6)
            a, b = p * TRIAL_CONCENTRATION, (1 - p) * TRIAL_CONCENTRATION
            means.append(sum(rng.betavariate(a, b) for _ in range(k)) / k if k > 1 else p)
        e = mean_estimate(means)
        assert e.low is not None and e.high is not None
        hits += e.low <= mu <= e.high
    return hits / reps


def table(title: str, columns: list[str], cell: Callable[[int, int, int], float]) -> float:
    print(f"\n{title}\n")
    print("| n | K | " + " | ".join(columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    lowest = 1.0
    for n in CASES:
        for k in TRIALS:
            row = [cell(n, k, i) for i in range(len(columns))]
            lowest = min(lowest, *row)
            print(f"| {n} | {k} | " + " | ".join(f"{c:.3f}" for c in row) + " |")
    return lowest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--only", choices=("pass", "unit", "score"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    reps = args.reps
    if args.only in (None, "pass"):
        lowest = table(
            "pass rate", [f"μ = {mu}" for mu in MEANS],
            lambda n, k, i: coverage(rng, n, k, MEANS[i], reps),
        )  # fmt: skip
        print(f"\nminimum coverage {lowest:.3f} at nominal 0.95 ({reps} runs per cell)")
    if args.only in (None, "unit"):
        names = list(UNITS)
        lowest = table(
            "means in a unit (Hall's t)", names,
            lambda n, k, i: unit_coverage(rng, n, k, names[i], reps),
        )  # fmt: skip
        print(f"\nminimum coverage {lowest:.3f} at nominal 0.95 ({reps} runs per cell)")
    if args.only in (None, "score"):
        cells = [(mu, c) for c in SCORE_CONCENTRATIONS for mu in SCORE_MEANS]
        lowest = table(
            "0-1 scores (Wilson on the effective n)",
            [f"μ = {mu}, c = {c:g}" for mu, c in cells],
            lambda n, k, i: score_coverage(rng, n, k, *cells[i], reps),
        )  # fmt: skip
        print(f"\nminimum coverage {lowest:.3f} at nominal 0.95 ({reps} runs per cell)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
