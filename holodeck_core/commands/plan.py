"""``holodeck plan AGENT_YAML --detect 0.05``: how many cases and trials a comparison needs to
see a drop of that size, from the latest recorded run's variances (DESIGN §7.7-7.8)."""

from __future__ import annotations

import argparse
import sys

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
    plan.add_argument("--alpha", type=float, default=0.05, help="significance level")
    plan.add_argument("--power", type=float, default=0.8, help="wanted power (default 0.8)")
    plan.add_argument("--db", default=None, metavar="PATH", help="history database")
    plan.set_defaults(handler=run_plan_command)


def run_plan_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_core.history import store
    from holodeck_core.naming import slugify
    from holodeck_core.stats import plan_power

    if not 0 < args.detect < 1:
        raise ConfigError("--detect is a fraction between 0 and 1 (0.05 = 5 points)")
    if not 0 < args.alpha < 1 or not 0 < args.power < 1:
        raise ConfigError("--alpha and --power are between 0 and 1")
    loaded = load_agent(args.agent)
    db = Path(args.db) if args.db else Project.discover(loaded.base_dir).history_db
    slug = slugify(loaded.agent.name)
    with store.reader(db) as con:
        row = con.execute(
            "SELECT run_id, prompt_version FROM eval_runs WHERE agent_slug = ? "
            "ORDER BY finished_at DESC, run_id DESC LIMIT 1",
            [slug],
        ).fetchone()
        if row is None:
            raise ConfigError(
                f"no recorded run of {loaded.agent.name!r} in {db}: run `holodeck test "
                f"{args.agent}` (ideally with --trials 3 or more) first"
            )
        cases = con.execute(
            "SELECT pass_fraction, trials FROM v_case_trials WHERE run_id = ?", [row[0]]
        ).fetchall()
    trials = max(int(c[1]) for c in cases)
    plan = plan_power(
        [float(c[0]) for c in cases], trials, args.detect, alpha=args.alpha, power=args.power
    )
    out = sys.stdout
    out.write(
        f"from run {str(row[0])[:12]} (prompt {row[1]}): {plan.cases} cases x {trials} "
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
