"""HoloDeck 0.7.1 EvalRun files in, with inference (the export side is
:mod:`~holodeck_core.history.holodeck_export`).

A file without ``metadata.run_id`` is a HoloDeck file (docs/history.md). Its run id is the sha256
of the file's bytes (file names repeat across agents), its trigger ``import``, and what 0.7.1
does not record is inferred: metric ``kind`` from the metric's name and the agent's metric
config, case ids (docs/architecture.md), ERROR vs FAIL (from ``TestResult``'s own rule), the
summary's ``errored`` count, config and dataset hashes, and an estimated start time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from holodeck_core.config.project import superset_of
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history.rows import derived_case_ids, sha256_hex, utc_naive
from holodeck_core.models import EvalRun, bounded_json
from holodeck_core.models.bounded_json import BoundedJSONError
from holodeck_core.models.evaluation import HOLODECK_STANDARD_METRICS as HOLODECK_STANDARD_METRICS
from holodeck_core.models.evaluation import LEGACY_JUDGE_METRICS
from holodeck_core.models.outside import invalid_at

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
    """Read an EvalRun file: ours as is, a HoloDeck 0.7.1 one with inference; of a run's two
    files (docs/holodeck-fidelity.md), the superset beside the one named if it is there.

    Raises :class:`NotAnEvalRun` for JSON that is not an EvalRun, :class:`ConfigError` for
    an EvalRun that does not validate."""
    path = superset_of(path)
    return load_run_bytes(path, path.read_bytes())


def load_run_bytes(path: Location, data: bytes) -> LoadedRun:
    """:func:`load_run_file` for bytes already read from ``path``."""
    digest = sha256_hex(data)
    try:
        raw = bounded_json.loads(data)
    except BoundedJSONError as exc:  # valid JSON we refuse to read: a problem in any folder
        raise ConfigError([Problem(file=str(path), message=f"{exc}; not read")]) from None
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
    invalid = invalid_at(run.model_dump())
    if invalid is not None:
        raise ConfigError(
            [Problem(file=str(path), path=invalid[0], message=f"{invalid[1]}; not read")]
        )
    if imported:
        run = _complete(run)
    return LoadedRun(
        run=run,
        run_id=run.metadata.run_id or digest,
        path=path,
        file_sha256=digest,
        imported=imported,
    )
