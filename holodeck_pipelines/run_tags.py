"""What a run's tags say (what started it, its trials) and the tags a run is given when it was
launched without ours, so every run reads and filters alike."""

from collections.abc import Mapping

import dagster as dg

from holodeck_core.defaults import TRIALS_MAX, TRIALS_MIN
from holodeck_core.models import Trigger

TRIGGER_TAG = "holodeck/trigger"
TRIALS_TAG = "holodeck/trials"
AGENT_TAG = "holodeck/agent"
BACKFILL_TAG = "dagster/backfill"
ESTIMATE_TAG = "holodeck/estimate_usd"
ESTIMATE_JSON_TAG = "holodeck/estimate"
"""Each version's estimate (a JSON object by partition key), read back by the agent step."""


def trigger_of(tags: Mapping[str, str]) -> Trigger:
    """What started a run, from its tags: ours where we launched it, else Dagster's own
    (a backfill, a schedule, a sensor); a run launched by hand in the UI has none."""
    if TRIGGER_TAG in tags:
        return Trigger(tags[TRIGGER_TAG])
    if BACKFILL_TAG in tags:
        return Trigger.BACKFILL
    if "dagster/schedule_name" in tags:
        return Trigger.NIGHTLY
    if "dagster/sensor_name" in tags:
        return Trigger.SENSOR
    return Trigger.MANUAL


def label_run(context: dg.AssetExecutionContext, tags: Mapping[str, object]) -> None:
    """Give a run launched without our tags (a plain materialization from the UI, a
    re-execution) the tags the demo, the schedule and the sensor set, with the values this run
    assumed (its agent, trigger and trials), so every run reads and filters alike."""
    missing = {key: str(value) for key, value in tags.items() if key not in context.run.tags}
    if missing:
        context.instance.add_run_tags(context.run.run_id, missing)
        context.log.info(f"run tags added (what this run assumed): {missing}")


def trials_of(context: dg.AssetExecutionContext) -> int | None:
    """``holodeck/trials: K`` on the run overrides ``execution.trials``."""
    value = context.run.tags.get(TRIALS_TAG)
    if value is None:
        return None
    if not value.isdigit() or not TRIALS_MIN <= int(value) <= TRIALS_MAX:
        raise dg.Failure(
            description=f"tag {TRIALS_TAG}={value!r}: give an integer {TRIALS_MIN}-{TRIALS_MAX}"
        )
    return int(value)
