"""``holodeck matrix``'s table (docs/cli.md): one row per prompt version x model candidate,
built by :mod:`holodeck_core.engine.matrix`, rendered by the CLI and
:mod:`holodeck_core.reports.matrix`, written as JSON by ``--output FILE.json``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from holodeck_core.defaults import MATRIX_CELL_SEPARATOR
from holodeck_core.errors import ExitCode
from holodeck_core.stats.paired import PairedComparison


class MatrixCell(BaseModel):
    """One cell's row of the table (rates are fractions, latency in ms, cost in USD)."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    model: str
    run_id: str | None = None
    eval_run: str | None = None
    cases: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    pass_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    cost_per_case: float | None = None
    cost_per_pass: float | None = None
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    gate: str = ""
    exit_code: int = ExitCode.OK
    baseline: bool = False
    against_baseline: PairedComparison | None = None
    """Paired on the shared cases, p adjusted over the cells compared with the baseline."""
    best: bool = False
    tie: bool = False
    """Not significantly different from the best cell (the best itself included)."""
    warnings: list[str] = []
    """What went wrong after its EvalRun was written (its journal not closed or not written)."""
    error: str | None = None
    """Why the cell has no run (an execution error), or why its run is not in the history."""

    @property
    def ref(self) -> str:
        """``v1:mini`` (``--baseline``'s form)."""
        return f"{self.prompt}{MATRIX_CELL_SEPARATOR}{self.model}"


class MatrixTable(BaseModel):
    agent: str
    baseline: str
    alpha: float
    adjustment: str
    cells: list[MatrixCell]
    notes: list[str] = []
    """What the table misses and why (the history could not be read for the verdicts)."""

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.worst(*(ExitCode(cell.exit_code) for cell in self.cells))
