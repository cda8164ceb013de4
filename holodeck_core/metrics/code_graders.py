"""``type: code`` metrics: a user's Python grader, HoloDeck 0.7.1's contract.

``grader: module:callable`` names a module under the agent directory (``graders.checks``
is ``<agent dir>/graders/checks.py`` or ``.../checks/__init__.py``) or, failing that, an
importable module. The callable receives a :class:`GraderContext` and returns

* ``bool``: score 1.0 / 0.0, passed as returned;
* a number in 0-1: the score; passes at ``threshold`` (default 0.5);
* a :class:`GraderResult`, or any object or mapping with ``score`` (and optionally
  ``passed``, ``reason``, ``details``): ``passed`` wins over the threshold when given.

A grader that raises, returns something else, or cannot be imported yields an error result;
other metrics and cases go on. Modules are loaded from their file under a private module name
(two agents may both have ``graders/checks.py``), with the agent directory on ``sys.path``
only while the module is imported, so graders import their own helpers absolutely
(``from graders.util import x``); relative imports are not supported. Graders written for
HoloDeck that import ``holodeck.lib.test_runner.code_grader`` get this module's
``GraderContext`` and ``GraderResult`` when HoloDeck itself is not installed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import math
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodeck_core.config.graders import find_grader_file, parse_grader_reference
from holodeck_core.metrics.base import EvalContext, MetricError, MetricInput, Score
from holodeck_core.metrics.registry import REGISTRY, ThresholdPolicy
from holodeck_core.models.evaluation import METRIC_THRESHOLDS, CodeMetric
from holodeck_core.models.results import ToolInvocation

_HOLODECK_SHIM = "holodeck.lib.test_runner.code_grader"
_LOCK = threading.RLock()
_LOADED: dict[tuple[str, int], types.ModuleType] = {}


@dataclass(frozen=True)
class GraderContext:
    """What a grader sees for one turn (single-turn cases are turn 0)."""

    turn_input: str
    agent_response: str
    ground_truth: str | None
    tool_invocations: tuple[ToolInvocation, ...]
    retrieval_context: tuple[str, ...] | None
    turn_index: int
    test_case_name: str | None
    turn_config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GraderResult:
    """A grader's structured answer: ``score`` in 0-1; ``passed`` overrides the threshold."""

    score: float
    passed: bool | None = None
    reason: str | None = None
    details: dict[str, Any] | None = None


Grader = Callable[[GraderContext], Any]


@contextlib.contextmanager
def _import_environment(base_dir: Path | None) -> Iterator[None]:
    """The agent dir on ``sys.path`` and HoloDeck's grader module shimmed, during import."""
    added_path = str(base_dir) if base_dir is not None else None
    shimmed: list[str] = []
    with _LOCK:
        if added_path is not None:
            sys.path.insert(0, added_path)
        if "holodeck" not in sys.modules and importlib.util.find_spec("holodeck") is None:
            for name in ("holodeck", "holodeck.lib", "holodeck.lib.test_runner", _HOLODECK_SHIM):
                shim = types.ModuleType(name)
                shim.__path__ = []
                sys.modules[name] = shim
                shimmed.append(name)
            grader_shim = sys.modules[_HOLODECK_SHIM]
            grader_shim.GraderContext = GraderContext  # type: ignore[attr-defined]
            grader_shim.GraderResult = GraderResult  # type: ignore[attr-defined]
        try:
            yield
        finally:
            for name in shimmed:
                sys.modules.pop(name, None)
            if added_path is not None:
                with contextlib.suppress(ValueError):
                    sys.path.remove(added_path)


def _load_module(module: str, base_dir: Path | None) -> tuple[types.ModuleType, str]:
    path = find_grader_file(module, base_dir) if base_dir is not None else None
    if path is None:
        with _import_environment(base_dir):
            try:
                return importlib.import_module(module), module
            except ModuleNotFoundError as exc:
                if exc.name is not None and (module + ".").startswith(exc.name + "."):
                    where = f"under {base_dir} or " if base_dir is not None else ""
                    raise MetricError(
                        f"grader module {module!r} not found {where}on sys.path"
                    ) from exc
                raise
    resolved = path.resolve()
    key = (str(resolved), resolved.stat().st_mtime_ns)
    with _LOCK:
        if key in _LOADED:
            return _LOADED[key], str(path)
        digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
        private_name = f"_holodeck_grader_{digest}_{module.replace('.', '_')}"
        package = [str(resolved.parent)] if resolved.name == "__init__.py" else None
        spec = importlib.util.spec_from_file_location(
            private_name, resolved, submodule_search_locations=package
        )
        if spec is None or spec.loader is None:
            raise MetricError(f"cannot load grader module {module!r} from {path}")
        loaded = importlib.util.module_from_spec(spec)
        sys.modules[private_name] = loaded
        try:
            with _import_environment(base_dir):
                spec.loader.exec_module(loaded)
        except BaseException:
            sys.modules.pop(private_name, None)
            raise
        _LOADED[key] = loaded
        return loaded, str(path)


def load_grader(grader: str, base_dir: Path | None) -> Grader:
    """Import ``module:callable`` (see the module docstring); :class:`MetricError` when it
    cannot be imported or is not callable. The module runs: use
    :func:`check_grader_reference` to validate configs without running code."""
    try:
        module, name = parse_grader_reference(grader)
    except ValueError as exc:
        raise MetricError(str(exc)) from None
    try:
        loaded, where = _load_module(module, base_dir)
    except MetricError:
        raise
    except (Exception, SystemExit) as exc:
        raise MetricError(
            f"cannot import grader module {module!r} for {grader!r}: {type(exc).__name__}: {exc}"
        ) from exc
    function = getattr(loaded, name, None)
    if function is None:
        raise MetricError(f"grader module {module!r} ({where}) has no callable {name!r}")
    if not callable(function):
        raise MetricError(f"grader {grader!r}: {name!r} in {where} is not callable")
    return function  # type: ignore[no-any-return]


def _field(raw: Any, name: str) -> Any:
    if isinstance(raw, Mapping):
        return raw.get(name)
    return getattr(raw, name, None)


def normalize_grader_return(raw: Any) -> GraderResult:
    """Turn what a grader returned into a :class:`GraderResult`, or raise
    :class:`MetricError` saying why it cannot be used."""
    if isinstance(raw, GraderResult):
        value: Any = raw.score
        passed, reason, details = raw.passed, raw.reason, raw.details
    elif isinstance(raw, bool):
        return GraderResult(score=1.0 if raw else 0.0, passed=raw)
    elif isinstance(raw, int | float):
        value, passed, reason, details = raw, None, None, None
    elif (isinstance(raw, Mapping) and "score" in raw) or hasattr(raw, "score"):
        value = _field(raw, "score")
        passed, reason, details = (
            _field(raw, "passed"),
            _field(raw, "reason"),
            _field(raw, "details"),
        )
    else:
        raise MetricError(
            f"grader returned {type(raw).__name__}; expected bool, a 0-1 number or a result "
            "with score/passed/reason"
        )
    if isinstance(value, bool):
        value = 1.0 if value else 0.0
    if not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        raise MetricError(f"grader score {value!r} is not a number in 0-1")
    if passed is not None and not isinstance(passed, bool):
        raise MetricError(f"grader 'passed' must be true, false or null, got {passed!r}")
    if details is not None:
        if not isinstance(details, Mapping):
            raise MetricError(f"grader 'details' must be a mapping, got {type(details).__name__}")
        try:
            json.dumps(details)
        except (TypeError, ValueError) as exc:
            raise MetricError(f"grader 'details' are not JSON-serializable: {exc}") from exc
        details = dict(details)
    return GraderResult(
        score=float(value),
        passed=passed,
        reason=None if reason is None else str(reason),
        details=details,
    )


def grader_context(inputs: MetricInput) -> GraderContext:
    return GraderContext(
        turn_input=inputs.input or "",
        agent_response=inputs.actual_output or "",
        ground_truth=inputs.expected_output,
        tool_invocations=tuple(inputs.tool_invocations),
        retrieval_context=inputs.retrieval_context,
        turn_index=inputs.turn_index,
        test_case_name=inputs.test_case_name,
        turn_config=dict(inputs.turn_config),
    )


@REGISTRY.metric(
    "code",
    kind="code",
    requires=("actual_output",),
    policy=ThresholdPolicy.DEFAULT,
    default_threshold=METRIC_THRESHOLDS["code"],
)
def code_grader(metric: CodeMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Run the user's grader; passes by its ``passed`` or at ``threshold`` (default 0.5)."""
    function = load_grader(metric.grader, ctx.base_dir)
    try:
        raw = function(grader_context(inputs))
    except (Exception, SystemExit) as exc:
        raise MetricError(f"grader {metric.grader!r} raised {type(exc).__name__}: {exc}") from exc
    if inspect.isawaitable(raw):
        close = getattr(raw, "close", None)
        if callable(close):
            close()
        raise MetricError(f"grader {metric.grader!r} is async; graders must be synchronous")
    result = normalize_grader_return(raw)
    details: dict[str, Any] = {"grader": metric.grader}
    if result.details:
        details["grader_details"] = result.details
    return Score(score=result.score, passed=result.passed, reasoning=result.reason, details=details)
