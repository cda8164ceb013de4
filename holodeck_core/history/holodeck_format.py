"""HoloDeck 0.7.1 EvalRun files in (with inference) and out (the 0.7.1 shape).

In: a file without ``metadata.run_id`` is a HoloDeck file (DESIGN §6.14). Its run id is the
sha256 of the file's bytes (file names repeat across agents), its trigger ``import``, and what
0.7.1 does not record is inferred: metric ``kind`` from the metric's name and the agent's
metric config, case ids (§6.5), ERROR vs FAIL (from ``TestResult``'s own rule), the summary's
``errored`` count, config and dataset hashes, and an estimated start time.

Out: :func:`to_holodeck` produces what HoloDeck's own models read: ERROR folded into failed,
our extra fields dropped, metrics HoloDeck cannot express removed from ``agent_config`` (their
results stay in the report). The field lists are HoloDeck 0.7.1's, from its JSON Schema
``schemas/agent.schema.json`` and its report models.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr, ValidationError

from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history.rows import derived_case_ids, sha256_hex, utc_naive
from holodeck_core.models import EvalRun, MetricResult, TestResult
from holodeck_core.models.base import REDACTED
from holodeck_core.models.evaluation import LEGACY_JUDGE_METRICS

if TYPE_CHECKING:
    from holodeck_core.config.project import Location

RAG_METRICS = frozenset(
    {
        "faithfulness",
        "answer_relevancy",
        "contextual_relevancy",
        "contextual_precision",
        "contextual_recall",
    }
)
STANDARD_METRICS = frozenset(
    {"bleu", "rouge", "meteor", "equality", "numeric", *LEGACY_JUDGE_METRICS}
    | {"exact_match", "contains", "regex", "json_valid", "json_schema", "tool_correctness"}
    | {"latency", "cost"}
)
HOLODECK_STANDARD_METRICS = frozenset(
    {"bleu", "rouge", "meteor", "equality", "numeric", *LEGACY_JUDGE_METRICS}
)
_UNITS = {"latency": ("ms", "lower_is_better"), "cost": ("USD", "lower_is_better")}


class NotAnEvalRun(ValueError):
    """A JSON file that is not an EvalRun at all (e.g. a ``report.json``)."""


@dataclass(frozen=True)
class LoadedRun:
    run: EvalRun
    run_id: str
    path: Location
    file_sha256: str
    imported: bool
    """True for a HoloDeck file (no ``metadata.run_id``): fields were inferred."""


# --------------------------------------------------------------------------- import


def infer_metric_kind(name: str, agent_config: dict[str, Any] | None) -> str:
    """``standard | rag | geval | code`` for a metric result that does not say: the agent's
    metric config decides when it names the metric, else the name itself (RAG and standard
    names are fixed; any other name is a G-Eval criterion, HoloDeck's only free-named metric
    besides code graders)."""
    for metric in _configured_metrics(agent_config):
        kind = metric.get("type")
        names = {
            metric.get("name"),
            metric.get("metric"),
            metric.get("metric_type"),
            (metric.get("grader") or ":").rsplit(":", 1)[-1] or None,
        }
        if name in names and kind in ("standard", "rag", "geval", "code"):
            return str(kind)
    lowered = name.lower()
    if lowered in RAG_METRICS:
        return "rag"
    if lowered in STANDARD_METRICS:
        return "standard"
    return "geval"


def _configured_metrics(agent_config: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(agent_config, dict):
        return []
    found: list[dict[str, Any]] = []
    evaluations = agent_config.get("evaluations") or {}
    found.extend(m for m in evaluations.get("metrics") or [] if isinstance(m, dict))
    for case in agent_config.get("test_cases") or []:
        if not isinstance(case, dict):
            continue
        found.extend(m for m in case.get("evaluations") or [] if isinstance(m, dict))
        for turn in case.get("turns") or []:
            if isinstance(turn, dict):
                found.extend(m for m in turn.get("evaluations") or [] if isinstance(m, dict))
    return found


def _fill_metric(metric: dict[str, Any], agent_config: dict[str, Any] | None) -> None:
    name = str(metric.get("metric_name") or "")
    if "kind" not in metric:
        metric["kind"] = infer_metric_kind(name, agent_config)
    unit_direction = _UNITS.get(name.lower())
    if unit_direction is not None:
        metric.setdefault("unit", unit_direction[0])
        metric.setdefault("direction", unit_direction[1])


def _canonical_hash(value: Any) -> str:
    return sha256_hex(json.dumps(value, sort_keys=True, default=str, ensure_ascii=False))


def infer_holodeck(raw: dict[str, Any], file_sha256: str) -> dict[str, Any]:
    """A HoloDeck 0.7.1 EvalRun document completed with what our model records."""
    doc: dict[str, Any] = json.loads(json.dumps(raw))  # deep copy; the input stays untouched
    report, meta = doc.get("report"), doc.get("metadata")
    if not isinstance(report, dict) or not isinstance(meta, dict):
        raise NotAnEvalRun("an EvalRun has 'report' and 'metadata' objects")
    agent_config = meta.get("agent_config") if isinstance(meta.get("agent_config"), dict) else None
    results = [r for r in report.get("results") or [] if isinstance(r, dict)]
    for result in results:
        for metric in result.get("metric_results") or []:
            if isinstance(metric, dict):
                _fill_metric(metric, agent_config)
        for turn in result.get("turns") or []:
            for metric in (turn or {}).get("metric_results") or []:
                if isinstance(metric, dict):
                    _fill_metric(metric, agent_config)
    meta["run_id"] = file_sha256
    meta["trigger"] = "import"
    if agent_config is not None:
        meta.setdefault("config_hash", _canonical_hash(agent_config))
        cases = agent_config.get("test_cases")
        if cases is None:
            cases = [[r.get("test_name"), r.get("test_input")] for r in results]
        meta.setdefault("dataset_hash", _canonical_hash(cases))
    started = _estimated_start(results)
    if started is not None:
        meta.setdefault("started_at", started)
    return doc


def _estimated_start(results: list[dict[str, Any]]) -> str | None:
    """HoloDeck records no start time: the earliest case's end minus its duration."""
    starts: list[datetime] = []
    for result in results:
        try:
            end = utc_naive(result.get("timestamp"))
        except (TypeError, ValueError):
            continue
        if end is not None:
            starts.append(end - timedelta(milliseconds=int(result.get("execution_time_ms") or 0)))
    if not starts:
        return None
    return min(starts).replace(tzinfo=UTC).isoformat()


def _complete(run: EvalRun) -> EvalRun:
    """Case ids and the ERROR count, once statuses exist (they come from the model's rule)."""
    ids = derived_case_ids(run.report.results)
    for case_id, result in zip(ids, run.report.results, strict=True):
        if result.test_id is None:
            result.test_id = case_id
    summary = run.report.summary
    errored = sum(1 for r in run.report.results if r.status.value == "ERROR")
    if summary.errored == 0 and errored and summary.failed >= errored:
        summary.failed -= errored
        summary.errored = errored
    return run


def load_run_file(path: Location) -> LoadedRun:
    """Read an EvalRun file: ours as is, a HoloDeck 0.7.1 one with inference.

    Raises :class:`NotAnEvalRun` for JSON that is not an EvalRun, :class:`ConfigError` for
    an EvalRun that does not validate."""
    return load_run_bytes(path, path.read_bytes())


def load_run_bytes(path: Location, data: bytes) -> LoadedRun:
    """:func:`load_run_file` for bytes already read from ``path``."""
    digest = sha256_hex(data)
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotAnEvalRun(f"not JSON: {exc}") from None
    if not (isinstance(raw, dict) and isinstance(raw.get("report"), dict)):
        raise NotAnEvalRun("an EvalRun has 'report' and 'metadata' objects")
    if not isinstance(raw.get("metadata"), dict):
        raise NotAnEvalRun("an EvalRun has 'report' and 'metadata' objects")
    imported = raw["metadata"].get("run_id") is None
    document = infer_holodeck(raw, digest) if imported else raw
    try:
        run = EvalRun.model_validate(document)
    except ValidationError as exc:
        problems = [
            Problem(
                file=str(path),
                path=".".join(str(p) for p in err["loc"]),
                message=err["msg"],
            )
            for err in exc.errors()[:10]
        ]
        raise ConfigError(problems) from None
    if imported:
        run = _complete(run)
    return LoadedRun(
        run=run,
        run_id=run.metadata.run_id or digest,
        path=path,
        file_sha256=digest,
        imported=imported,
    )


# --------------------------------------------------------------------------- export

# HoloDeck 0.7.1's fields per model, from schemas/agent.schema.json ($defs) and its report
# models (seed 000 + the 031 additions seen in its real output). Our models carry more.
AGENT_FIELDS: dict[str, tuple[str, ...]] = {
    "Agent": (
        "name",
        "description",
        "author",
        "model",
        "instructions",
        "response_format",
        "tools",
        "evaluations",
        "test_cases",
        "execution",
        "observability",
        "deployment",
        "embedding_provider",
        "claude",
        "openai",
        "test_cases_file",
    ),
    "LLMProvider": (
        "provider",
        "name",
        "temperature",
        "max_tokens",
        "top_p",
        "endpoint",
        "api_key",
        "api_version",
        "auth_provider",
    ),
    "Instructions": ("file", "inline"),
    "ExecutionConfig": (
        "file_timeout",
        "llm_timeout",
        "download_timeout",
        "cache_enabled",
        "cache_dir",
        "verbose",
        "quiet",
        "parallel_test_cases",
    ),
    "EvaluationConfig": ("model", "metrics", "optimizer"),
    "StandardMetric": (
        "type",
        "metric",
        "threshold",
        "enabled",
        "scale",
        "model",
        "fail_on_error",
        "retry_on_failure",
        "timeout_ms",
        "custom_prompt",
        "case_insensitive",
        "strip_whitespace",
        "strip_punctuation",
        "absolute_tolerance",
        "relative_tolerance",
        "accept_percent",
        "accept_thousands_separators",
        "response_path",
    ),
    "GEvalMetric": (
        "type",
        "name",
        "criteria",
        "evaluation_steps",
        "evaluation_params",
        "strict_mode",
        "threshold",
        "model",
        "enabled",
        "fail_on_error",
    ),
    "RAGMetric": (
        "type",
        "metric_type",
        "threshold",
        "include_reason",
        "model",
        "enabled",
        "fail_on_error",
    ),
    "CodeMetric": ("type", "grader", "name", "threshold", "enabled", "fail_on_error"),
    "TestCaseModel": (
        "name",
        "input",
        "expected_tools",
        "ground_truth",
        "files",
        "retrieval_context",
        "evaluations",
        "turns",
    ),
    "Turn": (
        "input",
        "ground_truth",
        "expected_tools",
        "files",
        "retrieval_context",
        "evaluations",
        "turn_config",
    ),
    "FileInput": ("path", "url", "type", "description", "pages", "sheet", "range", "cache"),
    "ExpectedTool": ("name", "args", "count"),
    "FunctionTool": (
        "name",
        "description",
        "type",
        "defer_loading",
        "file",
        "function",
        "parameters",
    ),
    "MCPTool": (
        "name",
        "description",
        "type",
        "defer_loading",
        "transport",
        "command",
        "args",
        "env",
        "env_file",
        "encoding",
        "url",
        "headers",
        "timeout",
        "sse_read_timeout",
        "terminate_on_close",
        "config",
        "load_tools",
        "load_prompts",
        "request_timeout",
        "is_retrieval",
        "registry_name",
    ),
    "VectorstoreTool": (
        "name",
        "description",
        "type",
        "defer_loading",
        "source",
        "vector_field",
        "meta_fields",
        "chunk_size",
        "chunk_overlap",
        "embedding_model",
        "embedding_dimensions",
        "database",
        "top_k",
        "min_similarity_score",
        "record_path",
        "record_prefix",
        "meta_prefix",
        "id_field",
        "field_separator",
        "delimiter",
    ),
    "PromptTool": (
        "name",
        "description",
        "type",
        "defer_loading",
        "template",
        "file",
        "parameters",
        "model",
    ),
    "HierarchicalDocumentTool": (
        "name",
        "description",
        "type",
        "defer_loading",
        "source",
        "chunking_strategy",
        "max_chunk_tokens",
        "chunk_overlap",
        "document_domain",
        "max_subsection_depth",
        "search_mode",
        "top_k",
        "min_score",
        "semantic_weight",
        "keyword_weight",
        "exact_weight",
        "rrf_k",
        "contextual_embeddings",
        "context_max_tokens",
        "context_concurrency",
        "extract_definitions",
        "extract_cross_references",
        "enable_reranking",
        "reranker_model",
        "context_model",
        "embedding_model",
        "database",
        "keyword_index",
    ),
}
"""Models absent here (``DatabaseConfig``, ``KeywordIndexConfig``: open in HoloDeck too) are
dumped whole."""

METRIC_RESULT_FIELDS = (
    "metric_name",
    "kind",
    "score",
    "threshold",
    "passed",
    "scale",
    "error",
    "retry_count",
    "evaluation_time_ms",
    "model_used",
    "reasoning",
)
TOOL_INVOCATION_FIELDS = ("name", "args", "result", "bytes", "duration_ms", "error")
TURN_FIELDS = (
    "turn_index",
    "input",
    "response",
    "ground_truth",
    "expected_tools",
    "tool_calls",
    "tool_invocations",
    "tools_matched",
    "arg_match_details",
    "metric_results",
    "passed",
    "execution_time_ms",
    "token_usage",
    "errors",
    "skipped",
    "grader_details",
)
RESULT_FIELDS = (
    "test_name",
    "test_input",
    "processed_files",
    "agent_response",
    "tool_calls",
    "tool_invocations",
    "expected_tools",
    "tools_matched",
    "metric_results",
    "ground_truth",
    "passed",
    "execution_time_ms",
    "errors",
    "timestamp",
    "token_usage",
    "turns",
)
SUMMARY_FIELDS = (
    "total_tests",
    "passed",
    "failed",
    "pass_rate",
    "total_duration_ms",
    "metrics_evaluated",
    "average_scores",
)
REPORT_FIELDS = (
    "agent_name",
    "agent_config_path",
    "results",
    "summary",
    "timestamp",
    "holodeck_version",
    "environment",
)
METADATA_FIELDS = ("agent_config", "prompt_version", "holodeck_version", "cli_args", "git_commit")


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


def _pick(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {name: data.get(name) for name in fields}


def _metric(metric: MetricResult) -> dict[str, Any]:
    out = _pick(metric.model_dump(mode="json"), METRIC_RESULT_FIELDS)
    out["passed"] = bool(metric.passed)
    return out


def _tools(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_pick(item, TOOL_INVOCATION_FIELDS) for item in items]


def _result(result: TestResult) -> dict[str, Any]:
    dumped = result.model_dump(mode="json")
    out = _pick(dumped, RESULT_FIELDS)
    out["passed"] = result.status.value == "PASS"
    out["metric_results"] = [_metric(m) for m in result.metric_results]
    out["tool_invocations"] = _tools(dumped["tool_invocations"])
    if result.turns is not None:
        turns = []
        for turn, turn_dump in zip(result.turns, dumped["turns"], strict=True):
            turn_out = _pick(turn_dump, TURN_FIELDS)
            turn_out["metric_results"] = [_metric(m) for m in turn.metric_results]
            turn_out["tool_invocations"] = _tools(turn_dump["tool_invocations"])
            turns.append(turn_out)
        out["turns"] = turns
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
    if summary.passed != passed or summary.total_tests != total:
        summary_out["pass_rate"] = 100.0 * passed / total if total else 0.0
    report_out = _pick(report.model_dump(mode="json", exclude={"results"}), REPORT_FIELDS)
    report_out["results"] = [_result(r) for r in report.results]
    report_out["summary"] = summary_out
    report_out["environment"] = _environment(report.environment)
    meta = run.metadata
    meta_out = _pick(meta.model_dump(mode="json", exclude={"agent_config"}), METADATA_FIELDS)
    meta_out["agent_config"] = _agent_value(meta.agent_config)
    return {"report": report_out, "metadata": meta_out}


def to_ours(run: EvalRun) -> dict[str, Any]:
    """Our EvalRun document (what ``EvalRun.model_validate`` reads back)."""
    return run.model_dump(mode="json")


def holodeck_file_name(run: EvalRun) -> str:
    """HoloDeck's name for a run file: the report timestamp with ``:`` made file-safe."""
    stamp = utc_naive(run.report.timestamp)
    text = stamp.isoformat(timespec="milliseconds") + "Z" if stamp else "run"
    return text.replace(":", "-") + ".json"
