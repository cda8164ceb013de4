"""Which embeddings model a retrieval tool uses, as HoloDeck 0.7.1 chooses it
(docs/holodeck-fidelity.md, ``lib/tool_initializer.py``; agent side, docs/holodeck-fidelity.md): the
agent's own endpoint, with the ``embedding_model`` the agent's retrieval tools share, else the
provider's default; ``embedding_provider`` only for an anthropic agent, and never its ``name``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.testing import ModelServer, run_model_server
from tests.test_retrieval import search_rule, tool_of, write_agent, write_docs


def _embeddings(server: ModelServer) -> list[dict[str, Any]]:
    return [r for r in server.requests() if r["route"] == "embeddings"]


def test_embedding_provider_is_not_used_by_an_openai_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path)
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        elsewhere = {"provider": "openai", "name": "big-embed", "endpoint": "http://127.0.0.1:9/v1"}
        agent = write_agent(
            tmp_path, server, [tool_of(source="docs")], embedding_provider=elsewhere
        )
        assert main(["validate", str(agent)]) == 0
        out = capsys.readouterr().out
        assert "embedding_provider is not used: the agent's provider is openai" in out
        assert "text-embedding-3-small at the agent's model endpoint" in out
        assert main(["test", str(agent)]) == 0, capsys.readouterr().err
        requests = _embeddings(server)  # the port-9 endpoint would refuse: never dialled
    assert len(requests) == 2  # the index and the query, at the agent's endpoint
    assert {r["body"]["model"] for r in requests} == {"text-embedding-3-small"}


def test_one_tools_embedding_model_is_every_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HoloDeck makes one embeddings service per agent: a model one tool names embeds the
    other tool's documents too."""
    write_docs(tmp_path)
    tools = [
        tool_of(source="docs", embedding_model="embed-large"),
        {**tool_of(source="docs"), "name": "kb2"},
    ]
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        agent = write_agent(tmp_path, server, tools)
        assert main(["test", str(agent)]) == 0, capsys.readouterr().err
        models = {r["body"]["model"] for r in _embeddings(server)}
    assert models == {"embed-large"}


def test_different_embedding_models_are_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path)
    tools = [
        tool_of(source="docs", embedding_model="embed-a"),
        {**tool_of(source="docs", embedding_model="embed-b"), "name": "kb2"},
    ]
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        agent = write_agent(tmp_path, server, tools)
        for command in ("validate", "test"):
            assert main([command, str(agent)]) == 2
            err = capsys.readouterr().err
            assert "kb=embed-a, kb2=embed-b" in err and "same embedding_model" in err, err
            assert "Traceback" not in err
        assert server.stats()["total_calls"] == 0
