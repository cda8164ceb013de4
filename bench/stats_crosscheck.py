"""Cross-check our standard errors (holodeck_core.stats) against Inspect AI's ``stderr()`` on
the same scores (docs/benchmarks.md, docs/cli.md).

    .venv/bin/python bench/stats_crosscheck.py [--inspect-python /tmp/inspect-venv/bin/python]

Inspect AI is never a project dependency: set it up in its own venv first,

    python3 -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai

The scores are synthetic and seeded (per-case pass probabilities from a Beta distribution,
Bernoulli trials; continuous judge-like scores), so every run compares the same numbers. Our
side runs here; Inspect's runs in its venv on the same values (JSON on stdin). Ends with one
``RATIOS`` line: ours / Inspect for each standard error (1.000000 = identical).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from holodeck_core.stats import mean_estimate, pass_rate_estimate  # noqa: E402
from holodeck_core.stats.estimates import CaseOutcome  # noqa: E402

INSPECT_SIDE = """
import json, sys
from inspect_ai.scorer import SampleScore, Score, stderr
data = json.load(sys.stdin)
out = {}
for name, rows in data.items():
    scores = [SampleScore(score=Score(value=v), sample_id=f"{c}-{t}", sample_metadata={"case": c})
              for c, t, v in rows]
    per_case = {}
    for c, _, v in rows:
        per_case.setdefault(c, []).append(v)
    reduced = [SampleScore(score=Score(value=sum(v) / len(v)), sample_id=c)
               for c, v in per_case.items()]
    out[name] = {"clustered": stderr(cluster="case")(scores), "epochs_mean": stderr()(reduced)}
json.dump(out, sys.stdout)
"""


def datasets(seed: int, cases: int) -> dict[str, list[tuple[str, int, float]]]:
    rng = random.Random(seed)
    out: dict[str, list[tuple[str, int, float]]] = {}
    for name, trials in (("pass_k1", 1), ("pass_k5", 5)):
        rows = []
        for c in range(cases):
            p = rng.betavariate(2, 1)
            rows += [(f"c{c}", t, float(rng.random() < p)) for t in range(trials)]
        out[name] = rows
    rows = []
    for c in range(cases):
        center = rng.betavariate(5, 2)
        rows += [(f"c{c}", t, min(1.0, max(0.0, rng.gauss(center, 0.1)))) for t in range(3)]
    out["score_k3"] = rows
    return out


def ours(rows: list[tuple[str, int, float]]) -> dict[str, float]:
    per_case: dict[str, list[float]] = {}
    for c, _, v in rows:
        per_case.setdefault(c, []).append(v)
    means = [sum(v) / len(v) for v in per_case.values()]
    result = {"metric_se": mean_estimate(means).se or 0.0}
    if all(v in (0.0, 1.0) for _, _, v in rows):
        outcomes = [CaseOutcome(c, int(sum(v)), len(v)) for c, v in per_case.items()]
        result["pass_rate_se"] = pass_rate_estimate(outcomes).se or 0.0
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inspect-python", default="/tmp/inspect-venv/bin/python")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    data = datasets(args.seed, args.cases)
    try:
        proc = subprocess.run(
            [args.inspect_python, "-c", INSPECT_SIDE],
            input=json.dumps(data),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"Inspect AI is not set up at {args.inspect_python}: {exc}", file=sys.stderr)
        return 2
    if proc.returncode != 0:
        print(f"Inspect AI failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return 2
    inspect = json.loads(proc.stdout)
    ratios = []
    print(
        f"{'scores':<10} {'ours (case-clustered)':>22} {'inspect cluster=case':>21} "
        f"{'inspect epochs+mean':>20}  note"
    )
    for name, rows in data.items():
        mine = ours(rows)
        theirs = inspect[name]
        print(
            f"{name:<10} {mine['metric_se']:>22.6f} {theirs['clustered']:>21.6f} "
            f"{theirs['epochs_mean']:>20.6f}  metric mean (t interval)"
        )
        ratios.append((f"{name}/clustered", mine["metric_se"] / theirs["clustered"]))
        ratios.append((f"{name}/epochs", mine["metric_se"] / theirs["epochs_mean"]))
        if "pass_rate_se" in mine:
            note = "Wilson run (binomial SE, ddof 0)" if name == "pass_k1" else "pass rate"
            print(f"{'':<10} {mine['pass_rate_se']:>22.6f} {'':>21} {'':>20}  {note}")
            ratios.append((f"{name}/pass_rate", mine["pass_rate_se"] / theirs["epochs_mean"]))
    print("RATIOS " + " ".join(f"{key}={value:.6f}" for key, value in ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
