"""Deterministic checks of the response: ``equality``, ``exact_match``, ``numeric``,
``contains``, ``regex``, ``json_valid``, ``json_schema``.

All are 0/1 scores that pass at 1.0 when no threshold is set. ``equality``, ``exact_match``,
``numeric``, ``contains`` and ``regex`` accept ``response_path`` (grade one JSON leaf).

A response that cannot be graded as configured (not JSON, not a number) fails with the
reason; a configuration that cannot be applied (a ground truth that is not a number, an
invalid JSON Schema) is an error result.
"""

from __future__ import annotations

import json
import math
import re
import string
import unicodedata
from typing import Any

from holodeck_core.metrics.base import (
    EvalContext,
    EvaluationDataError,
    MetricError,
    MetricInput,
    ResponseRejected,
    Score,
)
from holodeck_core.metrics.registry import REGISTRY
from holodeck_core.models.evaluation import StandardMetric

_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_THOUSANDS_SEPARATORS = ",_\u00a0\u202f"  # comma, underscore, no-break and narrow no-break
MAX_VIOLATIONS = 5


def normalize_text(
    value: str,
    *,
    case_insensitive: bool = False,
    strip_whitespace: bool = False,
    strip_punctuation: bool = False,
) -> str:
    """HoloDeck's equality normalization: casefold, drop ASCII punctuation, collapse runs of
    whitespace to one space and trim, each when asked."""
    out = value
    if case_insensitive:
        out = out.casefold()
    if strip_punctuation:
        out = out.translate(_PUNCTUATION)
    if strip_whitespace:
        out = _WHITESPACE.sub(" ", out).strip()
    return out


def _normalized(metric: StandardMetric, value: str) -> str:
    return normalize_text(
        value,
        case_insensitive=metric.case_insensitive,
        strip_whitespace=metric.strip_whitespace,
        strip_punctuation=metric.strip_punctuation,
    )


def _verdict(ok: bool, why: str | None = None, **details: Any) -> Score:
    return Score(score=1.0 if ok else 0.0, reasoning=None if ok else why, details=details)


def _response(inputs: MetricInput) -> str:
    return inputs.actual_output or ""


def _ground_truth(inputs: MetricInput) -> str:
    return inputs.expected_output or ""


@REGISTRY.metric(
    "equality",
    kind="standard",
    requires=("actual_output", "expected_output"),
    response_path=True,
    inline=True,
)
def equality(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Response equals the ground truth (HoloDeck: optional casefold, punctuation and
    whitespace normalization)."""
    left = _normalized(metric, _response(inputs))
    right = _normalized(metric, _ground_truth(inputs))
    return _verdict(left == right, f"{left[:200]!r} != {right[:200]!r}")


@REGISTRY.metric(
    "exact_match",
    kind="standard",
    requires=("actual_output", "expected_output"),
    response_path=True,
    inline=True,
)
def exact_match(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Like ``equality`` after Unicode NFC normalization and trimming both ends (a trailing
    newline from the model does not count), plus the same options."""

    def prepare(value: str) -> str:
        return _normalized(metric, unicodedata.normalize("NFC", value).strip())

    left, right = prepare(_response(inputs)), prepare(_ground_truth(inputs))
    return _verdict(left == right, f"{left[:200]!r} != {right[:200]!r}")


def parse_number(
    value: str, *, accept_percent: bool, accept_thousands_separators: bool
) -> float | str:
    """HoloDeck's number parsing: the number, or a one-line reason it is not one.

    A trailing ``%`` (with ``accept_percent``) divides by 100; ``,``, ``_`` and no-break
    spaces are stripped with ``accept_thousands_separators`` and rejected without it."""
    raw = value.strip()
    if not raw:
        return "value is empty"
    percent = raw.endswith("%")
    if percent and not accept_percent:
        return f"percent sign in {raw!r} but accept_percent is off"
    if percent:
        raw = raw[:-1].strip()
    if accept_thousands_separators:
        for char in _THOUSANDS_SEPARATORS:
            raw = raw.replace(char, "")
    elif any(char in raw for char in _THOUSANDS_SEPARATORS):
        return f"thousands separator in {raw!r} but accept_thousands_separators is off"
    try:
        number = float(raw)
    except ValueError:
        return f"{value!r} is not a number"
    if not math.isfinite(number):  # 'nan' never equals anything, 'inf' has no tolerance
        return f"{value!r} is not a finite number"
    return number / 100.0 if percent else number


@REGISTRY.metric(
    "numeric",
    kind="standard",
    requires=("actual_output", "expected_output"),
    response_path=True,
    inline=True,
)
def numeric(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Numbers within ``absolute_tolerance`` (inclusive) or ``relative_tolerance`` x
    ``|expected|`` of each other (HoloDeck semantics)."""
    options = {
        "accept_percent": metric.accept_percent,
        "accept_thousands_separators": metric.accept_thousands_separators,
    }
    ground_truth = _ground_truth(inputs)
    expected = parse_number(ground_truth, **options)
    if isinstance(expected, str):
        where = f"case {inputs.test_case_name!r}" if inputs.test_case_name else "the case"
        raise EvaluationDataError(
            f"{where}: metric {metric.display_name!r} needs a number as ground_truth, got "
            f"{ground_truth[:200]!r} ({expected}); fix the test case's ground_truth"
        )
    actual = parse_number(_response(inputs), **options)
    if isinstance(actual, str):
        raise ResponseRejected(f"response is not a number: {actual}")
    diff = abs(actual - expected)
    within_abs = diff <= metric.absolute_tolerance
    within_rel = metric.relative_tolerance > 0 and diff <= metric.relative_tolerance * abs(expected)
    return _verdict(
        within_abs or within_rel,
        f"{actual} differs from {expected} by {diff:g}",
        actual=actual,
        expected=expected,
        abs_diff=diff,
    )


@REGISTRY.metric(
    "contains", kind="standard", requires=("actual_output",), response_path=True, inline=True
)
def contains(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """The response contains ``pattern`` as a substring (equality's options apply to both)."""
    if not metric.pattern:
        raise MetricError("metric contains needs 'pattern'")
    needle = _normalized(metric, metric.pattern)
    return _verdict(
        needle in _normalized(metric, _response(inputs)), f"{metric.pattern!r} not found"
    )


@REGISTRY.metric("regex", kind="standard", requires=("actual_output",), response_path=True)
def regex(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """``re.search(pattern, response)`` finds a match (``case_insensitive`` -> IGNORECASE);
    anchor with ``^...$`` to match the whole response."""
    if not metric.pattern:
        raise MetricError("metric regex needs 'pattern'")
    flags = re.IGNORECASE if metric.case_insensitive else 0
    try:
        found = re.search(metric.pattern, _response(inputs), flags)
    except re.error as exc:
        raise MetricError(f"'pattern' is not a valid regular expression: {exc}") from exc
    if found is None:
        return _verdict(False, f"no match for /{metric.pattern}/")
    return _verdict(True, match=found.group(0)[:200], span=list(found.span()))


def _parse_json(response: str) -> Any:
    try:
        return json.loads(response)
    except ValueError as exc:
        hint = ""
        if response.lstrip().startswith("```"):
            hint = " (it is wrapped in a Markdown code fence)"
        raise ResponseRejected(f"response is not valid JSON{hint}: {exc}") from None


@REGISTRY.metric("json_valid", kind="standard", requires=("actual_output",), inline=True)
def json_valid(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """The response parses as JSON (strictly: no code fences, no trailing prose)."""
    document = _parse_json(_response(inputs))
    return _verdict(True, type=type(document).__name__)


def _json_pointer(path: Any) -> str:
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)


@REGISTRY.metric("json_schema", kind="standard", requires=("actual_output",))
def json_schema(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """The response is JSON valid against ``json_schema`` (jsonschema; the dialect follows
    the schema's ``$schema``, default 2020-12). Failures list the first violations."""
    import jsonschema
    from jsonschema.exceptions import SchemaError

    schema = metric.json_schema
    if schema is None:
        raise MetricError("metric json_schema needs 'json_schema'")
    validator_cls = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    try:
        validator_cls.check_schema(schema)
    except SchemaError as exc:
        raise MetricError(f"json_schema is not a valid JSON Schema: {exc.message}") from exc
    document = _parse_json(_response(inputs))
    errors = sorted(
        validator_cls(schema).iter_errors(document),
        key=lambda error: (list(map(str, error.absolute_path)), error.message),
    )
    violations = [f"{_json_pointer(error.absolute_path)}: {error.message}" for error in errors][
        :MAX_VIOLATIONS
    ]
    return _verdict(
        not errors,
        f"{len(errors)} schema violation(s): " + "; ".join(violations),
        violations=violations,
        violation_count=len(errors),
    )
