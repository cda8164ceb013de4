"""One EvalRun flattened into Arrow tables shaped like the history tables.

Built before any connection is opened (the writer only inserts), and inserted with
``INSERT ... BY NAME SELECT`` from the registered Arrow table: bulk, never row by row.
Counts and rates come from the results' statuses, not from the summary, so a HoloDeck
summary that folds ERROR into failed cannot skew them (DESIGN §6.2: 0-1 fraction, ERROR in
the denominator).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from holodeck_core.models import EvalRun, MetricResult, Status, TestResult, ToolInvocation
from holodeck_core.naming import slugify

_STR = pa.string()
_STRS = pa.list_(pa.string())
_TS = pa.timestamp("us")

EVAL_RUNS = pa.schema(
    [
        ("run_id", _STR),
        ("agent_name", _STR),
        ("agent_slug", _STR),
        ("prompt_version", _STR),
        ("prompt_label", _STR),
        ("prompt_body_hash", _STR),
        ("prompt_source", _STR),
        ("model_provider", _STR),
        ("model_name", _STR),
        ("judge_model", _STR),
        ("trigger", _STR),
        ("dagster_run_id", _STR),
        ("partition_key", _STR),
        ("started_at", _TS),
        ("finished_at", _TS),
        ("wall_time_ms", pa.int64()),
        ("total_duration_ms", pa.int64()),
        ("total_tests", pa.int32()),
        ("passed", pa.int32()),
        ("failed", pa.int32()),
        ("errored", pa.int32()),
        ("pass_rate", pa.float64()),
        ("weighted_pass_rate", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("git_commit", _STR),
        ("holodeck_version", _STR),
        ("provenance", _STR),
        ("cli_args", _STRS),
        ("config_hash", _STR),
        ("dataset_hash", _STR),
        ("source_path", _STR),
        ("file_sha256", _STR),
        ("ingested_at", _TS),
    ]
)

TEST_RESULTS = pa.schema(
    [
        ("run_id", _STR),
        ("case_id", _STR),
        ("case_index", pa.int32()),
        ("test_name", _STR),
        ("status", _STR),
        ("passed", pa.bool_()),
        ("test_input", _STR),
        ("agent_response", _STR),
        ("ground_truth", _STR),
        ("execution_time_ms", pa.int64()),
        ("errors", _STRS),
        ("tool_calls", _STRS),
        ("tools_matched", pa.bool_()),
        ("turn_count", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("weight", pa.float64()),
        ("tags", _STRS),
        ("metadata", _STR),
        ("executed_at", _TS),
    ]
)

METRIC_RESULTS = pa.schema(
    [
        ("run_id", _STR),
        ("case_id", _STR),
        ("turn_index", pa.int32()),
        ("metric_index", pa.int32()),
        ("metric_name", _STR),
        ("kind", _STR),
        ("score", pa.float64()),
        ("raw_score", pa.float64()),
        ("threshold", pa.float64()),
        ("direction", _STR),
        ("unit", _STR),
        ("passed", pa.bool_()),
        ("error", _STR),
        ("judge_model", _STR),
        ("retry_count", pa.int32()),
        ("evaluation_time_ms", pa.int64()),
        ("scale", _STR),
        ("fail_on_error", pa.bool_()),
        ("reasoning", _STR),
        ("details", _STR),
    ]
)

TOOL_INVOCATIONS = pa.schema(
    [
        ("run_id", _STR),
        ("case_id", _STR),
        ("turn_index", pa.int32()),
        ("call_index", pa.int32()),
        ("name", _STR),
        ("args", _STR),
        ("result", _STR),
        ("bytes", pa.int64()),
        ("duration_ms", pa.int64()),
        ("error", _STR),
        ("call_id", _STR),
    ]
)

PROMPT_VERSIONS = pa.schema(
    [
        ("agent_slug", _STR),
        ("prompt_version", _STR),
        ("label", _STR),
        ("body_hash", _STR),
        ("source", _STR),
        ("file_path", _STR),
        ("author", _STR),
        ("description", _STR),
        ("tags", _STRS),
        ("extra", _STR),
        ("body", _STR),
        ("snapshot_path", _STR),
        ("registered_at", _TS),
        ("first_run_id", _STR),
        ("first_seen_at", _TS),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "eval_runs": EVAL_RUNS,
    "test_results": TEST_RESULTS,
    "metric_results": METRIC_RESULTS,
    "tool_invocations": TOOL_INVOCATIONS,
    "prompt_versions": PROMPT_VERSIONS,
}


@dataclass(frozen=True)
class PromptInfo:
    """The registered prompt behind a run: its key (partition key, ``v3`` or ``v3+1a2b3c4d``)
    and, when the snapshot store has it, the body copied from the snapshot file."""

    key: str
    body: str | None = None
    snapshot_path: str | None = None
    registered_at: str | None = None


@dataclass(frozen=True)
class RunSource:
    """Where a run came from, for idempotency and export."""

    run_id: str
    source_path: str | None = None
    file_sha256: str | None = None


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def run_id_of(run: EvalRun) -> str:
    """``metadata.run_id``, else the sha256 of the run's canonical JSON (DESIGN §6.14 uses the
    file's bytes; :func:`holodeck_core.history.holodeck_format.load_run_file` does that)."""
    return run.metadata.run_id or sha256_hex(run.to_json())


def utc_naive(value: str | None) -> datetime | None:
    """An ISO 8601 timestamp as a naive UTC datetime (the tables store UTC)."""
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def derived_case_ids(results: Iterable[TestResult]) -> list[str]:
    """Stable case ids (DESIGN §6.5): ``test_id`` > slug of the name > sha256(input)[:12];
    repeats get ``-2``, ``-3`` so ``(run_id, case_id)`` stays unique."""
    ids: list[str] = []
    taken: set[str] = set()
    for result in results:
        base = (
            result.test_id
            or (slugify(result.test_name) if result.test_name else "")
            or sha256_hex(result.test_input)[:12]
        )
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate)
        ids.append(candidate)
    return ids


def _json(value: Any) -> str | None:
    if value is None:
        return None
    return json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)


def _json_or_empty(value: dict[str, Any]) -> str | None:
    return _json(value) if value else None


def _case_tokens(result: TestResult) -> tuple[int | None, int | None, int | None]:
    usage = result.token_usage
    if usage is None and result.turns:
        turn_usages = [t.token_usage for t in result.turns if t.token_usage is not None]
        if turn_usages:
            usage = turn_usages[0]
            for extra in turn_usages[1:]:
                usage = usage + extra
    if usage is None:
        return None, None, None
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens


def _case_cost(metrics: list[MetricResult]) -> float | None:
    for metric in metrics:
        if metric.unit == "USD" and metric.raw_score is not None:
            return metric.raw_score
    return None


def _judge_model(run: EvalRun) -> str | None:
    evaluations = run.metadata.agent_config.evaluations
    if evaluations is not None and evaluations.model is not None:
        return evaluations.model.name
    used = Counter(
        m.model_used
        for r in run.report.results
        for m in _all_metrics(r)
        if m.model_used is not None
    )
    return used.most_common(1)[0][0] if used else None


def _all_metrics(result: TestResult) -> list[MetricResult]:
    found = list(result.metric_results)
    for turn in result.turns or []:
        found.extend(turn.metric_results)
    return found


def _ms_between(start: datetime | None, end: datetime | None) -> int | None:
    if start is None or end is None or end < start:
        return None
    return int((end - start).total_seconds() * 1000)


def build_tables(
    run: EvalRun, source: RunSource, prompt: PromptInfo, *, now: datetime | None = None
) -> dict[str, pa.Table]:
    """The rows of one run for every history table, as Arrow tables."""
    report, meta = run.report, run.metadata
    run_id = source.run_id
    agent = meta.agent_config
    slug = slugify(report.agent_name)
    results = report.results
    case_ids = derived_case_ids(results)
    ingested_at = (now or datetime.now(UTC)).replace(tzinfo=None)

    tests: dict[str, list[Any]] = {name: [] for name in TEST_RESULTS.names}
    metrics: dict[str, list[Any]] = {name: [] for name in METRIC_RESULTS.names}
    tools: dict[str, list[Any]] = {name: [] for name in TOOL_INVOCATIONS.names}
    case_costs: list[float] = []
    token_sums = [0, 0, 0]
    any_tokens = False

    for index, (case_id, result) in enumerate(zip(case_ids, results, strict=True)):
        prompt_t, completion_t, total_t = _case_tokens(result)
        if total_t is not None:
            any_tokens = True
            token_sums[0] += prompt_t or 0
            token_sums[1] += completion_t or 0
            token_sums[2] += total_t
        case_metrics: list[tuple[int | None, MetricResult]] = [
            (None, m) for m in result.metric_results
        ]
        case_tools: list[tuple[int | None, ToolInvocation]] = [
            (None, t) for t in result.tool_invocations
        ]
        for turn in result.turns or []:
            case_metrics.extend((turn.turn_index, m) for m in turn.metric_results)
            case_tools.extend((turn.turn_index, t) for t in turn.tool_invocations)
        cost = _case_cost([m for _, m in case_metrics])
        if cost is not None:
            case_costs.append(cost)
        row = {
            "run_id": run_id,
            "case_id": case_id,
            "case_index": index,
            "test_name": result.test_name,
            "status": result.status.value,
            "passed": result.status is Status.PASS,
            "test_input": result.test_input,
            "agent_response": result.agent_response,
            "ground_truth": result.ground_truth,
            "execution_time_ms": result.execution_time_ms,
            "errors": list(result.errors),
            "tool_calls": list(result.tool_calls),
            "tools_matched": result.tools_matched,
            "turn_count": len(result.turns) if result.turns is not None else None,
            "prompt_tokens": prompt_t,
            "completion_tokens": completion_t,
            "total_tokens": total_t,
            "cost_usd": cost,
            "weight": result.weight,
            "tags": list(result.tags),
            "metadata": _json_or_empty(result.metadata),
            "executed_at": utc_naive(result.timestamp),
        }
        for name, value in row.items():
            tests[name].append(value)
        for metric_index, (turn_index, metric) in enumerate(case_metrics):
            metric_row = {
                "run_id": run_id,
                "case_id": case_id,
                "turn_index": turn_index,
                "metric_index": metric_index,
                "metric_name": metric.metric_name,
                "kind": metric.kind,
                "score": metric.score,
                "raw_score": metric.raw_score,
                "threshold": metric.threshold,
                "direction": metric.direction.value,
                "unit": metric.unit,
                "passed": metric.passed,
                "error": metric.error,
                "judge_model": metric.model_used,
                "retry_count": metric.retry_count,
                "evaluation_time_ms": metric.evaluation_time_ms,
                "scale": None if metric.scale is None else str(metric.scale),
                "fail_on_error": metric.fail_on_error,
                "reasoning": metric.reasoning,
                "details": _json_or_empty(metric.details),
            }
            for name, value in metric_row.items():
                metrics[name].append(value)
        for call_index, (turn_index, tool) in enumerate(case_tools):
            tool_row = {
                "run_id": run_id,
                "case_id": case_id,
                "turn_index": turn_index,
                "call_index": call_index,
                "name": tool.name,
                "args": _json(tool.args),
                "result": _json(tool.result),
                "bytes": tool.bytes,
                "duration_ms": tool.duration_ms,
                "error": tool.error,
                "call_id": tool.call_id,
            }
            for name, value in tool_row.items():
                tools[name].append(value)

    statuses = Counter(r.status for r in results)
    total = len(results)
    weight_total = sum(r.weight for r in results)
    weight_passed = sum(r.weight for r in results if r.status is Status.PASS)
    summary = report.summary
    usage = summary.token_usage
    run_tokens: list[int] | list[None] = [None, None, None]
    if usage is not None:
        run_tokens = [usage.prompt_tokens, usage.completion_tokens, usage.total_tokens]
    elif any_tokens:
        run_tokens = token_sums
    prompt_tokens, completion_tokens, total_tokens = run_tokens
    cost_usd = summary.cost_usd
    if cost_usd is None and case_costs:
        cost_usd = sum(case_costs)
    started_at = utc_naive(meta.started_at)
    finished_at = utc_naive(report.timestamp)
    run_row = {
        "run_id": run_id,
        "agent_name": report.agent_name,
        "agent_slug": slug,
        "prompt_version": prompt.key,
        "prompt_label": meta.prompt_version.version,
        "prompt_body_hash": meta.prompt_version.body_hash,
        "prompt_source": meta.prompt_version.source,
        "model_provider": agent.model.provider.value,
        "model_name": agent.model.name,
        "judge_model": _judge_model(run),
        "trigger": meta.trigger.value if meta.trigger is not None else None,
        "dagster_run_id": meta.dagster_run_id,
        "partition_key": meta.partition_key,
        "started_at": started_at,
        "finished_at": finished_at,
        "wall_time_ms": summary.wall_time_ms
        if summary.wall_time_ms is not None
        else _ms_between(started_at, finished_at),
        "total_duration_ms": summary.total_duration_ms,
        "total_tests": total,
        "passed": statuses[Status.PASS],
        "failed": statuses[Status.FAIL],
        "errored": statuses[Status.ERROR],
        "pass_rate": statuses[Status.PASS] / total if total else 0.0,
        "weighted_pass_rate": weight_passed / weight_total if weight_total else None,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
        "cost_usd": cost_usd,
        "git_commit": meta.git_commit,
        "holodeck_version": meta.holodeck_version,
        "provenance": _json_or_empty(meta.provenance),
        "cli_args": list(meta.cli_args),
        "config_hash": meta.config_hash,
        "dataset_hash": meta.dataset_hash,
        "source_path": source.source_path,
        "file_sha256": source.file_sha256,
        "ingested_at": ingested_at,
    }
    pv = meta.prompt_version
    prompt_row = {
        "agent_slug": slug,
        "prompt_version": prompt.key,
        "label": pv.version,
        "body_hash": pv.body_hash,
        "source": pv.source,
        "file_path": pv.file_path,
        "author": pv.author,
        "description": pv.description,
        "tags": list(pv.tags),
        "extra": _json_or_empty(pv.extra),
        "body": prompt.body,
        "snapshot_path": prompt.snapshot_path,
        "registered_at": utc_naive(prompt.registered_at),
        "first_run_id": run_id,
        "first_seen_at": finished_at,
    }
    return {
        "eval_runs": pa.Table.from_pylist([run_row], schema=EVAL_RUNS),
        "test_results": pa.Table.from_pydict(tests, schema=TEST_RESULTS),
        "metric_results": pa.Table.from_pydict(metrics, schema=METRIC_RESULTS),
        "tool_invocations": pa.Table.from_pydict(tools, schema=TOOL_INVOCATIONS),
        "prompt_versions": pa.Table.from_pylist([prompt_row], schema=PROMPT_VERSIONS),
    }
