"""The asset checks' shape in the UI: evaluated per partition (prompt version), each result
naming its version, the versions failing it elsewhere, and when it was evaluated."""

import time
import warnings
from collections.abc import Iterable, Iterator

import dagster as dg


def partitioned_checks(
    asset: dg.AssetKey, partitions: dg.PartitionsDefinition, descriptions: dict[str, str]
) -> list[dg.AssetCheckSpec]:
    """Checks evaluated per partition (prompt version), so each version's gate keeps its own
    result (a preview feature of Dagster 1.13: its warning is expected here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(check, asset=asset, description=text, partitions_def=partitions)
            for check, text in descriptions.items()
        ]


def in_partition(
    asset: dg.AssetKey, check: dg.AssetCheckResult, partition: str, failing_elsewhere: list[str]
) -> dg.AssetCheckEvaluation:
    """The evaluation of ``check`` for one prompt version (a step may evaluate several: a
    single-run backfill), with its version named in the description and the metadata, for the
    pages that list check results without their partition. The asset's checks list shows a
    partitioned check as failed while any version fails it, so a passing version's
    description names the versions that fail (status and description then agree); the
    evaluation time is in the metadata (the UI's time of a check is when its run was planned,
    before the materialization it checks)."""
    others = [key for key in failing_elsewhere if key != partition]
    elsewhere = f" (failing for prompt version {', '.join(others)})" if others else ""
    return dg.AssetCheckEvaluation(
        asset_key=asset,
        check_name=check.check_name or "",
        passed=check.passed,
        severity=check.severity,
        description=f"prompt version {partition}: {check.description}{elsewhere}",
        metadata={
            "partition": partition,
            **check.metadata,
            "evaluated_at": dg.MetadataValue.timestamp(time.time()),
            **({"failing_for": ", ".join(others)} if others else {}),
        },
        partition=partition,
    )


def evaluations(
    instance: dg.DagsterInstance, asset: dg.AssetKey, checked: dict[str, list[dg.AssetCheckResult]]
) -> Iterator[dg.AssetCheckEvaluation]:
    """The evaluations of a step's partitions (``checked``: each partition's results, in one
    order); the versions failing a check are those this step found failing and, of the
    others, those whose latest evaluation failed."""
    first = next(iter(checked.values()), [])
    latest = [failing_partitions(instance, asset, check) for check in first]
    for partition, results in checked.items():
        for index, check in enumerate(results):
            failing = {key for key, found in checked.items() if not found[index].passed}
            failing.update(key for key in latest[index] if key not in checked)
            yield in_partition(asset, check, partition, sorted(failing))


def check_outputs(
    context: dg.AssetExecutionContext, asset: dg.AssetKey, names: Iterable[str]
) -> Iterator[dg.Output[None]]:
    """The (empty) output of each check the step evaluated, once: what Dagster yields for an
    ``AssetCheckResult``, which names no partition and so cannot serve a step of several."""
    for name in names:
        key = dg.AssetCheckKey(asset, name)
        yield dg.Output(
            None, output_name=context.assets_def.get_output_name_for_asset_check_key(key)
        )


def failing_partitions(
    instance: dg.DagsterInstance, asset: dg.AssetKey, check: dg.AssetCheckResult
) -> list[str]:
    """The prompt versions whose latest evaluation of the check failed."""
    key = dg.AssetCheckKey(asset, check.check_name or "")
    return sorted(
        info.partition_key
        for info in instance.event_log_storage.get_asset_check_partition_info([key])
        if info.partition_key is not None and info.latest_execution_status.value == "FAILED"
    )
