"""``holodeck plan AGENT_YAML [--model NAME] [--trials K] [--prompt-version V ...] [--batch M]
[--detect 0.05]``:
what the run will cost (calls, tokens and dollars per heading, from the history's measured
spend per case, else from the prompt and case sizes; at the batch prices when its calls
batch), and with ``--detect`` how many cases and trials a
comparison needs to see a drop of that size, from the latest recorded run's variances, and
what those cost (docs/cli.md, docs/cost.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from holodeck_core.cli.argtypes import trial_count
from holodeck_core.cli.history_option import add_history_arguments, history_from
from holodeck_core.cli.model_option import add_model_option
from holodeck_core.defaults import ALPHA, BATCH_MODES, TRIALS, TRIALS_MAX, TRIALS_MIN
from holodeck_core.engine import points, usd
from holodeck_core.errors import ConfigError, ExitCode

if TYPE_CHECKING:
    from holodeck_core.engine.plan import CostEstimate


def add_plan_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    plan = commands.add_parser(
        "plan",
        help="expected calls, tokens and dollars of a run; with --detect, the cases and "
        "trials needed to detect a pass-rate drop",
    )
    plan.add_argument("agent", metavar="AGENT_YAML")
    plan.add_argument(
        "--trials",
        type=trial_count,
        metavar="K",
        help=f"trials per case, {TRIALS_MIN} to {TRIALS_MAX} (default: the agent's)",
    )
    plan.add_argument(
        "--prompt-version",
        dest="prompt_keys",
        action="append",
        metavar="V",
        help="a registered prompt version (repeat for several; default: the current prompt)",
    )
    plan.add_argument("--detect", type=float, metavar="D", help="drop to detect (0.05 = 5 points)")
    plan.add_argument(
        "--alpha", type=float, default=ALPHA, help=f"significance level (default {ALPHA})"
    )
    plan.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    plan.add_argument(
        "--batch",
        choices=BATCH_MODES,
        help="price the run as `holodeck test --batch` would run it: its agent and judge "
        "calls at the batch prices (default: the agent's batch mode; docs/cost.md)",
    )
    add_model_option(plan)
    add_history_arguments(plan)
    plan.set_defaults(handler=run_plan_command)


def run_plan_command(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.engine.plan import estimate_versions, plan_from_history

    if args.detect is not None and not 0 < args.detect < 1:
        raise ConfigError("--detect is a fraction between 0 and 1 (0.05 = 5 points)")
    if not 0 < args.alpha < 1 or not 0 < args.power < 1:
        raise ConfigError("--alpha and --power are between 0 and 1")
    loaded = load_agent(args.agent, model=args.model)
    project = Project.discover(loaded.base_dir)
    history = history_from(args, project)
    execution = loaded.agent.execution
    trials = args.trials or (execution.trials if execution else None) or TRIALS
    out = sys.stdout
    estimates = []
    keys = args.prompt_keys or [None]
    for estimate in estimate_versions(loaded, project, history, keys, trials, args.batch):
        estimates.append(estimate)
        out.write("".join(f"{line}\n" for line in estimate_lines(estimate)))
    if len(estimates) > 1:
        out.write(f"all {len(estimates)} versions: {usd(_sum_usd(estimates))}\n")
    if args.detect is None:
        return ExitCode.OK
    found = plan_from_history(
        loaded, history, detect=args.detect, alpha=args.alpha, power=args.power
    )
    plan = found.plan
    per_trial = estimates[0].per_case_trial_usd()
    out.write(
        f"from run {found.run_id[:12]} (prompt {found.prompt_version} · model "
        f"{found.model_candidate}, the newest run of this configuration): {plan.cases} cases x "
        f"{found.trials} "
        f"trial(s), pass rate {plan.pass_rate:.1%}\n"
        f"to detect a drop of {points(plan.detect, sign=False)} at alpha {plan.alpha} with "
        f"{plan.power:.0%} power (paired comparison, `holodeck history compare`):\n"
    )
    for r in plan.rows:
        needed = "more than 1,000,000" if r.cases_needed is None else f"{r.cases_needed:,}"
        now = "" if r.power_now is None else f" (power with {plan.cases} cases: {r.power_now:.0%})"
        cost = ""
        if r.cases_needed is not None:
            dollars = None if per_trial is None else per_trial * r.cases_needed * r.trials
            cost = f", about {usd(dollars)} a run"
        out.write(f"  {r.trials:>3} trial(s) per case: {needed} cases{now}{cost}\n")
    out.write("assumptions:\n" + "".join(f"  - {a}\n" for a in plan.assumptions))
    for warning in found.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    return ExitCode.OK


def estimate_lines(estimate: CostEstimate) -> list[str]:
    source = (
        "sizes of the prompt and the cases (no run with costs recorded: a rough estimate)"
        if estimate.source == "sizes"
        else f"the measured spend per case of {estimate.source}"
    )
    lines = [
        f"prompt {estimate.prompt_version}: {estimate.cases} cases x {estimate.trials} "
        f"trial(s), from {source}"
        + (", the agent's and judges' calls at the batch prices:" if estimate.batch else ":")
    ]
    for name, cost in estimate.headings.items():
        lines.append(
            f"  {name:<12} {cost.calls:>7,} calls {cost.tokens:>11,} tokens  {usd(cost.usd)}"
        )
    calls = sum(c.calls for c in estimate.headings.values())
    tokens = sum(c.tokens for c in estimate.headings.values())
    lines.append(
        f"  {'total':<12} {calls:>7,} calls {tokens:>11,} tokens  {usd(estimate.total_usd)}"
    )
    if {"judge", "embedding"} & estimate.headings.keys():
        lines.append(
            "  (with cold caches: judge answers and embeddings already cached are not paid "
            "again, so a run after a run of the same answers costs less)"
        )
    return lines


def _sum_usd(estimates: list[CostEstimate]) -> float | None:
    values = [e.total_usd for e in estimates]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)
