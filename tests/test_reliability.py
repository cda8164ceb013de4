"""Reliability and security: faults from the model, bad inputs of every kind, canary secrets,
hostile names. Nothing crashes, everything is classified, nothing leaks, nothing is lost."""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
import zipfile
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import request_key, run_model_server
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.pools import apply_pools
from tests.test_runner import journaled_case_ids

WEATHER_TOOL = "def get_weather(city: str) -> str:\n    return f'Sunny in {city}'\n"


DIRECT_PATH = "execution: {anthropic_path: direct}\n"
"""Our Messages/chat loop for an anthropic or ollama agent: these tests are about our clients'
retries and limits, which the Claude Agent SDK path does not use (tests/test_claude_sdk_path.py)."""


def direct_path(provider: str) -> str:
    return DIRECT_PATH if provider in ("anthropic", "ollama") else ""


def agent_yaml(base_url: str, provider: str = "openai", extra: str = "", name: str = "rel") -> str:
    if "execution:" not in extra:
        extra = direct_path(provider) + extra
    return (
        textwrap.dedent(f"""\
        name: "{name}"
        model: {{provider: {provider}, name: m, endpoint: "{base_url}", api_key: sk-test-key-99}}
        instructions: {{inline: "Be brief."}}
        tools:
          - {{type: function, name: get_weather, description: w, file: tools.py,
             function: get_weather}}
        evaluations:
          metrics: [{{type: standard, metric: contains, pattern: Paris}}]
        """)
        + extra
    )


def run_suite(
    tmp_path: Path, base_url: str, cases: str, *args: str, provider: str = "openai", **kw: str
) -> tuple[int, EvalRun, str]:
    (tmp_path / "tools.py").write_text(WEATHER_TOOL)
    agent = tmp_path / "agent.yaml"
    agent.write_text(agent_yaml(base_url, provider, **kw) + "test_cases:\n" + cases)
    code = main(["test", str(agent), "-q", *args])
    [path] = sorted(tmp_path.glob("results/*/holodeck-pipelines/*.json"))[-1:]
    return code, EvalRun.model_validate_json(path.read_text()), path.read_text()


FAULTS = ["429", "500", "503", "drop", "malformed", "slow"]


ROUTES = {"openai": "responses", "anthropic": "messages", "ollama": "chat"}
"""The agent's API per provider: HoloDeck's openai agents call the Responses API, Ollama's
chat completions (its OpenAI-compatible route)."""


@pytest.mark.parametrize("provider", list(ROUTES))
@pytest.mark.parametrize("kind", FAULTS)
def test_fault_matrix_retries_then_classifies(
    tmp_path: Path, kind: str, provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two faults then success: the retry recovers (PASS). Always failing: ERROR with the
    reason, after a bounded number of attempts. Never a traceback."""
    rules = {
        "faults": {"retry_after": 0.05, "slow_seconds": 5},
        "rules": [
            {"match": {"user": "flaky"}, "reply": "Paris", "fault": {"kind": kind, "first": 2}},
            {"match": {"user": "down"}, "reply": "Paris", "fault": {"kind": kind}},
        ],
    }
    cases = "  - {name: flaky, input: flaky}\n  - {name: down, input: down}\n"
    with run_model_server(rules) as server:
        url = {"openai": server.openai_base_url, "ollama": server.url}.get(
            provider, server.anthropic_base_url
        )
        code, run, _ = run_suite(tmp_path, url, cases, "--timeout", "0.5", provider=provider)
        by_key = server.stats()["by_key"]
    flaky, down = run.report.results
    assert flaky.status is Status.PASS, flaky.errors
    assert down.status is Status.ERROR and down.error_source == "execution"
    assert "after 4 attempts" in down.errors[0]
    assert by_key[request_key(ROUTES[provider], "down")] == 4  # bounded: never more than the policy
    assert code == 3
    assert "Traceback" not in capsys.readouterr().err


def test_invalid_tool_call_json_is_an_error_result_for_that_call(tmp_path: Path) -> None:
    rules = {
        "rules": [
            {
                "match": {"user": "weather"},
                "tool_calls": [{"name": "get_weather", "arguments_raw": '{"city": "Par'}],
                "reply": "Paris, I guess ({tool_result})",
            }
        ]
    }
    cases = "  - {name: bad args, input: weather in Paris}\n"
    with run_model_server(rules) as server:
        code, run, _ = run_suite(tmp_path, server.openai_base_url, cases)
    [result] = run.report.results
    [invocation] = result.tool_invocations
    assert invocation.error and "invalid JSON arguments" in invocation.error
    assert result.agent_response and "invalid JSON" in result.agent_response  # model saw it
    assert result.status is Status.PASS and code == 0  # the suite went on


def corrupt_files(folder: Path) -> dict[str, str]:
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(2000))
    (folder / "broken.xlsx").write_bytes(b"PK\x03\x04" + os.urandom(500))
    with zipfile.ZipFile(folder / "empty.docx", "w") as archive:
        archive.writestr("nothing.txt", "not a word document")
    (folder / "huge.txt").write_bytes(b"a" * (2 * 1024 * 1024 + 1))
    return {
        "broken.pdf": "pdf",
        "broken.xlsx": "excel",
        "empty.docx": "word",
        "huge.txt": "text",
    }


def test_bad_documents_are_error_cases_with_reasons(tmp_path: Path) -> None:
    files = corrupt_files(tmp_path)
    cases = (
        "".join(
            f"  - {{name: {name}, input: 'summarize', files: [{{path: {name}, type: {kind}}}]}}\n"
            for name, kind in files.items()
        )
        + "  - {name: fine, input: fine}\n"
    )
    extra = "execution: {max_file_mb: 2}\n"
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        code, run, _ = run_suite(tmp_path, server.openai_base_url, cases, extra=extra)
        calls = server.stats()["total_calls"]
    by_name = {r.test_name: r for r in run.report.results}
    for name in files:
        result = by_name[name]
        assert result.status is Status.ERROR, name
        assert name in result.errors[0] and result.processed_files[0].error, name
    assert "larger than" in by_name["huge.txt"].errors[0] or "MB" in by_name["huge.txt"].errors[0]
    assert by_name["fine"].status is Status.PASS
    assert calls == 1  # no model call for cases whose files failed
    assert code == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "JSON"),
        ('{"report": {}, "metadata": {}}', "report"),
        ("[1, 2, 3]", "EvalRun"),
        ("", "JSON"),
    ],
)
def test_bad_stored_json_is_refused_cleanly(
    tmp_path: Path, content: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "results" / "x" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(content)
    db = tmp_path / "history.duckdb"
    assert main(["history", "import", str(bad), "--db", str(db)]) == 2
    assert main(["rescore", str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not list(tmp_path.glob("results/x/*.json"))[1:]  # nothing new written


CANARY = {
    "KEY": "sk-canary-secret-key-4242",
    "URLPASS": "canary-url-password-77",
    "HEADER": "canary-header-token-88",
    "TOKEN": "canary-env-token-99",
}


CANARY_AGENT = """\
name: canary
model:
  provider: openai
  name: m
  endpoint: "{endpoint}"
  api_key: ${{CANARY_KEY}}
instructions: {{inline: "Be brief."}}
tools:
  - type: mcp
    name: memory
    description: m
    command: npx
    args: ["--token=${{CANARY_TOKEN}}"]
    env: {{MCP_SECRET: "${{CANARY_TOKEN}}"}}
    headers: {{Authorization: "Bearer ${{CANARY_HEADER}}"}}
    mock: {{result: remembered}}
evaluations:
  metrics: [{{type: standard, metric: contains, pattern: Paris}}]
test_cases:
  - {{name: c, input: "capital? my token is ${{CANARY_TOKEN}}"}}
"""


def test_canaries_stay_out_of_every_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """EvalRun JSON, DuckDB, Dagster storage (event log, metadata), IO-manager artifacts,
    journals, caches, prompt snapshots, Markdown/JSON/JUnit reports and the console."""
    for name, value in CANARY.items():
        monkeypatch.setenv(f"CANARY_{name}", value)
    home = Path(os.environ["HOLODECK_HOME"])
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    project_dir = tmp_path / "project"
    (project_dir / "agent").mkdir(parents=True)
    (project_dir / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n")
    agent_file = project_dir / "agent" / "agent.yaml"
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        endpoint = server.openai_base_url.replace("http://", "http://user:${CANARY_URLPASS}@")
        agent_file.write_text(CANARY_AGENT.format(endpoint=endpoint))
        assert main(["validate", str(agent_file)]) == 0
        for report in ("r.md", "r.xml", "r.json"):
            assert main(["test", str(agent_file), "-v", "-o", str(tmp_path / report)]) == 0
        assert main(["prompts", "register", str(agent_file)]) == 0
        key = "auto-" + hashlib.sha256(b"Be brief.").hexdigest()[:8]
        with dg.instance_for_test(temp_dir=str(dagster_home)) as instance:
            defs = build_definitions(Project.discover(project_dir))
            instance.add_dynamic_partitions("canary_prompt_versions", [key])
            apply_pools(instance, Project.discover(project_dir))
            job = defs.resolve_job_def("Canary_eval")
            assert job.execute_in_process(partition_key=f"default|{key}", instance=instance).success
    captured = capsys.readouterr()
    outputs = {"stdout": captured.out, "stderr": captured.err}
    for folder in (home, dagster_home, tmp_path):
        for path in folder.rglob("*"):
            if path.is_file() and path != agent_file:
                outputs[str(path)] = path.read_bytes().decode("utf-8", "replace")
    assert len(outputs) > 15
    leaks = [
        (where, name)
        for where, text in outputs.items()
        for name, value in CANARY.items()
        if value in text
    ]
    assert leaks == []
    assert any(path.endswith(".duckdb") for path in outputs)


def test_hostile_agent_names_are_stored_and_queried_safely(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "Bobby'); DROP TABLE eval_runs;-- \\\"x"
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        code, run, _ = run_suite(
            tmp_path, server.openai_base_url, "  - {input: capital?}\n", name=name
        )
    assert code == 0 and run.report.agent_name == name.replace('\\"', '"')
    db = Path(os.environ["HOLODECK_HOME"]) / "history.duckdb"
    assert main(["history", "runs", "--db", str(db)]) == 0
    assert (
        main(
            [
                "history",
                "sql",
                "SELECT agent_name FROM eval_runs",
                "--db",
                str(db),
                "--format",
                "json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "DROP TABLE" in out  # stored verbatim, as data
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM eval_runs").fetchone() == (1,)
    assert main(["history", "sql", "DELETE FROM eval_runs", "--db", str(db)]) == 2
    assert (tmp_path / "results").exists() and json.loads(
        next(tmp_path.glob("results/*/holodeck-pipelines/*.json")).read_text()
    )["report"]["agent_name"] == run.report.agent_name


KILL_SCRIPT = """
import os, sys
from pathlib import Path
import dagster as dg
from holodeck_core.config.project import Project
from holodeck_pipelines.builder import build_definitions
from holodeck_pipelines.pools import apply_pools
project = Project.discover(Path(sys.argv[1]))
with dg.instance_for_test(temp_dir=sys.argv[2]) as instance:
    instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v1"])
    apply_pools(instance, project)
    job = build_definitions(project).resolve_job_def("Geo_agent_eval")
    job.execute_in_process(partition_key="default|v1", instance=instance)
"""


def test_killed_dagster_run_resumes_without_repeating_model_calls(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from tests.test_pipelines import make_project

    home = Path(os.environ["HOLODECK_HOME"])
    fast = {"match": {"user": "capital"}, "reply": "Paris", "latency": 0.4}
    stuck = {"match": {"user": r"\((8|9)\)"}, "reply": "Paris", "latency": 60}
    rules = {"rules": [stuck, fast]}  # cases 8 and 9 hang, so the kill lands mid-run
    with run_model_server(rules) as server:
        project = make_project(tmp_path, server.openai_base_url, cases=10)
        assert main(["prompts", "register", str(tmp_path / "agents/geo/agent.yaml")]) == 0
        script = tmp_path / "run.py"
        script.write_text(KILL_SCRIPT)
        (tmp_path / "dg").mkdir()
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        proc = subprocess.Popen(
            [sys.executable, str(script), str(project.root), str(tmp_path / "dg")], env=env
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and _journaled(home) < 3:
            time.sleep(0.05)
        proc.kill()  # kill -9, mid-run
        proc.wait(timeout=30)
        finished = journaled_case_ids(home)
        assert 3 <= len(finished) < 10
        server.set_rules({"rules": [fast]})
        before = dict(server.stats()["by_key"])
        with dg.instance_for_test() as instance:
            instance.add_dynamic_partitions("geo_agent_prompt_versions", ["v1"])
            apply_pools(instance, project)
            job = build_definitions(project).resolve_job_def("Geo_agent_eval")
            assert job.execute_in_process(partition_key="default|v1", instance=instance).success
        after = server.stats()["by_key"]
    for case_id in finished:
        key = request_key("responses", f"capital of France ({case_id.removeprefix('c')})?")
        assert after[key] == before[key], case_id  # not paid for twice
    with duckdb.connect(str(project.history_db), read_only=True) as con:
        assert con.execute("SELECT count(*), max(total_tests) FROM eval_runs").fetchall() == [
            (1, 10)
        ]


def _journaled(home: Path) -> int:
    return len(journaled_case_ids(home))
