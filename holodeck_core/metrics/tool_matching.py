"""Expected tools vs the tools the agent called (HoloDeck 0.7.1 semantics), and the
``tool_correctness`` metric. The runner (``tools_matched``) and the metric share
:func:`match_expected_tools`.

Semantics:

* A bare string expects a call whose tool name **contains** it (case-sensitive), as does an
  object's ``name``.
* ``args`` asserts only the listed arguments; other arguments are ignored. Matchers:

  - a literal: equal JSON values, ``1 == 1.0``, booleans strict (``true != 1``), lists and
    objects compared element by element;
  - ``{fuzzy: text}``: numbers compare numerically when both sides parse as numbers
    (``"1,234"`` ~ ``1234``, ``"5%"`` ~ ``0.05``); otherwise rapidfuzz
    ``token_set_ratio`` after lowercasing and stripping non-alphanumerics is at least
    :data:`FUZZY_THRESHOLD` (80), so ``paris`` ~ ``Paris``, ``Paris, France`` or ``Pariss``;
  - ``{regex: pattern}``: ``re.fullmatch`` over ``str(value)``, as HoloDeck 0.7.1's
    ``tool_arg_matcher.match_regex`` does (``Rome`` does not match ``Rome, Italy``; write
    ``Rome.*`` for a prefix). The ``regex`` *metric* searches instead.
* ``count`` is a minimum number of calls satisfying name and arguments.
* Calls that satisfy no expectation are reported as extra; they never fail a match.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from holodeck_core.metrics.base import EvalContext, MetricInput, Score
from holodeck_core.metrics.registry import REGISTRY
from holodeck_core.models.evaluation import StandardMetric
from holodeck_core.models.results import ToolInvocation
from holodeck_core.models.test_case import ExpectedTool, FuzzyMatcher, RegexMatcher

FUZZY_THRESHOLD = 80.0
"""Minimum rapidfuzz ``token_set_ratio`` (0-100) for a ``{fuzzy: ...}`` argument match."""

_NUMBER_SEPARATORS = re.compile(r"[,_\s\u00a0\u202f]")


@dataclass(frozen=True)
class ExpectationResult:
    """How one expected tool fared."""

    expected: str | ExpectedTool
    label: str
    matched: bool
    matching_calls: tuple[int, ...]
    reason: str | None = None

    @property
    def message(self) -> str | None:
        """``expected get_weather(city~^Rome$): arg 'city' mismatch: ...`` when unmatched."""
        return None if self.matched else f"expected {self.label}: {self.reason}"


@dataclass(frozen=True)
class ToolMatchReport:
    """All expectations against all calls."""

    expectations: tuple[ExpectationResult, ...]
    extra_calls: tuple[int, ...]
    invocations: tuple[ToolInvocation, ...] = field(repr=False, default=())

    @property
    def matched(self) -> bool:
        return all(result.matched for result in self.expectations)

    @property
    def matched_count(self) -> int:
        return sum(1 for result in self.expectations if result.matched)

    @property
    def score(self) -> float:
        """Matched expectations / expectations; 1.0 when nothing is expected."""
        if not self.expectations:
            return 1.0
        return self.matched_count / len(self.expectations)

    @property
    def missing(self) -> list[str]:
        """One message per unmatched expectation (HoloDeck's wording)."""
        return [result.message for result in self.expectations if result.message]

    def extra_call_summaries(self) -> list[dict[str, Any]]:
        return [
            {
                "index": index,
                "name": self.invocations[index].name,
                "args": self.invocations[index].args,
            }
            for index in self.extra_calls
        ]

    def arg_match_details(self) -> list[dict[str, Any]]:
        """HoloDeck's ``arg_match_details`` entries for object-form expectations."""
        rows = []
        for result in self.expectations:
            expected = result.expected
            if isinstance(expected, str) or (expected.args is None and expected.count == 1):
                continue
            rows.append(
                {
                    "expected_tool": expected.name,
                    "args_asserted": dict(expected.args or {}),
                    "matched_call_index": result.matching_calls[0] if result.matched else -1,
                    "unmatched_reason": result.reason,
                }
            )
        return rows


def match_expected_tools(
    expected: Sequence[str | ExpectedTool], invocations: Sequence[ToolInvocation]
) -> ToolMatchReport:
    """Match every expectation against the calls; see the module docstring."""
    calls = tuple(invocations)
    results = [_match_one(item, calls) for item in expected]
    used = {index for result in results for index in result.matching_calls}
    extra = tuple(index for index in range(len(calls)) if index not in used)
    return ToolMatchReport(expectations=tuple(results), extra_calls=extra, invocations=calls)


def expectation_label(expected: str | ExpectedTool) -> str:
    """``get_weather(city~^Rome$)``: ``=`` literal, ``≈`` fuzzy, ``~`` regex; ``xN`` count."""
    if isinstance(expected, str):
        return expected
    parts = []
    for arg in expected.args or {}:
        matcher = expected.matcher(arg)
        if isinstance(matcher, RegexMatcher):
            parts.append(f"{arg}~{matcher.regex}")
        elif isinstance(matcher, FuzzyMatcher):
            parts.append(f"{arg}≈{matcher.fuzzy}")
        else:
            parts.append(f"{arg}={json.dumps(matcher, ensure_ascii=False)}")
    label = f"{expected.name}({', '.join(parts)})" if expected.args else expected.name
    return f"{label} x{expected.count}" if expected.count > 1 else label


def _match_one(
    expected: str | ExpectedTool, calls: tuple[ToolInvocation, ...]
) -> ExpectationResult:
    spec = ExpectedTool(name=expected) if isinstance(expected, str) else expected
    label = expectation_label(expected)
    named = [index for index, call in enumerate(calls) if spec.name in call.name]
    if not named:
        return ExpectationResult(expected, label, False, (), f"no call to '{spec.name}' found")
    satisfying: list[int] = []
    last_reason: str | None = None
    for index in named:
        reason = _args_mismatch(spec, calls[index].args)
        if reason is None:
            satisfying.append(index)
        else:
            last_reason = reason
    if len(satisfying) >= spec.count:
        return ExpectationResult(expected, label, True, tuple(satisfying))
    if not satisfying:
        reason = last_reason or f"no call to '{spec.name}' satisfied all args"
    else:
        reason = f"expected {spec.count} matching call(s), got {len(satisfying)}"
    return ExpectationResult(expected, label, False, tuple(satisfying), reason)


def _args_mismatch(spec: ExpectedTool, actual_args: dict[str, Any]) -> str | None:
    for arg in spec.args or {}:
        if arg not in actual_args:
            return f"arg '{arg}' missing"
        reason = _arg_mismatch(spec.matcher(arg), actual_args[arg])
        if reason is not None:
            return f"arg '{arg}' mismatch: {reason}"
    return None


def _arg_mismatch(matcher: Any, actual: Any) -> str | None:
    if isinstance(matcher, RegexMatcher):
        if re.fullmatch(matcher.regex, str(actual)) is None:
            return f"expected regex {matcher.regex!r}, got {actual!r}"
        return None
    if isinstance(matcher, FuzzyMatcher):
        if not fuzzy_matches(matcher.fuzzy, actual):
            return f"expected ≈{matcher.fuzzy!r}, got {actual!r}"
        return None
    if not literal_matches(matcher, actual):
        return f"expected {matcher!r}, got {actual!r}"
    return None


def literal_matches(expected: Any, actual: Any) -> bool:
    """JSON-value equality with ``1 == 1.0`` and strict booleans (HoloDeck)."""
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            literal_matches(e, a) for e, a in zip(expected, actual, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(
            literal_matches(expected[key], actual[key]) for key in expected
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(expected) == float(actual)
    return bool(expected == actual)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    text = _NUMBER_SEPARATORS.sub("", str(value).strip().lower())
    percent = text.endswith("%")
    try:
        number = float(text[:-1] if percent else text)
    except ValueError:
        return None
    return number / 100.0 if percent else number


def fuzzy_matches(expected: str, actual: Any) -> bool:
    """Numbers numerically (abs tol 1e-9), text by rapidfuzz ``token_set_ratio`` ≥ 80."""
    from rapidfuzz import fuzz, utils

    expected_number, actual_number = _as_number(expected), _as_number(actual)
    if (
        expected_number is not None
        and actual_number is not None
        and math.isfinite(expected_number)
        and math.isfinite(actual_number)
    ):
        return math.isclose(expected_number, actual_number, rel_tol=0.0, abs_tol=1e-9)
    ratio = fuzz.token_set_ratio(expected, str(actual), processor=utils.default_process)
    return bool(ratio >= FUZZY_THRESHOLD)


@REGISTRY.metric(
    "tool_correctness",
    kind="standard",
    requires=("expected_tools", "tool_invocations"),
)
def tool_correctness(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Share of expected tools (with their arguments) the agent called; extra calls are
    reported, never penalized."""
    report = match_expected_tools(inputs.expected_tools or (), inputs.tool_invocations)
    return Score(
        score=report.score,
        reasoning="; ".join(report.missing) or None,
        details={
            "expected": len(report.expectations),
            "matched": report.matched_count,
            "missing": report.missing,
            "extra_calls": report.extra_call_summaries(),
        },
    )
