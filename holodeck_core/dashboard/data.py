"""The dashboard's reads: one short read-only connection per request (docs/architecture.md).

A connection is opened when a page is rendered and closed before the page is sent, so a
writer (a nightly run, ``holodeck test``) never waits on the dashboard for longer than one
query. Pages and the Summary's rows are kept only while the file is unchanged
(:mod:`holodeck_core.dashboard.cache`): a run written a second ago is on the next page.
The database is never created or written from here (that would make the dashboard a writer):
an earlier release's history is a page that names ``holodeck history rebuild``, and
``holodeck dashboard`` refuses to start on one (docs/dashboard.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qs, urlencode

from holodeck_core.errors import ConfigError, HolodeckError
from holodeck_core.history import schema, store
from holodeck_core.history.store import History

if TYPE_CHECKING:
    import duckdb

READ_TIMEOUT_S = 10.0
"""How long a page waits for a writer's lock (writers hold it for one short transaction)."""


BEFORE_SCHEMA = "History from an earlier release"
"""The page's title for a history this release refuses to read (``holodeck history rebuild``)."""


class PageError(HolodeckError):
    """Bad input the page explains: a title and what to do about it."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title
        self.message = message


def rows(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description or []]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


@contextmanager
def connect(db: History) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection to a history at the current schema, or a :class:`PageError`.
    A lake gives a snapshot of its committed runs (:func:`holodeck_core.history.store.reader`)."""
    if not isinstance(db, Path):
        with ExitStack() as stack:
            try:
                lake_con = stack.enter_context(store.reader(db))
            except schema.HistoryBeforeSchemaError as exc:
                raise PageError(BEFORE_SCHEMA, str(exc)) from None
            except HolodeckError as exc:
                raise PageError("Cannot open the history", str(exc)) from None
            yield lake_con
        return
    if not db.is_file():
        raise PageError(
            "No history database",
            f"There is no history database at {db}. Run an evaluation first "
            "(`holodeck test AGENT_YAML` or `holodeck demo`), ingest EvalRun files with "
            "`holodeck history sync RESULTS_DIR`, or restart the dashboard with --db PATH "
            "(or --seed for the example's runs).",
        )
    try:
        con = store.connect_with_retry(db, read_only=True, timeout_s=READ_TIMEOUT_S)
    except HolodeckError as exc:
        raise PageError("Cannot open the history", str(exc)) from None
    try:
        try:
            version = schema.installed_version(con, str(db))
        except schema.HistoryBeforeSchemaError as exc:
            raise PageError(BEFORE_SCHEMA, str(exc)) from None
        except HolodeckError as exc:
            raise PageError("Newer history schema", str(exc)) from None
        if version == 0:
            raise PageError(
                "Not a history database",
                f"{db} is a DuckDB file without the history tables. Point --db at the "
                "history (default .holodeck/history.duckdb in the project root).",
            )
        yield con
    finally:
        con.close()


def refuse_before_schema(db: History) -> None:
    """Stop (exit 2) before serving a history from an earlier release: every page would say
    so. Any other problem is left to the pages, which explain it and recover once fixed."""
    try:
        with connect(db):
            pass
    except PageError as exc:
        if exc.title == BEFORE_SCHEMA:
            raise schema.HistoryBeforeSchemaError(exc.message) from None


def require_runs(con: duckdb.DuckDBPyConnection, db: History) -> None:
    (count,) = con.execute("SELECT count(*) FROM eval_runs").fetchone() or (0,)
    if not count:
        (failed,) = con.execute(
            "SELECT count(DISTINCT dagster_run_id) FROM failed_runs"
        ).fetchone() or (0,)
        why = (
            f" {failed:,} orchestrated run(s) failed before writing one: `holodeck history "
            f"runs --db {db}` lists them with their reason."
            if failed
            else ""
        )
        raise PageError(
            "The history is empty",
            f"The history at {db} holds no runs yet.{why} Run `holodeck test AGENT_YAML`, "
            "`holodeck demo`, or `holodeck history sync RESULTS_DIR`, then reload this page.",
        )


# --------------------------------------------------------------------------- filters


@dataclass
class Filters:
    """The Summary's filters; the URL query string is their only home (deep links)."""

    agents: list[str] = field(default_factory=list)
    start: date | None = None
    end: date | None = None
    prompt_versions: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    triggers: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    min_pass_rate: float | None = None
    """Percent, 0-100: runs at or above it."""
    include_failed: bool = False
    """Keep infrastructure failures in the trend and table (URL ``failed=1``, docs/cli.md)."""

    KEYS: ClassVar[dict[str, str]] = {
        "agents": "agent", "prompt_versions": "prompt", "models": "model",
        "candidates": "candidate", "triggers": "trigger", "tags": "tag",
    }  # fmt: skip
    """List filters and their URL keys (values joined with commas)."""

    @classmethod
    def from_query(cls, query: dict[str, list[str]]) -> Filters:
        """The filters of a link, or a :class:`PageError` for the first bad value (the CSV
        export and the table's pages: they cannot show a note)."""
        found, problems = cls.parse(query)
        if problems:
            raise PageError(*problems[0])
        return found

    @classmethod
    def parse(cls, query: dict[str, list[str]]) -> tuple[Filters, list[tuple[str, str]]]:
        """The filters of a link, leaving out values that are not dates or percentages, and
        (title, message) for each value left out and for a range that holds no day."""
        found = cls()
        problems: list[tuple[str, str]] = []
        for name, key in cls.KEYS.items():
            values = [v for item in query.get(key, []) for v in item.split(",") if v]
            setattr(found, name, values)
        for key in ("from", "to"):
            text = first(query, key)
            if text:
                try:
                    setattr(found, "start" if key == "from" else "end", date.fromisoformat(text))
                except ValueError:
                    problems.append(
                        (
                            "Bad date in the link",
                            f"{key}={text!r} is not a date (use YYYY-MM-DD): ignored.",
                        )
                    )
        if found.start and found.end and found.start > found.end:
            problems.append((
                "Empty date range",
                f"from={found.start} is after to={found.end}: no day is in that range, so no "
                "run can match. Swap the two dates.",
            ))  # fmt: skip
        found.include_failed = first(query, "failed") == "1"
        text = first(query, "min_rate")
        if text:
            try:
                rate = float(text)
            except ValueError:
                rate = -1.0
            if 0 <= rate <= 100:
                found.min_pass_rate = rate
            else:
                problems.append((
                    "Bad pass-rate threshold in the link",
                    f"min_rate={text!r} is not a percentage (use a number from 0 to 100): "
                    "ignored.",
                ))  # fmt: skip
        return found, problems

    def unknown(self, options: Options) -> list[tuple[str, str]]:
        """(title, message) for each list filter value no run in the history has."""
        problems = []
        for name, key in self.KEYS.items():
            known: list[str] = getattr(options, name)
            for value in getattr(self, name):
                if value not in known:
                    what = name.rstrip("s").replace("_", " ").replace("tag", "prompt tag")
                    listed = ", ".join(known[:12]) + (" ..." if len(known) > 12 else "")
                    problems.append((
                        f"Unknown {what}",
                        f"{key}={value!r}: no run in the history has {what} {value!r} "
                        f"(the history has: {listed or 'none'}).",
                    ))  # fmt: skip
        return problems

    def to_query(self) -> str:
        pairs: list[tuple[str, str]] = [
            (key, ",".join(getattr(self, name))) for name, key in self.KEYS.items()
            if getattr(self, name)
        ]  # fmt: skip
        if self.start:
            pairs.append(("from", self.start.isoformat()))
        if self.end:
            pairs.append(("to", self.end.isoformat()))
        if self.min_pass_rate is not None:
            pairs.append(("min_rate", f"{self.min_pass_rate:g}"))
        if self.include_failed:
            pairs.append(("failed", "1"))
        return "?" + urlencode(pairs) if pairs else ""

    def where(self) -> tuple[str, list[Any]]:
        """A WHERE clause over ``v_runs r`` (with ``tags``, the prompt's frontmatter tags)."""
        clauses: list[str] = []
        params: list[Any] = []
        for column, values in (
            ("r.agent_name", self.agents),
            ("r.prompt_version", self.prompt_versions),
            ("r.model_name", self.models),
            ("r.model_candidate", self.candidates),
            ("r.trigger", self.triggers),
        ):
            if values:
                clauses.append(f"{column} IN ({', '.join('?' for _ in values)})")
                params.extend(values)
        if self.tags:
            clauses.append("list_has_any(coalesce(p.tags, []), ?::VARCHAR[])")
            params.append(self.tags)
        if self.start:
            clauses.append("r.day >= ?")
            params.append(self.start)
        if self.end:
            clauses.append("r.day <= ?")
            params.append(self.end)
        if self.min_pass_rate is not None:
            clauses.append("r.pass_rate >= ?")
            params.append(self.min_pass_rate / 100)
        if not self.include_failed:
            clauses.append("NOT h.infrastructure_failure")
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def parse_query(search: str | None) -> dict[str, list[str]]:
    return parse_qs((search or "").lstrip("?"))


def first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


# --------------------------------------------------------------------------- runs

RUNS = "v_runs"
"""The runs with their cost and cost per passing case as the CLI and the reports show them
(``cost_usd``: the run's cost, docs/cost.md; a rescore's is its own judge calls)."""

FILTERED_RUNS = f"""
SELECT r.run_id, r.agent_name, r.agent_slug, r.prompt_version, r.model_provider, r.model_name,
       r.trigger, r.finished_at, r.total_tests, r.passed, r.failed, r.errored, r.pass_rate,
       r.total_tokens, r.cost_usd, r.cost_per_pass, r.wall_time_ms, r.total_duration_ms,
       r.git_commit, r.model_candidate,
       coalesce(p.tags, []) AS prompt_tags, h.infrastructure_failure
FROM {RUNS} r
JOIN v_run_health h USING (run_id)
LEFT JOIN prompt_versions p
  ON p.agent_slug = r.agent_slug AND p.prompt_version = r.prompt_version
 AND p.body_hash = r.prompt_body_hash
"""


@dataclass
class Options:
    """What the filters can choose from (the whole history, not the filtered part)."""

    agents: list[str]
    prompt_versions: list[str]
    models: list[str]
    candidates: list[str]
    triggers: list[str]
    tags: list[str]
    first_day: date | None
    last_day: date | None


def agent_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every agent in the history, by name (the agent filters)."""
    return [str(a) for (a,) in con.execute(AGENTS).fetchall()]


AGENTS = "SELECT DISTINCT agent_name FROM eval_runs ORDER BY 1"


def options(con: duckdb.DuckDBPyConnection) -> Options:
    def distinct(sql: str) -> list[str]:
        return [str(r[0]) for r in con.execute(sql).fetchall() if r[0] is not None]

    days = con.execute("SELECT min(day), max(day) FROM v_runs").fetchone() or (None, None)
    return Options(
        agents=distinct(AGENTS),
        prompt_versions=distinct("SELECT DISTINCT prompt_version FROM eval_runs ORDER BY 1"),
        models=distinct("SELECT DISTINCT model_name FROM eval_runs ORDER BY 1"),
        candidates=distinct("SELECT DISTINCT model_candidate FROM eval_runs ORDER BY 1"),
        triggers=distinct("SELECT DISTINCT trigger FROM eval_runs ORDER BY 1"),
        tags=distinct("SELECT DISTINCT unnest(tags) FROM prompt_versions ORDER BY 1"),
        first_day=days[0],
        last_day=days[1],
    )


def resolve(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """A run id from a full id or unique prefix, or a page that says which run is missing."""
    from holodeck_core.history.queries import resolve_run

    try:
        return resolve_run(con, ref)
    except ConfigError as exc:
        raise PageError("Run not found", f"{exc}. Pick a run from the Summary.") from None
