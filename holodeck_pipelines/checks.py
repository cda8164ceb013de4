"""The asset checks' shape in the UI: evaluated per partition (prompt version), each result
naming its version, the versions failing it elsewhere, and when it was evaluated."""

import time
import warnings

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
    check: dg.AssetCheckResult, partition: str, failing_elsewhere: list[str]
) -> dg.AssetCheckResult:
    """The result with its prompt version named in the description and the metadata, for the
    pages that list check results without their partition. The asset's checks list shows a
    partitioned check as failed while any version fails it, so a passing version's
    description names the versions that fail (status and description then agree); the
    evaluation time is in the metadata (the UI's time of a check is when its run was planned,
    before the materialization it checks)."""
    others = [key for key in failing_elsewhere if key != partition]
    elsewhere = f" (failing for prompt version {', '.join(others)})" if others else ""
    return dg.AssetCheckResult(
        check_name=check.check_name,
        passed=check.passed,
        severity=check.severity,
        description=f"prompt version {partition}: {check.description}{elsewhere}",
        metadata={
            "partition": partition,
            **check.metadata,
            "evaluated_at": dg.MetadataValue.timestamp(time.time()),
            **({"failing_for": ", ".join(others)} if others else {}),
        },
    )


def failing_partitions(instance: dg.DagsterInstance, key: dg.AssetCheckKey) -> list[str]:
    """The prompt versions whose latest evaluation of the check failed."""
    return sorted(
        info.partition_key
        for info in instance.event_log_storage.get_asset_check_partition_info([key])
        if info.partition_key is not None and info.latest_execution_status.value == "FAILED"
    )
