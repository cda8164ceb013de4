"""``holodeck matrix``'s table as text (docs/cli.md): its columns and one row of strings per
cell, shared by the console (rich) and the Markdown report and PR summary, and the lines
under it (the baseline, the adjustment, the cells without a run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from holodeck_core.reports.markdown import markdown_text
from holodeck_core.stats.display import money, number, p_value, points
from holodeck_core.terminal import one_line

if TYPE_CHECKING:
    from holodeck_core.models.matrix import MatrixCell, MatrixTable

COLUMNS = (
    "prompt",
    "model",
    "pass rate (95% CI)",
    "errors",
    "cost/case",
    "cost/pass",
    "latency p50/p95",
    "gate",
    "vs baseline",
    "p (BH)",
    "tie",
)
GATE = {0: "pass", 1: "FAIL"}
"""A cell's gate column by its exit code (docs/cli.md); an error shows its code."""
BASELINE = "baseline"
BEST = "★ best"
TIE = "≈ tie"


def matrix_rows(table: MatrixTable) -> list[tuple[str, ...]]:
    """One row per cell, in :data:`COLUMNS`' order; text from configs stays as given (the
    renderer makes it literal)."""
    return [_row(cell) for cell in table.cells]


def _row(cell: MatrixCell) -> tuple[str, ...]:
    if cell.run_id is None:
        return (cell.prompt, cell.model, "no run", "—", "—", "—", "—", "error", "—", "—", "")
    return (
        cell.prompt,
        cell.model,
        _rate(cell),
        str(cell.errored),
        money(cell.cost_per_case),
        money(cell.cost_per_pass),
        _latency(cell),
        GATE.get(cell.exit_code, f"error (exit {cell.exit_code})"),
        *_verdict(cell),
        BEST if cell.best else TIE if cell.tie else "",
    )


def _rate(cell: MatrixCell) -> str:
    rate = f"{cell.pass_rate or 0.0:.1%} ({cell.passed}/{cell.cases})"
    if cell.ci_low is not None and cell.ci_high is not None:
        rate += f" [{cell.ci_low:.1%}, {cell.ci_high:.1%}]"
    return rate


def _latency(cell: MatrixCell) -> str:
    if cell.latency_p50_ms is None or cell.latency_p95_ms is None:
        return "—"
    return f"{number(cell.latency_p50_ms, unit='ms')} / {number(cell.latency_p95_ms, unit='ms')}"


def _verdict(cell: MatrixCell) -> tuple[str, str]:
    """``+20.0 pp improvement`` and ``p = 0.031 (BH p = 0.062)``; the baseline names itself."""
    if cell.baseline:
        return BASELINE, "—"
    test = cell.against_baseline
    if test is None or test.p_value is None:
        return "not compared", "—"
    diff = points(test.mean_diff or 0.0)
    adjusted = f" (BH {p_value(test.p_adjusted)})" if test.p_adjusted is not None else ""
    return f"{diff} {test.verdict.value}", f"{p_value(test.p_value)}{adjusted}"


def notes(table: MatrixTable) -> list[str]:
    """The lines under the table: how verdicts and ties are decided, and what went wrong."""
    lines = [
        f"baseline {table.baseline}; each cell paired with it on the shared cases, p-values "
        f"adjusted over the cells ({table.adjustment}, alpha = {table.alpha:g}); "
        f"{TIE}: not significantly different from {BEST}"
    ]
    lines += table.notes
    lines += [f"{c.ref}: {c.error}" for c in table.cells if c.error]
    lines += [f"{c.ref}: warning: {w}" for c in table.cells for w in c.warnings]
    lines += [f"{c.ref}: {c.eval_run}" for c in table.cells if c.eval_run]
    return lines


def render_matrix_markdown(table: MatrixTable) -> str:
    """The table as Markdown (``--output FILE.md``, ``--summary``): every cell literal."""
    head = f"## holodeck matrix: {markdown_text(table.agent)}\n\n"
    lines = ["| " + " | ".join(markdown_text(c) for c in row) + " |"
             for row in (COLUMNS, *matrix_rows(table))]  # fmt: skip
    lines.insert(1, "|" + "---|" * len(COLUMNS))
    body = "\n".join(lines)
    foot = "\n".join(f"- {markdown_text(line, limit=1000)}" for line in notes(table))
    return f"{head}{body}\n\n{foot}\n"


def render_matrix_text(table: MatrixTable) -> list[str]:
    """The table as plain aligned lines (a log without a terminal: ``holodeck demo``), each
    cell on one line, then the notes."""
    rows = [COLUMNS, *(tuple(one_line(c) for c in row) for row in matrix_rows(table))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    return [*lines, *(one_line(line, limit=1000) for line in notes(table))]
