"""A run's report: its cases' results, their summary and the judge-control scores (HoloDeck
0.7.1's ``TestReport``)."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from holodeck_core.models.base import StrictModel, omit_if_none
from holodeck_core.models.results import ReportSummary, TestResult, iso8601


class JudgeControlScore(StrictModel):
    """A judge's score of one fixed judge-control row on this run (judge drift, uncached)."""

    control_id: str
    metric_name: str
    judge_model: str | None = None
    score: float | None = None
    passed: bool | None = None
    """The judge's verdict against the metric's threshold (None: errored, or recorded before)."""
    human_passed: bool | None = None
    """A person's verdict on the row (the control file's ``human``), if given."""
    human_score: float | None = None
    error: str | None = None


class TestReport(StrictModel):
    __test__ = False

    agent_name: str = Field(min_length=1)
    agent_config_path: str
    results: list[TestResult] = Field(min_length=1)
    summary: ReportSummary
    timestamp: str
    holodeck_version: str
    environment: dict[str, Any] = Field(default_factory=dict)
    judge_control: list[JudgeControlScore] | None = Field(
        None, description="evaluations.judge_control re-scored by this run's judges."
    )

    _ts = field_validator("timestamp")(iso8601)

    @model_serializer(mode="wrap")
    def _without_control(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return omit_if_none(self, handler, "judge_control")

    @model_validator(mode="after")
    def _totals(self) -> TestReport:
        if self.summary.total_tests != len(self.results):
            raise ValueError(
                f"summary.total_tests ({self.summary.total_tests}) must equal the number of "
                f"results ({len(self.results)})"
            )
        return self
