"""``holodeck history``: runs, show, compare, sql, sync, rebuild, import, export.

:func:`add_history_parser` plugs the commands into the top-level CLI; each sets ``handler``
(``Callable[[argparse.Namespace], int]``) on the parsed namespace. Handlers return an exit code
(docs/cli.md) or raise a :class:`~holodeck_core.errors.HolodeckError`; the history itself is
read and written through :mod:`holodeck_core.engine.history`. This module imports only the
standard library at load time: DuckDB, pandas, pyarrow and rich load inside handlers, so
``holodeck --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodeck_core import defaults
from holodeck_core.cli.argtypes import non_negative_seconds, positive_int, positive_seconds
from holodeck_core.cli.history_option import add_history_arguments, history_from
from holodeck_core.defaults import ALPHA, HISTORY_SQL_MAX_ROWS, HISTORY_SQL_TIMEOUT_S
from holodeck_core.engine import history as engine
from holodeck_core.errors import (
    ConfigError,
    ExecutionError,
    ExitCode,
)
from holodeck_core.terminal import plain

Handler = Callable[[argparse.Namespace], int]

LOCK_HELP = (
    "how long to wait for another process's lock on the database before giving up "
    "(default: $HOLODECK_HISTORY_LOCK_TIMEOUT, else 30)"
)


# --------------------------------------------------------------------------- helpers


def _location(value: str) -> Any:
    """A results folder or file: a path, or a URL (``s3://bucket/prefix``)."""
    try:
        return engine.results_location(value)
    except ConfigError as exc:  # an s3:// URL with no credentials set: a usage error (exit 2)
        raise argparse.ArgumentTypeError(str(exc)) from None


def _prompts_dir(args: argparse.Namespace) -> Path:
    if args.prompts_dir is not None:
        return Path(args.prompts_dir).expanduser()
    from holodeck_core.config.project import Project

    return Project.discover().prompts_dir


# --------------------------------------------------------------------------- handlers


def _cmd_runs(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    listed = engine.list_runs(
        history_from(args),
        agent=args.agent,
        prompt_version=args.prompt_version,
        limit=args.limit,
        with_failed=args.format == "table" and not args.hide_failed,
        lock_timeout=args.lock_timeout,
    )
    if args.format != "table":
        columns = list(listed.columns)
        render.print_rows(columns, [[r[c] for c in columns] for r in listed.runs], args.format)
        return ExitCode.OK
    render.print_runs(listed.runs)
    if listed.failed:
        render.print_failed_runs(listed.failed)
    return ExitCode.OK


def _cmd_show(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    detail = engine.show_run(history_from(args), args.run, lock_timeout=args.lock_timeout)
    if args.format == "json":
        import json

        payload = {
            "run": detail.run,
            "cases": detail.cases,
            "metrics": detail.metrics,
            "errors": detail.errors,
        }
        sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
        return ExitCode.OK
    render.render_detail(detail, args.failures)
    return ExitCode.OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from rich.text import Text

    from holodeck_core.cli import history_render as render

    if not 0.0 <= args.max_drop <= 1.0:
        raise ConfigError("--max-drop is a fraction between 0 and 1 (0.05 = 5 points)")
    if not 0.0 < args.alpha < 1.0:
        raise ConfigError(f"--alpha is a significance level between 0 and 1 (default {ALPHA})")
    result = engine.compare_runs(
        history_from(args),
        args.run_a,
        args.run_b,
        max_drop=args.max_drop,
        strict=args.strict,
        alpha=args.alpha,
        include_failed=args.include_failed,
        adjustment=args.adjust,
        lock_timeout=args.lock_timeout,
    )
    for warning in result.warnings:
        render.err().print(Text.assemble(plain("warning:", "yellow"), plain(f" {warning}")))
    if args.format == "json":
        import json

        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    else:
        render.render_comparison(result)
    return ExitCode.FAILED if result.is_regression else ExitCode.OK


def _cmd_sql(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    result = engine.run_query(
        history_from(args),
        args.query,
        lock_timeout=args.lock_timeout,
        max_rows=args.max_rows,
        timeout_s=args.timeout,
    )
    render.print_rows(result.columns, result.rows, args.format)
    if result.truncated:
        render.err().print(
            f"note: only the first {args.max_rows:,} rows are shown; add LIMIT/WHERE to the "
            "query or raise --max-rows",
            markup=False,
        )
    return ExitCode.OK


def _report_ingest(verb: str, report: Any, *, looked_in: object = None) -> int:
    """One line of what was written; ``looked_in``: the folder scanned, named when it held no
    EvalRun at all (distinct from one whose runs are all in the history already)."""
    from holodeck_core.cli import history_render as render

    ignored = f"{len(report.ignored)} non-EvalRun JSON file(s) ignored" if report.ignored else ""
    if looked_in is not None and not (report.ingested or report.skipped or report.problems):
        line = f"found no EvalRun under {looked_in} (looked for *.json in it and its subfolders"
        line += f"; {ignored})" if ignored else ")"
        line += "; nothing synced: give the agent's results/ folder"
    else:
        line = f"{verb} {len(report.ingested)} run(s); {len(report.skipped)} already in "
        line += "the history" + (f"; {ignored}" if ignored else "")
    render.err().print(plain(line), highlight=False, soft_wrap=True)
    if report.problems:
        raise ConfigError(report.problems)
    return ExitCode.OK


def _cmd_sync(args: argparse.Namespace) -> int:
    if args.to_lake is not None or args.from_lake is not None:
        return _copy(args)
    if args.results_dir is None:
        raise ConfigError(
            "history sync needs RESULTS_DIR (a folder of EvalRuns), or --to WHERE / "
            "--from WHERE to copy a history between the DuckDB file and a DuckLake"
        )
    report = engine.sync_results(
        history_from(args),
        args.results_dir,
        prompts_dir=_prompts_dir(args),
        lock_timeout=args.lock_timeout,
    )
    return _report_ingest("synced", report, looked_in=args.results_dir)


def _copy(args: argparse.Namespace) -> int:
    """``sync --to WHERE``: this history (``--db``/``--lake``/the project's) into another;
    ``--from WHERE``: another into this one. ``WHERE`` is a ``.duckdb`` file or a lake URL."""
    if args.to_lake is not None and args.from_lake is not None:
        raise ConfigError("history sync: give --to or --from, not both")
    if args.results_dir is not None:
        raise ConfigError(
            "history sync --to/--from copies between two histories; RESULTS_DIR does not apply"
        )
    this = history_from(args)
    if args.to_lake is not None:
        copied = engine.copy_to(this, args.to_lake, lock_timeout=args.lock_timeout)
        return _report_ingest(f"copied to {copied.other}:", copied.report)
    copied = engine.copy_from(this, args.from_lake, lock_timeout=args.lock_timeout)
    return _report_ingest(f"copied from {copied.other}:", copied.report)


def _cmd_rebuild(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    folders = engine.results_folders(args.results_dirs)
    history = history_from(args)
    report = engine.rebuild_history(
        history, folders, prompts_dir=_prompts_dir(args), lock_timeout=args.lock_timeout
    )
    carried = ", ".join(f"{rows} {table}" for table, rows in report.carried.items()) or "none"
    render.err().print(
        f"rebuilt {history}: the old history is kept at {report.aside}; "
        f"{len(report.ingest.ingested)} run(s) from {len(folders)} results folder(s), "
        f"{len(report.kept_runs)} run(s) with no EvalRun file copied from the old history; "
        f"carried over: {carried}",
        markup=False,
    )
    if report.ingest.problems:
        raise ConfigError(report.ingest.problems)
    return ExitCode.OK


def _cmd_maintain(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    done = engine.maintain_history(
        history_from(args), lock_timeout=args.lock_timeout, grace_s=args.grace
    )
    render.err().print(f"maintained {done}", markup=False)
    return ExitCode.OK


def _cmd_import(args: argparse.Namespace) -> int:
    report = engine.import_runs(
        history_from(args),
        [_location(p) for p in args.paths],
        prompts_dir=_prompts_dir(args),
        lock_timeout=args.lock_timeout,
    )
    return _report_ingest("imported", report)


def _cmd_export(args: argparse.Namespace) -> int:
    from holodeck_core.cli import history_render as render

    report = engine.export_runs(
        history_from(args),
        Path(args.out),
        args.format,
        runs=args.run,
        agent=args.agent,
        prompt_version=args.prompt_version,
        lock_timeout=args.lock_timeout,
    )
    render.err().print(plain(f"wrote {len(report.written)} file(s) to {args.out}"))
    if report.problems:
        raise ExecutionError("\n".join(p.render() for p in report.problems))
    return ExitCode.OK


# --------------------------------------------------------------------------- parser


@dataclass(frozen=True)
class HistoryCommands:
    """The ``history`` subcommands being added, and the options they share: ``common``
    (which history, how long to wait for its lock) for all, ``prompts`` for the ingesting
    ones."""

    subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
    common: argparse.ArgumentParser
    prompts: argparse.ArgumentParser

    def add(
        self, name: str, handler: Handler, help_text: str, *, prompts: bool = False
    ) -> argparse.ArgumentParser:
        parents = [self.common, self.prompts] if prompts else [self.common]
        parser = self.subparsers.add_parser(
            name, help=help_text, description=help_text, parents=parents
        )
        parser.set_defaults(handler=handler)
        return parser


def _shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The parent parsers of :class:`HistoryCommands`: ``common`` and ``prompts``."""
    common = argparse.ArgumentParser(add_help=False)
    add_history_arguments(common)
    common.add_argument(
        "--lock-timeout", type=float, default=None, metavar="SECONDS", help=LOCK_HELP
    )
    prompts = argparse.ArgumentParser(add_help=False)
    prompts.add_argument(
        "--prompts-dir",
        default=None,
        metavar="DIR",
        help="prompt snapshot store to copy bodies from (default: HOLODECK_HOME/prompts)",
    )
    return common, prompts


def _add_runs(commands: HistoryCommands) -> None:
    runs = commands.add("runs", _cmd_runs, "list runs, newest first")
    runs.add_argument("--agent", help="agent name or slug")
    runs.add_argument("--prompt-version", help="prompt version (key)")
    runs.add_argument("--limit", type=positive_int, default=20)
    runs.add_argument("--format", choices=("table", "csv", "json"), default="table")
    runs.add_argument(
        "--hide-failed",
        action="store_true",
        help="leave out the orchestrated runs that failed before writing an EvalRun",
    )


def _add_show(commands: HistoryCommands) -> None:
    show = commands.add("show", _cmd_show, "one run: summary, cases, metrics, errors")
    show.add_argument("run", metavar="RUN", help="run id or a unique prefix of it")
    show.add_argument("--failures", action="store_true", help="list only FAIL and ERROR cases")
    show.add_argument("--format", choices=("table", "json"), default="table")


def _add_compare(commands: HistoryCommands) -> None:
    compare = commands.add(
        "compare",
        _cmd_compare,
        "compare run B against run A: case flips, metric deltas, pass rate, tokens, cost, "
        "and a paired test; exit 1 on a significant regression (for CI gates)",
    )
    compare.add_argument("run_a", metavar="RUN_A", help="baseline run (id or prefix)")
    compare.add_argument("run_b", metavar="RUN_B", help="candidate run (id or prefix)")
    compare.add_argument(
        "--max-drop",
        type=float,
        default=0.0,
        metavar="F",
        help="tolerated pass-rate drop as a fraction (0.05 = 5 points; default 0)",
    )
    compare.add_argument(
        "--strict",
        action="store_true",
        help="any case that passed in A and not in B is a regression (the any-flip rule)",
    )
    compare.add_argument(
        "--alpha", type=float, default=ALPHA, help=f"significance level (default {ALPHA})"
    )
    compare.add_argument("--include-failed", action="store_true", help=engine.INCLUDE_FAILED_HELP)
    compare.add_argument(
        "--adjust",
        choices=list(engine.ADJUSTMENTS),
        default=defaults.ADJUSTMENT,
        help="adjust the p-values of the pass fraction and the metrics together: bh "
        "(Benjamini-Hochberg, the false discovery rate; default), holm (the family-wise "
        "error rate) or none",
    )
    compare.add_argument("--format", choices=("table", "json"), default="table")


def _add_sql(commands: HistoryCommands) -> None:
    sql = commands.add(
        "sql",
        _cmd_sql,
        "run one read-only SELECT (or WITH ... SELECT) on the history; anything else is "
        "refused (exit 2)",
    )
    sql.add_argument("query", metavar="QUERY")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument(
        "--max-rows",
        type=positive_int,
        default=HISTORY_SQL_MAX_ROWS,
        metavar="N",
        help=f"fetch at most N rows (default {HISTORY_SQL_MAX_ROWS:,})",
    )
    sql.add_argument(
        "--timeout",
        type=positive_seconds,
        default=HISTORY_SQL_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop the query after SECONDS (default {HISTORY_SQL_TIMEOUT_S:g})",
    )


def _add_sync(commands: HistoryCommands) -> None:
    sync = commands.add(
        "sync",
        _cmd_sync,
        "ingest every EvalRun under RESULTS_DIR (a folder or a URL) not yet in the history; "
        "or copy the history to or from a lake",
        prompts=True,
    )
    sync.add_argument("results_dir", metavar="RESULTS_DIR", nargs="?", type=_location)
    sync.add_argument(
        "--to",
        "--to-lake",
        dest="to_lake",
        metavar="WHERE",
        help="copy this history's runs into another (a .duckdb file or a lake URL)",
    )
    sync.add_argument(
        "--from",
        "--from-lake",
        dest="from_lake",
        metavar="WHERE",
        help="copy another history's runs (a .duckdb file or a lake URL) into this one",
    )


def _add_rebuild(commands: HistoryCommands) -> None:
    rebuilt = commands.add(
        "rebuild",
        _cmd_rebuild,
        "rebuild the history (an earlier release's, or this one's) from the EvalRun files: "
        "the old one is kept aside, and the runs with no file, the human labels, failed runs "
        "and budget ledger come over from it",
        prompts=True,
    )
    rebuilt.add_argument(
        "results_dirs",
        metavar="RESULTS_DIR",
        nargs="*",
        type=_location,
        help="folders of EvalRuns (default: the project's agents' results folders)",
    )


def _add_maintain(commands: HistoryCommands) -> None:
    maintained = commands.add(
        "maintain",
        _cmd_maintain,
        "compact the history and remove what nothing references: a DuckLake's small files "
        "merged, old snapshots expired, unreferenced (aborted writers') files deleted; the "
        "DuckDB file checkpointed",
    )
    maintained.add_argument(
        "--grace",
        type=non_negative_seconds,
        default=defaults.MAINTAIN_GRACE_S,
        metavar="SECONDS",
        help="a lake's snapshots and unreferenced files younger than this are kept: they may "
        f"be a running writer's or reader's (default {defaults.MAINTAIN_GRACE_S:g}; 0 when "
        "nothing else uses the lake)",
    )


def _add_import(commands: HistoryCommands) -> None:
    imp = commands.add(
        "import",
        _cmd_import,
        "ingest HoloDeck 0.7.1 (or our) EvalRun files or folders",
        prompts=True,
    )
    imp.add_argument("paths", metavar="PATH", nargs="+")


def _add_export(commands: HistoryCommands) -> None:
    exp = commands.add(
        "export",
        _cmd_export,
        "write runs as HoloDeck 0.7.1 files, our EvalRun JSON, or Parquet tables",
    )
    exp.add_argument("--format", choices=("holodeck", "json", "parquet"), required=True)
    exp.add_argument("--out", required=True, metavar="DIR", help="output folder")
    exp.add_argument("--run", action="append", metavar="RUN", help="a run to export (repeat)")
    exp.add_argument("--agent", help="only this agent (name or slug)")
    exp.add_argument("--prompt-version", help="only this prompt version")


SUBCOMMANDS: tuple[Callable[[HistoryCommands], None], ...] = (
    _add_runs,
    _add_show,
    _add_compare,
    _add_sql,
    _add_sync,
    _add_rebuild,
    _add_maintain,
    _add_import,
    _add_export,
)
"""Each adds one ``history`` subcommand, in the order ``holodeck history --help`` lists them."""


def add_history_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``history`` and its subcommands to a top-level CLI's subparsers."""
    history = subparsers.add_parser(
        "history",
        help="query the run history (DuckDB): runs, compare, sql, import, export",
        description="The run history: every EvalRun, in a DuckDB file you can query with SQL "
        "(tables and views: docs/history.md).",
    )
    common, prompts = _shared_options()
    commands = HistoryCommands(
        history.add_subparsers(dest="history_command", metavar="COMMAND", required=True),
        common,
        prompts,
    )
    for add_subcommand in SUBCOMMANDS:
        add_subcommand(commands)
