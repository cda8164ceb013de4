"""Run-level verdicts shared by the CLI and the pipelines' asset checks."""

from __future__ import annotations

from dataclasses import dataclass

from holodeck_core.models import Gate, ReportSummary


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    description: str
    rule: str
    """The gate as configured, e.g. ``min_pass_rate 80%, max_errors 0``."""

    @property
    def line(self) -> str:
        """One line a user reads: the gate, its thresholds and its result."""
        return f"gate ({self.rule}): {'PASSED' if self.passed else 'FAILED'}: {self.description}"


def gate_rule(gate: Gate | None) -> str:
    if gate is None:
        return "none configured"
    parts = []
    if gate.min_pass_rate is not None:
        parts.append(f"min_pass_rate {gate.min_pass_rate:.0%}")
    if gate.max_errors is not None:
        parts.append(f"max_errors {gate.max_errors}")
    return ", ".join(parts) or "no thresholds set"


def check_gate(summary: ReportSummary, gate: Gate | None) -> GateVerdict:
    """``evaluations.gate`` in fractions (DESIGN §6.2); ERROR counts in the denominator."""
    rate = summary.passed / summary.total_tests if summary.total_tests else 0.0
    rule = gate_rule(gate)
    if gate is None:
        return GateVerdict(True, f"no gate configured; pass rate {rate:.1%}", rule)
    problems = []
    if gate.min_pass_rate is not None and rate < gate.min_pass_rate:
        problems.append(f"pass rate {rate:.1%} is under the gate's {gate.min_pass_rate:.1%}")
    if gate.max_errors is not None and summary.errored > gate.max_errors:
        problems.append(f"{summary.errored} errored cases exceed max_errors {gate.max_errors}")
    if problems:
        return GateVerdict(False, "; ".join(problems), rule)
    return GateVerdict(
        True, f"pass rate {rate:.1%}, {summary.errored} errored: within the gate", rule
    )
