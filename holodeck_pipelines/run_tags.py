"""What a run's tags say (what started it, its trials) and the tags a run is given when it was
launched without ours, so every run reads and filters alike.

A run's tags can be set by hand in the launchpad, so they are read once at each step's start
(:func:`run_settings`) and a bad one fails the step before any model call, naming the tag, its
value and what it accepts (docs/cost.md). The estimate's tags are the project's own: written
by ``processed_files``, never read back as the run's estimate."""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import dagster as dg

from holodeck_core.defaults import BATCH_MODES, MAX_VERSIONS_TAGGED, TRIALS_MAX, TRIALS_MIN
from holodeck_core.engine import shown_name
from holodeck_core.models import Trigger
from holodeck_core.models.agent import BatchMode

TRIGGER_TAG = "holodeck/trigger"
TRIALS_TAG = "holodeck/trials"
AGENT_TAG = "holodeck/agent"
BATCH_TAG = "holodeck/batch"
BACKFILL_TAG = "dagster/backfill"
ESTIMATE_TAG = "holodeck/estimate_usd"
PROMPT_VERSION_TAG = "holodeck/prompt_version"
PASS_RATE_TAG = "holodeck/pass_rate"
COST_TAG = "holodeck/cost_usd"
PROJECT_TAGS = (ESTIMATE_TAG, PROMPT_VERSION_TAG, PASS_RATE_TAG, COST_TAG)
"""Tags only the project writes, for the Runs list (docs/dagster.md): a value given at launch
is replaced (with a warning) when the project writes its own."""
RETIRED_TAGS = ("holodeck/estimate",)
"""Tags the project once wrote and no longer reads: a value given at launch is overwritten
with ``IGNORED``, so the Runs list never shows it as the run's."""
IGNORED = "ignored (given at launch)"
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
    """What a run's tags set: its trigger, its trials and batch mode (None: the agent's)."""

    trigger: Trigger
    trials: int | None
    batch: BatchMode | None = None


def run_settings(tags: Mapping[str, str], agent: str) -> RunSettings:
    """The run's settings from its tags (:class:`BadRunTag` for the first bad one)."""
    given = tags.get(AGENT_TAG)
    if given is not None and given != agent:
        raise BadRunTag(AGENT_TAG, given, f"{agent!r} (this job's agent)")
    return RunSettings(trigger=trigger_of(tags), trials=trials_of(tags), batch=batch_of(tags))


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


def batch_of(tags: Mapping[str, str]) -> BatchMode | None:
    """``holodeck/batch: off|auto|on`` on the run overrides the agent's batch mode (a
    scheduled or backfill run's is ``auto`` by default, docs/dagster.md)."""
    value = tags.get(BATCH_TAG)
    if value is None:
        return None
    if value not in BATCH_MODES:
        raise BadRunTag(BATCH_TAG, value, f"one of {', '.join(BATCH_MODES)}")
    return cast("BatchMode", value)


def replace_project_tags(context: dg.AssetExecutionContext, tags: Mapping[str, str]) -> None:
    """Set some of the project's own tags (``PROJECT_TAGS``), replacing a value given at
    launch: that one is never read, and a warning says it was ignored (so is a retired tag)."""
    retired = {key: IGNORED for key in RETIRED_TAGS if key in context.run.tags}
    for key, value in {**tags, **retired}.items():
        given = context.run.tags.get(key)
        if given is not None and given not in (value, IGNORED):
            why = "no longer read" if key in retired else "the project computes it"
            context.log.warning(f"run tag {key}={shown_name(given)!r} ignored: {why}")
    context.instance.add_run_tags(context.run.run_id, {**tags, **retired})


def versions_text(keys: Sequence[str]) -> str:
    """A run's prompt versions for a tag: ``v1, v2``, or ``v1 … v9 (9 versions)``."""
    if len(keys) <= MAX_VERSIONS_TAGGED:
        return ", ".join(keys)
    return f"{keys[0]} … {keys[-1]} ({len(keys)} versions)"
