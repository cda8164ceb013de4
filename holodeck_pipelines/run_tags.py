"""What a run's tags say (what started it, its trials) and the tags a run is given when it was
launched without ours, so every run reads and filters alike.

A run's tags can be set by hand in the launchpad, so they are read once at each step's start
(:func:`run_settings`) and a bad one fails the step before any model call, naming the tag, its
value and what it accepts (docs/cost.md). The estimate's tags are the project's own: written
by ``processed_files``, never read back as the run's estimate."""

import re
from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from holodeck_core.defaults import TRIALS_MAX, TRIALS_MIN
from holodeck_core.models import Trigger
from holodeck_core.tools.untrusted import shown_name

TRIGGER_TAG = "holodeck/trigger"
TRIALS_TAG = "holodeck/trials"
AGENT_TAG = "holodeck/agent"
BACKFILL_TAG = "dagster/backfill"
ESTIMATE_TAG = "holodeck/estimate_usd"
ESTIMATE_JSON_TAG = "holodeck/estimate"
"""Each version's estimate (a JSON object by partition key), for people reading the run."""
PROJECT_TAGS = (ESTIMATE_TAG, ESTIMATE_JSON_TAG)
"""Tags only the project writes: a value given at launch is replaced (with a warning)."""
DAGSTER_TRIGGERS = (Trigger.MANUAL, Trigger.NIGHTLY, Trigger.SENSOR, Trigger.BACKFILL)
"""What ``holodeck/trigger`` may say of a Dagster run."""
_DIGITS = re.compile(r"[0-9]{1,9}")


class BadRunTag(ValueError):
    """A ``holodeck/*`` run tag a step cannot run with."""

    def __init__(self, tag: str, value: str, allowed: str) -> None:
        super().__init__(
            f"run tag {tag}={shown_name(value)!r} is not allowed: give {allowed} "
            "(or remove the tag)"
        )


@dataclass(frozen=True)
class RunSettings:
    """What a run's tags set: its trigger, and its trials (None: the agent's)."""

    trigger: Trigger
    trials: int | None


def run_settings(tags: Mapping[str, str], agent: str) -> RunSettings:
    """The run's settings from its tags (:class:`BadRunTag` for the first bad one)."""
    given = tags.get(AGENT_TAG)
    if given is not None and given != agent:
        raise BadRunTag(AGENT_TAG, given, f"{agent!r} (this job's agent)")
    return RunSettings(trigger=trigger_of(tags), trials=trials_of(tags))


def trigger_of(tags: Mapping[str, str]) -> Trigger:
    """What started a run, from its tags: ours where we launched it, else Dagster's own
    (a backfill, a schedule, a sensor); a run launched by hand in the UI has none."""
    if TRIGGER_TAG in tags:
        value = tags[TRIGGER_TAG]
        if value not in DAGSTER_TRIGGERS:
            raise BadRunTag(TRIGGER_TAG, value, f"one of {', '.join(DAGSTER_TRIGGERS)}")
        return Trigger(value)
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


def trials_of(tags: Mapping[str, str]) -> int | None:
    """``holodeck/trials: K`` on the run overrides ``execution.trials``."""
    value = tags.get(TRIALS_TAG)
    if value is None:
        return None
    if not _DIGITS.fullmatch(value) or not TRIALS_MIN <= int(value) <= TRIALS_MAX:
        raise BadRunTag(TRIALS_TAG, value, f"an integer {TRIALS_MIN}-{TRIALS_MAX}")
    return int(value)


def replace_project_tags(context: dg.AssetExecutionContext, tags: Mapping[str, str]) -> None:
    """Set the project's own tags (the estimate), replacing a value given at launch: that one
    is never read, and a warning says it was ignored."""
    for key in PROJECT_TAGS:
        given = context.run.tags.get(key)
        if given is not None and given != tags.get(key):
            context.log.warning(
                f"run tag {key}={shown_name(given)!r} ignored: the project computes it"
            )
    context.instance.add_run_tags(context.run.run_id, dict(tags))
