"""The asset checks' shape in the UI: evaluated per partition (a cell: prompt version x model
candidate, ``holodeck_pipelines.cells``), each result naming its cell, the cells failing it
elsewhere, and when it was evaluated."""

import time
import warnings
from collections.abc import Iterable, Iterator

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import (  # not exported
    AssetCheckEvaluationTargetMaterializationData,
)

from holodeck_pipelines.cells import cell_of, labels
from holodeck_pipelines.verdicts import Skipped, Verdict


def partitioned_checks(
    asset: dg.AssetKey, partitions: dg.PartitionsDefinition, descriptions: dict[str, str]
) -> list[dg.AssetCheckSpec]:
    """Checks evaluated per partition (cell), so each cell's gate keeps its own
    result (a preview feature of Dagster 1.13: its warning is expected here)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(check, asset=asset, description=text, partitions_def=partitions)
            for check, text in descriptions.items()
        ]


def in_partition(
    instance: dg.DagsterInstance,
    asset: dg.AssetKey,
    check: dg.AssetCheckResult,
    partition: str,
    failing_elsewhere: list[str],
) -> dg.AssetCheckEvaluation:
    """The evaluation of ``check`` for one prompt version (a step may evaluate several: a
    single-run backfill), with its version named in the description and the metadata, for the
    pages that list check results without their partition. The asset's checks list shows a
    partitioned check as failed while any version fails it, so a passing version's
    description names the versions that fail (status and description then agree); the
    evaluation time is in the metadata (the UI's time of a check is when its run was planned,
    before the materialization it checks)."""
    others = [key for key in failing_elsewhere if key != partition]
    elsewhere = f" (failing for {labels(others)})" if others else ""
    return dg.AssetCheckEvaluation(
        asset_key=asset,
        check_name=check.check_name or "",
        passed=check.passed,
        severity=check.severity,
        description=f"{cell_of(partition).label}: {check.description}{elsewhere}",
        metadata={
            "partition": partition,
            **check.metadata,
            "evaluated_at": dg.MetadataValue.timestamp(time.time()),
            **({"failing_for": ", ".join(others)} if others else {}),
        },
        partition=partition,
        target_materialization_data=checked_materialization(instance, asset, partition),
    )


def checked_materialization(
    instance: dg.DagsterInstance, asset: dg.AssetKey, partition: str
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The version's materialization an evaluation checks (its latest, just written), as
    Dagster records it for a partitioned step's ``AssetCheckResult``: without it the asset's
    check status per partition counts the result as stale, neither passed nor failed."""
    latest = dg.AssetRecordsFilter(asset_key=asset, asset_partitions=[partition])
    records = instance.fetch_materializations(latest, limit=1).records
    if not records:
        return None
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=records[0].storage_id,
        run_id=records[0].event_log_entry.run_id,
        timestamp=records[0].timestamp,
    )


def evaluations(
    instance: dg.DagsterInstance, asset: dg.AssetKey, checked: dict[str, list[Verdict]]
) -> Iterator[dg.AssetCheckEvaluation]:
    """The evaluations of a step's partitions (``checked``: each partition's verdicts, in one
    order); the versions failing a check are those this step found failing and, of the
    others, those whose latest evaluation failed. A skipped check yields nothing: Dagster then
    shows it as skipped when the run succeeds (see :func:`skipped_checks`)."""
    first = next(iter(checked.values()), [])
    latest = [failing_partitions(instance, asset, check.check_name or "") for check in first]
    for partition, results in checked.items():
        for index, check in enumerate(results):
            if isinstance(check, Skipped):
                continue
            failing = {key for key, found in checked.items() if not found[index].passed}
            failing.update(key for key in latest[index] if key not in checked)
            yield in_partition(instance, asset, check, partition, sorted(failing))


def skipped_checks(results: list[Verdict]) -> dict[str, str]:
    """The checks a version's run could not evaluate, each with the reason: the
    ``checks skipped`` metadata of ``eval_history`` and its log."""
    return {r.check_name: r.reason for r in results if isinstance(r, Skipped)}


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


def failing_partitions(instance: dg.DagsterInstance, asset: dg.AssetKey, name: str) -> list[str]:
    """The prompt versions whose latest evaluation of the check ``name`` failed."""
    key = dg.AssetCheckKey(asset, name)
    return sorted(
        info.partition_key
        for info in instance.event_log_storage.get_asset_check_partition_info([key])
        if info.partition_key is not None and info.latest_execution_status.value == "FAILED"
    )


def skipped_table(skipped: dict[str, str]) -> dg.TableMetadataValue:
    """The skipped checks as a (check, reason) table beside the asset's other metadata."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({"check": c, "reason": why}) for c, why in skipped.items()],
        schema=dg.TableSchema(
            columns=[dg.TableColumn("check", "string"), dg.TableColumn("reason", "string")]
        ),
    )
