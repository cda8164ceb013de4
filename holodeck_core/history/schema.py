"""The history schema: tables, and versioned forward migrations recorded in ``schema_version``.

Analysts query these tables directly, so they are a public interface (``docs/history.md``).
A migration is frozen once released: change the schema by appending a new one, never by
editing an old one. Each migration runs in its own transaction; a database written by a newer
release (a version we do not know) is refused rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from holodeck_core.errors import ExecutionError
from holodeck_core.history import (
    migration_v2_views,
    migration_v4_stats,
    migration_v5_verdicts,
    migration_v6_labels,
    migration_v7_cost,
    migration_v8_budgets,
    migration_v9_verdicts,
    migration_v10_comparisons,
    migration_v11_estimate,
    migration_v12_pairs,
    migration_v13_label_cases,
    migration_v14_intervals,
)

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


SCHEMA_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER PRIMARY KEY,
    description VARCHAR NOT NULL,
    applied_at  TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP)
)
"""

TABLES_V1: tuple[str, ...] = (
    """
    CREATE TABLE eval_runs (
        run_id             VARCHAR PRIMARY KEY,
        agent_name         VARCHAR NOT NULL,
        agent_slug         VARCHAR NOT NULL,
        prompt_version     VARCHAR NOT NULL,
        prompt_label       VARCHAR NOT NULL,
        prompt_body_hash   VARCHAR,
        prompt_source      VARCHAR,
        model_provider     VARCHAR,
        model_name         VARCHAR,
        judge_model        VARCHAR,
        trigger            VARCHAR,
        dagster_run_id     VARCHAR,
        partition_key      VARCHAR,
        started_at         TIMESTAMP,
        finished_at        TIMESTAMP NOT NULL,
        wall_time_ms       BIGINT,
        total_duration_ms  BIGINT,
        total_tests        INTEGER NOT NULL,
        passed             INTEGER NOT NULL,
        failed             INTEGER NOT NULL,
        errored            INTEGER NOT NULL,
        pass_rate          DOUBLE NOT NULL,
        weighted_pass_rate DOUBLE,
        prompt_tokens      BIGINT,
        completion_tokens  BIGINT,
        total_tokens       BIGINT,
        cost_usd           DOUBLE,
        git_commit         VARCHAR,
        holodeck_version   VARCHAR,
        provenance         JSON,
        cli_args           VARCHAR[],
        config_hash        VARCHAR,
        dataset_hash       VARCHAR,
        source_path        VARCHAR,
        file_sha256        VARCHAR,
        ingested_at        TIMESTAMP NOT NULL,
        CHECK (passed + failed + errored = total_tests),
        CHECK (pass_rate BETWEEN 0 AND 1)
    )
    """,
    """
    CREATE TABLE test_results (
        run_id            VARCHAR NOT NULL,
        case_id           VARCHAR NOT NULL,
        case_index        INTEGER NOT NULL,
        test_name         VARCHAR,
        status            VARCHAR NOT NULL CHECK (status IN ('PASS', 'FAIL', 'ERROR')),
        passed            BOOLEAN NOT NULL,
        test_input        VARCHAR,
        agent_response    VARCHAR,
        ground_truth      VARCHAR,
        execution_time_ms BIGINT,
        errors            VARCHAR[],
        tool_calls        VARCHAR[],
        tools_matched     BOOLEAN,
        turn_count        INTEGER,
        prompt_tokens     BIGINT,
        completion_tokens BIGINT,
        total_tokens      BIGINT,
        cost_usd          DOUBLE,
        weight            DOUBLE,
        tags              VARCHAR[],
        metadata          JSON,
        executed_at       TIMESTAMP,
        PRIMARY KEY (run_id, case_id)
    )
    """,
    """
    CREATE TABLE metric_results (
        run_id             VARCHAR NOT NULL,
        case_id            VARCHAR NOT NULL,
        turn_index         INTEGER,
        metric_index       INTEGER NOT NULL,
        metric_name        VARCHAR NOT NULL,
        kind               VARCHAR NOT NULL,
        score              DOUBLE,
        raw_score          DOUBLE,
        threshold          DOUBLE,
        direction          VARCHAR NOT NULL,
        unit               VARCHAR,
        passed             BOOLEAN,
        error              VARCHAR,
        judge_model        VARCHAR,
        retry_count        INTEGER,
        evaluation_time_ms BIGINT,
        scale              VARCHAR,
        fail_on_error      BOOLEAN,
        reasoning          VARCHAR,
        details            JSON
    )
    """,
    """
    CREATE TABLE tool_invocations (
        run_id      VARCHAR NOT NULL,
        case_id     VARCHAR NOT NULL,
        turn_index  INTEGER,
        call_index  INTEGER NOT NULL,
        name        VARCHAR NOT NULL,
        args        JSON,
        result      JSON,
        bytes       BIGINT,
        duration_ms BIGINT,
        error       VARCHAR,
        call_id     VARCHAR
    )
    """,
    """
    CREATE TABLE prompt_versions (
        agent_slug     VARCHAR NOT NULL,
        prompt_version VARCHAR NOT NULL,
        label          VARCHAR NOT NULL,
        body_hash      VARCHAR NOT NULL,
        source         VARCHAR,
        file_path      VARCHAR,
        author         VARCHAR,
        description    VARCHAR,
        tags           VARCHAR[],
        extra          JSON,
        body           VARCHAR,
        snapshot_path  VARCHAR,
        registered_at  TIMESTAMP,
        first_run_id   VARCHAR NOT NULL,
        first_seen_at  TIMESTAMP NOT NULL,
        PRIMARY KEY (agent_slug, prompt_version, body_hash)
    )
    """,
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "tables: eval_runs, test_results, metric_results, tool_invocations, prompt_versions",
        TABLES_V1,
    ),
    Migration(
        2,
        "views v_runs, v_pass_rate_trend, v_metric_trend, v_regressions, "
        "v_flaky_cases, v_errors; macros holodeck_t95, flaky_cases",
        migration_v2_views.VIEWS_V2,
    ),
    Migration(
        3,
        "table failed_runs: orchestrated runs that failed before producing an EvalRun",
        (
            """
            CREATE TABLE failed_runs (
                dagster_run_id VARCHAR PRIMARY KEY,
                job_name       VARCHAR NOT NULL,
                partition_key  VARCHAR,
                trigger        VARCHAR,
                failed_at      TIMESTAMP NOT NULL,
                error          VARCHAR
            )
            """,
        ),
    ),
)
MIGRATIONS += (
    Migration(
        4,
        "tables case_trials (one row per trial), judge_control_scores; views v_case_trials, "
        "v_run_stats, v_metric_stats, v_run_comparisons, v_judge_drift; v_flaky_cases by "
        "the trials rule; macros holodeck_t975, holodeck_t_pvalue, holodeck_mcnemar_p",
        migration_v4_stats.VIEWS_V4,
    ),
    Migration(5, migration_v5_verdicts.DESCRIPTION_V5, migration_v5_verdicts.VIEWS_V5),
    Migration(6, migration_v6_labels.DESCRIPTION_V6, migration_v6_labels.VIEWS_V6),
)
MIGRATIONS += (
    Migration(
        7,
        "tables call_costs (per run, case and heading), run_costs (price table, budget "
        "verdict); views v_cost_by_run, v_cost_by_case",
        migration_v7_cost.STATEMENTS_V7,
    ),
    Migration(8, migration_v8_budgets.DESCRIPTION_V8, migration_v8_budgets.STATEMENTS_V8),
    Migration(9, migration_v9_verdicts.DESCRIPTION_V9, migration_v9_verdicts.STATEMENTS_V9),
    Migration(
        10, migration_v10_comparisons.DESCRIPTION_V10, migration_v10_comparisons.STATEMENTS_V10
    ),
    Migration(11, migration_v11_estimate.DESCRIPTION_V11, migration_v11_estimate.STATEMENTS_V11),
    Migration(12, migration_v12_pairs.DESCRIPTION_V12, migration_v12_pairs.STATEMENTS_V12),
    Migration(
        13, migration_v13_label_cases.DESCRIPTION_V13, migration_v13_label_cases.STATEMENTS_V13
    ),
    Migration(14, migration_v14_intervals.DESCRIPTION_V14, migration_v14_intervals.STATEMENTS_V14),
)
LATEST_VERSION = MIGRATIONS[-1].version

TABLES = (
    "eval_runs",
    "test_results",
    "metric_results",
    "tool_invocations",
    "prompt_versions",
    *migration_v4_stats.TABLES_V4,
    *migration_v7_cost.TABLES_V7,
)
"""Tables that hold one run's rows, in insert order (``prompt_versions`` is upserted)."""


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The schema version of an open database; 0 for a new (empty) one. The table is read
    directly, not looked up in ``information_schema``: on a DuckLake that listing fetches
    every table's statistics from the catalog (two round trips a table, a third of a
    writer's open), and a missing table is a binder error that leaves a transaction usable."""
    import duckdb

    try:
        (version,) = con.execute("SELECT max(version) FROM schema_version").fetchall()[0]
    except duckdb.CatalogException:
        return 0
    return int(version) if version is not None else 0


def check_known(version: int, db_label: str) -> None:
    if version > LATEST_VERSION:
        raise ExecutionError(
            f"history database {db_label} has schema version {version}, newer than this "
            f"release understands ({LATEST_VERSION}); upgrade holodeck-pipelines to use it"
        )


def migrate(
    con: duckdb.DuckDBPyConnection,
    *,
    target: int = LATEST_VERSION,
    db_label: str = "(database)",
    translate: Callable[[str], str] = str,
) -> list[int]:
    """Apply the pending migrations up to ``target`` on a read-write connection; each
    statement goes through ``translate`` first (a backend's dialect: DuckLake's tables have
    no keys, :func:`holodeck_core.history.ducklake.lake_ddl`).

    All pending migrations go in one transaction: a new DuckLake then holds every table at
    one schema version, and a reader of a table's inlined rows loads no older catalog for
    them (two catalog loads, a quarter of a lake writer's round trips, before).

    Returns the versions applied (empty when the schema is current, which costs one query)."""
    version = current_version(con)
    check_known(version, db_label)
    pending = [m for m in MIGRATIONS if version < m.version <= target]
    if not pending:
        return []
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(translate(SCHEMA_VERSION_TABLE))
        for migration in pending:
            for statement in migration.statements:
                con.execute(translate(statement))
            description = migration.description.replace("'", "''")  # no bound parameter:
            con.execute(  # DuckDB 1.5 imports pandas for one (tabular.literal)
                "INSERT INTO schema_version (version, description) "
                f"VALUES ({migration.version}, '{description}')"
            )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return [migration.version for migration in pending]


@cache
def _arrow_schemas() -> dict[str, pa.Schema]:
    import duckdb

    con = duckdb.connect()
    try:
        migrate(con)
        tables = [
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'main' AND table_type = 'BASE TABLE'"
            ).fetchall()
        ]
        return {t: con.sql(f"SELECT * FROM {t} LIMIT 0").to_arrow_table().schema for t in tables}
    finally:
        con.close()


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a history table at the latest version, read from the DDL above (the
    one source of the schema: rows, the lake's Parquet files and their casts follow it)."""
    return _arrow_schemas()[table]
