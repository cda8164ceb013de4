"""``holodeck plan AGENT_YAML --detect 0.05``: how many cases and trials a comparison needs to
see a drop of that size, from the latest recorded run's variances (DESIGN §7.7-7.8)."""

from __future__ import annotations

import argparse
import sys

from holodeck_core.cli.history_option import add_history_arguments, history_from
from holodeck_core.defaults import ALPHA
from holodeck_core.errors import ConfigError, ExitCode


def add_plan_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    plan = commands.add_parser(
        "plan",
        help="cases and trials needed to detect a pass-rate drop (from the latest run)",
    )
    plan.add_argument("agent", metavar="AGENT_YAML")
    plan.add_argument(
        "--detect", type=float, default=0.05, metavar="D", help="drop to detect (0.05 = 5 points)"
    )
    plan.add_argument(
        "--alpha", type=float, default=ALPHA, help=f"significance level (default {ALPHA})"
    )
    plan.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    add_history_arguments(plan)
    plan.set_defaults(handler=run_plan_command)


def run_plan_command(args: argparse.Namespace) -> int:
    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.engine.plan import plan_from_history

    if not 0 < args.detect < 1:
        raise ConfigError("--detect is a fraction between 0 and 1 (0.05 = 5 points)")
    if not 0 < args.alpha < 1 or not 0 < args.power < 1:
        raise ConfigError("--alpha and --power are between 0 and 1")
    loaded = load_agent(args.agent)
    history = history_from(args, Project.discover(loaded.base_dir))
    found = plan_from_history(
        loaded, history, detect=args.detect, alpha=args.alpha, power=args.power
    )
    plan = found.plan
    out = sys.stdout
    out.write(
        f"from run {found.run_id[:12]} (prompt {found.prompt_version}): {plan.cases} cases x "
        f"{found.trials} "
        f"trial(s), pass rate {plan.pass_rate:.1%}\n"
        f"to detect a drop of {plan.detect:.1%} at alpha {plan.alpha} with "
        f"{plan.power:.0%} power (paired comparison, `holodeck history compare`):\n"
    )
    for r in plan.rows:
        needed = "more than 1,000,000" if r.cases_needed is None else f"{r.cases_needed:,}"
        now = "" if r.power_now is None else f" (power with {plan.cases} cases: {r.power_now:.0%})"
        out.write(f"  {r.trials:>3} trial(s) per case: {needed} cases{now}\n")
    out.write("assumptions:\n" + "".join(f"  - {a}\n" for a in plan.assumptions))
    return ExitCode.OK
