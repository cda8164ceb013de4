"""The Markdown a pull request gets (``holodeck test --summary FILE``, and the GitHub Actions
job summary): the verdict first, then the pass rate with its interval, the paired delta against
the baseline with its p-value, regressions, new failures, flaky cases and cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.defaults import OWN_MODEL_CANDIDATE
from holodeck_core.models import EvalRun, Status, TestResult
from holodeck_core.reports.markdown import markdown_code, markdown_text
from holodeck_core.stats.display import money

if TYPE_CHECKING:
    from holodeck_core.history.queries import Comparison

MAX_LISTED = 20


def render_pr_summary(
    run: EvalRun, comparison: Comparison | None, *, baseline: str | None, passed_gate: bool
) -> str:
    """``passed_gate``: the run's own verdict (exit code 0); a significant regression against
    the baseline fails the gate too."""
    report, summary = run.report, run.report.summary
    regressed = comparison is not None and comparison.is_regression
    ok = passed_gate and not regressed
    version = run.metadata.prompt_version.version
    lines = [
        f"## {'✅' if ok else '❌'} {markdown_text(report.agent_name)} · prompt "
        f"{markdown_text(version)}: "
        f"{'gate passed' if ok else 'gate failed'}",
        "",
        f"**{summary.passed} passed, {summary.failed} failed, {summary.errored} errored** of "
        f"{summary.total_tests}",
    ]
    stats = summary.statistics
    if stats is not None:
        lines.append(
            f"- pass rate: {stats.pass_rate.render(percent=True)}, {stats.trials} trial(s)"
        )
    else:
        lines.append(f"- pass rate: {summary.pass_rate:.1f}%")
    if summary.cost_usd is not None:
        delta = comparison.cost_delta if comparison is not None else None
        change = f" ({money(delta, sign=True)} vs the baseline)" if delta is not None else ""
        per_pass = summary.cost_per_pass
        each = f", {money(per_pass)} per passing case" if per_pass is not None else ""
        lines.append(f"- cost: {money(summary.cost_usd)}{each}{change}")
    else:
        lines.append("- cost: unknown (no price for this model)")
    own = _cell(version, run.metadata.model_candidate or OWN_MODEL_CANDIDATE)
    lines += _against(comparison, baseline, own)
    failing = {r.test_id or "": r for r in report.results if r.status is not Status.PASS}
    listed: list[str] = []
    if comparison is not None:
        regressions = [flip.case_id for flip in comparison.regressions]
        new = [case for case in failing if case in comparison.only_in_b]
        lines += _cases("Regressions (passed in the baseline)", regressions, failing)
        lines += _cases("New failures (cases the baseline did not have)", new, failing)
        listed = regressions + new
    others = [case for case in failing if case not in listed]
    lines += _cases("Failing" if not listed else "Other failing cases", others, failing)
    flaky = {*(stats.flaky_cases if stats else []), *(comparison.flaky if comparison else [])}
    lines += _cases("Flaky (trials or runs disagree)", sorted(flaky), failing)
    return "\n".join(lines) + "\n"


def _cell(prompt_version: object, model_candidate: object) -> str:
    """A configuration of the run's agent as the summary names it (Markdown-safe):
    ``prompt v2 · model large``."""
    return (
        f"prompt {markdown_text(str(prompt_version))} · model {markdown_text(str(model_candidate))}"
    )


def _against(comparison: Comparison | None, baseline: str | None, own: str) -> list[str]:
    """The baseline line: the configuration of the baseline's run and of this run (``own``
    when nothing was compared), and a warning when the baseline ran another model candidate
    (a baseline named by run id may)."""
    if baseline is None:
        return []
    if comparison is None:
        return [f"- baseline {markdown_text(baseline)}: no run to compare this run's {own} with"]
    base, head = comparison.a, comparison.b
    lines = [
        f"- baseline: {_cell(base.get('prompt_version'), base.get('model_candidate'))}, run "
        f"{markdown_code(str(base.get('run_id'))[:12])}, against this run's "
        f"{_cell(head.get('prompt_version'), head.get('model_candidate'))}: "
        f"{comparison.common_cases} shared cases"
    ]
    if base.get("model_candidate") != head.get("model_candidate"):
        lines.append(
            f"- **another model candidate**: the baseline ran model "
            f"{markdown_text(str(base.get('model_candidate')))}, this run model "
            f"{markdown_text(str(head.get('model_candidate')))}: the difference is the "
            "model's as much as the prompt's"
        )
    if comparison.paired is not None:
        lines.append(f"- paired: {comparison.paired.pass_fraction.render()}")
    lines += [f"- **regression**: {markdown_text(reason)}" for reason in comparison.reasons]
    return lines


def _cases(title: str, cases: list[str], failing: dict[str, TestResult]) -> list[str]:
    if not cases:
        return []
    lines = ["", f"### {title} ({len(cases)})", ""]
    for case in cases[:MAX_LISTED]:
        result = failing.get(case)
        why = ""
        if result is not None:
            reason = result.errors[0][:200] if result.errors else "below threshold"
            why = f" {result.status.value}: {markdown_text(reason)}"
        lines.append(f"- {markdown_code(case)}{why}")
    if len(cases) > MAX_LISTED:
        lines.append(f"- … and {len(cases) - MAX_LISTED} more")
    return lines
