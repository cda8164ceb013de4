"""What the Dagster tests read back from a real instance: the asset checks a run evaluated and
the runs a schedule's tick requests."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dagster as dg


def check_evaluations(
    result: dg.ExecuteInProcessResult, check: str | None = None
) -> list[dg.AssetCheckEvaluation]:
    """Every asset check evaluation of the run, in order; only ``check``'s when given."""
    found: list[Any] = [
        e.asset_check_evaluation_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    return [data for data in found if check is None or data.check_name == check]


def by_check(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    """The run's check evaluations by check name (the last of each)."""
    return {data.check_name: data for data in check_evaluations(result)}


def schedule_requests(
    defs: dg.Definitions, schedule_name: str, tick: datetime
) -> list[dg.RunRequest]:
    """The runs the schedule requests at ``tick``, evaluated on a throwaway instance."""
    schedule = defs.resolve_schedule_def(schedule_name)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(
            instance=instance,
            resources=defs.resources,
            scheduled_execution_time=tick,
            repository_def=defs.get_repository_def(),
        ) as context,
    ):
        return list(schedule.evaluate_tick(context).run_requests or [])
