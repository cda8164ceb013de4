"""What a hostile config, model or provider puts into a run never breaks or leaks through the
CLI's outputs (docs/agent-yaml.md): keys however they got
into the config, Rich markup and terminal escapes, XML-forbidden characters."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.models import EvalRun
from holodeck_core.testing import run_model_server
from tests.hostile import agent_yaml, everything_written, no_traceback, run_cli

ENV_KEY = "sk-env-canary-4b1d8e2f9a7c"
LITERAL_KEY = "sk-literal-canary-0c9e7a5b3d1f"
QUERY_TOKEN = "qtok-canary-55aa77cc99ee"
SIGNATURE = "sig-canary-1234abcd5678"
USER_PASSWORD = "pw-canary-8f8f8f8f8f"


def eval_runs(agent: Path) -> list[EvalRun]:
    files = sorted((agent.parent / "results").glob("*/holodeck-pipelines/*.json"))
    return [EvalRun.model_validate_json(f.read_text()) for f in files]


@pytest.mark.parametrize("key_source", ["env", "literal"])
def test_keys_never_reach_console_reports_history_or_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key_source: str
) -> None:
    key = ENV_KEY if key_source == "env" else LITERAL_KEY
    monkeypatch.setenv("MY_PROVIDER_KEY", ENV_KEY)
    rules = {
        "default": {"reply": "ok"},
        "rules": [
            {
                "match": {"user": "full echo"},
                "fault": {"kind": "401", "message": "Invalid key {api_key} for this project"},
            },
            {
                "match": {"user": "masked echo"},
                "fault": {"kind": "401", "message": "Incorrect API key: {api_key_masked}."},
            },
            {"match": {"user": "reply echo"}, "reply": f"your key is {key}, piece {key[:10]}"},
        ],
    }
    extra = f"""\
tools:
  - type: mcp
    name: remote
    description: remote tools
    url: "https://mcp.example/sse?token={QUERY_TOKEN}&region=eu"
    mock: {{result: "ok"}}
  - type: mcp
    name: other
    description: other tools
    url: "https://bob:{USER_PASSWORD}@mcp2.example/x?sig={SIGNATURE}&access_token={QUERY_TOKEN}"
    mock: {{result: "ok"}}
"""
    with run_model_server(rules) as server:
        agent = agent_yaml(
            tmp_path / "agent",
            server.openai_base_url,
            """\
            - {name: full, input: full echo, ground_truth: ok}
            - {name: masked, input: masked echo, ground_truth: ok}
            - {name: reply, input: reply echo, ground_truth: ok}
            """,
            api_key="${MY_PROVIDER_KEY}" if key_source == "env" else LITERAL_KEY,
            extra=extra,
        )
        report = tmp_path / "report.xml"
        proc = run_cli(["test", str(agent), "-v", "-o", str(report)])
        markdown = run_cli(["test", str(agent), "-q", "-o", str(tmp_path / "report.md")])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr
    assert "EvalRun:" in proc.stdout
    assert "Invalid key *** for this project" in proc.stderr, proc.stderr
    agent.unlink()  # the config itself is the user's; everything else a run wrote is checked
    written = everything_written(tmp_path)
    outputs = "\n".join([proc.stdout, proc.stderr, markdown.stdout, markdown.stderr, written])
    for secret in (key, key[:10], QUERY_TOKEN, SIGNATURE, USER_PASSWORD):
        assert secret not in outputs, secret
    [run, _] = eval_runs(agent)
    urls = [tool.url for tool in run.metadata.agent_config.tools or []]  # type: ignore[union-attr]
    assert urls[0] == "https://mcp.example/sse?token=***&region=eu"
    assert "bob:***@" in str(urls[1]) and "sig=***" in str(urls[1])


@pytest.mark.parametrize(
    ("hostile", "shown"),
    [("case [/y]", "case [/y]"), ("[bold]x[/] \\e[31mred \\a", "[bold]x[/] \\x1b[31mred \\x07")],
)
def test_markup_and_escapes_in_names_errors_and_metrics_stay_literal(
    tmp_path: Path, hostile: str, shown: str
) -> None:
    rules = {
        "default": {"reply": "ok"},
        "rules": [
            {
                "match": {"user": "bad"},
                "fault": {"kind": "400", "message": "Invalid [/messages/0/content] \x1b]0;t\x07"},
            },
            {"match": {"user": "ctl"}, "reply": "bell \x07 esc \x1b[2J soh \x01 end"},
        ],
    }
    with run_model_server(rules) as server:
        agent = agent_yaml(
            tmp_path / "agent",
            server.openai_base_url,
            f"""\
            - {{name: "{hostile}", input: bad request, ground_truth: ok}}
            - {{name: "ctl \\x01 {hostile}", input: ctl reply, ground_truth: ok}}
            """,
            metric=f'{{type: standard, metric: equality, name: "eq [/m] {hostile}"}}',
        )
        junit = tmp_path / "report.xml"
        proc = run_cli(["test", str(agent), "-v", "-o", str(junit)])
    no_traceback(proc)
    assert proc.returncode == 3, proc.stderr  # the 400 is an execution error
    assert "[/messages/0/content]" in proc.stderr and shown in proc.stderr
    assert "\x1b]0" not in proc.stderr and "\x07" not in proc.stderr
    [run] = eval_runs(agent)
    assert {r.test_name for r in run.report.results} >= {
        hostile.replace("\\e", "\x1b").replace("\\a", "\x07")
    }
    ET.fromstring(junit.read_bytes())  # well-formed despite ESC, BEL and \x01

    show = run_cli(["history", "show", run.metadata.run_id or ""])
    no_traceback(show)
    assert show.returncode == 0 and "eq [/m]" in show.stdout and "\x1b]0" not in show.stdout
    sql = run_cli(
        [
            "history",
            "sql",
            "SELECT metric_name, chr(27) || '[2J' || chr(7) AS evil FROM metric_results",
        ]
    )
    no_traceback(sql)
    assert sql.returncode == 0 and "eq [/m]" in sql.stdout
    assert "\\x1b[2J\\x07" in sql.stdout and "\x07" not in sql.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--limit", "-1"],
        ["--limit", "0"],
        ["--timeout", "-1"],
        ["--timeout", "nan"],
        ["--timeout", "0"],
        ["--timeout", "inf"],
        ["--parallel", "0"],
    ],
)
def test_nonsense_arguments_are_usage_errors(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    agent = agent_yaml(tmp_path, "http://127.0.0.1:9/v1", "- {input: q}\n")
    with pytest.raises(SystemExit) as exited:
        main(["test", str(agent), *args])
    assert exited.value.code == 2 and "must be" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_json_report_is_valid_for_control_characters(tmp_path: Path) -> None:
    rules = {"default": {"reply": "a \x00 b \x1b c"}}
    with run_model_server(rules) as server:
        agent = agent_yaml(tmp_path, server.openai_base_url, "- {input: q, ground_truth: x}\n")
        proc = run_cli(["test", str(agent), "-q", "-o", str(tmp_path / "r.json")])
    assert proc.returncode == 1, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["agent_response"]


@pytest.mark.parametrize("echo", ["reply", "error"])
def test_a_literal_key_echoed_by_the_provider_stays_out_of_dagster_storage(
    tmp_path: Path, echo: str
) -> None:
    import dagster as dg

    from holodeck_core.config.loader import load_agent
    from holodeck_core.config.project import Project
    from holodeck_pipelines.builder import build_definitions
    from holodeck_pipelines.pools import apply_pools

    action = (
        {"reply": f"the key is {LITERAL_KEY}"}
        if echo == "reply"
        else {"fault": {"kind": "401", "message": "Incorrect API key: {api_key_masked}"}}
    )
    with run_model_server({"default": action}) as server:
        agent_yaml(
            tmp_path / "agent",
            server.openai_base_url,
            "- {name: echo, input: q, ground_truth: ok}\n",
            name="echo",
            api_key=LITERAL_KEY,
        )
        (tmp_path / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n")
        defs = build_definitions(Project.discover(tmp_path))
        with dg.instance_for_test() as instance:
            job = defs.resolve_job_def("Echo_eval")
            name = "echo_prompt_versions"
            [prompt] = load_agent(tmp_path / "agent" / "agent.yaml").active_prompts
            key = prompt.version.version
            instance.add_dynamic_partitions(name, [key])
            apply_pools(instance, Project.discover(tmp_path))
            result = job.execute_in_process(
                partition_key=f"default|{key}", instance=instance, raise_on_error=False
            )
            stored = "\n".join(str(record) for record in instance.all_logs(result.run_id))
    assert "echo" in stored
    for secret in (LITERAL_KEY, LITERAL_KEY[:10]):
        assert secret not in stored
    (tmp_path / "agent" / "agent.yaml").unlink()
    assert LITERAL_KEY[:10] not in everything_written(tmp_path)


@pytest.mark.parametrize("name", ["\\e]0;pwned\\a", "bell \\a [bold]x[/]"])
def test_validate_shows_escapes_in_names_literally(tmp_path: Path, name: str) -> None:
    agent = agent_yaml(tmp_path, "http://127.0.0.1:9/v1", "- {input: q}\n", name=f'"{name}"')
    proc = run_cli(["validate", str(agent)])
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\\x07" in proc.stdout
