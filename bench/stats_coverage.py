"""Simulated coverage of the pass-rate interval (issue 30, DESIGN §8.7).

    .venv/bin/python bench/stats_coverage.py [--reps 4000] [--seed 30]

For n cases and K trials per case, each case's true pass probability is drawn from a Beta
distribution with mean μ (concentration 2: cases differ a lot in difficulty, as real suites
do), its K trials are Bernoulli draws, and the run's 95% interval comes from
``holodeck_core.stats.pass_rate_estimate`` (the one implementation the CLI, reports and views
use). Coverage = the share of simulated runs whose interval holds μ. Prints one Markdown table
(rows n x K, columns μ) and the minimum; the figures go into docs/benchmarks.md. Seeded: every
run prints the same numbers.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from holodeck_core.stats import pass_rate_estimate  # noqa: E402
from holodeck_core.stats.estimates import CaseOutcome  # noqa: E402

CASES = (10, 30, 100)
TRIALS = (1, 5)
MEANS = (0.5, 0.7, 0.8, 0.9, 0.95)
CONCENTRATION = 2.0


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| n | K | " + " | ".join(f"μ = {mu}" for mu in MEANS) + " |")
    print("|---|---|" + "---|" * len(MEANS))
    lowest = 1.0
    for n in CASES:
        for k in TRIALS:
            row = [coverage(rng, n, k, mu, args.reps) for mu in MEANS]
            lowest = min(lowest, *row)
            print(f"| {n} | {k} | " + " | ".join(f"{c:.3f}" for c in row) + " |")
    print(f"\nminimum coverage {lowest:.3f} at nominal 0.95 ({args.reps} runs per cell)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
