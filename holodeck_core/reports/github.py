"""GitHub Actions workflow commands: one ``::error`` annotation per failing case (FAIL and
ERROR), escaped as the runner expects, so a pull request's checks list names the cases."""

from __future__ import annotations

from holodeck_core.models import EvalRun, Status


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def error_annotations(run: EvalRun, *, file: str | None = None) -> list[str]:
    """``::error file=agent.yaml,title=<agent> <case> FAIL::<why>`` for each case that did
    not pass (``file``: where the annotation points, the agent file)."""
    lines = []
    agent = run.report.agent_name
    for result in run.report.results:
        if result.status is Status.PASS:
            continue
        case = result.test_name or result.test_id or "case"
        if result.errors:
            why = result.errors[0]
        else:
            failed = [m.metric_name for m in result.metric_results if m.passed is False]
            why = f"below threshold: {', '.join(failed)}" if failed else "failed"
        where = f"file={_property(file)}," if file else ""
        title = _property(f"{agent} · {case} {result.status.value}")
        lines.append(f"::error {where}title={title}::{_data(why[:1000])}")
    return lines
