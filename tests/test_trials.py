"""Repeated trials end to end (docs/cli.md): seeded random replies of the loopback server,
reducers, the stored statistics against scipy, resume per trial, paired comparisons in the CLI
and in the Dagster check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from scipy import stats as sps

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.models import EvalRun, Status
from holodeck_core.stats.intervals import wilson_cc
from holodeck_core.testing import request_key, run_model_server
from holodeck_core.testing.server.planning import uniform_draw
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.pools import apply_pools
from tests.dagster_helpers import check_evaluations

CONTAINS_PARIS = "{type: standard, metric: contains, pattern: Paris}"


def agent_yaml(
    url: str, cases: list[str], *, execution: str = "", metric: str = CONTAINS_PARIS
) -> str:
    lines = "".join(f"  - {{id: {c.split()[0]}, input: '{c}'}}\n" for c in cases)
    return (
        textwrap.dedent(f"""\
        name: trials
        model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-key-1234}}
        instructions: {{inline: "Answer."}}
        {execution}
        evaluations:
          metrics: [{metric}]
        test_cases:
        """)
        + lines
    )


def seed_with(passes: int, of: int, p: float, text: str, rule: int = 0) -> int:
    """A server seed whose first ``of`` draws for ``text`` give exactly ``passes`` hits."""
    key = request_key("responses", text)
    for seed in range(1000):
        hits = sum(uniform_draw(seed, f"rule{rule}|replies", key, n) < p for n in range(1, of + 1))
        if hits == passes:
            return seed
    raise AssertionError("no such seed")


def eval_runs(folder: Path) -> list[EvalRun]:
    return [
        EvalRun.model_validate_json(p.read_text())
        for p in sorted(folder.glob("results/*/holodeck-pipelines/*.json"))
    ]


def test_five_trials_three_seeded_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flaky = "capital of France?"
    seed = seed_with(3, 5, 0.6, flaky)
    rules = {
        "seed": seed,
        "rules": [
            {
                "match": {"user": "capital"},
                "replies": [{"p": 0.6, "reply": "Paris"}, {"p": 0.4, "reply": "Lyon"}],
            },
            {"match": {"user": "always"}, "reply": "Paris"},
        ],
    }
    cases = [flaky, "always Paris", "never"]
    statuses = {}
    with run_model_server(rules) as server:
        for reducer in ("all", "majority", "any"):
            server.reset()  # the same draws for every reducer
            agent = tmp_path / reducer / "agent.yaml"
            agent.parent.mkdir()
            execution = f"execution: {{trials: 5, reducer: {reducer}}}"
            agent.write_text(agent_yaml(server.openai_base_url, cases, execution=execution))
            report = agent.parent / "report.md"
            assert main(["test", str(agent), "-o", str(report)]) == 1  # "never" always fails
            [run] = eval_runs(agent.parent)
            statuses[reducer] = {r.test_id: r.status for r in run.report.results}
            assert server.stats()["total_calls"] == 3 * 5
    out = capsys.readouterr().out
    assert "% pass rate (95% CI " in out and "pass^5" in out and "flaky" in out
    assert ": mean " not in out  # the per-metric statistics only with -v
    # each interval's method once for the run, not once per metric
    methods = "intervals (95%): Wilson score with continuity correction on the effective n"
    assert out.count(methods) == len(statuses) and out.count("interval method") == 0
    assert statuses == {
        "all": {"capital": Status.FAIL, "always": Status.PASS, "never": Status.FAIL},
        "majority": {"capital": Status.PASS, "always": Status.PASS, "never": Status.FAIL},
        "any": {"capital": Status.PASS, "always": Status.PASS, "never": Status.FAIL},
    }
    markdown = (tmp_path / "all" / "report.md").read_text()
    assert "## Statistics" in markdown and "**Trials**: 3/5 passed" in markdown
    assert "pass@1 0.533" in markdown
    [run] = eval_runs(tmp_path / "all")
    case = next(r for r in run.report.results if r.test_id == "capital")
    assert case.trials is not None and [t.agent_response for t in case.trials].count("Paris") == 3
    assert case.metric_results[0].score == pytest.approx(0.6)  # scores average over trials
    stats = run.report.summary.statistics
    assert stats is not None and stats.trials == 5 and stats.flaky_cases == ["capital"]
    assert stats.pass_at_k is not None and stats.pass_hat_k is not None
    assert stats.pass_at_k[1] == pytest.approx((0.6 + 1 + 0) / 3)
    assert stats.pass_hat_k[5] == pytest.approx(1 / 3)  # only "always" passes all five
    # the flaky case alone: pass fraction 0.6, pass@1 0.6, pass^5 0
    from holodeck_core.stats import run_statistics

    alone = run_statistics([case.outcome()], trials=5)
    assert alone.pass_rate.mean == pytest.approx(0.6)
    assert alone.pass_at_k is not None and alone.pass_hat_k is not None
    assert (alone.pass_at_k[1], alone.pass_hat_k[5]) == (pytest.approx(0.6), 0.0)
    # the interval equals scipy's on the stored trial rows, and the view's
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    run_id = run.metadata.run_id
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(
            "SELECT count(*) FROM case_trials WHERE run_id = ?", [run_id]
        ).fetchone() == (15,)
        x = [
            r[0]
            for r in con.execute(
                "SELECT avg(CAST(passed AS DOUBLE)) FROM case_trials WHERE run_id = ? "
                "GROUP BY case_id",
                [run_id],
            ).fetchall()
        ]
        view = con.execute(
            "SELECT pass_rate, ci95_low, ci95_high, pass_at_1, pass_hat_k, flaky_cases "
            "FROM v_run_stats WHERE run_id = ?",
            [run_id],
        ).fetchone()
    capsys.readouterr()
    assert main(["plan", str(tmp_path / "any" / "agent.yaml"), "--detect", "0.1"]) == 0
    plan = capsys.readouterr().out
    assert "3 cases x 5 trial(s)" in plan and "10 trial(s) per case" in plan
    assert "assumptions:" in plan and "measured from the trials" in plan
    with duckdb.connect(str(db), read_only=True) as con:
        flaky = con.execute("SELECT case_id, disagreeing_runs FROM v_flaky_cases").fetchall()
    assert flaky == [("capital", 3)]  # its trials disagree in each of the three runs
    # Wilson (continuity-corrected) on n_eff = p(1-p)/SE² · (z / t(n-1))², in [0, 1]
    p, n, z = sum(x) / len(x), len(x), float(sps.norm.ppf(0.975))
    n_eff = p * (1 - p) / sps.sem(x) ** 2 * (z / sps.t.ppf(0.975, n - 1)) ** 2
    low, high = wilson_cc(p, n_eff, z)
    assert 0.0 <= low < high <= 1.0 and stats.pass_rate.n_effective == pytest.approx(n_eff)
    assert (stats.pass_rate.low, stats.pass_rate.high) == (pytest.approx(low), pytest.approx(high))
    assert view == (
        pytest.approx(sum(x) / 3),
        pytest.approx(low, abs=1e-6),
        pytest.approx(high, abs=1e-6),
        pytest.approx(sum(x) / 3),
        pytest.approx(1 / 3),
        1,
    )
    # rescore re-scores each trial and reduces again (no agent call)
    agent = tmp_path / "all" / "agent.yaml"
    agent.write_text(agent.read_text().replace("pattern: Paris", "pattern: Lyon"))
    [first] = sorted((tmp_path / "all").glob("results/*/holodeck-pipelines/*.json"))
    assert main(["rescore", str(first)]) == 1
    rescored = next(r for r in eval_runs(tmp_path / "all") if r.metadata.trigger == "rescore")
    moved = next(r for r in rescored.report.results if r.test_id == "capital")
    assert moved.trial_passes == 2 and moved.metric_results[0].score == pytest.approx(0.4)
    assert rescored.report.summary.statistics is not None
    assert rescored.report.summary.statistics.trials == 5
    with duckdb.connect(str(db), read_only=True) as con:  # rescores sample nothing new
        assert con.execute("SELECT case_id FROM v_flaky_cases").fetchall() == [("capital",)]


def test_one_trial_keeps_the_eval_run_shape(tmp_path: Path) -> None:
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        agent = tmp_path / "agent.yaml"
        agent.write_text(agent_yaml(server.openai_base_url, ["capital ?", "again ?"]))
        assert main(["test", str(agent), "-q", "-o", str(tmp_path / "r.xml")]) == 0
    [path] = tmp_path.glob("results/*/holodeck-pipelines/*.json")
    data = json.loads(path.read_text())
    assert all("trials" not in r for r in data["report"]["results"])
    assert "judge_control" not in data["report"]
    stats = data["report"]["summary"]["statistics"]
    assert stats["trials"] == 1 and stats["pass_rate"]["method"] == "wilson_cc"
    assert stats["pass_at_k"] is None
    junit = (tmp_path / "r.xml").read_text()
    assert 'name="stats.pass_rate.ci95_low"' in junit


RESUME_RULES = {
    "rules": [
        {"match": {"user": "half", "nth": 4}, "reply": "Paris", "latency": 60},
        {"match": {"user": "half", "nth": 5}, "reply": "Paris", "latency": 60},
        {"match": {"user": "fast|half"}, "reply": "Paris"},
    ]
}


def journal_lines(home: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in home.glob("journal/*/*.jsonl"))


def test_a_killed_five_trial_run_resumes_paying_only_for_missing_trials(tmp_path: Path) -> None:
    home = Path(os.environ["HOLODECK_HOME"])
    holodeck = Path(sys.executable).parent / "holodeck"
    with run_model_server(RESUME_RULES) as server:
        agent = tmp_path / "agent.yaml"
        agent.write_text(
            agent_yaml(
                server.openai_base_url,
                ["fast one", "half done"],
                execution="execution: {trials: 5}",
            )
        )
        proc = subprocess.Popen([str(holodeck), "test", str(agent), "-q"], env=dict(os.environ))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and journal_lines(home) < 8:
            time.sleep(0.05)
        proc.kill()  # kill -9 while trials 4 and 5 of "half done" hang
        proc.wait(timeout=30)
        assert journal_lines(home) == 8  # 5 + 3 finished trials
        server.set_rules({"rules": [RESUME_RULES["rules"][2]]})
        before = dict(server.stats()["by_key"])
        assert main(["test", str(agent), "-q"]) == 0
        after = server.stats()["by_key"]
    fast, half = request_key("responses", "fast one"), request_key("responses", "half done")
    assert after[fast] == before[fast] == 5
    assert after[half] == before[half] + 2
    [run] = eval_runs(tmp_path)
    assert [len(r.trials or []) for r in run.report.results] == [5, 5]


CASES = 100


def seeded_rules(seed: int, planted: list[int] | None = None) -> dict[str, object]:
    """Case i answers right with probability 0.7 (seeded); ``planted`` cases always wrong.
    The planted rule is rule 0 in every variant, so the random rule's draws do not move."""
    ids = "|".join(str(i) for i in planted or []) or "none"
    return {
        "seed": seed,
        "rules": [
            {"match": {"user": rf"^question (?:{ids}) \?$"}, "reply": "Lyon"},
            {
                "match": {"user": "question"},
                "replies": [{"p": 0.7, "reply": "Paris"}],
                "reply": "Lyon",
            },
        ],
    }


def make_project(root: Path, url: str, cases: int = CASES) -> Path:
    agent = root / "agents" / "geo"
    (agent / "prompts").mkdir(parents=True)
    (agent / "prompts" / "v1.md").write_text("---\nversion: v1\n---\nAnswer briefly.\n")
    lines = "".join(f"  - {{id: q{i}, input: 'question {i} ?'}}\n" for i in range(cases))
    (agent / "agent.yaml").write_text(
        f"name: Geo Agent\n"
        f"model: {{provider: openai, name: m, endpoint: '{url}', api_key: sk-test-123456}}\n"
        "instructions: {file: prompts/v1.md}\n"
        f"evaluations: {{metrics: [{CONTAINS_PARIS}]}}\n"
        "test_cases:\n" + lines
    )
    (root / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    return agent / "agent.yaml"


def no_regression(result: dg.ExecuteInProcessResult) -> tuple[bool | None, dict[str, object]]:
    """The check's verdict and metadata; ``(None, {})`` when it was skipped (a first run has
    nothing to compare with)."""
    found = check_evaluations(result, "no_regression")
    if not found:
        return None, {}
    [data] = found
    return data.passed, {k: getattr(v, "value", v) for k, v in data.metadata.items()}


def compare(capsys: pytest.CaptureFixture[str], a: str, b: str, *extra: str) -> tuple[int, str]:
    code = main(["history", "compare", a, b, *extra])
    return code, capsys.readouterr().out


def test_paired_verdicts_in_the_cli_and_the_dagster_check_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(seeded_rules(1)) as server, dg.instance_for_test() as instance:
        agent = make_project(tmp_path, server.openai_base_url)
        assert main(["prompts", "register", str(agent)]) == 0
        instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v1"])
        apply_pools(instance, Project.discover(tmp_path))
        job = build_definitions(Project.discover(tmp_path)).resolve_job_def("Geo_agent_eval")
        runs = []
        for rules in (seeded_rules(1), seeded_rules(2), None):
            if rules is None:  # the planted drop: 30 cases that passed in run A now fail
                first = eval_runs(agent.parent)[0]
                passed_in_a = [int(r.test_id[1:]) for r in first.report.results if r.passed]
                rules = seeded_rules(1, planted=passed_in_a[:30])
            server.set_rules(rules)
            server.reset()
            result = job.execute_in_process(partition_key="default|v1", instance=instance)
            assert result.success
            runs.append(no_regression(result))
    ids = [r.metadata.run_id or "" for r in eval_runs(agent.parent)]
    capsys.readouterr()
    assert runs[0] == (None, {})  # run A has nothing to compare with: skipped
    # A -> B: only the server's seed differs
    passed, meta = runs[1]
    assert passed is True and meta["verdict"] == "no significant change"
    code, out = compare(capsys, ids[0], ids[1], "--format", "json")
    assert code == 0
    cli = json.loads(out)
    assert cli["verdict"] == "no significant change" and cli["paired"]["test"] == "mcnemar_midp"
    assert cli["paired"]["p_value"] == pytest.approx(meta["p_value"])
    assert compare(capsys, ids[0], ids[1], "--strict")[0] == 1  # cases did flip
    # B -> C (what the check saw) and A -> C (the planted drop): regressions
    passed, meta = runs[2]
    assert passed is False and meta["verdict"] == "regression"
    code, out = compare(capsys, ids[1], ids[2], "--format", "json")
    assert code == 1 and json.loads(out)["paired"]["p_value"] == pytest.approx(meta["p_value"])
    code, out = compare(capsys, ids[0], ids[2], "--format", "json")
    planted = json.loads(out)
    # the cases that flipped between A and B (same fingerprint) are listed as flaky, apart
    assert planted["flaky"] and not set(planted["flaky"]) & set(planted["regressed_cases"])
    assert set(planted["regressed_cases"]) <= {f"q{i}" for i in passed_in_a[:30]}
    code, out = compare(capsys, ids[0], ids[2])
    assert code == 1 and "REGRESSION" in out and "95% CI" in out and "-30.0 pp" in out
    assert "flaky (" in out
    with duckdb.connect(str(Project.discover(tmp_path).history_db), read_only=True) as con:
        view = con.execute(
            "SELECT verdict, p_value FROM v_run_comparisons WHERE head_run_id = ?", [ids[1]]
        ).fetchone()
    assert view == ("no significant change", pytest.approx(cli["paired"]["p_value"]))


def test_the_dagster_trials_tag_runs_every_case_k_times(tmp_path: Path) -> None:
    from holodeck_pipelines.run_tags import TRIALS_TAG

    with (
        run_model_server({"default": {"reply": "Paris"}}) as server,
        dg.instance_for_test() as instance,
    ):
        agent = make_project(tmp_path, server.openai_base_url, cases=3)
        assert main(["prompts", "register", str(agent)]) == 0
        instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v1"])
        apply_pools(instance, Project.discover(tmp_path))
        job = build_definitions(Project.discover(tmp_path)).resolve_job_def("Geo_agent_eval")
        result = job.execute_in_process(
            partition_key="default|v1", instance=instance, tags={TRIALS_TAG: "2"}
        )
        assert result.success and server.stats()["total_calls"] == 3 * 2
    [run] = eval_runs(agent.parent)
    assert [len(r.trials or []) for r in run.report.results] == [2, 2, 2]
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(["geo_agent", "report_summary"])
    ]
    metadata = event.materialization.metadata
    assert metadata["cases"].value == "3 passed, 0 failed, 0 errored of 3 cases x 2 trials"
    rows = {row.data["metric"]: row.data for row in metadata["metrics"].records}
    assert rows["pass rate"]["mean"] == "100.0%" and rows["pass rate"]["n"] == 3
    assert rows["pass rate"]["interval method"] == (
        "Wilson score with continuity correction on the effective n"
    )
    assert rows["pass@2"]["mean"] == "100.0%" and rows["pass^2"]["unit"] == "%"


def test_judge_cache_never_answers_a_trial_with_another_outputs_judgement(tmp_path: Path) -> None:
    seed = seed_with(2, 4, 0.5, "capital of France?", rule=3)
    rules = {
        "seed": seed,
        "rules": [
            {"match": {"user": "Task: write G-Eval"}, "json": {"steps": ["Check it."]}},
            {
                "name": "paris",
                "match": {"user": "(?s)Task: score a test case.*Actual output:\nParis"},
                "json": {"score": 9, "reason": "r"},
            },
            {
                "name": "other",
                "match": {"user": "Task: score"},
                "json": {"score": 1, "reason": "r"},
            },
            {
                "match": {"user": "capital"},
                "replies": [{"p": 0.5, "reply": "Paris"}],
                "reply": "Lyon",
            },
        ],
    }
    geval = "{type: geval, name: Correct, criteria: 'Is it Paris?'}"
    with run_model_server(rules) as server:
        agent = tmp_path / "agent.yaml"
        text = agent_yaml(
            server.openai_base_url,
            ["capital of France?"],
            execution="execution: {trials: 4}",
            metric=geval,
        )
        url = server.openai_base_url
        judge = f"model: {{provider: openai, name: judge, endpoint: '{url}', api_key: sk-test-1}}"
        agent.write_text(text.replace("evaluations:\n", f"evaluations:\n  {judge}\n"))
        main(["test", str(agent), "-q"])
        by_rule = server.stats()["by_rule"]
    [run] = eval_runs(tmp_path)
    [case] = run.report.results
    pairs = sorted((t.agent_response, t.metric_results[0].score) for t in case.trials or [])
    assert pairs == [("Lyon", 0.1), ("Lyon", 0.1), ("Paris", 0.9), ("Paris", 0.9)]
    assert by_rule["paris"] == 1 and by_rule["other"] == 1  # one judgement per distinct output
    assert case.metric_results[0].score == pytest.approx(0.5)


def test_the_check_takes_a_baseline_version_and_the_strict_rule(tmp_path: Path) -> None:
    from holodeck_core.history.regression import RegressionCheck, regression_check
    from holodeck_pipelines.verdicts import Skipped, regression_result
    from tests.history_helpers import day, ingest_runs, make_run

    db = tmp_path / "history.duckdb"
    ingest_runs(
        db,
        [
            make_run("PPPP", day(0), run_id="base-v1", prompt="v1"),
            make_run("PPPP", day(1), run_id="prev-v2", prompt="v2"),
            make_run("PPPF", day(2), run_id="head-v2", prompt="v2"),
            make_run("EEEP", day(3), run_id="dead-v2", prompt="v2"),  # the model server died
            make_run("PPPP", day(4), run_id="next-v2", prompt="v2"),
        ],
    )
    checked = regression_check(db, "head-v2")
    assert checked.previous == "prev-v2" and checked.comparison is not None
    assert checked.comparison.is_regression is False  # one flip in four cases: no evidence
    assert regression_result(checked).passed is True
    assert regression_check(db, "head-v2", baseline="v1").previous == "base-v1"
    strict = regression_check(db, "head-v2", strict=True)
    assert strict.comparison is not None and strict.comparison.is_regression  # strict rule
    check = regression_result(strict)
    assert check.passed is False and check.metadata["verdict"].value == "strict"
    assert regression_check(db, "base-v1") == RegressionCheck()
    # an infrastructure failure (3 of 4 cases ERROR) is not compared, and is no baseline
    dead = regression_check(db, "dead-v2")
    assert dead.comparison is None and dead.not_compared is not None
    assert "3 of 4 cases ERROR" in dead.not_compared
    skipped = regression_result(dead)  # not evaluated: Dagster shows it as skipped
    assert isinstance(skipped, Skipped) and "not compared" in skipped.reason
    assert regression_check(db, "next-v2").previous == "head-v2"
