"""Run-level verdicts shared by the CLI and the pipelines' asset checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from holodeck_core.errors import ExitCode
from holodeck_core.models import Gate, ReportSummary, Status, TestResult


@dataclass(frozen=True)
class GateVerdict:
    passed: bool
    description: str
    rule: str
    """The gate as configured, e.g. ``min_pass_rate 80%, max_errors 0``."""
    rate_below: bool = False
    """The pass rate is under ``min_pass_rate``."""
    errors_tolerated: bool = False
    """``max_errors`` is set and the errored cases are within it."""

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
    """``evaluations.gate`` in fractions (docs/history.md); ERROR counts in the denominator."""
    return _verdict(summary.passed, summary.total_tests, summary.errored, gate)


def _verdict(passed: int, total: int, errored: int, gate: Gate | None) -> GateVerdict:
    rate = passed / total if total else 0.0
    rule = gate_rule(gate)
    if gate is None:
        return GateVerdict(True, f"no gate configured; pass rate {rate:.1%}", rule)
    rate_below = gate.min_pass_rate is not None and rate < gate.min_pass_rate
    errors_over = gate.max_errors is not None and errored > gate.max_errors
    problems = []
    if rate_below:
        problems.append(f"pass rate {rate:.1%} is under the gate's {gate.min_pass_rate:.1%}")
    if errors_over:
        problems.append(f"{errored} errored cases exceed max_errors {gate.max_errors}")
    tolerated = gate.max_errors is not None and not errors_over
    if problems:
        return GateVerdict(False, "; ".join(problems), rule, rate_below, tolerated)
    return GateVerdict(
        True, f"pass rate {rate:.1%}, {errored} errored: within the gate", rule, False, tolerated
    )


def exit_code(results: Sequence[TestResult], gate: Gate | None) -> ExitCode:
    """The exit code (docs/cli.md), from the gate's one verdict: 3 for an execution ERROR, 4 for an
    ERROR from a fail_on_error metric only, 1 for a FAIL, else 0. With ``evaluations.gate``, the
    gate decides FAIL (by ``min_pass_rate``) and ERRORs are tolerated up to an explicit
    ``max_errors``; without one, any FAIL fails and any ERROR is an error."""
    errors = [r for r in results if r.status is Status.ERROR]
    passed = sum(1 for r in results if r.status is Status.PASS)
    verdict = _verdict(passed, len(results), len(errors), gate)
    codes = [ExitCode.OK]
    if not verdict.errors_tolerated:
        codes += [
            ExitCode.EVALUATION if r.error_source == "evaluation" else ExitCode.EXECUTION
            for r in errors
        ]
    failed = any(r.status is Status.FAIL for r in results) if gate is None else verdict.rate_below
    if failed:
        codes.append(ExitCode.FAILED)
    return ExitCode.worst(*codes)
