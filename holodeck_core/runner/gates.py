"""Run-level verdicts shared by the CLI and the pipelines' asset checks."""

from __future__ import annotations

from dataclasses import dataclass

from holodeck_core.models import Gate, ReportSummary


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    description: str


def check_gate(summary: ReportSummary, gate: Gate | None) -> GateVerdict:
    """``evaluations.gate`` in fractions (DESIGN §6.2); ERROR counts in the denominator."""
    rate = summary.passed / summary.total_tests if summary.total_tests else 0.0
    if gate is None:
        return GateVerdict(True, f"no gate configured; pass rate {rate:.1%}")
    problems = []
    if gate.min_pass_rate is not None and rate < gate.min_pass_rate:
        problems.append(f"pass rate {rate:.1%} is under the gate's {gate.min_pass_rate:.1%}")
    if gate.max_errors is not None and summary.errored > gate.max_errors:
        problems.append(f"{summary.errored} errored cases exceed max_errors {gate.max_errors}")
    if problems:
        return GateVerdict(False, "; ".join(problems))
    return GateVerdict(True, f"pass rate {rate:.1%}, {summary.errored} errored: within the gate")
