"""Adding an agent as a person does: ``holodeck agents add`` copies one under a name of its own,
lists it in holodeck.yaml without touching the rest of the file, registers its prompt versions
and partitions, and the new agent then runs from Dagster into the history and the dashboard."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from holodeck_core.engine.add_agent import append_agent, rename_agent
from holodeck_core.errors import ConfigError
from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.dashboard_harness import free_port, running
from tests.test_pipelines import make_project
from tests.test_readme import bash_blocks, fresh_checkout, user_env

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("text", "listed"),
    [
        (
            "# agents we run\nagents:\n  - a/agent.yaml   # the first\n  # - off/agent.yaml\n"
            "nightly_cron: '0 3 * * *'\n",
            ["a/agent.yaml"],
        ),
        ("agents: [a/agent.yaml, 'b c/agent.yaml']  # flow\nllm_api_pool_limit: 2\n", None),
        ("agents: []\n", []),
        ("nightly_cron: '0 3 * * *'", []),
        ("agents:\nnightly_cron: '0 3 * * *'\n", []),
        ("agents:\n    - path: a/agent.yaml\n      target: {kind: http, url: 'http://x'}\n", None),
        ("", []),
    ],
    ids=["block", "flow", "empty-flow", "no-key", "null", "entries", "empty-file"],
)
def test_an_agent_is_appended_and_the_rest_of_holodeck_yaml_is_kept(
    tmp_path: Path, text: str, listed: list[str] | None
) -> None:
    (tmp_path / "holodeck.yaml").write_text(text)
    before = (yaml.safe_load(text) or {}).get("agents") or []
    append_agent(tmp_path, "new agent/agent.yaml")
    after = (tmp_path / "holodeck.yaml").read_text()
    data = yaml.safe_load(after)
    assert data["agents"] == [*before, "new agent/agent.yaml"]
    assert {k: v for k, v in data.items() if k != "agents"} == {
        k: v for k, v in (yaml.safe_load(text) or {}).items() if k != "agents"
    }
    for comment in re.findall(r"#.*", text):
        assert comment in after
    if listed is not None:
        assert before == listed


@pytest.mark.parametrize("text", ["agents: ~\n", "agents: {a: 1}\n", "agents: a/agent.yaml\n"])
def test_a_list_that_cannot_be_extended_in_place_is_refused_and_left_alone(
    tmp_path: Path, text: str
) -> None:
    (tmp_path / "holodeck.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"add the line `- new/agent.yaml` under agents"):
        append_agent(tmp_path, "new/agent.yaml")
    assert (tmp_path / "holodeck.yaml").read_text() == text


@pytest.mark.parametrize("name", ["Billing Agent", "Ünïcødé: agent", "it's #1", "yes"])
def test_a_copy_is_renamed_in_place(tmp_path: Path, name: str) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text("# mine\nname: old  # the name\nmodel: {provider: openai, name: m}\n")
    rename_agent(agent, name)
    text = agent.read_text()
    assert yaml.safe_load(text)["name"] == name
    assert "# mine" in text and "# the name" in text


def cli(args: list[str], root: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    return subprocess.run(
        [str(BIN / "holodeck"), *args], cwd=root, env=env, capture_output=True, text=True
    )


def test_a_copied_agent_runs_from_dagster_into_the_history_and_dashboard(tmp_path: Path) -> None:
    home = tmp_path / "dagster-home"
    home.mkdir()
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        project = make_project(tmp_path, server.openai_base_url, cases=2)
        (project.root / "agents" / "geo" / "results").mkdir()
        assert cli(["pools"], project.root, home).returncode == 0
        added = cli(
            ["agents", "add", "agents/billing/agent.yaml", "--from", "agents/geo/agent.yaml",
             "--name", "Billing Agent"],
            project.root,
            home,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        assert "'Billing Agent' (slug billing-agent, Dagster group billing_agent)" in added.stdout
        assert (
            "billing_agent: prompt versions v1, v2 x models default (2 cells); added v1, v2"
            in added.stdout
        )
        assert not (project.root / "agents" / "billing" / "results").exists()
        assert yaml.safe_load((project.root / "holodeck.yaml").read_text())["agents"] == [
            "agents/geo/agent.yaml",
            "agents/billing/agent.yaml",
        ]
        [command] = [line for line in added.stdout.splitlines() if "asset materialize" in line]
        materialize = subprocess.run(
            shlex.split(command.strip())[1:],
            cwd=project.root,
            env={**os.environ, "DAGSTER_HOME": str(home)},
            capture_output=True,
            text=True,
        )
        assert materialize.returncode == 0, materialize.stderr[-3000:]
    runs = cli(["history", "runs"], project.root, home)
    assert "billing-agent" in runs.stdout, runs.stdout
    with (
        (tmp_path / "dashboard.log").open("w") as log,
        running(project.history_db, log) as url,
        urllib.request.urlopen(f"{url}/runs.csv", timeout=30) as response,
    ):
        assert "Billing Agent" in response.read().decode()


def test_a_copy_that_cannot_join_leaves_nothing_behind(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    before = (project.root / "holodeck.yaml").read_text()
    home = tmp_path / "dagster-home"
    for extra, message in (
        ([], "a copy needs a name of its own: give --name"),
        (["--name", "geo agent"], "give the agent in"),
    ):
        proc = cli(
            ["agents", "add", "agents/copy/agent.yaml", "--from", "agents/geo/agent.yaml", *extra],
            project.root,
            home,
        )
        assert proc.returncode == 2 and message in " ".join(proc.stderr.split()), proc.stderr
        assert "Traceback" not in proc.stderr
        assert not (project.root / "agents" / "copy").exists()
        assert (project.root / "holodeck.yaml").read_text() == before


def test_a_listed_agent_is_not_listed_twice(tmp_path: Path) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1")
    before = (project.root / "holodeck.yaml").read_text()
    home = tmp_path / "home"
    missing = cli(["agents", "add", "agents/geo/agent.yaml"], project.root, home)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert f"DAGSTER_HOME={home} is not a folder: create it (mkdir -p {home})" in missing.stderr
    home.mkdir()
    proc = cli(["agents", "add", "agents/geo/agent.yaml"], project.root, home)
    assert proc.returncode == 0, proc.stderr
    assert "already in holodeck.yaml" in proc.stdout
    assert (project.root / "holodeck.yaml").read_text() == before


def test_the_documented_command_adds_a_copy_of_the_example(tmp_path: Path) -> None:
    """docs/dagster.md's "Add an agent" block, as written, in a fresh checkout."""
    root = fresh_checkout(tmp_path)
    [block] = bash_blocks(REPO / "docs" / "dagster.md", "## Add an agent")
    proc = subprocess.run(
        ["bash", "-c", block.replace(".venv/bin/", f"{BIN}/")],
        cwd=root,
        env=user_env(free_port()),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "acme_billing: prompt versions v1, v2 x models default (2 cells); added v1, v2"
        in proc.stdout
    )
    agents = yaml.safe_load((root / "holodeck.yaml").read_text())["agents"]
    [example] = yaml.safe_load((REPO / "holodeck.yaml").read_text())["agents"]  # as it was
    assert agents == [example, "agents/billing/agent.yaml"]
    assert (root / "agents" / "billing" / "agent.pipelines.yaml").is_file()  # its v2, its gate
    assert "Traceback" not in proc.stderr
