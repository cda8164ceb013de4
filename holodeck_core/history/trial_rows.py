"""A run's ``case_trials`` rows (one per trial; a case run once is its own trial 0) and its
``judge_control_scores`` rows (schema version 4)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from holodeck_core.history.tabular import TableRows
from holodeck_core.models import EvalRun, Status, TestResult
from holodeck_core.naming import slugify


def trial_tables(run: EvalRun, run_id: str, case_ids: list[str]) -> dict[str, TableRows]:
    fingerprints: dict[str, str] = run.metadata.provenance.get("case_fingerprints") or {}
    rows: list[dict[str, Any]] = []
    for case_id, result in zip(case_ids, run.report.results, strict=True):
        for trial, outcome in enumerate(result.trials or [result]):
            rows.append(
                {
                    "run_id": run_id,
                    "case_id": case_id,
                    "trial": trial,
                    "case_fingerprint": fingerprints.get(case_id),
                    "status": outcome.status.value,
                    "passed": outcome.status is Status.PASS,
                    "agent_response": outcome.agent_response,
                    "errors": list(outcome.errors),
                    "execution_time_ms": outcome.execution_time_ms,
                    "total_tokens": outcome.token_usage.total_tokens
                    if outcome.token_usage
                    else None,
                    "scores": _scores(outcome),
                }
            )
    controls = [
        {
            "run_id": run_id,
            "agent_slug": slugify(run.report.agent_name),
            "control_id": score.control_id,
            "metric_name": score.metric_name,
            "judge_model": score.judge_model,
            "score": score.score,
            "error": score.error,
            "recorded_at": datetime.now(UTC).replace(tzinfo=None),
            "passed": score.passed,
            "human_passed": score.human_passed,
            "human_score": score.human_score,
        }
        for score in run.report.judge_control or []
    ]
    return {
        "case_trials": TableRows.of_dicts("case_trials", rows),
        "judge_control_scores": TableRows.of_dicts("judge_control_scores", controls),
    }


def _scores(result: TestResult) -> str | None:
    """The trial's mean score per metric (over turns), as JSON."""
    scores = result.outcome().scores
    return json.dumps(dict(sorted(scores.items()))) if scores else None
