"""How ``holodeck history`` shows things: rich tables on a terminal, CSV or JSON when asked.
Text from the history is never read as markup (:func:`holodeck_core.terminal.plain`).

Imported by the command handlers only, so ``holodeck --help`` never loads rich."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from holodeck_core.defaults import OWN_MODEL_CANDIDATE
from holodeck_core.engine.history import money, number
from holodeck_core.terminal import one_line, plain

if TYPE_CHECKING:
    from holodeck_core.engine.history import CaseFlip, Comparison, RunDetail


def out() -> Console:
    """stdout; wide when it is not a terminal, so piped tables are not cut to 80 columns."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def err() -> Console:
    return Console(stderr=True, highlight=False)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.1f}%"


def _num(value: Any) -> str:
    return "-" if value is None else f"{int(value):,}"


def _usd(value: Any) -> str:
    return money(None if value is None else float(value))


def _batched(run: dict[str, Any]) -> list[tuple[str, str]]:
    """``history show``'s line on the calls batches answered, at the batch prices (none
    without them)."""
    if not run["batch_calls"]:
        return []
    return [("of it batched", f"{_usd(run['batch_usd'])} in {_num(run['batch_calls'])} calls")]


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _short(run_id: str) -> str:
    return run_id[:12]


def print_rows(columns: list[str], rows: Sequence[Sequence[Any]], fmt: str) -> None:
    if fmt == "csv":
        from holodeck_core.engine.history import csv_text
        from holodeck_core.terminal import printable

        # on a terminal, stored escape sequences are shown, not obeyed; a pipe gets the data
        shown = printable if sys.stdout.isatty() else str
        texts = ([shown(v) if isinstance(v, str) else v for v in row] for row in rows)
        sys.stdout.write(csv_text(columns, texts, for_shell=True))
        return
    if fmt == "json":
        import json

        records = [dict(zip(columns, row, strict=True)) for row in rows]
        sys.stdout.write(json.dumps(records, indent=2, default=str, ensure_ascii=False) + "\n")
        return
    table = Table(show_lines=False)
    for column in columns:
        table.add_column(plain(column), overflow="fold")
    for row in rows:
        table.add_row(*(plain(_cell(v)) for v in row))
    out().print(table)
    err().print(f"{len(rows)} row(s)")


def print_runs(runs: list[dict[str, Any]]) -> None:
    """The runs, with a model candidate column once any of them ran another candidate than
    the agent's own model (``default``)."""
    candidates = any(r["model_candidate"] != OWN_MODEL_CANDIDATE for r in runs)
    table = Table(title="runs, newest first")
    table.add_column("run", no_wrap=True)
    for column in (
        "finished (UTC)",
        "agent",
        "prompt",
        *(("candidate",) if candidates else ()),
        "trigger",
        "tests",
        "pass",
        "P/F/E",
        "tokens",
        "cost",
    ):
        table.add_column(column)
    for r in runs:
        cells = (
            _short(r["run_id"]),
            str(r["finished_at"])[:19],
            r["agent_slug"],
            r["prompt_version"],
            *((r["model_candidate"],) if candidates else ()),
            r["trigger"] or "-",
            str(r["total_tests"]),
            _pct(r["pass_rate"]),
            f"{r['passed']}/{r['failed']}/{r['errored']}",
            _num(r["total_tokens"]),
            _usd(r["cost_usd"]) + (" (batch)" if r["batch_calls"] else ""),
        )
        table.add_row(*map(plain, cells))
    out().print(table)


def print_failed_runs(runs: list[dict[str, Any]]) -> None:
    """Orchestrated runs that failed before writing an EvalRun, each with its reason (outside
    text: one line, shown literally)."""
    table = Table(title="FAILED runs (no EvalRun; --hide-failed hides them), newest first")
    for column in ("dagster run", "failed (UTC)", "job", "configuration", "trigger", "reason"):
        table.add_column(column, no_wrap=column == "dagster run")
    for r in runs:
        cells = (
            _short(r["dagster_run_id"]),
            str(r["failed_at"])[:19],
            one_line(str(r["job_name"])),
            one_line(str(r["configuration"])),
            r["trigger"] or "-",
            one_line(str(r["error"] or "no reason recorded")),
        )
        table.add_row(*map(plain, cells))
    out().print(table)


def render_detail(detail: RunDetail, only_failures: bool) -> None:
    run = detail.run
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    for label, value in (
        ("run", run["run_id"]),
        ("agent", f"{run['agent_name']} ({run['agent_slug']})"),
        ("prompt", f"{run['prompt_version']} (body {str(run['prompt_body_hash'])[:12]})"),
        ("model / judge", f"{run['model_name']} / {run['judge_model'] or '-'}"),
        ("model candidate", run["model_candidate"]),
        ("trigger", f"{run['trigger'] or '-'}  dagster run {run['dagster_run_id'] or '-'}"),
        ("finished (UTC)", str(run["finished_at"])),
        (
            "pass rate",
            f"{_pct(run['pass_rate'])}  ({run['passed']} pass, {run['failed']} fail, "
            f"{run['errored']} error of {run['total_tests']})",
        ),
        ("tokens / cost", f"{_num(run['total_tokens'])} / {_usd(run['cost_usd'])}"),
        *_batched(run),
        ("per passing case", _usd(run["cost_per_pass"])),
        ("wall / summed", f"{_num(run['wall_time_ms'])} ms / {_num(run['total_duration_ms'])} ms"),
        ("dataset hash", str(run["dataset_hash"] or "-")),
        ("source", str(run["source_path"] or "-")),
    ):
        head.add_row(label, plain(value))
    console = out()
    console.print(head)
    by_case: dict[str, list[str]] = {}
    for m in detail.metrics:
        value = m["score"] if m["score"] is not None else m["raw_score"]
        mark = "!" if m["error"] else ("ok" if m["passed"] else "x")
        shown = "err" if value is None else f"{value:.3g}"
        by_case.setdefault(m["case_id"], []).append(f"{m['metric_name']}={shown} {mark}")
    cases = Table(title="cases")
    for column in ("case", "status", "ms", "tokens", "metrics", "errors"):
        cases.add_column(column, overflow="fold")
    for case in detail.cases:
        if only_failures and case["status"] == "PASS":
            continue
        style = {"PASS": "green", "FAIL": "red", "ERROR": "magenta"}[case["status"]]
        cases.add_row(
            plain(case["case_id"]),
            plain(case["status"], style),
            plain(_num(case["execution_time_ms"])),
            plain(_num(case["total_tokens"])),
            plain(", ".join(by_case.get(case["case_id"], []))),
            plain("; ".join(case["errors"] or [])),
        )
    console.print(cases)


FLAKY_SHOWN = 20
"""Flaky cases named before the rest are left to ``…``."""


def render_comparison(result: Comparison) -> None:
    console = out()
    print_sides(console, result)
    if result.flips:
        console.print(flips_table(result))
    else:
        console.print("no case changed status")
    if result.metrics:
        console.print(metrics_table(result))
    print_totals(console, result)
    print_verdict(console, result)


def print_sides(console: Console, result: Comparison) -> None:
    """One line per run: A, then B."""
    sides = (("A", result.a, result.configuration_a), ("B", result.b, result.configuration_b))
    for side, run, configuration in sides:
        line = (
            f" {_short(run['run_id'])}  {configuration}  {str(run['finished_at'])[:19]}  pass "
            f"{_pct(run['pass_rate'])} ({run['passed']}/{run['total_tests']})  tokens "
            f"{_num(run['total_tokens'])}  cost {_usd(run['cost_usd'])}"
        )
        console.print(Text.assemble(plain(side, "bold"), plain(line)))


def _change(result: Comparison, flip: CaseFlip, regressed: set[str]) -> Text:
    if flip.case_id in regressed:
        return plain("REGRESSION", "red")
    if flip.case_id in result.flaky:
        return plain("flaky", "yellow")
    if flip.status_b == "PASS":
        return plain("fixed", "green")
    return plain("changed")


def flips_table(result: Comparison) -> Table:
    """The cases whose status changed, each marked as a regression, flaky, fixed or changed."""
    flips = Table(title=f"case flips ({len(result.flips)})")
    for column in ("case", "name", "A", "B", "change"):
        flips.add_column(column, overflow="fold")
    regressed = {flip.case_id for flip in result.regressions}
    for flip in result.flips:
        flips.add_row(
            *map(plain, (flip.case_id, flip.test_name or "", flip.status_a, flip.status_b)),
            _change(result, flip, regressed),
        )
    return flips


def metrics_table(result: Comparison) -> Table:
    """Each metric's mean and pass rate on the cases both runs have, a worse delta in red."""
    metrics = Table(title="metrics on common cases")
    for column in ("metric", "unit", "n A/B", "mean A", "mean B", "delta", "pass A", "pass B"):
        metrics.add_column(column)
    for m in result.metrics:
        delta = "-" if m.delta is None else number(m.delta, sign=True)
        metrics.add_row(
            *map(
                plain,
                (
                    m.metric_name,
                    m.unit or "0-1",
                    f"{m.n_a}/{m.n_b}",
                    "-" if m.mean_a is None else number(m.mean_a),
                    "-" if m.mean_b is None else number(m.mean_b),
                ),
            ),
            plain(delta, "red" if m.worse else ""),
            plain(_pct(m.pass_rate_a)),
            plain(_pct(m.pass_rate_b)),
        )
    return metrics


def print_totals(console: Console, result: Comparison) -> None:
    """Pass rates, tokens and cost, then the paired test of each shared measure."""
    tokens = "-" if result.tokens_delta is None else f"{result.tokens_delta:+,}"
    cost = "-" if result.cost_delta is None else f"{money(result.cost_delta, sign=True)} USD"
    console.print(
        f"pass rate {_pct(result.pass_rate_a)} -> {_pct(result.pass_rate_b)} "
        f"(on the {result.common_cases} common case(s): {_pct(result.common_pass_rate_a)} -> "
        f"{_pct(result.common_pass_rate_b)}); tokens {tokens}; cost {cost}"
    )
    if result.paired is not None:
        console.print(
            f"paired over {result.paired.pass_fraction.n} shared case(s), pass fraction "
            f"B - A: {result.paired.pass_fraction.render()}",
            highlight=False,
        )
        for line in result.paired_metric_lines():
            console.print(f"  {line}", highlight=False)


def print_verdict(console: Console, result: Comparison) -> None:
    """The flaky cases (not counted), then REGRESSION with its reasons, or no regression."""
    if result.flaky:
        console.print(
            f"flaky ({len(result.flaky)}, not counted as regressions): "
            + ", ".join(result.flaky[:FLAKY_SHOWN])
            + (" …" if len(result.flaky) > FLAKY_SHOWN else ""),
            highlight=False,
        )
    if result.is_regression:
        console.print(
            Text.assemble(plain("REGRESSION", "bold red"), plain(": " + "; ".join(result.reasons)))
        )
    else:
        console.print("[bold green]no regression[/]")
