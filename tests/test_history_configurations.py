"""The history knows configurations (docs/history.md): an agent, a prompt version and a model
candidate. Two agents x two prompt versions x two candidates, in a DuckDB file and a DuckLake:
the ``configuration_cells`` view (the newest healthy run of each), the previous run, trends,
regressions, flaky cases and paired comparisons within one configuration (in SQL and in the
Python of the ``no_regression`` check and ``--baseline``), ``history compare`` naming both
configurations and refusing two agents (exit 2), ``history runs`` showing the candidate, and an
older EvalRun file without a candidate synced as ``default``."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.baseline import baseline_comparison
from holodeck_core.history import store
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.queries import compare_runs
from holodeck_core.history.regression import regression_check
from holodeck_core.models import EvalRun
from holodeck_core.runner import fingerprint as fp
from holodeck_core.testing import run_model_server
from tests.history_helpers import day, ingest_runs, make_agent, make_run, run_cli, write_run
from tests.test_model_candidates import RULES as CANDIDATE_RULES
from tests.test_model_candidates import write_project

AGENTS = {"s": "support-bot", "b": "billing-bot"}
PROMPTS = ("v1", "v2")
CANDIDATES = ("default", "fast")
STATUSES = {
    # (prompt, candidate): its three runs, oldest first (refund-policy, order-status,
    # weather-paris, escalation); v2 x fast's newest run is an infrastructure failure
    ("v1", "default"): ("PPPP", "PPPF", "PPPP"),
    ("v1", "fast"): ("PFPP", "PFPP", "PFPP"),
    ("v2", "default"): ("PPFF", "PPFF", "PPFF"),
    ("v2", "fast"): ("PPPP", "PPPP", "EEEE"),
}


def run_id(agent: str, prompt: str, candidate: str, n: int) -> str:
    return f"{agent}-{prompt}-{candidate}-{n}"


def with_candidate(run: EvalRun, candidate: str) -> EvalRun:
    meta = run.metadata.model_copy(
        update={"model_candidate": candidate, "model_fingerprint": f"fp-{candidate}"}
    )
    return run.model_copy(update={"metadata": meta})


def matrix_runs() -> list[EvalRun]:
    """Three runs of each of the eight configurations, interleaved: the configurations' runs
    of one day follow each other an hour apart, so the previous run of the agent and prompt
    version is mostly another candidate's."""
    runs = []
    for n in range(1, 4):
        hour = 8
        for key, name in AGENTS.items():
            agent = make_agent(name)
            for prompt in PROMPTS:
                for candidate in CANDIDATES:
                    statuses = STATUSES[prompt, candidate][n - 1]
                    when: datetime = day(n - 1, hour)
                    hour += 1
                    made = make_run(
                        statuses,
                        when,
                        run_id=run_id(key, prompt, candidate, n),
                        prompt=prompt,
                        agent=agent,
                    )
                    runs.append(with_candidate(made, candidate))
    return runs


@pytest.fixture(params=["file", "lake"])
def matrix(request: pytest.FixtureRequest, tmp_path: Path) -> store.History:
    target: store.History = (
        tmp_path / "history.duckdb"
        if request.param == "file"
        else DuckLake.parse(str(tmp_path / "lake"))
    )
    ingest_runs(target, matrix_runs())
    return target


def rows(target: store.History, sql: str) -> list[tuple[Any, ...]]:
    with store.reader(target) as con:
        return con.execute(sql).fetchall()


def config_of(run: str) -> str:
    return run.rsplit("-", 1)[0]


def said(text: str) -> str:
    return " ".join(text.split())


def test_the_cells_are_the_newest_healthy_run_of_each_configuration(
    matrix: store.History,
) -> None:
    cells = rows(
        matrix,
        "SELECT agent_slug, prompt_version, model_candidate, model_fingerprint, run_id, "
        "healthy_runs, total_tests, passed, errored, pass_rate, cost_per_case, cost_per_pass, "
        "latency_p50_ms, latency_p95_ms, age > INTERVAL 1 DAY "
        "FROM configuration_cells ORDER BY ALL",
    )
    expected = []
    for key, name in sorted(AGENTS.items(), key=lambda item: item[1]):
        for prompt in PROMPTS:
            for candidate in CANDIDATES:
                newest = 2 if (prompt, candidate) == ("v2", "fast") else 3
                statuses = STATUSES[prompt, candidate][newest - 1]
                passed = statuses.count("P")
                expected.append(
                    (
                        name, prompt, candidate, f"fp-{candidate}",
                        run_id(key, prompt, candidate, newest), newest, 4, passed, 0,
                        pytest.approx(passed / 4), pytest.approx(0.01 / 4),
                        pytest.approx(0.01 / passed), pytest.approx(450.0),
                        pytest.approx(585.0), True,
                    )
                )  # fmt: skip
    assert cells == expected
    # the interval is v_run_stats's, for the cell's run
    assert rows(
        matrix,
        "SELECT count(*) FROM configuration_cells c JOIN v_run_stats s USING (run_id) "
        "WHERE c.ci95_low = s.ci95_low AND c.ci95_high = s.ci95_high "
        "AND c.pass_rate_method = s.method AND c.ci95_low < c.pass_rate",
    ) == [(8,)]
    assert rows(matrix, "SELECT count(*) FROM configuration_cells WHERE ci95_low IS NULL") == [(0,)]


def test_previous_runs_trends_regressions_and_comparisons_stay_in_one_configuration(
    matrix: store.History,
) -> None:
    previous = rows(
        matrix, "SELECT run_id, previous_run_id FROM v_runs WHERE previous_run_id IS NOT NULL"
    )
    assert len(previous) == 16
    assert all(config_of(a) == config_of(b) for a, b in previous)
    trend = rows(
        matrix,
        "SELECT agent_slug, prompt_version, model_candidate, day, runs FROM v_pass_rate_trend",
    )
    assert len(trend) == 8 * 3 - 2 and {r[4] for r in trend} == {1}  # one run a day each
    pairs = rows(
        matrix,
        "SELECT DISTINCT comparison, model_candidate, base_run_id, head_run_id FROM v_regressions",
    )
    assert pairs and all(
        config_of(base) == config_of(head)
        for kind, _, base, head in pairs
        if kind == "previous_run"
    )
    assert all(base.split("-")[2] == head.split("-")[2] == c for _, c, base, head in pairs)
    compared = rows(matrix, "SELECT base_run_id, head_run_id FROM v_run_comparisons_raw")
    assert sorted(compared) == sorted(
        (run_id(k, p, c, n - 1), run_id(k, p, c, n))
        for k in AGENTS
        for p in PROMPTS
        for c in CANDIDATES
        for n in (2, 3)
        if (p, c, n) != ("v2", "fast", 3)  # an infrastructure failure is never compared
    )


def test_the_previous_run_is_the_previous_healthy_run(tmp_path: Path) -> None:
    db = tmp_path / "history.duckdb"
    statuses = ("PPPP", "EEEE", "PPPF")  # the second run is an infrastructure failure
    ingest_runs(db, [make_run(s, day(n), run_id=f"r{n}") for n, s in enumerate(statuses)])
    assert rows(
        db, "SELECT run_id, run_seq, previous_run_id, pass_rate_change FROM v_runs ORDER BY 2"
    ) == [("r0", 1, None, None), ("r1", 2, "r0", -1.0), ("r2", 3, "r0", -0.25)]


def test_flaky_cases_are_counted_within_one_configuration(matrix: store.History) -> None:
    flaky = rows(
        matrix,
        "SELECT agent_slug, prompt_version, model_candidate, case_id, history, flips "
        "FROM v_flaky_cases ORDER BY ALL",
    )
    # fast answers order-status FAIL every time and default PASS: no flip within either
    assert flaky == [
        ("billing-bot", "v1", "default", "escalation", "PFP", 2),
        ("support-bot", "v1", "default", "escalation", "PFP", 2),
    ]
    with store.reader(matrix) as con:
        paired = compare_runs(con, "s-v1-fast-2", "s-v1-fast-3")
    assert paired.flaky == [
        "escalation"
    ]  # flaky in a configuration of the agent's, not order-status


def test_the_regression_check_and_the_baseline_pick_the_same_configuration(
    matrix: store.History,
) -> None:
    assert regression_check(matrix, "s-v1-fast-2").previous == "s-v1-fast-1"
    assert regression_check(matrix, "s-v2-default-3", baseline="v1").previous == "s-v1-default-3"
    comparison = baseline_comparison(matrix, "s-v2-default-3", "v1", strict=False, alpha=0.05)
    assert comparison.a["run_id"] == "s-v1-default-3"
    assert comparison.configuration_a == "support-bot · v1 · default"


def test_a_versions_baseline_is_its_newest_counted_run_for_the_gate_and_the_check(
    tmp_path: Path,
) -> None:
    """One baseline for ``holodeck test --baseline v1`` and ``evaluations.baseline: v1``:
    neither a rescore nor an infrastructure failure that came after v1's run."""
    db = tmp_path / "history.duckdb"
    runs = [
        make_run("PPPF", day(0), run_id="v1-run"),
        make_run("PPPP", day(1), run_id="v1-rescore", trigger="rescore"),
        make_run("EEEE", day(2), run_id="v1-outage"),
        make_run("PPPF", day(3), run_id="v2-run", prompt="v2"),
    ]
    ingest_runs(db, runs)
    assert regression_check(db, "v2-run", baseline="v1").previous == "v1-run"
    comparison = baseline_comparison(db, "v2-run", "v1", strict=False, alpha=0.05)
    assert comparison.a["run_id"] == "v1-run"


def test_compare_names_both_configurations_and_refuses_two_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    db = tmp_path / "history.duckdb"
    ingest_runs(db, matrix_runs())
    code, out, err = run_cli(capsys, "compare", "s-v1-default-3", "b-v1-default-3", "--db", str(db))
    assert code == 2 and out == "" and "Traceback" not in err, err
    text = said(err)
    assert "(support-bot · v1 · default)" in text and "(billing-bot · v1 · default)" in text
    assert "different agents" in text and "holodeck history runs --agent" in text
    code, out, err = run_cli(capsys, "compare", "s-v1-default-3", "s-v1-fast-3", "--db", str(db))
    assert code in (0, 1), err
    assert "support-bot · v1 · default" in out and "support-bot · v1 · fast" in out
    code, out, _ = run_cli(
        capsys, "compare", "s-v1-default-3", "s-v2-fast-2", "--db", str(db), "--format", "json"
    )
    assert code in (0, 1)
    assert json.loads(out)["configuration_b"] == "support-bot · v2 · fast"
    code, out, _ = run_cli(capsys, "show", "s-v2-fast-2", "--db", str(db))
    assert code == 0 and re.search(r"model candidate +fast", out), out


def test_runs_shows_the_candidate_once_another_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    db = tmp_path / "history.duckdb"
    ingest_runs(db, [make_run("PPPP", day(0), run_id="own-1")])
    code, out, _ = run_cli(capsys, "runs", "--db", str(db))
    assert code == 0 and "own-1" in out and "candidate" not in out
    ingest_runs(db, [with_candidate(make_run("PPPP", day(1), run_id="fast-1"), "fast")])
    code, out, _ = run_cli(capsys, "runs", "--db", str(db))
    assert code == 0 and "candidate" in out
    [fast] = [line for line in out.splitlines() if "fast-1" in line]
    [own] = [line for line in out.splitlines() if "own-1" in line]
    assert " fast " in fast and " default " in own


@pytest.mark.parametrize("backend", ["--db", "--lake"])
def test_sync_of_an_older_evalrun_without_a_candidate_records_default(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = make_run("PPFP", day(0), run_id="old-1")
    assert old.metadata.model_candidate is None and old.metadata.model_fingerprint is None
    folder = tmp_path / "results"
    write_run(folder, old)
    write_run(folder, with_candidate(make_run("PPPP", day(1), run_id="new-1"), "fast"))
    target = str(tmp_path / ("history.duckdb" if backend == "--db" else "lake"))
    code, _, err = run_cli(capsys, "sync", str(folder), backend, target)
    assert code == 0, err
    history = tmp_path / "history.duckdb" if backend == "--db" else DuckLake.parse(target)
    assert rows(
        history, "SELECT run_id, model_candidate, model_fingerprint FROM eval_runs ORDER BY 1"
    ) == [("new-1", "fast", "fp-fast"), ("old-1", "default", None)]
    assert rows(history, "SELECT run_id, model_candidate FROM configuration_cells ORDER BY 1") == [
        ("new-1", "fast"),
        ("old-1", "default"),
    ]


def test_holodeck_test_records_its_candidate_and_its_baseline_is_of_that_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real CLI against the loopback model server: each run's row names its candidate and
    fingerprint, and ``--baseline VERSION`` compares with that version's newest run of the same
    candidate, not with a newer run of another."""
    db = tmp_path / "history.duckdb"
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(db))
    with run_model_server(CANDIDATE_RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, "mini: {}\nlarge: {name: gpt-4o}")
        assert main(["test", str(agent), "-q", "--model", "large"]) == 0
        assert main(["test", str(agent), "-q"]) == 0
        recorded = rows(
            db, "SELECT run_id, prompt_version, model_candidate, model_fingerprint FROM eval_runs "
            "ORDER BY finished_at",
        )  # fmt: skip
        [(large, version, large_name, large_fp), (mini, _, mini_name, mini_fp)] = recorded
        assert (large_name, mini_name) == ("large", "mini")
        assert large_fp == fp.model_fingerprint(load_agent(agent, model="large")) != mini_fp
        summary = tmp_path / "summary.md"
        argv = ["test", str(agent), "-q", "--model", "large", "--baseline", version]
        assert main([*argv, "--summary", str(summary)]) == 0
        # the PR summary names both configurations: the baseline's and the run's
        assert (
            f"- baseline: prompt {version} · model large, run `{large[:12]}`, against this "
            f"run's prompt {version} · model large: "
        ) in summary.read_text()
        assert "another model candidate" not in summary.read_text()
        # its cost estimate was measured on the same configuration's run, not the newer mini one
        [(source,)] = rows(
            db, "SELECT estimate_source FROM run_costs JOIN eval_runs USING (run_id) "
            "ORDER BY finished_at DESC LIMIT 1",
        )  # fmt: skip
        assert large in source or large[:12] in source, source
        # a baseline named by run id, or as VERSION:MODEL, may be another candidate's: the
        # summary says so
        named = {mini: tmp_path / "by-id.md", f"{version}:mini": tmp_path / "by-cell.md"}
        for ref, other in named.items():
            argv = ["test", str(agent), "-q", "--model", "large", "--baseline", ref]
            assert main([*argv, "--summary", str(other)]) == 0
        assert main(["test", str(agent), "-q", "--baseline", f"{version}:huge"]) == 2
    captured = capsys.readouterr()
    assert (
        f"--baseline {version}:huge: no run of prompt version '{version}' with model candidate "
        "'huge'"
    ) in " ".join(captured.err.split())
    # the console names the baseline's configuration too
    assert f"against baseline {mini} (prompt {version} · model mini, run {mini[:12]}): " in (
        captured.out
    )
    for other in named.values():
        said = other.read_text()
        assert f"- baseline: prompt {version} · model mini, run `{mini[:12]}`" in said
        assert (
            "- **another model candidate**: the baseline ran model mini, this run model large"
        ) in said


def test_a_file_whose_candidate_is_no_partition_key_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate name is data from the file: one that holodeck.yaml could not have declared
    (markup, a formula, a terminal escape) never reaches the history."""
    data = json.loads(make_run("PPPP", day(0), run_id="hostile-1").to_json())
    data["metadata"]["model_candidate"] = '=HYPERLINK("x")\x1b[2J'
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "hostile.json").write_text(json.dumps(data))
    db = tmp_path / "history.duckdb"
    code, _, err = run_cli(capsys, "sync", str(folder), "--db", str(db))
    assert code == 2 and "Traceback" not in err and "\x1b" not in err
    assert "hostile.json: metadata.model_candidate" in said(err)
    assert not db.exists() or rows(db, "SELECT count(*) FROM eval_runs") == [(0,)]
