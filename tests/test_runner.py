"""`holodeck test` end to end: the real CLI, the real SDK clients, the loopback model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import request_key, run_model_server

TOOLS_PY = """
def get_weather(city: str) -> str:
    return f"Sunny in {city}"
"""

SUPERSETS = "runner-test/holodeck-pipelines/*.json"  # our EvalRun files (docs/holodeck-fidelity.md)

RULES: dict[str, Any] = {
    "default": {"reply": "I don't know."},
    "rules": [
        {
            "match": {"user": "weather in (\\w+)"},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
            "reply": "{tool_result}",
        },
        {"match": {"user": "capital of France"}, "reply": "Paris"},
        {"match": {"user": "broken"}, "fault": {"kind": "400"}},
    ],
}


def write_agent(folder: Path, provider: str, base_url: str, cases: str, extra: str = "") -> Path:
    (folder / "tools.py").write_text(TOOLS_PY)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: runner-test
            model: {{provider: {provider}, name: test-model, endpoint: "{base_url}",
                     api_key: sk-test-key-1234}}
            instructions: {{inline: "You are helpful."}}
            tools:
              - {{type: function, name: get_weather, description: Weather, file: tools.py,
                 function: get_weather}}
            evaluations:
              metrics:
                - {{type: standard, metric: equality, case_insensitive: true}}
            """)
        + extra
        + ("execution: {anthropic_path: direct}\n" if provider == "anthropic" else "")
        + "test_cases:\n"
        + textwrap.indent(textwrap.dedent(cases), "  ")
    )
    return agent


CASES = """\
- name: paris weather
  input: weather in Paris?
  ground_truth: Sunny in Paris
  expected_tools: [{name: get_weather, args: {city: {regex: "^Paris$"}}}]
- name: rome expected but paris called
  input: weather in Paris please
  ground_truth: Sunny in Paris
  expected_tools: [{name: get_weather, args: {city: {fuzzy: rome}}}]
- name: capital
  input: capital of France?
  ground_truth: paris
- name: wrong answer
  input: who won?
  ground_truth: nobody
"""


def eval_run_of(agent: Path) -> EvalRun:
    [path] = sorted((agent.parent / "results").glob(SUPERSETS))
    return EvalRun.model_validate_json(path.read_text())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_arg_matchers_statuses_and_exit_code(
    tmp_path: Path, provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
        agent = write_agent(tmp_path, provider, url, CASES)
        code = main(["test", str(agent), "--output", str(tmp_path / "report.md")])
    assert code == 1
    run = eval_run_of(agent)
    statuses = [(r.test_name, r.status) for r in run.report.results]
    assert statuses == [
        ("paris weather", Status.PASS),
        ("rome expected but paris called", Status.FAIL),
        ("capital", Status.PASS),
        ("wrong answer", Status.FAIL),
    ]
    second = run.report.results[1]
    assert second.tools_matched is False and "expected ≈'rome', got 'Paris'" in second.errors[0]
    assert second.tool_invocations[0].args == {"city": "Paris"}
    summary = run.report.summary
    assert (summary.passed, summary.failed, summary.errored) == (2, 2, 0)
    assert run.metadata.trigger == "cli" and run.metadata.run_id
    assert run.metadata.agent_config.model.api_key is not None
    assert "sk-test-key-1234" not in (next(agent.parent.glob("results/*/*.json"))).read_text()
    markdown = (tmp_path / "report.md").read_text()
    assert "rome expected but paris called (FAILED)" in markdown
    assert "get_weather(city={'fuzzy': 'rome'})" in markdown  # HoloDeck crashed rendering this


def test_errors_are_kept_apart_and_exit_3(tmp_path: Path) -> None:
    cases = CASES + "- name: broken request\n  input: broken\n  ground_truth: x\n"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        code = main(["test", str(agent), "-q"])
    run = eval_run_of(agent)
    broken = run.report.results[-1]
    assert broken.status is Status.ERROR and broken.error_source == "execution"
    assert "bad_request 400" in broken.errors[0]
    assert run.report.summary.errored == 1
    assert code == 3


def test_fail_on_error_metric_is_an_evaluation_error(tmp_path: Path) -> None:
    extra = ""
    cases = """\
    - name: no ground truth
      input: capital of France?
      evaluations:
        - {type: standard, metric: bleu, fail_on_error: true}
    """
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases, extra)
        code = main(["test", str(agent), "-q"])
    [result] = eval_run_of(agent).report.results
    assert result.status is Status.ERROR and result.error_source == "evaluation"
    assert code == 4


def test_a_ground_truth_a_numeric_metric_cannot_read_is_an_evaluation_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The case ran; its evaluation could not (two corpus turns have ``'yes'``): the metric's
    error, named with the case, the metric and the value, exit 4 (docs/cli.md), not 3."""
    cases = """\
    - name: yes or no
      input: capital of France?
      ground_truth: "yes"
      evaluations: [{type: standard, metric: numeric}]
    - name: multi
      turns:
        - input: capital of France?
          ground_truth: "yes"
          evaluations: [{type: standard, metric: numeric}]
    """
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        code = main(["test", str(agent)])
    single, multi = eval_run_of(agent).report.results
    assert code == 4
    for result in (single, multi):
        assert result.status is Status.ERROR and result.error_source == "evaluation"
    [metric] = single.metric_results
    assert metric.error == (
        "case 'yes or no': metric 'numeric' needs a number as ground_truth, got 'yes' ('yes' "
        "is not a number); fix the test case's ground_truth"
    )
    assert "case 'multi'" in " ".join(multi.errors) and "[turn 0]" in " ".join(multi.errors)
    assert "ERROR yes or no: metric numeric: case 'yes or no'" in capsys.readouterr().err


@pytest.mark.parametrize("truth", ["nan", "inf", "50%", "1,000", "  "])
def test_more_ground_truths_a_numeric_metric_cannot_read(tmp_path: Path, truth: str) -> None:
    """A NaN or infinite ground truth can never be matched: an evaluation error (exit 4)
    naming the value, as 'yes' is, not a FAIL of the agent."""
    cases = f"""\
    - name: shape
      input: capital of France?
      ground_truth: "{truth}"
      evaluations: [{{type: standard, metric: numeric}}]
    """
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        code = main(["test", str(agent), "-q"])
    [result] = eval_run_of(agent).report.results
    assert (code, result.status, result.error_source) == (4, Status.ERROR, "evaluation")
    assert f"got {truth!r}" in (result.metric_results[0].error or "")


def test_empty_response_without_metrics_fails(tmp_path: Path) -> None:
    rules = {"default": {"reply": ""}}
    (tmp_path / "agent.yaml").write_text(
        "name: runner-test\nmodel: {provider: openai, name: m, endpoint: URL, api_key: k}\n"
        "instructions: {inline: x}\ntest_cases: [{input: hello}]\n"
    )
    with run_model_server(rules) as server:
        text = (tmp_path / "agent.yaml").read_text().replace("URL", server.openai_base_url)
        (tmp_path / "agent.yaml").write_text(text)
        code = main(["test", str(tmp_path / "agent.yaml"), "-q"])
    [result] = eval_run_of(tmp_path / "agent.yaml").report.results
    assert result.status is Status.FAIL and code == 1


def test_faults_are_retried_or_classified_never_crash(tmp_path: Path) -> None:
    rules = {
        **RULES,
        "faults": {"rate": {"429": 0.2, "500": 0.1, "slow": 0.05}, "retry_after": 0.05, "seed": 3},
    }
    cases = "".join(
        f"- name: c{i}\n  input: capital of France? ({i})\n  ground_truth: paris\n"
        for i in range(40)
    )
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        code = main(["test", str(agent), "-q", "--timeout", "1", "--parallel", "10"])
        stats = server.stats()
    run = eval_run_of(agent)
    assert len(run.report.results) == 40
    assert [r.test_name for r in run.report.results] == [f"c{i}" for i in range(40)]
    for result in run.report.results:
        assert result.status in (Status.PASS, Status.ERROR)
        if result.status is Status.ERROR:
            assert result.errors and result.error_source == "execution"
    assert stats["faults"], stats  # faults really happened
    scheduler = run.metadata.provenance["scheduler"]
    assert scheduler["retries"] > 0 and scheduler["attempts"] <= 40 * 4
    assert code in (0, 3)


def test_multi_turn_turns_run_in_order_with_a_timeout(tmp_path: Path) -> None:
    rules = {
        "rules": [
            {"match": {"user": "first"}, "reply": "one"},
            {"match": {"user": "second"}, "reply": "two", "latency": 3},
        ]
    }
    cases = """\
    - name: two turns
      turns:
        - {input: first, ground_truth: one}
        - {input: second, ground_truth: two}
        - {input: third, ground_truth: three}
    - name: single slow
      input: second
      ground_truth: two
    """
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        code = main(["test", str(agent), "-q", "--timeout", "0.5"])
    multi, single = eval_run_of(agent).report.results
    assert multi.status is Status.ERROR and single.status is Status.ERROR
    assert multi.turns is not None and multi.turns[0].response == "one"
    assert "timeout" in (multi.turns[1].errors[0])
    assert multi.turns[2].skipped
    assert "timeout" in single.errors[0]  # single-turn cases get the timeout too
    assert code == 3


def test_a_report_that_cannot_be_written_loses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, CASES)
        code = main(["test", str(agent), "-q", "--output", str(blocker / "r.md")])
    assert code == 1
    assert "could not be written" in capsys.readouterr().err
    assert len(eval_run_of(agent).report.results) == 4


def run_cli(agent: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "holodeck_core.cli", "test", str(agent), "-q", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def journaled_case_ids(home: Path) -> set[str]:
    ids = set()
    for path in home.glob("journal/*/*.jsonl"):
        for line in path.read_text(errors="replace").splitlines():
            try:
                ids.add(json.loads(line)["case_id"])
            except ValueError:
                continue  # a line being written right now
    return ids


def journal_lines(home: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in home.glob("journal/*/*.jsonl"))


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_run_resumes_without_repeating_model_calls(
    tmp_path: Path, sig: signal.Signals
) -> None:
    home = Path(os.environ["HOLODECK_HOME"])
    fast = {"match": {"user": "capital"}, "reply": "Paris", "latency": 0.3}
    stuck = {"match": {"user": r"\((10|11)\)"}, "reply": "Paris", "latency": 60}
    rules = {"rules": [stuck, fast]}  # the last two cases hang, so the signal lands mid-run
    cases = "".join(
        f"- name: c{i}\n  input: capital of France ({i})?\n  ground_truth: paris\n"
        for i in range(12)
    )
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        proc = run_cli(agent, "--parallel", "2")
        deadline = time.monotonic() + 60
        while journal_lines(home) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if sig is signal.SIGINT:
            assert proc.returncode == 3 and "Traceback" not in err  # an aborted run
        assert not list(tmp_path.glob("results/*/*.json"))  # no EvalRun for the interrupted run
        finished = journaled_case_ids(home)
        assert 4 <= len(finished) < 12
        server.set_rules({"rules": [fast]})
        calls_before = dict(server.stats()["by_key"])
        code = main(["test", str(agent), "-q"])
        calls_after = server.stats()["by_key"]
    run = eval_run_of(agent)
    assert code == 0 and run.report.summary.passed == 12

    def key(case_id: str) -> str:
        return request_key("responses", f"capital of France ({case_id.removeprefix('c')})?")

    repeated = [c for c in finished if calls_after[key(c)] != calls_before[key(c)]]
    assert repeated == []  # cases finished before the kill were not paid for twice
    assert all(calls_after[key(f"c{i}")] >= 1 for i in range(12))
    assert journal_lines(home) == 0  # the clean finish closed the journal


SLOW_GRADER = """\
import time
from pathlib import Path

def grade(*args, **kwargs):
    Path(__file__).with_name("grading").write_text("")
    time.sleep(300)
    return 1.0
"""


def test_ctrl_c_during_a_slow_metric_ends_the_run_at_once(tmp_path: Path) -> None:
    """A synchronous metric still running (a grader asleep) does not keep an interrupted
    process alive: its thread is a daemon (docs/dagster.md, "Stopping `dg dev`"); it was joined
    at exit, so Ctrl-C waited for the grader."""
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "__init__.py").write_text("")
    (tmp_path / "graders" / "slow.py").write_text(SLOW_GRADER)
    cases = "- name: c\n  input: capital of France?\n  evaluations:\n"
    cases += "    - {type: code, grader: 'graders.slow:grade'}\n"
    with run_model_server({"rules": [{"match": {"user": "capital"}, "reply": "Paris"}]}) as server:
        proc = run_cli(write_agent(tmp_path, "openai", server.openai_base_url, cases))
        deadline = time.monotonic() + 60
        while not (tmp_path / "graders" / "grading").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)  # a bound; it was the grader's 300 s
        finally:
            proc.kill()
    assert proc.returncode == 3 and "Traceback" not in err
    assert "interrupted" in out + err


def test_fresh_ignores_the_open_journal(tmp_path: Path) -> None:
    home = Path(os.environ["HOLODECK_HOME"])
    rules = {"rules": [{"match": {"user": "capital"}, "reply": "Paris"}]}
    cases = "- name: c\n  input: capital of France?\n  ground_truth: paris\n"
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        assert main(["test", str(agent), "-q"]) == 0
        assert journal_lines(home) == 0
        (home / "journal").mkdir(exist_ok=True)
        # an open journal from an interrupted run is reused...
        journals = list(home.glob("journal/*/*.jsonl.done"))
        journals[0].rename(journals[0].with_suffix(""))
        assert main(["test", str(agent), "-q"]) == 0
        assert server.stats()["total_calls"] == 1
        journals = list(home.glob("journal/*/*.jsonl.done"))
        journals[0].rename(journals[0].with_suffix(""))
        # ...unless --fresh
        assert main(["test", str(agent), "-q", "--fresh"]) == 0
        assert server.stats()["total_calls"] == 2


def test_junit_keeps_failures_and_errors_apart(tmp_path: Path) -> None:
    cases = CASES + "- name: broken request\n  input: broken\n  ground_truth: x\n"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        main(["test", str(agent), "-q", "-o", str(tmp_path / "junit.xml")])
    xml = (tmp_path / "junit.xml").read_text()
    assert 'failures="2" errors="1"' in xml
    assert xml.count("<failure") == 2 and xml.count("<error") == 1
    assert '<property name="case.capital.metric.equality" value="1" />' in xml
    report = json.loads(next((tmp_path / "results").glob(SUPERSETS)).read_text())["report"]
    assert report["summary"]["errored"] == 1


def test_rescore_uses_the_current_metrics_without_calling_the_agent(tmp_path: Path) -> None:
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, CASES)
        assert main(["test", str(agent), "-q"]) == 1
        calls = server.stats()["total_calls"]
        [first] = sorted((tmp_path / "results").glob(SUPERSETS))
        text = agent.read_text().replace(
            "{type: standard, metric: equality, case_insensitive: true}",
            "{type: standard, metric: contains, pattern: Paris}",
        )
        agent.write_text(text)
        code = main(["rescore", str(first)])
        assert server.stats()["total_calls"] == calls  # no agent call
    runs = sorted((tmp_path / "results").glob(SUPERSETS))
    rescored = EvalRun.model_validate_json(runs[-1].read_text())
    original = EvalRun.model_validate_json(first.read_text())
    assert rescored.metadata.trigger == "rescore"
    assert rescored.metadata.provenance["rescored_from"] == original.metadata.run_id
    assert [m.metric_name for m in rescored.report.results[0].metric_results] == ["contains"]
    # "wrong answer" answered "I don't know." (no Paris): still a FAIL; the rest keep statuses
    assert rescored.report.results[3].status is Status.FAIL
    assert code == 1


def test_filter_and_limit_select_cases(tmp_path: Path) -> None:
    cases = CASES.replace("- name: capital\n", "- name: capital\n  tags: [geo]\n")
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, cases)
        assert main(["test", str(agent), "-q", "--filter", "geo"]) == 0
        assert main(["test", str(agent), "-q", "--filter", "WEATHER", "--limit", "1"]) == 0
        assert main(["test", str(agent), "-q", "--filter", "nothing-matches"]) == 2
    first, second = (
        EvalRun.model_validate_json(p.read_text())
        for p in sorted((tmp_path / "results").glob(SUPERSETS))
    )
    assert [r.test_name for r in first.report.results] == ["capital"]  # by tag
    assert [r.test_name for r in second.report.results] == ["paris weather"]  # name, limit


def test_retrieval_context_comes_from_retrieval_tools(tmp_path: Path) -> None:
    (tmp_path / "graders.py").write_text(
        "def cites_kb(ctx):\n"
        "    return any('30 days' in c for c in (ctx.retrieval_context or []))\n"
    )
    (tmp_path / "agent.yaml").write_text(
        textwrap.dedent("""\
            name: runner-test
            model: {provider: openai, name: m, endpoint: "URL", api_key: sk-test-key-1234}
            instructions: {inline: "Use the knowledge base."}
            tools:
              - type: vectorstore
                name: kb
                description: policies
                source: kb.md
                mock: {result: "Returns are accepted within 30 days."}
            evaluations:
              metrics: [{type: code, grader: "graders:cites_kb"}]
            test_cases:
              - {name: uses kb, input: "return policy?"}
              - {name: given context, input: "return policy?", retrieval_context: ["none"]}
            """)
    )
    rules = {
        "rules": [
            {
                "match": {"user": "return policy"},
                "tool_calls": [{"name": "kb", "arguments": {"query": "returns"}}],
                "reply": "{tool_result}",
            }
        ]
    }
    with run_model_server(rules) as server:
        text = (tmp_path / "agent.yaml").read_text().replace("URL", server.openai_base_url)
        (tmp_path / "agent.yaml").write_text(text)
        code = main(["test", str(tmp_path / "agent.yaml"), "-q"])
    from_tool, from_case = eval_run_of(tmp_path / "agent.yaml").report.results
    assert from_tool.status is Status.PASS  # the kb tool's result was the retrieval context
    assert from_case.status is Status.FAIL  # the case's own retrieval_context wins
    assert code == 1


def test_test_prints_derived_id_warnings_and_the_gate_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = """\
    - name: same name
      input: capital of France?
      ground_truth: paris
    - name: same name
      input: who won?
      ground_truth: nobody
    """
    with run_model_server(RULES) as server:
        agent = write_agent(
            tmp_path, "openai", server.openai_base_url, cases, "  gate: {min_pass_rate: 0.8}\n"
        )
        code = main(["test", str(agent), "-q"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "derived id 'same-name' is taken; using 'same-name-2'" in err
    assert "gate (min_pass_rate 80%): FAILED: pass rate 50.0% is under the gate's 80.0%" in out


def test_markdown_report_names_engine_prompt_and_model_with_units_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    latency = "    - {type: standard, metric: latency, threshold: 60000}\n"
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path, "openai", server.openai_base_url, CASES, latency)
        main(["test", str(agent), "-o", str(tmp_path / "report.md")])
    out = capsys.readouterr().out
    markdown = (tmp_path / "report.md").read_text()
    assert "**Engine**: holodeck-pipelines 0.1.0" in markdown
    assert "HoloDeck Version" not in markdown  # that was our own version under HoloDeck's name
    assert "**Prompt Version**: auto-" in markdown  # an inline prompt's derived label
    assert "**Model**: openai test-model" in markdown
    assert "| Metric | Average | Unit | Pass Rate | Errors |" in markdown
    rows = {r.split("|")[1].strip(): r.split("|") for r in markdown.splitlines() if "|" in r}
    assert rows["latency"][3].strip() == "ms" and rows["equality"][3].strip() == "score 0-1"
    assert float(rows["equality"][2]) == 0.75  # 3 of 4 answers equal (one calls a wrong tool)
    console_latency = next(line for line in out.splitlines() if "latency" in line)
    assert "ms" in console_latency  # the console table has the unit column too
