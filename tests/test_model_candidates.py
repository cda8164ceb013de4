"""Model candidates (docs/agent-yaml.md, docs/cli.md): ``models:`` of an agent's ``holodeck.yaml``
entry, checked before any model call with errors naming ``holodeck.yaml``, the field and the
line; ``holodeck test --model NAME`` runs one of them against the loopback server; the EvalRun
superset records the candidate and the model fingerprint (HoloDeck's file keeps its shape);
two candidates never share a journal; a candidate's secret reaches no file and no console."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.engine.suite import load_suite
from holodeck_core.history.holodeck_fields import METADATA_FIELDS
from holodeck_core.models import EvalRun
from holodeck_core.runner import fingerprint as fp
from holodeck_core.testing import run_model_server

RULES: dict[str, Any] = {"rules": [{"match": {"user": r"^question (\d+)"}, "reply": "Answer $1."}]}
AGENT = """\
name: cand
model:
  provider: openai
  name: gpt-4o-mini
  endpoint: "{url}"
  api_key: sk-test-key-1234
  temperature: 0.0
  max_tokens: 60
instructions: {{inline: "Answer briefly."}}
test_cases:
  - {{id: c1, input: 'question 1'}}
  - {{id: c2, input: 'question 2'}}
"""
SECRET = "sk-candidate-secret-98765"


def write_project(folder: Path, url: str, models: str) -> Path:
    """agent.yaml and a holodeck.yaml whose entry for it declares ``models`` (YAML, from line 4)."""
    agent = folder / "agent.yaml"
    agent.write_text(AGENT.format(url=url))
    declared = textwrap.indent(textwrap.dedent(models), "      ")
    (folder / "holodeck.yaml").write_text(f"agents:\n  - path: agent.yaml\n    models:\n{declared}")
    return agent


BAD: list[Any] = [
    # an unknown provider
    ("large: {provider: opneai}", 4, "large.provider", "should be 'openai', 'azure_openai'"),
    ("large: {provider: OpenAI}", 4, "large.provider", "should be 'openai'"),
    ("large: {provider: [openai]}", 4, "large.provider", "should be 'openai'"),
    # a name that is not a partition key
    ("Large: {}", 4, "Large", "not a partition key: use 1 to 32 of a-z, 0-9 and _ (e.g. 'large')"),
    ("gpt-4o: {name: gpt-4o}", 4, "gpt-4o", "(e.g. 'gpt_4o')"),
    (f"{'x' * 33}: {{}}", 4, "x" * 33, "not a partition key"),
    ("1: {}", 4, "1", "not a partition key"),
    ("'': {}", 4, "", "not a partition key"),
    # a name that repeats (YAML would keep only the last)
    ("large: {}\nlarge: {name: gpt-4o}", 5, "large", "duplicate key"),
    ("large: {}\n'large': {name: gpt-4o}", 5, "large", "duplicate key"),
    # a ${VAR} that is not set
    ("large: {api_key: '${CAND_UNSET_KEY}'}", 4, "large.api_key", "CAND_UNSET_KEY is not set"),
    ("large: {endpoint: 'http://${CAND_UNSET_HOST}/v1'}", 4, "large.endpoint", "CAND_UNSET_HOST"),
    ("large:\n  openai: {fallback_model: '${CAND_UNSET_M}'}", 5, "large.openai.fallback_model",
     "is not set"),
    # a field HoloDeck's model block does not have
    ("large: {temprature: 0.4}", 4, "large.temprature", "did you mean 'temperature'?"),
    ("large:\n  openai: {efort: high}", 5, "large.openai.efort", "did you mean 'effort'?"),
    ("large:\n  claude: {max_turn: 3}", 5, "large.claude.max_turn", "did you mean 'max_turns'?"),
    ("large:\n  model: {name: gpt-4o}", 5, "large.model", "unknown key"),
    # values HoloDeck refuses, and shapes that are not a block
    ("large: {temperature: 3}", 4, "large.temperature", "less than or equal to 2"),
    ("large: [gpt-4o]", 4, "large", "a candidate is a mapping of model settings"),
    ("default: {name: gpt-4o}", 4, "default", "'default' is the agent's own model"),
    # nightly (docs/dagster.md) is a boolean
    ("large: {nightly: sometimes}", 4, "large.nightly", "valid boolean"),
]  # fmt: skip


@pytest.mark.parametrize(("models", "line", "path", "message"), BAD)
def test_a_bad_candidate_is_a_located_config_error_before_any_model_call(
    models: str,
    line: int,
    path: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in ("CAND_UNSET_KEY", "CAND_UNSET_HOST", "CAND_UNSET_M"):
        monkeypatch.delenv(name, raising=False)
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, models + "\nok: {}\n")
        for command in (["test", str(agent)], ["test", str(agent), "--model", "ok"]):
            assert main(command) == 2
            err = capsys.readouterr().err
            located = f"{tmp_path / 'holodeck.yaml'}:{line}: agents[0].models.{path}: "
            assert located in err and message in err, err
            assert "Traceback" not in err
        assert main(["validate", str(agent)]) == 2
        assert located in capsys.readouterr().err
        assert server.requests() == []


def _runs(folder: Path) -> list[tuple[Path, Path]]:
    """(superset, HoloDeck-shaped) file pairs of the agent ``cand``, oldest first."""
    supersets = sorted((folder / "results" / "cand" / "holodeck-pipelines").glob("*.json"))
    return [(s, s.parent.parent / s.name) for s in supersets]


def test_a_candidate_runs_records_itself_and_keeps_its_own_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CAND_KEY", SECRET)
    with run_model_server(RULES) as server:
        url = server.openai_base_url
        agent = write_project(
            tmp_path,
            url,
            f"""\
            mini: {{}}
            large:
              name: gpt-4o
              temperature: 0.7
              max_tokens: 99
              api_key: ${{CAND_KEY}}
              openai: {{effort: low}}
            twin: {{endpoint: "{url}/"}}
            """,
        )
        assert main(["test", str(agent), "--model", "large"]) == 0
        bodies = [r["body"] for r in server.requests()]
        server.reset()
        assert main(["test", str(agent)]) == 0
        own = [r["body"] for r in server.requests()]
    assert len(bodies) == 2 and len(own) == 2
    for body in bodies:
        assert (body["model"], body["temperature"], body["max_output_tokens"]) == (
            "gpt-4o",
            0.7,
            99,
        )
        assert body["reasoning"]["effort"] == "low"
    for body in own:
        assert (body["model"], body["temperature"], body["max_output_tokens"]) == (
            "gpt-4o-mini",
            0.0,
            60,
        )
        assert "reasoning" not in body

    (large, large_holodeck), (mini, mini_holodeck) = _runs(tmp_path)
    for superset, name, model in ((large, "large", "gpt-4o"), (mini, "mini", "gpt-4o-mini")):
        meta = EvalRun.model_validate_json(superset.read_text()).metadata
        assert meta.model_candidate == name
        assert meta.model_fingerprint == fp.model_fingerprint(load_agent(agent, model=name))
        assert meta.agent_config.model.name == model
    for holodeck in (large_holodeck, mini_holodeck):  # HoloDeck 0.7.1's shape, nothing of ours
        assert set(json.loads(holodeck.read_text())["metadata"]) == set(METADATA_FIELDS)
    assert json.loads(large_holodeck.read_text())["metadata"]["agent_config"]["model"]["name"] == (
        "gpt-4o"
    )

    suites = {name: load_suite(load_agent(agent, model=name)) for name in ("mini", "large", "twin")}
    assert len({s.journal_key for s in suites.values()}) == 3  # never one journal for two
    fingerprints = {name: fp.model_fingerprint(s.loaded) for name, s in suites.items()}
    assert fingerprints["twin"] == fingerprints["mini"] != fingerprints["large"]
    own_key = load_suite(load_agent(agent, model="default")).journal_key
    assert own_key == suites["mini"].journal_key

    printed = capsys.readouterr()
    assert SECRET not in printed.out + printed.err
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    (tmp_path / "holodeck.yaml").unlink()  # declaring candidates kept the own model's journal
    assert load_suite(load_agent(agent)).journal_key == own_key


def test_validate_shows_the_candidates_and_where_each_setting_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CAND_KEY", SECRET)
    agent = write_project(
        tmp_path,
        "http://127.0.0.1:9/v1",
        "large: {name: gpt-4o, api_key: '${CAND_KEY}'}\nsmall: {}\n",
    )
    assert main(["validate", str(agent), "--model", "large"]) == 0
    out = capsys.readouterr().out
    where = f"{tmp_path / 'holodeck.yaml'} agents[0].models.large"
    assert "  model:    openai gpt-4o\n" in out
    assert "  candidate: small: the agent's own model\n" in out
    assert f"  candidate: large (loaded): name=gpt-4o, api_key=***; {where}\n" in out
    assert f"  setting:  model.name = gpt-4o ({where})\n" in out
    assert f"  setting:  model.api_key = *** ({where})\n" in out
    assert "  setting:  model.temperature = 0.0 (agent.yaml)\n" in out
    assert SECRET not in out
    for own in ([], ["--model", "default"]):  # `default` names the own model, whatever its name
        assert main(["validate", str(agent), *own]) == 0
        out = capsys.readouterr().out
        assert "  model:    openai gpt-4o-mini\n" in out
        assert "  candidate: small (loaded): the agent's own model\n" in out


def test_a_rescore_keeps_the_candidate_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, "large: {name: gpt-4o}\n")
        assert main(["test", str(agent), "--model", "large"]) == 0
        [(superset, _)] = _runs(tmp_path)
        assert main(["rescore", str(superset), "--agent", str(agent)]) == 0
    runs = [EvalRun.model_validate_json(s.read_text()).metadata for s, _ in _runs(tmp_path)]
    assert [(m.model_candidate, m.agent_config.model.name) for m in runs] == [
        ("large", "gpt-4o")
    ] * 2


def test_model_names_a_declared_candidate_else_exit_2_listing_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = write_project(tmp_path, "http://127.0.0.1:9/v1", "large: {name: gpt-4o}\n")
    assert main(["test", str(agent), "--model", "larg"]) == 2
    err = capsys.readouterr().err
    listed = r"choose one of: default, large \(.*holodeck\.yaml agents\[0\]\.models\)"
    assert re.search(r"--model 'larg' is not a model candidate of this agent; " + listed, err)
    (tmp_path / "holodeck.yaml").unlink()
    assert main(["validate", str(agent), "--model", "large"]) == 2
    err = capsys.readouterr().err
    assert "choose one of: default (holodeck.yaml declares none)" in err and "Traceback" not in err
    assert main(["validate", str(agent), "--model", "default"]) == 0


def test_a_candidate_that_breaks_the_merged_agent_is_named_by_validate_and_test(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid alone, the candidate's ``openai.max_turns`` contradicts the agent's own turn limit:
    ``holodeck validate`` checks every candidate's merged agent, and says which candidate."""
    agent = write_project(tmp_path, "http://127.0.0.1:9/v1", "large:\n  openai: {max_turns: 8}\n")
    agent.write_text(agent.read_text() + "execution: {max_tool_turns: 5}\n")
    for command in (["validate", str(agent)], ["test", str(agent), "--model", "large"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "execution.max_tool_turns (5) and openai.max_turns (8)" in err, err
        assert f"(with model candidate 'large', {tmp_path / 'holodeck.yaml'} agents[0]" in err
    assert main(["validate", str(agent), "--model", "default"]) == 2
