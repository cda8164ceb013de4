"""The Matrix page's data: one agent's configurations as cells (prompt version by model
candidate), each the newest healthy run of its configuration, the cells not significantly
different from the best (paired on shared cases, Benjamini-Hochberg adjusted over the cells;
docs/architecture.md), and the cells on the cost-quality Pareto frontier."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from holodeck_core.dashboard.data import agent_names, connect, require_runs, rows
from holodeck_core.history.paired import against_one
from holodeck_core.history.store import History
from holodeck_core.stats.paired import Verdict

if TYPE_CHECKING:
    import duckdb

CELLS = """
SELECT *, total_tests AS cases FROM configuration_cells
WHERE agent_name = ? ORDER BY prompt_version, model_candidate
"""
"""The newest healthy run of each of the agent's configurations with its interval, cost and
latency (docs/history.md; infrastructure failures, docs/cli.md, are no cell)."""


@dataclass
class Matrix:
    agent: str
    agents: list[str]
    cells: list[dict[str, Any]]
    """Per configuration: its run's columns (:data:`CELLS`), ``best``,
    ``tie`` (not significantly different from the best), ``p_adjusted`` and ``frontier``."""
    prompts: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)

    def cell(self, prompt: str, candidate: str) -> dict[str, Any] | None:
        return next(
            (c for c in self.cells
             if c["prompt_version"] == prompt and c["model_candidate"] == candidate), None,
        )  # fmt: skip


def matrix(db: History, agent: str | None) -> Matrix:
    """The cells of ``agent`` (the newest run's agent when None)."""
    with connect(db) as con:
        require_runs(con, db)
        agents = agent_names(con)
        chosen = agent or _newest_agent(con)
        cells = rows(con.execute(CELLS, [chosen]))
        if cells:
            _mark_ties(con, cells)
    _mark_frontier(cells)
    return Matrix(
        chosen,
        agents,
        cells,
        sorted({str(c["prompt_version"]) for c in cells}),
        sorted({str(c["model_candidate"]) for c in cells}),
    )


def _newest_agent(con: duckdb.DuckDBPyConnection) -> str:
    found = con.execute(
        "SELECT agent_name FROM eval_runs ORDER BY finished_at DESC, run_id DESC LIMIT 1"
    ).fetchone()
    return str(found[0]) if found else ""


def _mark_ties(con: duckdb.DuckDBPyConnection, cells: list[dict[str, Any]]) -> None:
    """The best cell (highest pass rate; the cheaper per case, then the newer, of equals) and,
    for every other, its paired comparison with the best on their shared cases, the p-values
    adjusted together (BH): ``tie`` when the adjusted p is at or above :data:`ALPHA`."""
    best = max(cells, key=lambda c: (c["pass_rate"], -(c["cost_per_case"] or 0.0),
                                     c["finished_at"]))  # fmt: skip
    others = [c for c in cells if c is not best]
    compared = against_one(con, best["run_id"], [c["run_id"] for c in others])
    for cell, comparison in zip(others, compared, strict=True):
        cell["p_adjusted"] = comparison.p_adjusted
        cell["tie"] = comparison.p_value is not None and comparison.verdict == Verdict.NO_CHANGE
        cell["best"] = False
    best |= {"best": True, "tie": True, "p_adjusted": None}


def _mark_frontier(cells: list[dict[str, Any]]) -> None:
    """``frontier``: a cell of known cost that no other cell beats on both cost per case and
    pass rate (cheaper or as cheap, and at least as good, one of them strictly)."""
    known = [c for c in cells if c["cost_per_case"] is not None]
    for cell in cells:
        cell["frontier"] = cell in known and not any(
            o["cost_per_case"] <= cell["cost_per_case"]
            and o["pass_rate"] >= cell["pass_rate"]
            and (o["cost_per_case"], o["pass_rate"]) != (cell["cost_per_case"], cell["pass_rate"])
            for o in known
        )
