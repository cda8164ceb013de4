"""How many cases and trials a comparison needs to see a drop (``holodeck plan``), from the
latest recorded run's variances (DESIGN §7.7-7.8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError

if TYPE_CHECKING:
    from holodeck_core.config.loader import LoadedAgent
    from holodeck_core.history.store import History
    from holodeck_core.stats import PowerPlan


@dataclass(frozen=True)
class HistoryPlan:
    """A power plan and the recorded run it was computed from."""

    run_id: str
    prompt_version: str
    trials: int
    plan: PowerPlan


def plan_from_history(
    loaded: LoadedAgent, history: History, *, detect: float, alpha: float, power: float
) -> HistoryPlan:
    """The plan from the agent's newest run in ``history``, or a ConfigError saying which
    run to record first."""
    from holodeck_core.history import store
    from holodeck_core.naming import slugify
    from holodeck_core.stats import plan_power

    slug = slugify(loaded.agent.name)
    with store.reader(history) as con:
        row = con.execute(
            "SELECT run_id, prompt_version FROM eval_runs WHERE agent_slug = ? "
            "ORDER BY finished_at DESC, run_id DESC LIMIT 1",
            [slug],
        ).fetchone()
        if row is None:
            raise ConfigError(
                f"no recorded run of {loaded.agent.name!r} in {history}: run `holodeck test "
                f"{loaded.display}` (ideally with --trials 3 or more) first"
            )
        cases = con.execute(
            "SELECT pass_fraction, trials FROM v_case_trials WHERE run_id = ?", [row[0]]
        ).fetchall()
    trials = max(int(c[1]) for c in cases)
    plan = plan_power([float(c[0]) for c in cases], trials, detect, alpha=alpha, power=power)
    return HistoryPlan(str(row[0]), str(row[1]), trials, plan)
