"""How a failed step reads in the Dagster UI: its headline names the reason (which cases, why,
what to do), not Dagster's "Exceeded max_retries of 2"; the cases are a table beside it."""

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from holodeck_core.engine import redact_text
from holodeck_core.errors import ConfigError, HolodeckError, safe_message
from holodeck_core.models import TestResult
from holodeck_core.models.results import all_metric_results
from holodeck_pipelines.cells import labels

MAX_FAILING_ROWS = 50
# "connection_error after 4 attempts: " / "server_error 503: ": the kind, said again per case
_KIND_PREFIX = re.compile(r"^[a-z_]+(?: \d{3})?(?: after \d+ attempts)?: ")


def headline(
    count: int, what: str, reasons: list[str], trouble: str = "hit transient errors"
) -> str:
    """``"6 cases hit transient errors: cannot connect to …: connection refused; rerun
    resumes (…)"``: the most common reason, and how many others there were."""
    tally = Counter(_KIND_PREFIX.sub("", reason, count=1) or reason for reason in reasons)
    common = tally.most_common(1)[0][0] if tally else "no reason given"
    others = len(tally) - 1
    more = f" (and {others} other reason{'s' if others > 1 else ''})" if others else ""
    return (
        f"{count} {what} {trouble}: {redact_text(common)[:200]}{more}; rerun the "
        "partition to resume (finished work is kept)"
    )


def stage_failure(
    context: dg.AssetExecutionContext,
    partitions: list[str],
    what: str,
    failing: list[tuple[str, str]],
    metadata: dict[str, Any],
    *,
    count: int | None = None,
    retries: int = 0,
    trouble: str = "hit transient errors",
) -> dg.Failure:
    """A step failure that says which cells and cases failed and why, where the
    partition and backfill pages show it (the description, whose first line is the headline)
    and as a table (the metadata). On the step's last attempt (``retries`` used up) it is not
    retried, so the step's headline is this description, not Dagster's "Exceeded
    max_retries"."""
    reasons = [w for _, w in failing]
    title = headline(len(failing) if count is None else count, what, reasons, trouble)
    lines = [f"- {case}: {redact_text(why)[:200]}" for case, why in failing[:10]]
    more = [f"- … and {len(failing) - 10} more"] if len(failing) > 10 else []
    versions = ", ".join(partitions)
    return dg.Failure(
        description="\n".join([f"{labels(partitions)}: {title}", *lines, *more]),
        metadata={
            **metadata,
            "partition": versions,
            "failing_cases": case_table(
                [(case, "ERROR", why) for case, why in failing[:MAX_FAILING_ROWS]]
            ),
        },
        allow_retries=context.retry_number < retries,
    )


@dataclass
class StageFailures:
    """The failures of a step's partitions, raised together once every partition ran (one
    version's outage never stops the others' paid work from being kept). In a step of several
    versions, each case and metadata key is named with its version (``v2/c3``)."""

    what: str
    trouble: str = "hit transient errors"
    failing: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    count: int = 0

    def add(
        self,
        partition: str,
        failing: list[tuple[str, str]],
        metadata: dict[str, Any],
        *,
        count: int | None = None,
    ) -> None:
        if not failing and not count:
            return
        self.failing[partition] = failing
        self.metadata[partition] = metadata
        self.count += len(failing) if count is None else count

    def raise_if_any(self, context: dg.AssetExecutionContext, *, retries: int = 0) -> None:
        if not self.failing:
            return
        several = len(context.partition_keys) > 1
        named = (lambda key, name: f"{key}/{name}") if several else (lambda _, name: name)
        raise stage_failure(
            context,
            list(self.failing),
            self.what,
            [(named(key, case), why) for key, cases in self.failing.items() for case, why in cases],
            {named(key, k): v for key, found in self.metadata.items() for k, v in found.items()},
            count=self.count,
            retries=retries,
            trouble=self.trouble,
        )


def metric_errors(results: list[TestResult]) -> list[tuple[str, str]]:
    """Each case whose metrics could not all run, with the first metric error."""
    found = []
    for result in results:
        errors = [f"{m.metric_name}: {m.error}" for m in all_metric_results(result) if m.error]
        if errors:
            found.append((result.test_id or "", errors[0]))
    return found


def case_table(rows: list[tuple[str, str, str]]) -> dg.TableMetadataValue:
    """Cases as a (case, status, reason) table; reasons are redacted and cut to 200 chars."""
    return dg.MetadataValue.table(
        records=[
            dg.TableRecord({"case": case, "status": status, "reason": redact_text(why)[:200]})
            for case, status, why in rows
        ],
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn("case", "string"),
                dg.TableColumn("status", "string"),
                dg.TableColumn("reason", "string"),
            ]
        ),
    )


@contextmanager
def history_failure(eval_runs: dict[str, str]) -> Iterator[None]:
    """A history that cannot be reached or written (a silent catalog, refused credentials)
    while recording the cells ``eval_runs`` (each one's EvalRun file) as the step's
    failure, its headline the reason, never a traceback: the EvalRuns are already written, and
    a rerun of the partitions (or ``holodeck history sync``) ingests them."""
    try:
        yield
    except HolodeckError as exc:
        versions = ", ".join(eval_runs)
        files = ", ".join(eval_runs.values())
        safe = "the EvalRuns are safe" if len(eval_runs) > 1 else "the EvalRun is safe"
        raise dg.Failure(
            description=(
                f"{labels(list(eval_runs))}: the run history could not be written "
                f"or read: {safe_message(exc)}; {safe} ({files}): rerun the partition "
                "or `holodeck history sync` it once the history answers"
            ),
            metadata={"partition": versions, "eval_run": files},
        ) from None


@contextmanager
def stage_errors(
    context: dg.AssetExecutionContext, partitions: list[str], *, retries: int = 0
) -> Iterator[None]:
    """A stage's :class:`HolodeckError` (a source that cannot be read, a tool that cannot
    start) as its step's failure, the message its headline, not a traceback or Dagster's
    "Exceeded max_retries": a config error is never retried (it would fail the same way), an
    execution error while ``retries`` last (a server may come back)."""
    try:
        yield
    except HolodeckError as exc:
        retry = not isinstance(exc, ConfigError) and context.retry_number < retries
        raise dg.Failure(
            description=f"{labels(partitions)}: {safe_message(exc)}",
            metadata={"partition": ", ".join(partitions), "exit_code": int(exc.exit_code)},
            allow_retries=retry,
        ) from None
