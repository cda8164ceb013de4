"""Where state lives (docs/cli.md) and the names derived from agents (docs/architecture.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holodeck_core.config.project import Project, results_dir
from holodeck_core.errors import ConfigError
from holodeck_core.naming import dagster_name, partitions_def_name, slugify


def test_project_root_is_the_nearest_folder_with_holodeck_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOLODECK_HOME")
    (tmp_path / "holodeck.yaml").write_text("agents: [a/agent.yaml]\nhistory_db: data/h.duckdb\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    project = Project.discover()
    assert project.root == tmp_path
    assert project.home == tmp_path / ".holodeck"
    assert project.history_db == tmp_path / "data" / "h.duckdb"  # holodeck.yaml setting
    assert project.prompts_dir == tmp_path / ".holodeck" / "prompts"
    assert project.journal_dir.name == "journal"
    assert project.agent_paths() == [tmp_path / "a" / "agent.yaml"]


def test_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOLODECK_HISTORY_DB", str(tmp_path / "elsewhere.duckdb"))
    monkeypatch.setenv("HOLODECK_AGENTS", os.pathsep.join(["x/agent.yaml", "/abs/agent.yaml"]))
    project = Project.discover(tmp_path)
    assert project.root == tmp_path  # no holodeck.yaml: the starting folder
    assert project.file_cache_dir == tmp_path / "state" / "cache" / "files"
    assert project.history_db == tmp_path / "elsewhere.duckdb"
    assert project.agent_paths() == [tmp_path / "x" / "agent.yaml", Path("/abs/agent.yaml")]


def test_bad_holodeck_yaml_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "holodeck.yaml").write_text("agents: [a]\nnightly: yes\n")
    with pytest.raises(ConfigError, match=r"holodeck\.yaml:2: nightly: unknown key"):
        Project.discover(tmp_path)


@pytest.mark.parametrize(
    ("name", "slug", "dagster"),
    [
        ("Customer Support!", "customer-support", "customer_support"),
        ("  ACME -- support v2 ", "acme-support-v2", "acme_support_v2"),
        ("financial_assistant", "financial-assistant", "financial_assistant"),
    ],
)
def test_slugs_and_dagster_names(name: str, slug: str, dagster: str) -> None:
    assert slugify(name) == slug
    assert dagster_name(name) == dagster
    assert partitions_def_name(name) == f"{dagster}_prompt_versions"


def test_results_go_beside_the_agent_file(tmp_path: Path) -> None:
    agent = tmp_path / "agents" / "a" / "agent.yaml"
    assert results_dir(agent, "My Agent") == tmp_path / "agents" / "a" / "results" / "my-agent"
