"""``holodeck labels import FILE.csv|FILE.jsonl``: people's verdicts on a run's responses into
the history's ``human_labels`` (:func:`holodeck_core.engine.history.import_labels`), then how
far each judge agrees with them (``v_judge_agreement``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from holodeck_core.cli.history_option import add_history_arguments

SHOWN_LINES = 20
"""Duplicate lines listed by number before the rest are counted."""


def add_labels_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    labels = commands.add_parser(
        "labels", help="human labels of judged cases: import them, see judge agreement"
    )
    actions = labels.add_subparsers(dest="labels_command", required=True, metavar="ACTION")
    imported = actions.add_parser(
        "import",
        help="import a filled-in labelling sheet (.csv or .jsonl; the dashboard's Judges page "
        "offers each run's sheet) and print the judges' agreement with people",
    )
    imported.add_argument("file", type=Path, metavar="FILE", help="a .csv or .jsonl file")
    imported.add_argument(
        "--labeler", metavar="NAME", help="who labelled the rows that leave 'labeler' empty"
    )
    add_history_arguments(imported)
    imported.set_defaults(handler=run_import_command)


def run_import_command(args: argparse.Namespace) -> int:
    from holodeck_core.cli.history_option import history_from
    from holodeck_core.engine.history import import_labels
    from holodeck_core.terminal import printable

    history = history_from(args)
    imported = import_labels(history, args.file, labeler=args.labeler)
    done = imported.done
    print(
        f"imported {done.labels} label(s) of {done.cases} case(s) in {done.runs} run(s) into "
        f"{history}" + (f"; {done.skipped} row(s) left blank were skipped" if done.skipped else "")
    )
    if done.duplicates:
        print(f"{len(done.duplicates)} row(s) repeating an earlier one word for word counted "
              f"once: line(s) {shown_lines(done.duplicates)}")  # fmt: skip
    if imported.agreement:
        print(imported.unit)
    for agent_slug, agreement in imported.agreement:
        print(f"  {printable(agent_slug)}: {printable(agreement)}")
    return 0


def shown_lines(lines: tuple[int, ...]) -> str:
    """``4, 9, 12`` (the first :data:`SHOWN_LINES`, then how many more)."""
    more = len(lines) - SHOWN_LINES
    return ", ".join(map(str, lines[:SHOWN_LINES])) + (f" and {more} more" if more > 0 else "")
