"""agent.yaml stays HoloDeck's: our additions live in a sidecar beside it (docs/agent-yaml.md).

`holodeck validate` warns once per field of ours still in agent.yaml, `--fix` moves them out
(keeping comments, refusing what it cannot cut safely), and the agent loaded from the two
files is the one the single file gave. Where HoloDeck 0.7.1 is installed
(`bash bench/peer_setup.sh`), its own loader must accept every migrated agent.yaml."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from holodeck_core.config.extensions import find_extensions
from holodeck_core.config.loader import load_agent
from tests.conftest import corpus_path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "acme-support"
SINGLE_FILE = REPO / "tests" / "fixtures" / "agent_yaml" / "acme-support-single-file.yaml"
"""The example as one file, before its additions moved to agent.pipelines.yaml."""
PEER = REPO / "bench" / ".peer-venv" / "bin" / "python"
HOLODECK_LOADS = (
    "import sys; from dotenv import load_dotenv; load_dotenv('.env'); "
    "from holodeck.config.loader import load_agent_with_config; "
    "a, _, _ = load_agent_with_config(sys.argv[1]); print('loaded', a.name)"
)


def holodeck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HOLODECK_MODEL_ENDPOINT"}
    return subprocess.run(
        [sys.executable, "-m", "holodeck_core.cli", *args],
        cwd=cwd,
        env={**env, "HOLODECK_HOME": str(cwd / ".home"), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def peer_loads(agent: Path) -> subprocess.CompletedProcess[str]:
    """HoloDeck 0.7.1's own loader on ``agent``, run from its folder as `holodeck test` is."""
    return subprocess.run(
        [str(PEER), "-c", HOLODECK_LOADS, agent.name],
        cwd=agent.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )


def canonical(agent: Any) -> str:
    """An agent's dump with each list of metrics in a fixed order (ours follow HoloDeck's)."""

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            items = [walk(v) for v in value]
            if key in ("metrics", "evaluations"):
                return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str))
            return items
        return value

    return json.dumps(walk(agent.model_dump(mode="json")), sort_keys=True)


def single_file_example(tmp_path: Path) -> Path:
    folder = tmp_path / "acme-support"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns(".holodeck", "results"))
    (folder / "agent.pipelines.yaml").unlink()
    shutil.copy(SINGLE_FILE, folder / "agent.yaml")
    return folder / "agent.yaml"


def test_the_example_agent_yaml_holds_holodecks_fields_only() -> None:
    text = (EXAMPLE / "agent.yaml").read_text(encoding="utf-8")
    assert find_extensions(yaml.safe_load(text)) == []
    assert ":-" not in text  # HoloDeck keeps ${VAR:-default} as literal text
    proc = holodeck("validate", "agent.yaml", cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stdout
    assert "sidecar:  " in proc.stdout and "agent.pipelines.yaml" in proc.stdout


@pytest.mark.skipif(not PEER.exists(), reason="HoloDeck 0.7.1 not installed (bench/peer_setup.sh)")
def test_holodeck_itself_loads_the_example_and_refused_the_single_file(tmp_path: Path) -> None:
    loaded = peer_loads(EXAMPLE / "agent.yaml")
    assert loaded.returncode == 0 and "loaded acme-support" in loaded.stdout, loaded.stderr
    refused = peer_loads(single_file_example(tmp_path))
    assert refused.returncode != 0


def test_validate_warns_once_per_field_and_fix_moves_them_out(tmp_path: Path) -> None:
    agent_file = single_file_example(tmp_path)
    before = load_agent(agent_file).agent
    warned = holodeck("validate", "agent.yaml", cwd=agent_file.parent)
    assert warned.returncode == 0, warned.stderr
    warnings = [line for line in warned.stdout.splitlines() if "warning:" in line]
    for label in ("instructions.variants", "evaluations.gate", "test_cases[].id"):
        assert sum(label in line for line in warnings) == 1, warnings
    assert sum("metric contains" in line for line in warnings) == 1
    assert all("agent.pipelines.yaml" in line for line in warnings)

    fixed = holodeck("validate", "--fix", "agent.yaml", cwd=agent_file.parent)
    assert fixed.returncode == 0, fixed.stderr
    assert "warning" not in fixed.stdout and "moved to agent.pipelines.yaml" in fixed.stdout
    text = agent_file.read_text(encoding="utf-8")
    assert find_extensions(yaml.safe_load(text)) == []
    assert "# --- orders and tools" in text and "&policy_accuracy" in text  # comments, anchors
    assert canonical(load_agent(agent_file).agent) == canonical(before)
    sidecar = yaml.safe_load((agent_file.parent / "agent.pipelines.yaml").read_text())
    assert sidecar == yaml.safe_load((EXAMPLE / "agent.pipelines.yaml").read_text())
    again = holodeck("validate", "--fix", "agent.yaml", cwd=agent_file.parent)
    assert again.returncode == 0 and "moved" not in again.stdout
    if PEER.exists():
        assert peer_loads(agent_file).returncode == 0


EVERY_EXTENSION = """\
# a corpus sample with every field of ours
name: tools-probe
model: {provider: openai, name: gpt-4o-mini}
instructions:
  file: prompt.md
  variants: [prompt-v2.md]   # ours
tools:
  - type: function
    name: get_weather
    description: Get the weather for a city
    file: tools/weather.py
    function: get_weather
    parameters:
      city: {type: string, description: City name}
    mock: {result: {temperature: 21}}
evaluations:
  metrics:
    - type: standard
      metric: equality
    - {type: standard, metric: cost, threshold: 0.5}
    - {type: standard, metric: rouge, variant: rougeL}
    - {type: geval, name: Tone, criteria: Polite., scale: 5}
  gate: {min_pass_rate: 0.5, max_errors: 1}
  regression: strict
  alpha: 0.01
  max_error_share: 0.4
execution:
  parallel_test_cases: 2
  trials: 3
  reducer: majority
  budget: {usd: 1.5}
test_cases:
  - id: weather-ok
    name: weather_ok
    input: "Weather in Paris?"
    ground_truth: "The capital of France is Paris."
    tags: [weather]
    metadata: {owner: qa}
    weight: 2
    evaluations:
      - {type: standard, metric: exact_match}
      - {type: standard, metric: json_valid}
  - name: two turns
    turns:
      - input: Hi
        evaluations:
          - {type: standard, metric: tool_correctness}
      - input: Weather in Rome?
        evaluations:
          - {type: standard, metric: equality}
          - {type: standard, metric: latency, threshold: 5000}
"""


def test_fix_on_a_corpus_sample_with_every_extension(tmp_path: Path) -> None:
    folder = tmp_path / "tool_calls"
    shutil.copytree(corpus_path("holodeck", "generated", "tool_calls"), folder)
    for name, version in (("prompt.md", "v1"), ("prompt-v2.md", "v2")):
        (folder / name).write_text(f"---\nversion: {version}\n---\nUse get_weather.\n")
    agent_file = folder / "agent.yaml"
    agent_file.write_text(EVERY_EXTENSION)
    before = load_agent(agent_file).agent
    found = {item.label for item in find_extensions(yaml.safe_load(EVERY_EXTENSION))}
    assert len(found) == 20, found

    fixed = holodeck("validate", "--fix", "agent.yaml", cwd=folder)
    assert fixed.returncode == 0, fixed.stderr
    text = agent_file.read_text()
    assert find_extensions(yaml.safe_load(text)) == []
    assert "# a corpus sample" in text and "parallel_test_cases: 2" in text
    assert canonical(load_agent(agent_file).agent) == canonical(before)
    if PEER.exists():
        (folder / ".env").write_text("OPENAI_API_KEY=sk-x\n")
        assert peer_loads(agent_file).returncode == 0, peer_loads(agent_file).stderr


@pytest.mark.parametrize(
    ("agent_text", "why"),
    [
        (  # a key of ours inside a flow mapping
            "execution: {trials: 3, parallel_test_cases: 2}\n",
            "flow",
        ),
        (  # an anchor that moves out while an alias to it stays
            "test_cases:\n  - name: a\n    input: hi\n    tags: &t [x]\n"
            "    retrieval_context: *t\n",
            "anchor &t",
        ),
        (  # a case of ours without a name: the sidecar keys cases by name
            "test_cases:\n  - id: a\n    input: hi\n",
            "needs a 'name'",
        ),
    ],
)
def test_fix_refuses_what_it_cannot_cut_safely_and_writes_nothing(
    tmp_path: Path, agent_text: str, why: str
) -> None:
    agent_file = tmp_path / "agent.yaml"
    text = (
        "name: a\nmodel: {provider: openai, name: m}\ninstructions: {inline: hi}\n"
        "evaluations:\n  metrics:\n    - {type: standard, metric: equality}\n" + agent_text
    )
    agent_file.write_text(text)
    proc = holodeck("validate", "--fix", "agent.yaml", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert why in proc.stderr and "agent.yaml" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert agent_file.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.yaml"]


def test_fix_refuses_when_a_sidecar_exists(tmp_path: Path) -> None:
    agent_file = single_file_example(tmp_path)
    (agent_file.parent / "agent.pipelines.yaml").write_text("execution: {trials: 2}\n")
    proc = holodeck("validate", "--fix", "agent.yaml", cwd=agent_file.parent)
    assert proc.returncode == 2 and "exists already" in proc.stderr
    assert agent_file.read_text() == SINGLE_FILE.read_text()


@pytest.mark.parametrize(
    ("sidecar", "where", "message"),
    [
        ("model: {name: x}\n", "agent.pipelines.yaml:1", "not a field of the sidecar"),
        ("test_cases:\n  Nobody: {tags: [x]}\n", "test_cases.Nobody", "named 'Nobody'"),
        ("instructions:\n  variants: [v.md]\n", "instructions.variants", "agent.yaml too"),
        (
            "test_cases:\n  Greeting:\n    evaluations:\n"
            "      - {type: standard, metric: regex, pattern: '(', threshold: 0.5}\n",
            "agent.pipelines.yaml:4",
            "regular expression",
        ),
    ],
)
def test_a_bad_sidecar_is_exit_2_naming_its_file_and_field(
    tmp_path: Path, sidecar: str, where: str, message: str
) -> None:
    agent_file = single_file_example(tmp_path)
    (agent_file.parent / "agent.pipelines.yaml").write_text(sidecar)
    proc = holodeck("validate", "agent.yaml", cwd=agent_file.parent)
    assert proc.returncode == 2, proc.stdout
    assert where in proc.stderr and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_holodeck_yaml_names_the_sidecar(tmp_path: Path) -> None:
    agent_file = single_file_example(tmp_path)
    folder = agent_file.parent
    assert holodeck("validate", "--fix", "agent.yaml", cwd=folder).returncode == 0
    (folder / "agent.pipelines.yaml").rename(folder / "ours.yaml")
    (tmp_path / "holodeck.yaml").write_text(
        "agents:\n  - {path: acme-support/agent.yaml, extensions: ours.yaml}\n"
    )
    named = holodeck("validate", "agent.yaml", cwd=folder)
    assert named.returncode == 0 and "ours.yaml" in named.stdout, named.stderr
    assert "prompt:   v1, v2" in named.stdout
    (folder / "ours.yaml").unlink()
    missing = holodeck("validate", "agent.yaml", cwd=folder)
    assert missing.returncode == 2 and "ours.yaml" in missing.stderr
