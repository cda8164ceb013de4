"""A model candidate's requests are those of the agent.yaml that holds its merged model
(docs/agent-yaml.md, docs/holodeck-fidelity.md): the differential test's OpenAI and Azure samples
(``tests/holodeck_requests_samples.py``) run with ``--model`` against the loopback server, and
the same sample with the candidate's values written into its ``agent.yaml``.

Offline, ours against ours, always. Where HoloDeck 0.7.1 is installed (``bench/peer_setup.sh``,
or ``PEER_VENV``) the slow test runs HoloDeck on the merged agent.yaml too: the candidate adds
no difference to the ones ``docs/holodeck-fidelity.md`` lists for the sample."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from holodeck_core.cli.main import main
from holodeck_core.config.merge import deep_merge
from holodeck_core.testing import ModelServer, run_model_server
from holodeck_core.testing.request_log import differing_fields
from tests.conftest import REPO, corpus_path
from tests.holodeck_requests_samples import (
    load_fixture,
    our_command,
    prepare,
    recorded_set,
    rules,
    sample_env,
)
from tests.test_holodeck_requests import listed_differences

CANDIDATES: dict[str, dict[str, Any]] = {
    "samples/customer-support/openai": {
        "name": "gpt-4.1",
        "temperature": 0.9,
        "max_tokens": 512,
        "openai": {"effort": "low", "max_turns": 6},
    },
    "samples/customer-support/azure-openai": {
        "name": "gpt-4o-large-deployment",
        "temperature": 0.1,
        "max_tokens": 256,
        "api_version": "2024-10-21",
    },
}
PEER = Path(os.environ.get("PEER_VENV", REPO / "bench" / ".peer-venv")) / "bin" / "holodeck"


def _merged(doc: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """The agent document with ``block`` written into its model (and backend blocks) by hand."""
    out = copy.deepcopy(doc)
    out["model"].update({k: v for k, v in block.items() if k not in ("openai", "claude")})
    for key in ("openai", "claude"):
        if key in block:
            out[key] = out.get(key) or {}
            deep_merge(out[key], copy.deepcopy(block[key]))
    return out


def _copies(key: str, root: Path, url: str) -> tuple[Path, Path]:
    """The sample with a holodeck.yaml declaring candidate ``large``, and the sample whose
    agent.yaml holds the merged model (no holodeck.yaml)."""
    source = corpus_path("holodeck", key, "agent.yaml")
    declared = prepare(source, root / "declared", url)
    project = {"agents": [{"path": "agent.yaml", "models": {"large": CANDIDATES[key]}}]}
    (declared.parent / "holodeck.yaml").write_text(yaml.safe_dump(project))
    written = prepare(source, root / "written", url)
    doc = yaml.safe_load(written.read_text())
    written.write_text(yaml.safe_dump(_merged(doc, CANDIDATES[key]), sort_keys=False))
    return declared, written


def _ours(
    server: ModelServer, agent: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, dict[str, Any]]:
    server.reset()
    for name, value in sample_env(agent, server.url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HOLODECK_HOME", str(agent.parent / "home"))  # no cache between runs
    monkeypatch.chdir(agent.parent)
    code = main([*our_command(agent), *extra])
    return code, recorded_set(server.requests(), agent.parent)


@pytest.mark.parametrize("key", sorted(CANDIDATES))
def test_a_candidate_sends_what_its_merged_agent_yaml_sends(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = corpus_path("holodeck", key, "agent.yaml")
    with run_model_server(rules(key, source)) as server:
        declared, written = _copies(key, tmp_path, server.url)
        code, requests = _ours(server, declared, ["--model", "large"], monkeypatch)
        expected_code, expected = _ours(server, written, [], monkeypatch)
    assert requests["agent"], "the candidate's run sent no agent request"
    assert (code, requests) == (expected_code, expected), sorted(
        differing_fields(requests, expected)
    )
    own = load_fixture(key)["ours"]["requests"]  # the sample's own model, as recorded
    changed = {"agent.model", "agent.temperature", "agent.max_tokens"}
    assert changed <= differing_fields(requests, own)
    if "openai" in CANDIDATES[key]:  # the openai: block's effort, as HoloDeck sends it
        reasoning = [r["extra"].get("reasoning") for r in requests["agent"]]
        assert reasoning == [{"effort": "low", "summary": "auto"}] * len(reasoning)


@pytest.mark.slow
@pytest.mark.skipif(not PEER.is_file(), reason="HoloDeck 0.7.1 not installed (bench/peer_setup.sh)")
@pytest.mark.parametrize("key", sorted(CANDIDATES))
def test_holodeck_sends_for_the_merged_agent_yaml_what_the_candidate_sends(
    key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = corpus_path("holodeck", key, "agent.yaml")
    with run_model_server(rules(key, source)) as server:
        declared, written = _copies(key, tmp_path, server.url)
        _, ours = _ours(server, declared, ["--model", "large"], monkeypatch)
        server.reset()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("HOLODECK_")},
            **sample_env(written, server.url),
            "HOME": str(tmp_path / "home"),
            "OPENAI_BASE_URL": server.openai_base_url,  # its openai ignores `endpoint`
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # offline, as bench/holodeck_fidelity.py
            "HF_HUB_OFFLINE": "1",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        command = [str(PEER), "test", str(written), "--limit", str(our_command(written)[-1])]
        subprocess.run(command, cwd=written.parent, env=env, capture_output=True, timeout=900)
        theirs = recorded_set(server.requests(), written.parent)
    assert theirs["agent"], "HoloDeck sent no agent request"
    assert differing_fields(ours, theirs) == listed_differences().get(key, set())
