"""HoloDeck 0.7.1 EvalRun files out (the import side is
:mod:`~holodeck_core.history.holodeck_import`).

:func:`to_holodeck` produces what HoloDeck's own models read (docs/holodeck-fidelity.md): ERROR
folded into failed, our extra fields dropped, metrics HoloDeck cannot express removed from
``agent_config``, scores on the 0-1 scale its dashboard plots (unit metrics such as latency and cost
stay in our superset), multi-turn cases rolled up as its executor rolls them. It is the file
``holodeck test`` writes at ``results/<slug>/<timestamp>.json`` and the one ``history export
--format holodeck`` writes. The field lists are HoloDeck 0.7.1's, from its JSON Schema
``schemas/agent.schema.json`` and its report models."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from pydantic import BaseModel, SecretStr

from holodeck_core.history.holodeck_fields import (
    AGENT_FIELDS,
    METADATA_FIELDS,
    METRIC_RESULT_FIELDS,
    REPORT_FIELDS,
    RESULT_FIELDS,
    SUMMARY_FIELDS,
    TOOL_INVOCATION_FIELDS,
    TURN_FIELDS,
)
from holodeck_core.history.holodeck_import import HOLODECK_STANDARD_METRICS
from holodeck_core.history.rows import utc_naive
from holodeck_core.models import EvalRun, MetricResult, TestResult
from holodeck_core.models.results import all_metric_results
from holodeck_core.redaction import REDACTED


def _metric_fits_holodeck(metric: BaseModel) -> bool:
    kind = getattr(metric, "type", None)
    if kind == "standard":
        return getattr(metric, "metric", None) in HOLODECK_STANDARD_METRICS
    return kind in ("geval", "rag", "code")


def _agent_value(value: Any) -> Any:
    """Our agent config in HoloDeck's shape: per model, only HoloDeck's fields."""
    if isinstance(value, SecretStr):
        return REDACTED
    if isinstance(value, BaseModel):
        fields = AGENT_FIELDS.get(type(value).__name__)
        if fields is None:
            return value.model_dump(mode="json")
        out: dict[str, Any] = {}
        for name in fields:
            if name not in type(value).model_fields:
                continue
            item = getattr(value, name)
            if name in ("metrics", "evaluations") and isinstance(item, list):
                item = [m for m in item if _metric_fits_holodeck(m)]
                if name == "evaluations" and not item:
                    item = None
            out[name] = _agent_value(item)
        if type(value).__name__ == "EvaluationConfig" and not out.get("metrics"):
            return None
        return out
    if isinstance(value, list):
        return [_agent_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _agent_value(v) for k, v in value.items()}
    if isinstance(value, Enum):
        return value.value
    return value


_converted: list[tuple[BaseModel, Any]] = []
"""The last agent config converted, with its HoloDeck shape."""


def holodeck_agent_config(agent: BaseModel) -> Any:
    """``agent`` in HoloDeck's shape (:func:`_agent_value`), remembered for the last agent
    converted: a run's is converted on the preload thread while its calls are in flight
    (``engine/stages.py``), not after the last one. The value is shared: read it, never
    change it."""
    last = _converted[0] if _converted else None
    if last is not None and last[0] is agent:
        return last[1]
    value = _agent_value(agent)
    _converted[:] = [(agent, value)]
    return value


def _pick(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: data.get(name) for name in fields}


def _plotted(metric: MetricResult) -> bool:
    """Whether HoloDeck can show the metric: a unit metric (latency in ms, cost in USD) has no
    score on the 0-1 scale HoloDeck's dashboard plots, so it stays in our superset only."""
    return metric.score is not None or metric.unit is None


def _metric(metric: MetricResult) -> dict[str, Any]:
    """HoloDeck's ``score`` is a required 0-1 number: an errored metric gives 0.0 beside its
    error."""
    out = _pick(metric.model_dump(mode="json"), METRIC_RESULT_FIELDS)
    out["passed"] = bool(metric.passed)
    if metric.score is None:
        out["score"] = 0.0
    return out


def _metrics(metrics: list[MetricResult]) -> list[dict[str, Any]]:
    return [_metric(m) for m in metrics if _plotted(m)]


def _tools(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_pick(item, TOOL_INVOCATION_FIELDS) for item in items]


def _rolled_up(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """A multi-turn case's own fields as HoloDeck's executor derives them from its turns: the
    last turn's answer, each metric once with its mean score (passed unless a turn failed
    it), tools matched unless a turn missed them, no case-level expectations."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for turn in turns:
        for metric in turn["metric_results"]:
            by_name.setdefault(metric["metric_name"], []).append(metric)
    rolled = [
        {
            **records[0],
            "score": sum(r["score"] for r in records) / len(records),
            "passed": all(r["passed"] is not False for r in records),
            "error": None,
            "retry_count": 0,
            "evaluation_time_ms": sum(r["evaluation_time_ms"] or 0 for r in records),
            "reasoning": None,
        }
        for records in by_name.values()
    ]
    matched = [t["tools_matched"] for t in turns]
    return {
        "agent_response": turns[-1]["response"] if turns else None,
        "metric_results": rolled,
        "expected_tools": None,
        "ground_truth": None,
        "tools_matched": None
        if all(m is None for m in matched)
        else not any(m is False for m in matched),
    }


def _result(result: TestResult) -> dict[str, Any]:
    dumped = result.model_dump(mode="json")
    out = _pick(dumped, RESULT_FIELDS)
    out["passed"] = result.status.value == "PASS"
    out["metric_results"] = _metrics(result.metric_results)
    out["tool_invocations"] = _tools(dumped["tool_invocations"])
    if result.turns is not None:
        turns = []
        for turn, turn_dump in zip(result.turns, dumped["turns"], strict=True):
            turn_out = _pick(turn_dump, TURN_FIELDS)
            turn_out["metric_results"] = _metrics(turn.metric_results)
            turn_out["tool_invocations"] = _tools(turn_dump["tool_invocations"])
            turns.append(turn_out)
        out["turns"] = turns
        out.update(_rolled_up(turns))
    return out


def _environment(environment: dict[str, Any]) -> dict[str, str]:
    """HoloDeck types ``environment`` as ``dict[str, str]``."""
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, default=str, sort_keys=True)
        for k, v in environment.items()
    }


def to_holodeck(run: EvalRun) -> dict[str, Any]:
    """The run as a HoloDeck 0.7.1 EvalRun document (ERROR folded into failed)."""
    report = run.report
    summary = report.summary
    passed = sum(1 for r in report.results if r.status.value == "PASS")
    total = len(report.results)
    summary_out = _pick(summary.model_dump(mode="json"), SUMMARY_FIELDS)
    summary_out.update(total_tests=total, passed=passed, failed=total - passed)
    unplotted = {
        m.metric_name for r in report.results for m in all_metric_results(r) if not _plotted(m)
    }
    for key in ("average_scores", "metrics_evaluated"):
        summary_out[key] = {k: v for k, v in summary_out[key].items() if k not in unplotted}
    if summary.passed != passed or summary.total_tests != total:
        summary_out["pass_rate"] = 100.0 * passed / total if total else 0.0
    report_out = _pick(report.model_dump(mode="json", exclude={"results"}), REPORT_FIELDS)
    report_out["results"] = [_result(r) for r in report.results]
    report_out["summary"] = summary_out
    report_out["environment"] = _environment(report.environment)
    meta = run.metadata
    meta_out = _pick(meta.model_dump(mode="json", exclude={"agent_config"}), METADATA_FIELDS)
    meta_out["agent_config"] = holodeck_agent_config(meta.agent_config)
    return {"report": report_out, "metadata": meta_out}


def to_ours(run: EvalRun) -> dict[str, Any]:
    """Our EvalRun document (what ``EvalRun.model_validate`` reads back)."""
    return run.model_dump(mode="json")


def holodeck_file_name(run: EvalRun) -> str:
    """HoloDeck's name for a run file: the report timestamp with ``:`` made file-safe."""
    stamp = utc_naive(run.report.timestamp)
    text = stamp.isoformat(timespec="milliseconds") + "Z" if stamp else "run"
    return text.replace(":", "-") + ".json"
