"""``execution.batch`` (docs/cost.md): agent turns and judges through the providers' batch APIs,
end to end through the real ``holodeck test``, the real openai and anthropic SDKs and the
loopback model server's batch routes: the same verdicts at the batch prices, a killed run
resumed from the batch it paid for (no request sent twice), failed and expired batches, and
what cannot batch saying so."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from holodeck_core.calls.batch import Batches, BatchItem, SendAlone, item_error
from holodeck_core.calls.errors import ModelCallError
from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.defaults import BATCH_RESUBMITS
from holodeck_core.engine.suite import load_suite
from holodeck_core.models import EvalRun, Status
from holodeck_core.testing import ModelServer, run_model_server

TOOLS_PY = "def get_weather(city: str) -> str:\n    return f'Sunny in {city}'\n"
RULES: dict[str, Any] = {
    "rules": [
        {"match": {"user": "Task: write G-Eval evaluation steps"}, "json": {"steps": ["a", "b"]}},
        {"match": {"user": "Task: score a test case"}, "json": {"score": 8, "reason": "fine"}},
        {
            "match": {"user": r"weather in (\w+)"},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
            "reply": "It is {tool_result}.",
        },
        {"match": {"user": r"^question (\d+)"}, "reply": "The answer to question $1 is Paris."},
        {"match": {"user": "again"}, "reply": "Still Paris."},
    ]
}
KEY = "api_key: sk-test-key-1234"


def write_agent(folder: Path, model: str, *, cases: int = 4, extra: str = "") -> Path:
    """An agent with a function tool, a G-Eval judge, a tool case, a multi-turn case and
    ``cases`` plain ones."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.py").write_text(TOOLS_PY)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: nightly
            model: {model}
            instructions: {{inline: "Answer briefly."}}
            tools:
              - {{type: function, name: get_weather, description: Weather of a city,
                 file: tools.py, function: get_weather}}
            evaluations:
              model: {model}
              metrics: [{{type: geval, name: Correct, criteria: 'Is it right?'}}]
            """)
        + extra
        + "test_cases:\n"
        + "  - {name: weather, input: weather in Oslo?}\n"
        + "  - name: chat\n    turns:\n      - {input: question 0}\n      - {input: again please}\n"
        + "".join(f"  - {{name: q{i}, input: question {i}}}\n" for i in range(1, cases + 1))
    )
    return agent


def openai_model(server: ModelServer) -> str:
    url = server.openai_base_url
    return f'{{provider: openai, name: gpt-4o-mini, endpoint: "{url}", {KEY}, max_tokens: 60}}'


def anthropic_model(server: ModelServer) -> str:
    url = server.anthropic_base_url
    return f'{{provider: anthropic, name: claude-haiku-4-5, endpoint: "{url}", {KEY}}}'


def runs_of(folder: Path) -> list[EvalRun]:
    paths = sorted((folder / "results" / "nightly").glob("holodeck-pipelines/*.json"))
    return [EvalRun.model_validate_json(p.read_text()) for p in paths]


def stats(server: ModelServer) -> dict[str, Any]:
    root = server.openai_base_url.rsplit("/v1", 1)[0]
    data: dict[str, Any] = httpx.get(f"{root}/_stats", timeout=5).json()
    return data


def verdicts(run: EvalRun) -> dict[str, tuple[Status, list[float | None]]]:
    return {
        r.test_name or "": (r.status, [m.score for m in r.metric_results])
        for r in run.report.results
    }


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


PROVIDERS = ["openai", "anthropic"]


def plain_and_batched(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rules: dict[str, Any],
    provider: str = "openai",
) -> tuple[EvalRun, EvalRun, dict[str, Any], dict[str, Any]]:
    """The same suite run without and with ``--batch auto`` on one server (each with a home of
    its own: no judge cache shared): both EvalRuns and the server's stats after each."""
    with run_model_server(rules) as server:
        model = openai_model(server) if provider == "openai" else anthropic_model(server)
        direct = "execution: {anthropic_path: direct}\n" if provider == "anthropic" else ""
        agent = write_agent(tmp_path / "agent", model, extra=direct)
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "plain"))
        assert main(["test", str(agent)]) == 0
        before = dict(server.stats())
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "batched"))
        assert main(["test", str(agent), "--batch", "auto"]) == 0
        after = dict(server.stats())
    plain, batched = runs_of(tmp_path / "agent")
    assert verdicts(batched) == verdicts(plain)
    return plain, batched, before, after


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_suite_with_tools_and_a_judge_gives_the_same_verdicts_at_the_batch_prices(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain, batched, before, after = plain_and_batched(tmp_path, monkeypatch, RULES, provider)
    err = capsys.readouterr().err
    assert "requests submitted" in err and "the longest wait" in err  # progress on the console
    assert after["total_calls"] == before["total_calls"]  # not one ordinary model call
    assert (
        after["batches"]["requests"]["submitted"]
        == plain.report.summary.cost.headings["agent"].calls
        + plain.report.summary.cost.headings["judge"].calls
    )
    plain_cost, batch_cost = plain.report.summary.cost, batched.report.summary.cost
    assert plain_cost is not None and batch_cost is not None
    for heading in ("agent", "judge"):
        full, half = plain_cost.headings[heading], batch_cost.headings[heading]
        assert (half.calls, half.prompt_tokens, half.completion_tokens) == (
            full.calls,
            full.prompt_tokens,
            full.completion_tokens,
        )
        assert half.batch_calls == half.calls and full.batch_calls is None
        assert full.usd is not None and half.usd == pytest.approx(full.usd / 2)
        assert half.batch_usd == half.usd
    assert batched.report.environment["batch"] == "auto"
    rounds = batched.metadata.provenance["scheduler"]["batches"]["submitted"]
    assert rounds >= 3  # the agent's first turn, its turn after the tool, the judges


def test_requests_a_batch_fails_are_sent_again_then_alone_with_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = {**RULES, "batches": {"fail": {"rate": 0.3, "status": 500}}}
    _, batched, before, after = plain_and_batched(tmp_path, monkeypatch, rules)
    assert after["batches"]["requests"]["errored"] > 0
    assert after["total_calls"] > before["total_calls"]  # the failed ones, sent alone
    assert "sent as ordinary calls" in capsys.readouterr().err
    cost = batched.report.summary.cost
    assert cost is not None
    assert (
        0
        < sum(h.batch_calls or 0 for h in cost.headings.values())
        < sum(h.calls for h in cost.headings.values())
    )


def test_an_expired_batch_is_sent_again_then_alone_with_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = {**RULES, "batches": {"complete_after": 3.0, "expire_after": 0.5}}
    _, _, before, after = plain_and_batched(tmp_path, monkeypatch, rules)
    assert after["batches"]["expired"] > 0
    assert after["total_calls"] > before["total_calls"]
    assert "expired after" in capsys.readouterr().err


def test_a_killed_run_resumes_the_batch_it_paid_for_and_sends_no_request_twice(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "HOLODECK_HOME": str(tmp_path / "home")}
    rules = {**RULES, "batches": {"complete_after": 4.0}}
    with run_model_server(rules) as server:
        agent = write_agent(tmp_path / "agent", openai_model(server), cases=6)
        command = [sys.executable, "-m", "holodeck_core.cli.main", "test", str(agent)]
        command += ["--batch", "on"]
        first = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        assert first.stderr is not None
        for line in first.stderr:
            if "requests submitted" in line:  # journaled before: the run waits on it now
                first.send_signal(signal.SIGKILL)
                break
        first.wait(timeout=30)
        assert first.returncode == -signal.SIGKILL
        second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        killed_and_resumed = dict(server.stats())
    assert second.returncode == 0, second.stderr
    assert "8 answers from batches an earlier run submitted" in second.stderr
    [run] = runs_of(tmp_path / "agent")
    cost = run.report.summary.cost
    assert cost is not None
    calls = sum(h.calls for h in cost.headings.values())
    assert killed_and_resumed["total_calls"] == 0
    assert killed_and_resumed["batches"]["requests"]["submitted"] == calls  # none twice


def test_a_budget_holds_each_request_before_its_batch_and_settles_at_the_batch_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with run_model_server(RULES) as server:
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "measured"))
        measured = write_agent(tmp_path / "measured", openai_model(server))
        assert main(["test", str(measured), "--batch", "auto"]) == 0
        [full] = runs_of(tmp_path / "measured")
        assert full.report.summary.cost is not None and full.report.summary.cost.total_usd
        budget = full.report.summary.cost.total_usd / 2
        monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "budget"))
        extra = f"execution: {{budget: {{usd: {budget:.10f}}}}}\n"
        agent = write_agent(tmp_path / "budget", openai_model(server), extra=extra)
        sent_before = server.stats()["batches"]["requests"]["submitted"]
        assert main(["test", str(agent), "--batch", "auto"]) == 3
        sent = server.stats()["batches"]["requests"]["submitted"] - sent_before
    [stopped] = runs_of(tmp_path / "budget")
    cost = stopped.report.summary.cost
    assert cost is not None and cost.budget is not None and cost.budget.stopped_by == "usd"
    assert cost.budget.spent_usd <= budget  # held before each batch, at the list price
    booked = sum(h.calls for h in cost.headings.values())
    assert sent == booked  # every request in a batch was held first, and settled after
    assert cost.budget.spent_usd == pytest.approx(
        sum(h.batch_usd or 0 for h in cost.headings.values())
    )
    assert any(r.error_source == "budget" for r in stopped.report.results)


def test_ctrl_c_cancels_the_batches_the_run_submitted(tmp_path: Path) -> None:
    env = {**os.environ, "HOLODECK_HOME": str(tmp_path / "home")}
    with run_model_server({**RULES, "batches": {"complete_after": 30.0}}) as server:
        agent = write_agent(tmp_path / "agent", openai_model(server), cases=2)
        command = [sys.executable, "-m", "holodeck_core.cli.main", "test", str(agent)]
        run = subprocess.Popen([*command, "--batch", "auto"], env=env, stderr=subprocess.PIPE)
        assert run.stderr is not None
        for line in run.stderr:
            if b"requests submitted" in line:
                run.send_signal(signal.SIGINT)
                break
        rest = run.stderr.read().decode()
        run.wait(timeout=30)
        server_stats = dict(server.stats())
    assert server_stats["batches"]["cancelled"] == 1, rest
    assert ": cancelled" in rest and "Traceback" not in rest
    assert run.returncode != 0 and not runs_of(tmp_path / "agent")


def test_an_unknown_batch_mode_is_exit_2_naming_the_file_and_field(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = write_agent(
        tmp_path / "agent",
        '{provider: openai, name: m, endpoint: "http://127.0.0.1:9/v1", api_key: k}',
    )
    (tmp_path / "agent" / "agent.pipelines.yaml").write_text("execution: {batch: sometimes}\n")
    assert main(["test", str(agent)]) == 2
    err = capsys.readouterr().err
    assert "agent.pipelines.yaml:1" in err and "execution.batch" in err
    assert "'off', 'auto' or 'on'" in err and "Traceback" not in err
    assert not (tmp_path / "agent" / "results").exists()


def test_an_agent_that_cannot_batch_runs_as_always_and_says_so(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        root = server.openai_base_url.rsplit("/v1", 1)[0]
        model = f'{{provider: ollama, name: llama3, endpoint: "{root}"}}'
        agent = write_agent(
            tmp_path / "agent", model, cases=1, extra="execution: {anthropic_path: direct}\n"
        )
        assert main(["test", str(agent), "--batch", "on"]) == 2
        err = capsys.readouterr().err
        assert "--batch: on, but provider ollama has no batch API" in err
        assert "use auto" in err  # the fix
        assert main(["test", str(agent), "--batch", "auto"]) == 0
        err = capsys.readouterr().err
    assert "ollama has no batch API, so its calls are sent one by one" in err
    [run] = runs_of(tmp_path / "agent")
    assert "ollama has no batch API" in run.report.environment["batch_note"]


class ScriptedBatches:
    """A batch API whose batches answer as scripted: each batch's outcome per custom_id is
    taken from ``plan`` in order (``ok``, ``expired``, ``bad``), or it never ends (``hang``)."""

    key = "scripted /v1/x"
    credential = ""

    def __init__(self, plan: list[str]) -> None:
        self.plan = plan
        self.batches: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.cancelled: list[str] = []

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        batch_id = f"b{len(self.batches)}"
        self.batches[batch_id] = requests
        return batch_id

    async def status(self, batch_id: str) -> str:
        if batch_id in self.cancelled:
            return "cancelled"
        return "in_progress" if self.plan[int(batch_id[1:])] == "hang" else "completed"

    async def results(self, batch_id: str) -> dict[str, BatchItem]:
        outcome = self.plan[int(batch_id[1:])]
        if outcome == "ok":
            return {c: BatchItem(body={"echo": b}) for c, b in self.batches[batch_id]}
        if outcome == "bad":
            return {
                c: BatchItem(error=item_error("invalid_request", "no", 400))
                for c, _ in self.batches[batch_id]
            }
        return {
            c: BatchItem(error=item_error("batch_expired", None)) for c, _ in self.batches[batch_id]
        }

    async def cancel(self, batch_id: str) -> None:
        self.cancelled.append(batch_id)


def ask(plan: list[str], bodies: int = 3, **kw: Any) -> tuple[list[Any], ScriptedBatches]:
    api = ScriptedBatches(plan)

    async def go() -> list[Any]:
        batches = Batches(gather=0.01, **kw)
        try:
            return await asyncio.gather(
                *(batches.request(api, {"n": n}) for n in range(bodies)), return_exceptions=True
            )
        finally:
            await batches.aclose()

    return asyncio.run(go()), api


def test_requests_a_batch_expired_go_in_the_next_batch_then_alone() -> None:
    answers, api = ask(["expired", "ok"])
    assert answers == [{"echo": {"n": n}} for n in range(3)] and len(api.batches) == 2
    answers, api = ask(["expired"] * 5)
    assert all(isinstance(a, SendAlone) for a in answers)
    assert len(api.batches) == 1 + BATCH_RESUBMITS  # bounded
    answers, _ = ask(["bad"])
    assert all(isinstance(a, ModelCallError) and not a.transient for a in answers)


def test_the_wait_limit_cancels_the_batch_and_sends_its_requests_alone() -> None:
    answers, api = ask(["hang"], max_wait=0.3)
    assert api.cancelled == ["b0"]
    assert all(isinstance(a, SendAlone) for a in answers)
    answers, api = ask(["ok"], max_wait=1e-9)  # no wait left: nothing more is submitted
    assert all(isinstance(a, SendAlone) for a in answers) and not api.batches


def test_holodeck_yaml_sets_an_agents_batch_mode_below_its_sidecar(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = '{provider: ollama, name: llama3, endpoint: "http://127.0.0.1:9"}'
    agent = write_agent(tmp_path, model, cases=1, extra="execution: {anthropic_path: direct}\n")
    (tmp_path / "holodeck.yaml").write_text("agents: [{path: agent.yaml, batch: on}]\n")
    assert main(["test", str(agent)]) == 2
    err = capsys.readouterr().err
    assert "holodeck.yaml agents[].batch: on, but provider ollama has no batch API" in err
    (tmp_path / "agent.pipelines.yaml").write_text("execution: {batch: off}\n")  # YAML: false
    suite = load_suite(load_agent(agent))  # the sidecar's off wins: no error
    assert (suite.batch_mode, suite.batch_note) == ("off", None)
