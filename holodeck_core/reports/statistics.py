"""The run statistics (docs/cli.md) as text lines and flat properties, shared by the console
summary, the Markdown report, JUnit and the Dagster metadata."""

from __future__ import annotations

from holodeck_core.stats import Estimate, RunStatistics
from holodeck_core.stats.intervals import HALL_T

MAX_FLAKY_SHOWN = 10


def statistics_lines(stats: RunStatistics, *, verbose: bool = True) -> list[str]:
    """The run's statistics, each interval's method named once at the end. Without
    ``verbose`` (the console without ``-v``, whose headline has the pass rate): no pass-rate
    and no per-metric lines."""
    rate = stats.pass_rate
    what = "pass rate" if stats.trials == 1 else f"pass fraction over {stats.trials} trials"
    lines = [f"{what}: {rate.render(percent=True, method=False)}"] if verbose else []
    if stats.trials > 1 and verbose:
        lines[0] += f"; cases decided by reducer '{stats.reducer.value}'"
    if stats.infrastructure_failure and verbose:
        lines.insert(0, infrastructure_line(stats))
    if stats.pass_at_k and stats.pass_hat_k:
        k = stats.trials
        lines.append(
            f"pass@1 {stats.pass_at_k[1]:.3f} · pass@{k} {stats.pass_at_k[k]:.3f} · "
            f"pass^{k} {stats.pass_hat_k[k]:.3f}"
        )
    if stats.flaky_cases:
        shown = ", ".join(stats.flaky_cases[:MAX_FLAKY_SHOWN])
        more = "…" if len(stats.flaky_cases) > MAX_FLAKY_SHOWN else ""
        lines.append(
            f"flaky: {len(stats.flaky_cases)} case(s) whose trials disagree: {shown}{more}"
        )
    if verbose:
        for name, estimate in stats.metrics.items():
            lines.append(f"{name}: mean {estimate.render(method=False)}")
    return [*lines, methods_line(stats, metrics=verbose)]


def infrastructure_line(stats: RunStatistics) -> str:
    return (
        f"infrastructure failure: {stats.errored_cases} of {stats.cases} cases ERROR (more "
        f"than evaluations.max_error_share {stats.max_error_share:g}); not evidence about "
        "the prompt: kept out of trends, baselines and comparisons (--include-failed "
        "keeps it)"
    )


def methods_line(stats: RunStatistics, *, metrics: bool = True) -> str:
    """Once per run: ``intervals (95%): Wilson … (pass rate, 0-1 scores); Student t …
    (scores in a unit)``."""
    kinds: dict[str, list[str]] = {stats.pass_rate.method_name: ["pass rate"]}
    for estimate in stats.metrics.values() if metrics else ():
        kind = "0-1 scores" if estimate.method != HALL_T else "ms and USD"
        named = kinds.setdefault(estimate.method_name, [])
        named += [] if kind in named else [kind]
    methods = "; ".join(f"{name} ({', '.join(what)})" for name, what in kinds.items())
    return f"intervals ({stats.pass_rate.confidence:.0%}): {methods}"


def statistics_properties(stats: RunStatistics) -> dict[str, float | int]:
    """Flat numbers: ``pass_rate.ci95_low``, ``metric.<name>.se``, ``pass_at_k.5``, ..."""
    out: dict[str, float | int] = {"trials": stats.trials, "cases": stats.cases}
    out.update(_estimate("pass_rate", stats.pass_rate))
    for name, estimate in stats.metrics.items():
        out.update(_estimate(f"metric.{name}", estimate))
    for label, values in (("pass_at_k", stats.pass_at_k), ("pass_hat_k", stats.pass_hat_k)):
        for k, value in (values or {}).items():
            out[f"{label}.{k}"] = value
    out["flaky_cases"] = len(stats.flaky_cases)
    out["infrastructure_failure"] = int(stats.infrastructure_failure)
    return out


def _estimate(prefix: str, estimate: Estimate) -> dict[str, float | int]:
    out: dict[str, float | int] = {f"{prefix}.mean": estimate.mean, f"{prefix}.n": estimate.n}
    for key, value in (
        ("se", estimate.se),
        ("ci95_low", estimate.low),
        ("ci95_high", estimate.high),
    ):
        if value is not None:
            out[f"{prefix}.{key}"] = value
    return out
