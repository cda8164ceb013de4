"""``holodeck dashboard`` (and HoloDeck's ``holodeck test view``): serve the dashboard.

Only the standard library is imported at load time; Dash loads inside the handler."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.cli.history_option import add_history_arguments, history_from
from holodeck_core.dashboard.scratch import scratch_folder
from holodeck_core.defaults import DASHBOARD_PORT
from holodeck_core.errors import ConfigError, ExitCode

if TYPE_CHECKING:
    from holodeck_core.engine.store import History

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acme-support"


def add_dashboard_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "dashboard",
        help="serve the eval-runs dashboard over the history (alias: holodeck test view)",
    )
    parser.add_argument(
        "agent", nargs="?", metavar="AGENT_YAML",
        help="optional: use the history of the project holding this agent file",
    )  # fmt: skip
    add_history_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DASHBOARD_PORT, help=f"port (default {DASHBOARD_PORT})"
    )
    parser.add_argument(
        "--seed", action="store_true",
        help="fill a temporary history with the example's runs (v1 and v2) and show it",
    )  # fmt: skip
    parser.set_defaults(handler=run_dashboard)


def history_of(args: argparse.Namespace) -> History:
    """``--lake``/``--db``, else the history of the project holding ``AGENT_YAML`` (or the
    working directory)."""
    from holodeck_core.config.project import Project

    start = Path(args.agent).resolve().parent if args.agent else None
    return history_from(args, Project.discover(start))


def seed_history(folder: Path) -> Path:
    """Run the example agent's two prompt versions (loopback model server) into a history
    under ``folder``; returns the database path."""
    from holodeck_core.cli.test import add_test_parser
    from holodeck_core.testing import load_rules, run_model_server

    parser = argparse.ArgumentParser(prog="holodeck")
    add_test_parser(parser.add_subparsers())

    if not (EXAMPLE / "agent.yaml").is_file():
        raise ConfigError(f"--seed needs the example project at {EXAMPLE}")
    copy = folder / "acme-support"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".holodeck", "results"))
    db = folder / "history.duckdb"
    os.environ.update(HOLODECK_HOME=str(folder / "home"), HOLODECK_HISTORY_DB=str(db))
    with run_model_server(load_rules(copy / "model-rules.yaml")) as server:
        os.environ["HOLODECK_MODEL_ENDPOINT"] = server.openai_base_url
        for extra in ([], ["--prompt-version", "v2"]):
            args = parser.parse_args(["test", str(copy / "agent.yaml"), "-q", *extra])
            args.handler(args)
    return db


def run_dashboard(args: argparse.Namespace) -> int:
    try:
        from holodeck_core.dashboard.app import create_app
    except ImportError as exc:  # pragma: no cover - dash is a pinned dependency
        print(f"error: the dashboard needs dash and plotly: {exc}", file=sys.stderr)
        return ExitCode.CONFIG
    if args.seed:
        folder = scratch_folder("holodeck-dashboard-seed-")
        print(f"seeding a temporary history in {folder} with the example's runs ...")
        db: History = seed_history(folder)
    else:
        db = history_of(args)
        from holodeck_core.dashboard.data import refuse_before_schema

        refuse_before_schema(db)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"warning: serving on {args.host}: anyone who can reach it reads the history",
              file=sys.stderr)  # fmt: skip
    app = create_app(db, args.host)
    from holodeck_core.dashboard.app import render

    render(db, "/", "")  # load DuckDB, pandas and the first query now, not for the first visitor
    print(f"dashboard: http://{args.host}:{args.port}/ over {db} (Ctrl-C stops it)", flush=True)
    app.run(host=args.host, port=args.port, debug=False)
    return ExitCode.OK
