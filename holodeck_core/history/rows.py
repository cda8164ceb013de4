"""One EvalRun flattened into rows shaped like the history tables (:class:`TableRows`).

Column names and types are the DDL's (:func:`holodeck_core.history.schema.arrow_schema`): the
schema has one source, and a column the DDL gains but this module does not fill is an error.

Built before any connection is opened (the writer only inserts), and inserted with
``INSERT ... BY NAME SELECT``: bulk, never row by row.
Counts and rates come from the results' statuses, not from the summary, so a HoloDeck
summary that folds ERROR into failed cannot skew them (docs/history.md: 0-1 fraction, ERROR in
the denominator).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from holodeck_core.defaults import OWN_MODEL_CANDIDATE
from holodeck_core.history.tabular import TableRows
from holodeck_core.models import EvalRun, MetricResult, Status, TestResult, ToolInvocation
from holodeck_core.naming import slugify


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
    """``metadata.run_id``, else the sha256 of the run's canonical JSON (an imported file uses the
    file's bytes; :func:`holodeck_core.history.holodeck_import.load_run_file` does that)."""
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
    """Stable case ids (docs/architecture.md): ``test_id`` > slug of the name > sha256(input)[:12];
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


TEST_COLUMNS = (
    "run_id", "case_id", "case_index", "test_name", "status", "passed", "test_input",
    "agent_response", "ground_truth", "execution_time_ms", "errors", "tool_calls",
    "tools_matched", "turn_count", "prompt_tokens", "completion_tokens", "total_tokens",
    "cost_usd", "weight", "tags", "metadata", "executed_at",
)  # fmt: skip
METRIC_COLUMNS = (
    "run_id", "case_id", "turn_index", "metric_index", "metric_name", "kind", "score",
    "raw_score", "threshold", "direction", "unit", "passed", "error", "judge_model",
    "retry_count", "evaluation_time_ms", "scale", "fail_on_error", "reasoning", "details",
)  # fmt: skip
TOOL_COLUMNS = (
    "run_id", "case_id", "turn_index", "call_index", "name", "args", "result", "bytes",
    "duration_ms", "error", "call_id",
)  # fmt: skip
"""The order of the tuples :func:`build_tables` makes; types and table order come from the DDL."""


def _tool_calls(result: TestResult) -> list[tuple[int | None, ToolInvocation]]:
    """Each tool call once, with its turn: a multi-turn case lists its turns' calls again at
    the case level (the roll-up HoloDeck's readers expect), and those are not new calls."""
    turns = [(turn.turn_index, t) for turn in result.turns or [] for t in turn.tool_invocations]
    in_turns = [t for _, t in turns]
    rolled_up = [t for t in result.tool_invocations if t not in in_turns]
    return [*turns, *((None, t) for t in rolled_up)]


def _case_rows(
    run_id: str,
    index: int,
    case_id: str,
    result: TestResult,
    tokens: tuple[int | None, int | None, int | None],
) -> tuple[tuple[Any, ...], list[tuple[Any, ...]], list[tuple[Any, ...]], float | None]:
    """One case's ``test_results`` row, its metric and tool rows, and its cost."""
    case_metrics: list[tuple[int | None, MetricResult]] = [(None, m) for m in result.metric_results]
    for turn in result.turns or []:
        case_metrics.extend((turn.turn_index, m) for m in turn.metric_results)
    case_tools = _tool_calls(result)
    cost = _case_cost([m for _, m in case_metrics])
    prompt_t, completion_t, total_t = tokens
    status = result.status
    test = (
        run_id, case_id, index, result.test_name, status.value, status is Status.PASS,
        result.test_input, result.agent_response, result.ground_truth,
        result.execution_time_ms, list(result.errors), list(result.tool_calls),
        result.tools_matched, len(result.turns) if result.turns is not None else None,
        prompt_t, completion_t, total_t, cost, result.weight, list(result.tags),
        _json_or_empty(result.metadata), utc_naive(result.timestamp),
    )  # fmt: skip
    metrics = [
        (
            run_id,
            case_id,
            turn_index,
            metric_index,
            m.metric_name,
            m.kind,
            m.score,
            m.raw_score,
            m.threshold,
            m.direction.value,
            m.unit,
            m.passed,
            m.error,
            m.model_used,
            m.retry_count,
            m.evaluation_time_ms,
            None if m.scale is None else str(m.scale),
            m.fail_on_error,
            m.reasoning,
            _json_or_empty(m.details),
        )
        for metric_index, (turn_index, m) in enumerate(case_metrics)
    ]
    tools = [
        (
            run_id,
            case_id,
            turn_index,
            call_index,
            t.name,
            _json(t.args),
            _json(t.result),
            t.bytes,
            t.duration_ms,
            t.error,
            t.call_id,
        )
        for call_index, (turn_index, t) in enumerate(case_tools)
    ]
    return test, metrics, tools, cost


@dataclass
class _CaseTables:
    """The rows of a run's cases, with what the run row sums from them."""

    tests: list[tuple[Any, ...]] = field(default_factory=list)
    metrics: list[tuple[Any, ...]] = field(default_factory=list)
    tools: list[tuple[Any, ...]] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)
    tokens: list[int] | None = None
    """(prompt, completion, total) summed over the cases that report tokens; None if none do."""


def _case_tables(run_id: str, results: list[TestResult]) -> _CaseTables:
    out = _CaseTables()
    for index, (case_id, result) in enumerate(zip(derived_case_ids(results), results, strict=True)):
        tokens = _case_tokens(result)
        if tokens[2] is not None:
            out.tokens = [
                total + (n or 0) for total, n in zip(out.tokens or [0, 0, 0], tokens, strict=True)
            ]
        test, case_metrics, case_tools, cost = _case_rows(run_id, index, case_id, result, tokens)
        out.tests.append(test)
        out.metrics += case_metrics
        out.tools += case_tools
        if cost is not None:
            out.costs.append(cost)
    return out


def build_tables(
    run: EvalRun, source: RunSource, prompt: PromptInfo, *, now: datetime | None = None
) -> dict[str, TableRows]:
    """The rows of one run for every history table."""
    cases = _case_tables(source.run_id, run.report.results)
    ingested_at = (now or datetime.now(UTC)).replace(tzinfo=None)
    run_row = _run_row(run, source, prompt, cases, ingested_at)
    return {
        "eval_runs": TableRows.of_dicts("eval_runs", [run_row]),
        "test_results": TableRows("test_results", TEST_COLUMNS, cases.tests),
        "metric_results": TableRows("metric_results", METRIC_COLUMNS, cases.metrics),
        "tool_invocations": TableRows("tool_invocations", TOOL_COLUMNS, cases.tools),
        "prompt_versions": TableRows.of_dicts(
            "prompt_versions", [_prompt_row(run, source, prompt)]
        ),
    }


def _run_row(
    run: EvalRun, source: RunSource, prompt: PromptInfo, cases: _CaseTables, ingested_at: datetime
) -> dict[str, Any]:
    """The run's ``eval_runs`` row: counts and rates from the results'
    statuses, tokens and cost from the summary, else summed over the cases."""
    report, meta = run.report, run.metadata
    results, summary = report.results, report.summary
    statuses = Counter(r.status for r in results)
    total = len(results)
    weight_total = sum(r.weight for r in results)
    weight_passed = sum(r.weight for r in results if r.status is Status.PASS)
    usage = summary.token_usage
    run_tokens: list[int] | list[None] = [None, None, None]
    if usage is not None:
        run_tokens = [usage.prompt_tokens, usage.completion_tokens, usage.total_tokens]
    elif cases.tokens is not None:
        run_tokens = cases.tokens
    prompt_tokens, completion_tokens, total_tokens = run_tokens
    cost_usd = summary.cost_usd
    if cost_usd is None and cases.costs:
        cost_usd = sum(cases.costs)
    started_at = utc_naive(meta.started_at)
    finished_at = utc_naive(report.timestamp)
    return {
        "run_id": source.run_id,
        "agent_name": report.agent_name,
        "agent_slug": slugify(report.agent_name),
        "prompt_version": prompt.key,
        "prompt_label": meta.prompt_version.version,
        "prompt_body_hash": meta.prompt_version.body_hash,
        "prompt_source": meta.prompt_version.source,
        "model_provider": meta.agent_config.model.provider.value,
        "model_name": meta.agent_config.model.name,
        "model_candidate": meta.model_candidate or OWN_MODEL_CANDIDATE,
        "model_fingerprint": meta.model_fingerprint,
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
        "max_error_share": meta.agent_config.max_error_share,
    }


def _prompt_row(run: EvalRun, source: RunSource, prompt: PromptInfo) -> dict[str, Any]:
    """The ``prompt_versions`` row of the run's prompt (kept from its first run)."""
    pv = run.metadata.prompt_version
    return {
        "agent_slug": slugify(run.report.agent_name),
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
        "first_run_id": source.run_id,
        "first_seen_at": utc_naive(run.report.timestamp),
    }
