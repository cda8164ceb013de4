"""The DuckDB run history, read: the views (pass-rate trend, regressions, flaky cases, metric trend
with its interval, runs, errors) worked out on the hand-made sample history, the twelve example
queries and column list of docs/history.md, and the ``holodeck history`` commands compare (paired
and strict), sql (one SELECT only, nothing written), runs/show and the default database."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from statistics import NormalDist

import duckdb
import pytest

from holodeck_core.history import schema
from holodeck_core.stats.intervals import wilson_cc
from tests import history_helpers
from tests.history_helpers import CASES, day, ingest_runs, make_run, query, run_cli, write_run

# Shared fixtures: pytest finds a fixture by its name in the test module.
db = history_helpers.db
history = history_helpers.history

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "history.md"


# --------------------------------------------------------------------------- views


def test_pass_rate_trend(history: Path) -> None:
    rows = query(
        history,
        "SELECT prompt_version, day, runs, total_tests, passed, failed, errored, pass_rate "
        "FROM v_pass_rate_trend ORDER BY day, prompt_version",
    )
    d = [day(i).date() for i in range(4)]
    assert rows == [
        ("v2", d[0], 2, 8, 5, 3, 0, pytest.approx(5 / 8)),
        ("v2", d[1], 1, 4, 3, 0, 1, pytest.approx(3 / 4)),
        ("v3", d[2], 1, 4, 3, 1, 0, pytest.approx(3 / 4)),
        ("v3", d[3], 1, 4, 2, 2, 0, pytest.approx(2 / 4)),
    ]


def test_regressions_between_runs_and_prompt_versions(history: Path) -> None:
    rows = query(
        history,
        "SELECT comparison, base_run_id, head_run_id, case_id, base_status, head_status, flip "
        "FROM v_regressions ORDER BY comparison, head_run_id, case_id",
    )
    assert rows == [
        ("previous_run", "r1", "r2", "order-status", "PASS", "FAIL", "regression"),
        ("previous_run", "r2", "r3", "order-status", "FAIL", "PASS", "fix"),
        ("previous_run", "r2", "r3", "weather-paris", "FAIL", "ERROR", "change"),
        ("previous_run", "r4", "r5", "order-status", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "escalation", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "order-status", "PASS", "FAIL", "regression"),
        ("prompt_version", "r3", "r5", "weather-paris", "ERROR", "PASS", "fix"),
    ]


def test_flaky_cases(history: Path) -> None:
    rows = query(
        history,
        "SELECT prompt_version, case_id, runs, passes, fails, errors, flips, history, "
        "last_status FROM v_flaky_cases ORDER BY prompt_version, case_id",
    )
    # weather-paris (F, F, E) is not flaky: an ERROR is no verdict, so nothing flipped
    assert rows == [
        ("v2", "order-status", 3, 2, 1, 0, 2, "PFP", "PASS"),
        ("v3", "order-status", 2, 1, 1, 0, 1, "PF", "FAIL"),
    ]
    assert query(history, "SELECT count(*) FROM flaky_cases(1)") == [(0,)]


def test_metric_trend_interval_runs_and_errors(history: Path) -> None:
    mean, sd, n, low, high, errors = query(
        history,
        "SELECT mean, stddev, n, ci95_low, ci95_high, errors FROM v_metric_trend "
        "WHERE run_id = 'r3' AND metric_name = 'faithfulness'",
    )[0]
    scores = [0.9, 0.9, 0.9]  # weather-paris errored: excluded from n
    assert (n, errors) == (3, 1)
    assert mean == pytest.approx(statistics.mean(scores))
    assert sd == pytest.approx(0.0, abs=1e-12)
    r1 = query(
        history,
        "SELECT mean, stddev, ci95_low, ci95_high FROM v_metric_trend "
        "WHERE run_id = 'r1' AND metric_name = 'faithfulness'",
    )[0]
    values = [0.9, 0.9, 0.2, 0.9]
    # a 0-1 score: Wilson (continuity-corrected) on n_eff = m(1-m)/SE² · (z / t(3))², inside [0, 1]
    m, se, z = statistics.mean(values), statistics.stdev(values) / 2, NormalDist().inv_cdf(0.975)
    n_eff = m * (1 - m) / se**2 * (z / 3.182446) ** 2
    assert r1 == pytest.approx((m, statistics.stdev(values), *wilson_cc(m, n_eff, z)))
    assert 0.0 <= r1[2] < r1[3] <= 1.0
    # no spread: the 3 cases alone count (n_eff = n), not a zero-width interval
    assert (low, high) == pytest.approx(wilson_cc(0.9, 3, z))  # no SE: no df to lose
    runs = query(
        history,
        "SELECT run_id, run_seq, previous_run_id, pass_rate_change, cost_per_pass "
        "FROM v_runs WHERE prompt_version = 'v2' ORDER BY run_seq",
    )
    assert runs == [
        ("r1", 1, None, None, pytest.approx(0.01 / 3)),
        ("r2", 2, "r1", pytest.approx(-0.25), pytest.approx(0.01 / 2)),
        ("r3", 3, "r2", pytest.approx(0.25), pytest.approx(0.01 / 3)),
    ]
    errs = query(
        history,
        "SELECT run_id, case_id, source, name, message FROM v_errors ORDER BY run_id, source",
    )
    assert errs == [
        ("r3", "weather-paris", "case", None, "model timeout"),
        ("r3", "weather-paris", "metric", "faithfulness", "judge timeout"),
        ("r5", "weather-paris", "tool", "get_weather", "upstream 503"),
    ]


def doc_queries() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    examples = text.split("## Example queries", 1)[1]
    return re.findall(r"```sql\n(.*?)```", examples, flags=re.DOTALL)


def test_the_doc_queries_run_and_answer(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = doc_queries()
    assert len(queries) == 12
    for number, sql in enumerate(queries, start=1):
        code, out, err = run_cli(capsys, "sql", sql, "--db", str(history), "--format", "json")
        assert code == 0, f"query {number}: {err}"
        assert json.loads(out), f"query {number} returned no rows on the sample history"
    code, out, _ = run_cli(capsys, "sql", queries[4], "--db", str(history), "--format", "json")
    assert [r["case_id"] for r in json.loads(out)] == ["order-status"]  # r5 broke it


def test_the_duckdb_people_have_opens_the_file_and_runs_every_doc_query(history: Path) -> None:
    """docs/history.md says which DuckDB reads ``history.duckdb``: the pinned release's Python
    package on its own (no holodeck code) and the DuckDB CLI of that same release from PyPI
    (``duckdb-cli``) run every query of the page on a real file."""
    queries = doc_queries()
    cli = Path(sys.executable).with_name("duckdb")
    assert cli.is_file(), "duckdb-cli is a dev dependency: make venv"
    assert version("duckdb-cli") == duckdb.__version__, "pin duckdb-cli to the DuckDB release"
    shown = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=True)
    assert shown.stdout.startswith(f"v{duckdb.__version__} "), shown.stdout
    text = DOCS.read_text(encoding="utf-8")
    assert f"DuckDB {duckdb.__version__}" in text and f"duckdb-cli {duckdb.__version__}" in text
    script = (
        "import duckdb, json, sys\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(json.dumps([len(con.execute(q).fetchall()) for q in json.loads(sys.argv[2])]))"
    )
    plain = subprocess.run(
        [sys.executable, "-c", script, str(history), json.dumps(queries)],
        capture_output=True, text=True, check=True, cwd=history.parent,
    )  # fmt: skip
    assert all(json.loads(plain.stdout)), plain.stdout
    for number, sql in enumerate(queries, start=1):
        shell = subprocess.run(
            [str(cli), "-readonly", "-json", str(history), "-c", sql],
            capture_output=True, text=True, cwd=history.parent,
        )  # fmt: skip
        assert shell.returncode == 0 and not shell.stderr, f"query {number}: {shell.stderr}"
        assert json.loads(shell.stdout), f"query {number}: no rows in the CLI"


def test_docs_describe_every_column(history: Path) -> None:
    text = DOCS.read_text(encoding="utf-8")
    for relation in (
        *schema.TABLES,
        "schema_version",
        "v_pass_rate_trend",
        "v_metric_trend",
        "v_regressions",
        "v_flaky_cases",
        "v_errors",
        "v_cost_by_run",
        "v_cost_by_case",
        "configuration_cells",
    ):
        columns = [r[0] for r in query(history, f"DESCRIBE {relation}")]
        missing = [c for c in columns if f"`{c}`" not in text]
        assert missing == [], f"{relation}: undocumented columns {missing}"


# --------------------------------------------------------------------------- CLI


def test_compare_flags_a_planted_regression(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ingest_runs(
        db,
        [
            make_run("PPPP", day(0), run_id="base-aaaa"),
            make_run("PPFP", day(1), run_id="cand-bbbb", cost=0.02),
        ],
    )
    code, out, _ = run_cli(capsys, "compare", "base", "cand", "--db", str(db), "--format", "json")
    assert code == 0  # one flip of four cases is no evidence of a drop (McNemar mid-p 0.5)
    paired = json.loads(out)
    assert paired["verdict"] == "no significant change" and paired["regression"] is False
    assert paired["paired"]["test"] == "mcnemar_midp" and paired["paired"]["p_value"] == 0.5
    # raw and adjusted p, over the family of the pass fraction and the metrics (BH)
    assert paired["paired"]["adjustment"] == "bh" and paired["paired"]["family_size"] >= 2
    assert paired["paired"]["p_adjusted"] >= paired["paired"]["p_value"]
    code, out, _ = run_cli(
        capsys, "compare", "base", "cand", "--db", str(db), "--format", "json", "--strict"
    )
    assert code == 1  # --strict keeps the any-flip rule
    result = json.loads(out)
    assert result["regression"] is True
    assert [(f["case_id"], f["status_a"], f["status_b"]) for f in result["flips"]] == [
        ("weather-paris", "PASS", "FAIL")
    ]
    assert result["pass_rate_drop"] == pytest.approx(0.25)
    assert result["cost_delta"] == pytest.approx(0.01)
    assert result["tokens_delta"] == 0
    faith = next(m for m in result["metrics"] if m["metric_name"] == "faithfulness")
    assert faith["delta"] == pytest.approx((0.9 * 3 + 0.2) / 4 - 0.9)
    assert faith["worse"] is True
    code, out, _ = run_cli(capsys, "compare", "base-aaaa", "cand-bbbb", "--db", str(db), "--strict")
    assert code == 1 and "REGRESSION" in out and "weather-paris" in out
    assert run_cli(capsys, "compare", "base", "base", "--db", str(db))[0] == 0


def test_compare_different_test_sets_uses_common_cases(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    more = (*CASES, "new-one", "new-two")
    ingest_runs(
        db,
        [
            make_run("PPPP", day(0), run_id="small-run"),
            make_run("PPPPFF", day(1), run_id="large-run", cases=more),
        ],
    )
    code, out, err = run_cli(
        capsys,
        "compare",
        "small-run",
        "large-run",
        "--db",
        str(db),
        "--format",
        "json",
        "--strict",
    )
    assert code == 1  # no flip, but the pass rate fell from 100% to 67%
    result = json.loads(out)
    assert result["flips"] == [] and result["common_cases"] == 4
    assert result["only_in_b"] == ["new-one", "new-two"]
    assert "different test sets" in err
    assert result["pass_rate_drop"] == pytest.approx(1 / 3)
    assert result["paired"]["n"] == 4 and result["paired"]["mean_diff"] == 0.0
    args = ("compare", "small-run", "large-run", "--db", str(db), "--max-drop", "0.5", "--strict")
    assert run_cli(capsys, *args)[0] == 0


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("DROP TABLE eval_runs", "refused a statement of type DROP"),
        ("SELECT 1; DROP TABLE eval_runs", "exactly one"),
        ("DELETE FROM eval_runs", "refused a statement of type DELETE"),
        ("UPDATE eval_runs SET pass_rate = 1", "refused a statement of type UPDATE"),
        ("WITH x AS (SELECT 1) INSERT INTO schema_version SELECT 5, 'x', now()", "INSERT"),
        ("COPY eval_runs TO 'leak.csv'", "refused a statement of type COPY"),
        ("ATTACH 'other.duckdb' AS other", "refused a statement of type ATTACH"),
        ("SET enable_external_access = true", "refused a statement of type SET"),
        ("SELECT * FROM read_csv('/etc/passwd')", "refused read_csv()"),
        ("SELECT * FROM '/etc/passwd.csv'", "disabled by configuration"),
        ("", "empty"),
    ],
)
def test_sql_refuses_anything_but_one_select(
    history: Path, statement: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = hashlib.sha256(history.read_bytes()).hexdigest()
    code, out, err = run_cli(capsys, "sql", statement, "--db", str(history))
    assert code == 2
    assert out == ""
    assert reason in err
    assert hashlib.sha256(history.read_bytes()).hexdigest() == before
    assert query(history, "SELECT count(*) FROM eval_runs") == [(5,)]


def test_runs_show_and_run_lookup(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "runs", "--db", str(history), "--format", "json")
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)] == ["r5", "r4", "r3", "r2", "r1"]
    code, out, _ = run_cli(capsys, "runs", "--db", str(history), "--prompt-version", "v3")
    assert code == 0 and "r5" in out and "r1" not in out
    code, out, _ = run_cli(capsys, "show", "r3", "--db", str(history))
    assert code == 0
    assert "weather-paris" in out and "ERROR" in out and "model timeout" in out
    code, out, _ = run_cli(capsys, "show", "r3", "--db", str(history), "--format", "json")
    detail = json.loads(out)
    assert detail["run"]["errored"] == 1 and len(detail["cases"]) == 4
    code, _, err = run_cli(capsys, "show", "nope-nope", "--db", str(history))
    assert code == 2 and "not found" in err
    code, _, err = run_cli(capsys, "runs", "--db", str(history.with_name("absent.duckdb")))
    assert code == 2 and "no history database" in err


def test_default_database_comes_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(tmp_path / "env.duckdb"))
    path = write_run(tmp_path / "results", make_run("PPPP", day(0), run_id="env-run"))
    code, _, err = run_cli(capsys, "import", str(path))
    assert code == 0, err
    assert query(tmp_path / "env.duckdb", "SELECT run_id FROM eval_runs") == [("env-run",)]
