"""``holodeck matrix AGENT_YAML``: every selected prompt version x model candidate on the same
cases in one process, one table (docs/cli.md); exit codes as ``holodeck test``'s, the gate
applying per cell. The cells, their runs and their verdicts come from
:mod:`holodeck_core.engine.matrix`; this module parses and renders."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.cli.run_options import add_run_arguments
from holodeck_core.defaults import MATRIX_CELL_SEPARATOR, MATRIX_TABLE_WIDTH

if TYPE_CHECKING:
    from holodeck_core.models.matrix import MatrixTable


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def add_matrix_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    matrix = commands.add_parser(
        "matrix", help="run every prompt version x model candidate of an agent, one table"
    )
    matrix.add_argument("agent", metavar="AGENT_YAML")
    matrix.add_argument(
        "--prompts", type=_names, help="prompt versions, comma-separated (default: the active ones)"
    )
    matrix.add_argument(
        "--models", type=_names, help="model candidates, comma-separated (default: all)"
    )
    matrix.add_argument(
        "--baseline",
        metavar=f"PROMPT{MATRIX_CELL_SEPARATOR}MODEL",
        help="the cell every other is compared with (default: the first prompt version with "
        "the agent's own model)",
    )
    matrix.add_argument("--output", "-o", type=Path, help="also write the table (.md or .json)")
    matrix.add_argument(
        "--summary", type=Path, metavar="FILE", help="write the table as a PR comment (Markdown)"
    )
    add_run_arguments(matrix, per_cell=True)
    matrix.set_defaults(handler=run_matrix_command)


def run_matrix_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.run_options import print_warnings, step_summary_file, suite_options
    from holodeck_core.engine.matrix import (
        CellProgress,
        matrix_of,
        write_matrix_report,
        write_matrix_summary,
    )

    table = matrix_of(
        args.agent,
        suite_options(args),
        lambda suite: CellProgress(suite, _stderr),
        prompts=args.prompts,
        models=args.models,
        baseline=args.baseline,
    )
    print_matrix(table)
    if args.output:
        print_warnings([write_matrix_report(table, args.output)])
    write_matrix_summary(table, args.summary, step_summary_file())
    return int(table.exit_code)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def print_matrix(table: MatrixTable) -> None:
    """The table on stdout (every cell literal text), its notes under it."""
    from rich.console import Console
    from rich.table import Table

    from holodeck_core.engine.matrix import table_text
    from holodeck_core.terminal import plain

    console = Console(file=sys.stdout)
    if not console.is_terminal:  # a log or a pipe: every cell whole on one line
        console = Console(file=sys.stdout, width=MATRIX_TABLE_WIDTH)
    grid = Table(title=plain(f"{table.agent} · holodeck matrix"))
    columns, rows, notes = table_text(table)
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*(plain(cell) for cell in row))
    console.print(grid)
    for line in notes:
        console.print(plain(line), highlight=False, soft_wrap=True)
