"""``holodeck history sql`` runs only reads, on a lake too: DuckLake's maintenance functions
(``ducklake_cleanup_old_files``, ``ducklake_flush_inlined_data``, ...) delete or write data
files before they fail on the read-only catalog, so every table function outside the
read-only allow-list and every other ``ducklake_*`` call is refused before the lake is
opened, in whatever form (CALL, CTE, subquery, LATERAL, quoted, qualified, commented); the
catalog file and the data folder hash the same afterwards. PostgreSQL and S3:
tests/test_ducklake_servers.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from holodeck_core.history import store
from holodeck_core.history.ducklake import ALIAS, DuckLake
from holodeck_core.history.sql import HISTORY_TABLE_MACROS
from tests.history_helpers import build_history, run_cli
from tests.services import S3, Postgres
from tests.test_ducklake_servers import BUCKET, lake_url, servers  # noqa: F401 (fixtures)
from tests.test_lake import said

WRITERS = {
    "ducklake_cleanup_old_files": "'history', cleanup_all => true",
    "ducklake_delete_orphaned_files": "'history', cleanup_all => true",
    "ducklake_flush_inlined_data": "'history'",
    "ducklake_merge_adjacent_files": "'history'",
    "ducklake_rewrite_data_files": "'history', delete_threshold => 0",
    "ducklake_expire_snapshots": "'history', older_than => now()",
    "ducklake_set_option": "'history', 'parquet_compression', 'gzip'",
    "ducklake_set_commit_message": "'history', 'mallory', 'hello'",
    "ducklake_add_data_files": "'history', 'scratch', 'DATA/orphan.parquet'",
    "ducklake_commit": "'history'",
    "ducklake_scan": "'history'",
}
"""Every DuckLake table function that is not a read, with arguments that make it act."""

FORMS = (
    "SELECT * FROM {f}({a})",
    "FROM {f}({a})",
    "CALL {f}({a})",
    "WITH x AS (SELECT * FROM {f}({a})) SELECT count(*) FROM x",
    "SELECT (SELECT count(*) FROM {f}({a})) AS n",
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM {f}({a}))",
    "SELECT * FROM range(1) r, LATERAL (SELECT * FROM {f}({a}))",
    "SELECT 1 UNION ALL SELECT count(*) FROM {quoted}({a})",
    "select * from /* a */ history /* b */ . /* c */ {f} -- d\n ({a})",
    'SELECT * FROM "history"."main".{quoted}({a})',
    "SELECT * FROM system.main.{f}({a})",
    "SeLeCt * FrOm {mixed}({a})",
    "SELECT {f}({a})",
    "SELECT * FROM query('SELECT * FROM {f}({doubled})')",
)
"""The shapes a call takes: the check must find it in each."""

OTHERS = (
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM query_table('eval_runs')",
    "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
    "SELECT * FROM read_parquet('DATA**/*.parquet')",
    "SELECT * FROM glob('DATA**')",
    "SELECT * FROM read_blob('CATALOG')",
    "SELECT * FROM read_text('CATALOG')",
    "SELECT * FROM checkpoint()",
    "SELECT * FROM force_checkpoint()",
    "SELECT * FROM duckdb_secrets()",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM sniff_csv('CATALOG')",
    "SELECT * FROM postgres_execute('__ducklake_metadata_history', 'SELECT 1')",
    "SELECT * FROM postgres_query('__ducklake_metadata_history', 'SELECT 1')",
    "PRAGMA enable_checkpoint_on_shutdown",
    "PRAGMA json_execute_serialized_sql('x')",
    "ATTACH 'CATALOG' AS again",
    "ATTACH 'ducklake:CATALOG' AS again (DATA_PATH 'DATA')",
    "DETACH history",
    "SET enable_external_access = true",
    "SET ducklake_default_data_inlining_row_limit = 0",
    "RESET lock_configuration",
    "COPY eval_runs TO 'DATAcopy.parquet'",
    "EXPORT DATABASE 'DATAexport'",
    "IMPORT DATABASE 'DATA'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CHECKPOINT",
    "VACUUM",
    "USE memory",
    "BEGIN TRANSACTION",
    "COMMIT",
    "DROP TABLE eval_runs",
    "DELETE FROM eval_runs",
    "UPDATE eval_runs SET agent = 'x'",
    "INSERT INTO scratch VALUES (1)",
    "CREATE TABLE x AS SELECT 1",
    "ALTER TABLE eval_runs ADD COLUMN x INTEGER",
    "SELECT 1; CALL ducklake_cleanup_old_files('history', cleanup_all => true)",
    "CALL ducklake_snapshots('history')",
)
"""Everything else that is not a read: other table functions and other statements."""

LAST_DAY = "now() - INTERVAL 1 DAY, now()"
READS = (
    "SELECT count(*) FROM ducklake_snapshots('history')",
    "SELECT count(*) FROM system.main.ducklake_snapshots('history')",
    "SELECT count(*) FROM ducklake_table_info('history')",
    "SELECT count(*) FROM ducklake_list_files('history', 'eval_runs')",
    "FROM \"DuckLake_Current_Snapshot\"('history')",
    "FROM ducklake_last_committed_snapshot('history')",
    "SELECT count(*) FROM ducklake_options('history')",
    "SELECT count(*) FROM ducklake_settings('history')",
    f"SELECT count(*) FROM ducklake_table_insertions('history', 'main', 'scratch', {LAST_DAY})",
    f"SELECT count(*) FROM ducklake_table_deletions('history', 'main', 'scratch', {LAST_DAY})",
    f"SELECT count(*) FROM ducklake_table_changes('history', 'main', 'scratch', {LAST_DAY})",
    "WITH s AS (FROM ducklake_snapshots('history')) SELECT count(*) FROM s, LATERAL "
    "(SELECT * FROM range(2))",
    "SELECT count(*) FROM flaky_cases(3)",
    "SELECT count(*) FROM unnest([1, 2]), generate_series(1, 2)",
    "SELECT count(*) FROM duckdb_tables() JOIN duckdb_columns() USING (table_name)",
    "SELECT count(*) FROM eval_runs",
)
"""What a reader needs: these run, and change nothing either."""


def hostile(data: str, catalog: str) -> list[str]:
    """Every statement above, the lake's own paths put in."""
    calls = [
        form.format(
            f=name,
            a=args,
            quoted=f'"{name.upper()}"',
            mixed=name.title(),
            doubled=args.replace("'", "''"),
        )
        for name, args in WRITERS.items()
        for form in FORMS
    ]
    return [s.replace("DATA", data).replace("CATALOG", catalog) for s in (*calls, *OTHERS)]


def fingerprint(root: Path) -> dict[str, str]:
    """Every file under ``root`` by its relative path and content hash."""
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def stock(lake: DuckLake, orphan: str) -> None:
    """A lake where each maintenance function has work: files scheduled for deletion (a
    dropped table, expired), small adjacent files and deletions (``scratch``), rows inlined in
    the catalog (``inlined``) and a file nothing references (``orphan``)."""
    build_history(lake)  # type: ignore[arg-type]
    with store.writer(lake) as con:
        con.execute("SET ducklake_default_data_inlining_row_limit = 0")
        for table in ("scratch", "gone"):
            con.execute(f"CREATE TABLE {table} (i INTEGER)")
            for start in range(0, 30, 10):
                con.execute(f"INSERT INTO {table} SELECT range FROM range({start}, {start + 10})")
        con.execute("DELETE FROM scratch WHERE i % 3 = 0")
        con.execute("COPY (SELECT 1 AS i) TO " + repr(orphan) + " (FORMAT parquet)")
    with store.writer(lake) as con:
        con.execute("DROP TABLE gone")
    with store.writer(lake) as con:
        con.execute(f"CALL ducklake_expire_snapshots('{ALIAS}', older_than => now())")
        con.execute("SET ducklake_default_data_inlining_row_limit = 1000")
        con.execute("CREATE TABLE inlined AS SELECT range AS i FROM range(5)")


def refused(code: int, err: str) -> bool:
    text = said(err)
    return (
        code == 2
        and text.startswith("error: history sql")
        and ("not opened" in text or "Nothing was run" in text)
        and "Traceback" not in err
    )


@pytest.fixture
def lake(tmp_path: Path) -> DuckLake:
    target = DuckLake.parse(str(tmp_path / "lake"))
    stock(target, f"{target.data}orphan.parquet")
    return target


def test_nothing_a_query_calls_writes_or_deletes_a_lakes_catalog_or_files(
    lake: DuckLake, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "lake"
    before = fingerprint(root)
    assert [p for p in before if p.startswith("data/")]
    for statement in hostile(lake.data, lake.catalog):
        code, _, err = run_cli(capsys, "sql", statement, "--lake", lake.url)
        assert fingerprint(root) == before, statement
        assert refused(code, err), (statement, code, err)
    for statement in READS:
        code, out, err = run_cli(capsys, "sql", statement, "--lake", lake.url, "--format", "csv")
        assert code == 0 and out.strip(), (statement, err)
    assert fingerprint(root) == before


def test_a_refusal_names_the_function_and_what_may_be_called(
    lake: DuckLake, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "WITH x AS (SELECT * FROM Ducklake_Flush_Inlined_Data('history')) FROM x"
    code, _, err = run_cli(capsys, "sql", query, "--lake", lake.url)
    text = said(err)
    assert code == 2 and "refused ducklake_flush_inlined_data()" in text
    assert "ducklake_snapshots" in text and "docs/history.md" in text
    code, _, err = run_cli(capsys, "sql", "CALL ducklake_snapshots('history')", "--lake", lake.url)
    assert code == 2 and "SELECT * FROM name(...)" in said(err)


def test_the_duckdb_file_refuses_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "history.duckdb"
    build_history(db)
    before = fingerprint(tmp_path)
    for statement in hostile(str(tmp_path) + "/", str(db)):
        code, _, err = run_cli(capsys, "sql", statement, "--db", str(db))
        assert refused(code, err), (statement, code, err)
    for statement in READS:
        if "ducklake" not in statement.lower() and "scratch" not in statement:
            code, out, err = run_cli(capsys, "sql", statement, "--db", str(db), "--format", "csv")
            assert code == 0 and out.strip(), (statement, err)
    assert fingerprint(tmp_path) == before


def test_every_table_macro_of_the_history_may_be_called(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    build_history(db)
    with duckdb.connect(str(db), read_only=True) as con:
        macros = con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() "
            "WHERE function_type = 'table_macro' AND NOT internal"
        ).fetchall()
    assert {name for (name,) in macros} == HISTORY_TABLE_MACROS


# --- the catalog in PostgreSQL, the data on S3 ------------------------------------------------


def catalog_dump(pg: Postgres, database: str) -> dict[str, list[str]]:
    """Every row of every table of the catalog's PostgreSQL database, sorted."""
    import psycopg2

    con = psycopg2.connect(
        host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname=database
    )
    try:
        with con.cursor() as cursor:
            cursor.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE "
                "table_schema NOT IN ('pg_catalog', 'information_schema')"
            )
            tables = sorted(cursor.fetchall())
            dump: dict[str, list[str]] = {}
            for schema_name, table in tables:
                cursor.execute(f'SELECT * FROM "{schema_name}"."{table}"')
                dump[f"{schema_name}.{table}"] = sorted(
                    repr([bytes(v) if isinstance(v, memoryview) else v for v in row])
                    for row in cursor.fetchall()
                )
        return dump
    finally:
        con.close()


def bucket_listing(s3: S3, prefix: str) -> list[tuple[str, str, int]]:
    listed = s3.client().list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted((o["Key"], o["ETag"], o["Size"]) for o in listed)


def test_nothing_a_query_calls_changes_a_postgres_catalog_or_its_s3_files(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url: str = request.getfixturevalue("lake_url")  # test_ducklake_servers.py's fixtures
    pg, s3 = request.getfixturevalue("servers")
    lake = DuckLake.parse(url)
    stock(lake, f"{lake.data}orphan.parquet")
    database = url.split("/")[-1].split("?")[0]
    prefix = lake.data.removeprefix(f"s3://{BUCKET}/")

    def state() -> tuple[object, object]:
        return catalog_dump(pg, database), bucket_listing(s3, prefix)

    before = state()
    assert any(key.endswith("orphan.parquet") for key, _, _ in before[1])
    for statement in hostile(lake.data, lake.catalog):
        code, _, err = run_cli(capsys, "sql", statement, "--lake", url)
        assert state() == before, statement
        assert refused(code, err) and pg.password not in err, (statement, code, err)
    for statement in READS:
        code, out, err = run_cli(capsys, "sql", statement, "--lake", url, "--format", "csv")
        assert code == 0 and out.strip(), (statement, err)
    assert state() == before
