"""Loading agent.yaml: HoloDeck's samples, env substitution, .env, test_cases_file, paths."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.loader import load_agent
from holodeck_core.errors import ConfigError
from holodeck_core.models import FunctionTool
from holodeck_core.redaction import registered_secrets
from tests.conftest import corpus_path


def sample_agents() -> list[Path]:
    return sorted(corpus_path("holodeck", "samples").glob("*/*/agent.yaml"))


def set_dummy_env(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = agent.parent / "config.yaml"  # HoloDeck resolves its variables too
    text = agent.read_text() + (config.read_text() if config.is_file() else "")
    for var in set(re.findall(r"\$\{([A-Z_0-9]+)", text)):
        monkeypatch.setenv(var, f"dummy-{var.lower()}")


def test_every_sample_validates_except_the_one_missing_its_data(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agents = sample_agents()
    assert len(agents) == 11
    for agent in agents:
        set_dummy_env(agent, monkeypatch)
        code = main(["validate", str(agent)])
        out = capsys.readouterr()
        if "financial-assistant/claude" in str(agent):
            # its test_cases_file lives in ../openai/data in the original repo
            assert code == 2
            assert "test_cases_file" in out.err
            assert "data/convfinqa_subset_retrieval.yaml" in out.err
            assert "Traceback" not in out.err
            continue
        assert code == 0, out.err
        assert "metrics:" in out.out and "tools:" in out.out


def test_sample_summary_lists_tools_and_metrics(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = corpus_path("holodeck", "samples", "customer-support", "openai", "agent.yaml")
    set_dummy_env(agent, monkeypatch)
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert "openai gpt-4o" in out
    assert "cases:    5" in out
    assert "2 geval, 3 rag" in out
    assert "1 mcp, 3 vectorstore" in out
    assert "ignored:  observability" in out
    assert "not runnable here" not in out  # MCP and retrieval tools all run for real
    assert "run for real: knowledge_base, faq, product_catalog, memory" in out


def test_financial_sample_loads_multi_turn_cases_and_frontmatter_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    agent = corpus_path("holodeck", "samples", "financial-assistant", "openai", "agent.yaml")
    set_dummy_env(agent, monkeypatch)
    loaded = load_agent(agent)
    assert loaded.prompt.version.version == "2026-05-16.7"
    assert len(loaded.agent.cases) == 133
    assert all(case.turns for case in loaded.agent.cases)
    assert loaded.response_schema is not None and "answer" in loaded.response_schema["properties"]
    tool = loaded.agent.tools[0] if loaded.agent.tools else None
    assert isinstance(tool, FunctionTool)
    assert loaded.resolve(tool.file) == agent.parent / "tools" / "financial_tools.py"
    assert "embedding_provider" not in loaded.agent.ignored_blocks()


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


AGENT = """\
name: env-agent
model:
  provider: openai
  name: ${MODEL_NAME:-gpt-4o-mini}
  endpoint: ${ENDPOINT}
  api_key: ${SECRET_SAUCE}
  temperature: ${TEMP:-0.25}
instructions:
  inline: "Hi ${WHO:-there}"  # a comment with ${NOT_SUBSTITUTED}
test_cases_file: cases/cases.yaml
"""


def test_env_substitution_dotenv_defaults_and_cases_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = write(tmp_path, "agent.yaml", AGENT)
    write(tmp_path, ".env", "ENDPOINT=http://127.0.0.1:9/v1\nSECRET_SAUCE=from-dotenv-1234\n")
    write(
        tmp_path,
        "cases/cases.yaml",
        "- {name: one, input: a}\n- {name: from file, input: '${WHO:-b}'}\n",
    )
    monkeypatch.setenv("SECRET_SAUCE", "from-process-env-5678")
    loaded = load_agent(agent)
    model = loaded.agent.model
    assert model.name == "gpt-4o-mini" and model.temperature == 0.25
    assert model.endpoint == "http://127.0.0.1:9/v1"  # from .env
    assert model.api_key is not None
    assert model.api_key.get_secret_value() == "from-process-env-5678"  # process env wins
    assert loaded.agent.instructions.inline == "Hi there"
    assert [c.name for c in loaded.agent.cases] == ["one", "from file"]
    assert "from-process-env-5678" in registered_secrets()  # secret field → redacted later


def test_errors_in_cases_file_name_that_file_and_line(tmp_path: Path) -> None:
    agent = write(
        tmp_path, "agent.yaml", AGENT.replace("${ENDPOINT}", "x").replace("${SECRET_SAUCE}", "y")
    )
    write(tmp_path, "cases/cases.yaml", "- {input: ok}\n- input: fine\n  filez: []\n")
    with pytest.raises(ConfigError) as info:
        load_agent(agent)
    assert "cases/cases.yaml:3: [1].filez: unknown key" in str(info.value)


def test_paths_resolve_against_the_agent_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "deep" / "agent"
    write(
        folder,
        "agent.yaml",
        """\
        name: paths
        model: {provider: anthropic, name: claude-sonnet-4-6}
        instructions: {file: prompts/p.md}
        test_cases:
          - input: x
            files: [{path: docs/a.txt, type: text}]
        """,
    )
    write(folder, "prompts/p.md", "plain body, no frontmatter\n")
    write(folder, "docs/a.txt", "hello\n")
    monkeypatch.chdir(tmp_path)  # not the agent's folder
    loaded = load_agent(Path("deep/agent/agent.yaml"))
    assert loaded.prompt.version.version.startswith("auto-")
    assert loaded.prompt.version.file_path == "prompts/p.md"
    assert loaded.resolve("docs/a.txt").read_text() == "hello\n"


def test_variants_must_have_distinct_versions(tmp_path: Path) -> None:
    agent = write(
        tmp_path,
        "agent.yaml",
        """\
        name: ab
        model: {provider: openai, name: m}
        instructions: {file: a.md, variants: [b.md]}
        """,
    )
    write(tmp_path, "a.md", "---\nversion: v1\n---\nA\n")
    write(tmp_path, "b.md", "---\nversion: v1\n---\nB\n")
    with pytest.raises(ConfigError, match="must differ between the file and its variants"):
        load_agent(agent)
