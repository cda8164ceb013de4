"""Hostile inputs reaching a Dagster materialization (docs/agent-yaml.md), on a real
Dagster instance: JSON records for retrieval 100,000 levels deep or with a 5,000-digit number,
and an embeddings provider answering NaN or infinity. The partition fails with the reason as
its step's headline (the file, the model), no traceback there, no secret, no model call; once
the input or the provider is fixed, the partition materializes and nothing bad was cached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from holodeck_core.config.project import Project
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import materialize, register
from tests.test_hardening_embeddings import DIRECT, Embeddings, embeddings, provider
from tests.test_retrieval import search_rule, tool_of, write_agent, write_docs

__all__ = ["embeddings"]  # the fixture, used by name below

KEY = "sk-test-key-1234"  # write_agent's api key: a canary in every output


def project(tmp_path: Path, server: Any, tools: list[dict[str, Any]], **extra: Any) -> Project:
    folder = tmp_path / "agents" / "geo"
    folder.mkdir(parents=True, exist_ok=True)
    agent = write_agent(folder, server, tools, **extra)
    agent.write_text(agent.read_text().replace("retrieval-test", "Geo Agent"))
    (tmp_path / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
    return Project.discover(tmp_path)


def headline_of(result: dg.ExecuteInProcessResult) -> str:
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__agent_responses"
    error = failure.step_failure_data.error
    assert error is not None
    headline = error.message.splitlines()[0]
    assert "Traceback" not in headline and "Error occurred while executing" not in headline
    assert KEY not in error.message
    return headline


RECORDS = {
    "levels-100000": "[" * 100_000 + "]" * 100_000,
    "int-5000": json.dumps([{"id": "r1", "text": "returns"}])[:-2] + ', "n": 1' + "0" * 5000 + "}]",
    "deep-record": json.dumps([{"id": "r1", "text": "returns", "meta": 0}]).replace(
        "0}", "[" * 300 + "]" * 300 + "}"
    ),
}


@pytest.mark.parametrize("shape", sorted(RECORDS))
def test_hostile_json_records_fail_the_partition_naming_the_file(
    tmp_path: Path, shape: str
) -> None:
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        tool = tool_of(source="docs/records.json", vector_field="text", id_field="id")
        docs = tmp_path / "agents" / "geo" / "docs"
        docs.mkdir(parents=True)
        (docs / "records.json").write_text(RECORDS[shape])  # changed after the code loaded
        defs = build_definitions(project(tmp_path, server, [tool]))
        with dg.instance_for_test() as instance:
            [key] = register(defs, instance)
            failed = materialize(defs, instance, key)
            assert not failed.success
            headline = headline_of(failed)
            assert "docs/records.json" in headline, headline
            assert server.stats()["total_calls"] == 0  # refused before any model call
            (docs / "records.json").write_text(json.dumps([{"id": "r1", "text": "returns"}]))
            assert materialize(defs, instance, key).success


@pytest.mark.parametrize("mode", ["nan", "inf"])
def test_poisoned_embeddings_fail_the_partition_and_are_never_cached(
    tmp_path: Path, embeddings: Embeddings, mode: str
) -> None:
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        tool = tool_of(source="docs/*.md", embedding_model="embed-m")
        claude = {"provider": "anthropic", "name": "claude", "endpoint": server.url}
        defs = build_definitions(  # embedding_provider: read for an anthropic agent only
            project(
                tmp_path,
                server,
                [tool],
                model=claude,
                embedding_provider=provider(embeddings.url),
                execution=DIRECT,
            )
        )
        write_docs(tmp_path / "agents" / "geo")
        with dg.instance_for_test() as instance:
            [key] = register(defs, instance)
            embeddings.mode = mode
            failed = materialize(defs, instance, key)
            assert not failed.success
            headline = headline_of(failed)
            assert "embed-m" in headline and "not finite" in headline, headline
            assert server.stats()["total_calls"] == 0
            embeddings.mode, embeddings.calls = "good", 0
            fixed = materialize(defs, instance, key)
    assert fixed.success
    assert embeddings.calls == 2  # the index and the query, afresh: nothing poisoned was kept
    [run_file] = sorted((tmp_path / "agents" / "geo" / "results").rglob("holodeck-pipelines/*"))
    [result] = json.loads(run_file.read_text())["report"]["results"]
    assert "nan" not in result["tool_invocations"][0]["result"].lower()
