"""``config.yaml`` merged as HoloDeck 0.7.1 merges it (docs/holodeck-fidelity.md): for every
corpus sample with a ``config.yaml`` and the probes in ``tests/fixtures/holodeck/probes/``
(user-level ``~/.holodeck/config.yaml`` and ``.env`` files included), the effective model,
judge model, execution and database settings equal HoloDeck's own resolution, recorded by
``bench/holodeck_record.py`` into ``tests/fixtures/holodeck/config_resolution.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.models.llm import LLMProvider
from tests.conftest import corpus_path

FIXTURES = Path(__file__).parent / "fixtures" / "holodeck"
RECORDED: dict[str, Any] = json.loads((FIXTURES / "config_resolution.json").read_text())
HOLODECK_EXECUTION_DEFAULTS = {
    "file_timeout": 30, "llm_timeout": 60, "download_timeout": 30, "cache_enabled": True,
    "cache_dir": ".holodeck/cache", "verbose": False, "quiet": False, "parallel_test_cases": 1,
}  # fmt: skip
"""HoloDeck's built-in execution defaults; ours are our own (docs/holodeck-fidelity.md)."""


def agent_file(key: str) -> Path:
    if key.startswith("probes/"):
        return FIXTURES / key / "agent.yaml"
    path = corpus_path("holodeck", key, "agent.yaml")
    if not path.is_file():
        pytest.skip(f"HoloDeck corpus not available at {path}")
    return path


@pytest.fixture
def as_holodeck_ran(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The environment the resolution was recorded under: its variables, its HOME, the
    agent's folder as the working directory."""

    def enter(key: str) -> Path:
        path = agent_file(key)
        home = path.parent / "home"
        monkeypatch.setenv("HOME", str(home if home.is_dir() else FIXTURES / "probes" / "no-home"))
        for name, value in RECORDED["env"].items():
            monkeypatch.setenv(name, value)
        for name in ("PROBE_API_KEY", "PROBE_USER_KEY", "PROBE_JUDGE_ENDPOINT", "PROBE_AZURE_KEY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.chdir(path.parent)
        return path

    return enter


def model_settings(model: LLMProvider | None) -> dict[str, Any] | None:
    if model is None:
        return None
    keys = ("name", "temperature", "max_tokens", "top_p", "endpoint", "api_version")
    out: dict[str, Any] = {key: getattr(model, key) for key in keys}
    out["provider"] = model.provider.value
    out["api_key"] = model.api_key.get_secret_value() if model.api_key else None
    return out


def test_every_sample_with_a_config_file_is_recorded() -> None:
    samples = corpus_path("holodeck", "samples")
    if not samples.is_dir():
        pytest.skip(f"HoloDeck corpus not available at {samples}")
    with_config = {
        str(p.parent.relative_to(samples.parent))
        for p in samples.glob("*/*/agent.yaml")
        if (p.parent / "config.yaml").is_file()
    }
    assert len(with_config) == 9
    assert with_config <= set(RECORDED["agents"])
    assert RECORDED["holodeck"] == "0.7.1"


@pytest.mark.parametrize("key", sorted(RECORDED["agents"]))
def test_effective_settings_are_holodecks(key: str, as_holodeck_ran: Any) -> None:
    expected = RECORDED["agents"][key]
    path = as_holodeck_ran(key)
    if "error" in expected:  # HoloDeck refuses a key it does not know; we warn and go on
        assert "config.yaml" in expected["message"]
        warnings = load_agent(path).warnings
        assert any("config.yaml" in w and "not a setting HoloDeck knows" in w for w in warnings)
        return
    agent = load_agent(path).agent
    assert model_settings(agent.model) == expected["model"]
    judge = agent.evaluations.model if agent.evaluations else None
    assert model_settings(judge) == expected["evaluation_model"]
    ours = agent.execution.model_dump() if agent.execution else {}
    for field, value in expected["execution"].items():
        if ours.get(field) is None:  # we leave it to our default: HoloDeck's was its default
            assert value == HOLODECK_EXECUTION_DEFAULTS[field], field
        else:
            assert ours[field] == value, field
    databases = {
        tool.name: plain(tool.database) for tool in agent.tools or [] if tool.type == "vectorstore"
    }
    assert databases == expected["databases"]


def plain(database: Any) -> Any:
    """A database setting with its secrets' values (what HoloDeck's fixture records)."""
    if not isinstance(database, BaseModel):
        return database
    values = {**dict(database), **(database.model_extra or {})}
    return {
        key: value.get_secret_value() if isinstance(value, SecretStr) else value
        for key, value in values.items()
        if value is not None
    }


def validate_lines(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "sk-probe" not in out and "probe-azure-from-dotenv" not in out  # secrets never
    return {line.split(" = ")[0].split()[-1]: line for line in out.splitlines() if " = " in line}


def test_validate_says_where_each_setting_came_from(
    as_holodeck_ran: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both files: the project's provider entry replaces the user's whole (its endpoint is
    gone, as in HoloDeck), execution settings come field by field from either file."""
    lines = validate_lines(as_holodeck_ran("probes/user-and-project"), capsys)
    project, user = "user-and-project/config.yaml", "home/.holodeck/config.yaml"
    assert lines["model.max_tokens"].endswith("providers.openai)")
    assert f"{project} + " in lines["model.max_tokens"] and user in lines["model.max_tokens"]
    assert lines["model.temperature"].endswith("= 0.5 (agent.yaml)")
    assert "model.endpoint = None" in lines["model.endpoint"]
    assert lines["model.api_key"].split(" = ")[1].startswith("*** (")
    assert lines["evaluations.model.max_tokens"].endswith(
        "= 321 (" + lines["evaluations.model.max_tokens"].split("(", 1)[1]
    )
    assert "providers.claude-judge" in lines["evaluations.model.endpoint"]  # by its provider
    assert lines["execution.llm_timeout"].endswith(f"{project} execution)")
    assert lines["execution.file_timeout"].endswith(f"{user} execution)")
    assert "tools.kb.database" not in lines  # the project's dump has no vector stores


def test_validate_names_the_vector_stores_and_warns_of_an_unknown_one(
    as_holodeck_ran: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = as_holodeck_ran("probes/project-only")
    assert any("database 'nowhere'" in w for w in load_agent(path).warnings)
    lines = validate_lines(path, capsys)
    assert lines["tools.kb.database"].endswith(
        "= postgres (" + str(path.parent / "config.yaml") + " vectorstores.kb)"
    )
    assert "in-memory" in lines["tools.notes.database"]
    assert lines["model.temperature"].endswith("= 0.3 (default)")
    assert "providers.azure" in lines["model.api_version"]
