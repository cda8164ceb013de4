"""Edges of resume and verdicts: a judge outage is never a pass, the journal outlives every
failure before the EvalRun is safe, torn journal lines, stale stage outputs, exit codes."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest

from holodeck_core.calls.classify import classify
from holodeck_core.calls.errors import CallErrorKind
from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import load_suite
from holodeck_core.errors import ConfigError, ExitCode
from holodeck_core.models import EvalRun, Gate, Status, TestResult
from holodeck_core.runner.case_run import CaseRun, TurnRun
from holodeck_core.runner.gates import exit_code
from holodeck_core.runner.journal import Journal
from holodeck_core.testing import run_model_server

AGENT = """\
name: edge
model: {{provider: openai, name: m, endpoint: "{url}", api_key: sk-test-key-1234}}
instructions: {{inline: "Answer."}}
evaluations:
  model: {{provider: openai, name: judge, endpoint: "{url}", api_key: sk-test-key-1234}}
  metrics: [{metrics}]
test_cases:
{cases}"""


def write(tmp_path: Path, url: str, metrics: str, cases: str) -> Path:
    agent = tmp_path / "agent.yaml"
    agent.write_text(AGENT.format(url=url, metrics=metrics, cases=textwrap.indent(cases, "  ")))
    return agent


def test_a_judge_that_is_down_makes_an_error_not_a_pass(tmp_path: Path) -> None:
    rules = {
        "rules": [
            {"match": {"system": "(?i)evaluat|judge|criteria"}, "fault": {"kind": "500"}},
            {"match": {"user": "capital"}, "reply": "Paris"},
        ]
    }
    geval = "{type: geval, name: Correct, criteria: 'Is it right?', retry_on_failure: 1}"
    with run_model_server(rules) as server:
        agent = write(tmp_path, server.openai_base_url, geval, "- {input: capital?}\n")
        code = main(["test", str(agent), "-q"])
    [path] = (tmp_path / "results" / "edge" / "holodeck-pipelines").glob("*.json")
    [result] = EvalRun.model_validate_json(path.read_text()).report.results
    assert result.metric_results[0].error and result.metric_results[0].passed is None
    assert result.status is Status.ERROR and result.error_source == "execution"
    assert "no metric could be evaluated" in result.errors[0]
    assert code == 3


def test_the_journal_stays_open_until_the_eval_run_is_on_disk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = Path(os.environ["HOLODECK_HOME"])
    equality = "{type: standard, metric: contains, pattern: Paris}"
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        agent = write(tmp_path, server.openai_base_url, equality, "- {input: capital?}\n")
        (tmp_path / "results").write_text("a file where the results folder should be")
        code = main(["test", str(agent), "-q"])
        err = capsys.readouterr().err
        assert code == 3 and "Traceback" not in err and "EvalRun could not be written" in err
        assert len(list(home.glob("journal/*/*.jsonl"))) == 1  # paid work kept
        (tmp_path / "results").unlink()
        assert main(["test", str(agent), "-q"]) == 0
        assert server.stats()["total_calls"] == 1  # resumed: no second call
    assert not list(home.glob("journal/*/*.jsonl"))  # closed after the EvalRun was written


def run(case_id: str, fingerprint: str) -> CaseRun:
    return CaseRun(
        case_id=case_id,
        fingerprint=fingerprint,
        turns=[TurnRun(input="q", response="Paris ✓")],
        execution_time_ms=1,
        timestamp="2026-11-30T00:00:00Z",
    )


def test_a_torn_journal_line_is_skipped_and_appends_start_a_new_line(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "agent", "fp")
    journal.append(run("a", "fa"))
    with journal.path.open("ab") as handle:
        handle.write(run("b", "fb").model_dump_json().encode()[:-9] + "✓".encode()[:2])
    journal.append(run("c", "fc"))
    assert sorted(journal.load()) == [("fa", 0), ("fc", 0)]


def test_stale_agent_responses_are_refused_not_mispaired(tmp_path: Path) -> None:
    cases = "- {id: fr, input: capital of France?}\n- {id: de, input: capital of Germany?}\n"
    contains = "{type: standard, metric: contains, pattern: Paris}"
    rules = {"rules": [{"match": {"user": "France"}, "reply": "Paris"}], "default": "Berlin"}
    with run_model_server(rules) as server:
        agent = write(tmp_path, server.openai_base_url, contains, cases)
        runs = asyncio.run(load_suite(load_agent(agent)).execute_all())
        # stored out of order (or reloaded from elsewhere): paired by case id, not position
        results = asyncio.run(load_suite(load_agent(agent)).evaluate_all(list(reversed(runs))))
        assert [(r.test_id, r.agent_response, r.status) for r in results] == [
            ("fr", "Paris", Status.PASS),
            ("de", "Berlin", Status.FAIL),
        ]
        agent.write_text(agent.read_text().replace("Germany", "Italy"))
        with pytest.raises(ConfigError, match="do not match the current cases"):
            asyncio.run(load_suite(load_agent(agent)).evaluate_all(runs))


def test_repeated_inputs_are_journaled_as_separate_cases(tmp_path: Path) -> None:
    cases = "".join(f"- {{id: try-{i}, input: capital?}}\n" for i in range(3))
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        agent = write(
            tmp_path, server.openai_base_url, "{type: standard, metric: exact_match}", cases
        )
        suite = load_suite(load_agent(agent))
        assert len(set(suite.case_fingerprints.values())) == 3


def result(status: Status, source: str | None = None) -> TestResult:
    return TestResult(
        test_input="q",
        passed=status is Status.PASS,
        status=status,
        error_source=source,  # type: ignore[arg-type]
        errors=["x"] if status is not Status.PASS else [],
        execution_time_ms=0,
        timestamp="2026-11-30T00:00:00Z",
    )


@pytest.mark.parametrize(
    ("statuses", "gate", "code"),
    [
        ([Status.PASS, Status.FAIL], None, ExitCode.FAILED),
        ([Status.PASS, Status.ERROR], None, ExitCode.EXECUTION),
        ([Status.FAIL, (Status.ERROR, "evaluation")], None, ExitCode.EVALUATION),
        ([Status.PASS] * 4 + [Status.FAIL], Gate(min_pass_rate=0.8), ExitCode.OK),
        ([Status.PASS] * 3 + [Status.FAIL] * 2, Gate(min_pass_rate=0.8), ExitCode.FAILED),
        ([Status.PASS] * 9 + [Status.ERROR], Gate(min_pass_rate=0.8), ExitCode.EXECUTION),
        ([Status.PASS] * 9 + [Status.ERROR], Gate(min_pass_rate=0.8, max_errors=1), ExitCode.OK),
    ],
)
def test_exit_codes(statuses: list[object], gate: Gate | None, code: ExitCode) -> None:
    results = [
        result(*item)
        if isinstance(item, tuple)
        else result(item, "execution" if item is Status.ERROR else None)  # type: ignore[arg-type]
        for item in statuses
    ]
    assert exit_code(results, gate) == code


def test_unknown_exceptions_are_not_retried_as_transient() -> None:
    assert classify(TypeError("bad argument")).kind is CallErrorKind.INTERNAL
    assert not classify(TypeError("bad argument")).transient
    assert classify(ConnectionResetError("reset")).transient


def test_test_and_rescore_give_a_multi_turn_case_the_same_verdict(tmp_path: Path) -> None:
    """One scoring path: a multi-turn case scored by `holodeck rescore` gets the verdict
    `holodeck test` gives it. First only turn 1's blocking judge (``fail_on_error``) fails:
    an evaluation error. Then turn 2's criteria change (a new question) and the judge is down:
    turn 2 has no verdict (the infrastructure), so the case is an execution error, however
    it was scored."""
    judge = "(?i)evaluat|judge|criteria"
    agent_rules = [
        {"match": {"user": "alpha"}, "reply": "ZEBRA"},
        {"match": {"user": "beta"}, "reply": "QUOKKA"},
    ]
    partly_down = [
        {"match": {"system": judge, "user": "ZEBRA"}, "fault": {"kind": "500"}},
        {"match": {"system": judge}, "json": {"score": 8, "reason": "fine"}},
        *agent_rules,
    ]
    down = [{"match": {"system": judge}, "fault": {"kind": "500"}}, *agent_rules]
    geval = "{{type: geval, name: {}, criteria: 'Right?', evaluation_steps: [Check], {}}}"
    blocking = geval.format("Blocking", "fail_on_error: true, retry_on_failure: 1")
    cases = textwrap.dedent(f"""\
        - name: talk
          turns:
            - {{input: alpha, evaluations: [{blocking}]}}
            - {{input: beta, evaluations: [{geval.format("Plain", "retry_on_failure: 1")}]}}
        """)
    folder = tmp_path / "results" / "edge" / "holodeck-pipelines"
    with run_model_server({"rules": partly_down}) as server:
        agent = write(
            tmp_path, server.openai_base_url, "{type: standard, metric: json_valid}", cases
        )
        assert main(["test", str(agent), "-q"]) == 4
        [first] = folder.glob("*.json")
        server.set_rules({"rules": down})
        agent.write_text(
            agent.read_text().replace("Plain, criteria: 'Right?'", "Plain, criteria: 'Apt?'")
        )
        rescored = main(["rescore", str(first)])
        tested = main(["test", str(agent), "-q", "--fresh"])
    verdicts = [
        (r.status, r.error_source, [t.passed for t in r.turns or []])
        for path in sorted(folder.glob("*.json"))
        for r in EvalRun.model_validate_json(path.read_text()).report.results
    ]
    assert verdicts[0] == (Status.ERROR, "evaluation", [False, True])
    assert verdicts[1] == verdicts[2] == (Status.ERROR, "execution", [False, False])
    assert rescored == tested == 3
