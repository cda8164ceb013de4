"""Hostile configs (docs/agent-yaml.md): YAML that expands without
bound, names that slug to nothing, to each other or to too long a file name, versions that
are no file names. Through the CLI, and through Dagster where a bad agent took the code
location down."""

from __future__ import annotations

import textwrap
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from holodeck_core.config.project import Project
from holodeck_core.naming import dagster_name, slugify
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import register
from tests.hostile import agent_yaml, no_traceback, run_cli

LAUGHS = (
    "name: bomb\n"
    + 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
)
BOMBS = {
    "billion-laughs": LAUGHS,
    "mapping-laughs": "name: bomb\n"
    + "k0: &k0 {a: x, b: x, c: x, d: x, e: x, f: x, g: x, h: x}\n"
    + "".join(
        f"k{i}: &k{i} {{a: *k{i - 1}, b: *k{i - 1}, c: *k{i - 1}, d: *k{i - 1}, "
        f"e: *k{i - 1}, f: *k{i - 1}, g: *k{i - 1}, h: *k{i - 1}}}\n"
        for i in range(1, 9)
    ),
    "recursive": "name: bomb\nloop: &loop [x, *loop]\n",
    "deep": "name: bomb\nx: " + "[" * 5000 + "]" * 5000 + "\n",
    "alias-chain": "name: bomb\nc0: &c0 [x]\n"
    + "".join(f"c{i}: &c{i} [*c{i - 1}]\n" for i in range(1, 400)),
    "big-string": "name: bomb\ns: &s '"
    + "x" * 2_000_000
    + "'\nl: ["
    + ",".join(["*s"] * 100)
    + "]\n",
}


@pytest.mark.parametrize("shape", sorted(BOMBS))
def test_yaml_bombs_are_config_errors_as_agent_file(tmp_path: Path, shape: str) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(BOMBS[shape])
    proc = run_cli(["validate", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "agent.yaml" in proc.stderr and ("alias" in proc.stderr or "deep" in proc.stderr)


@pytest.mark.parametrize("shape", ["billion-laughs", "recursive"])
def test_yaml_bombs_are_config_errors_as_test_cases_file(tmp_path: Path, shape: str) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(BOMBS[shape].replace("name: bomb\n", "cases_hint: x\n"))
    agent = agent_yaml(
        tmp_path, "http://127.0.0.1:9/v1", "[]\n", extra="test_cases_file: cases.yaml\n"
    )
    agent.write_text(agent.read_text().replace("test_cases:\n  []\n", ""))
    for command in (["validate", str(agent)], ["test", str(agent)]):
        proc = run_cli(command)
        no_traceback(proc)
        assert proc.returncode == 2 and "cases.yaml" in proc.stderr, proc.stderr


def test_anchors_and_merge_keys_within_bounds_still_load(tmp_path: Path) -> None:
    agent = agent_yaml(
        tmp_path,
        "http://127.0.0.1:9/v1",
        """\
        - &base {name: one, input: q1, ground_truth: a, tags: [x]}
        - {<<: *base, name: two, input: q2}
        """,
    )
    proc = run_cli(["validate", str(agent)])
    assert proc.returncode == 0 and "cases:    2" in proc.stdout, proc.stderr


@pytest.mark.parametrize("name", ["客服助手", "🤖", "...", "Ünïcødé agent", "x" * 300])
def test_every_name_gets_a_short_non_empty_slug_and_runs(tmp_path: Path, name: str) -> None:
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = agent_yaml(
            tmp_path, server.openai_base_url, "- {input: q, ground_truth: ok}\n", name=f'"{name}"'
        )
        proc = run_cli(["test", str(agent), "-q"])
    no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    [folder] = (tmp_path / "results").iterdir()
    assert folder.name == slugify(name) and 0 < len(folder.name) <= 64
    assert dagster_name(name).replace("_", "").isalnum()


def test_names_without_letters_get_different_slugs() -> None:
    slugs = {slugify(n) for n in ["🤖", "...", "🦾", "!!!", "x" * 300, "x" * 301]}
    assert len(slugs) == 6 and "" not in slugs


def colliding_project(root: Path, base_url: str) -> Project:
    for folder, name in (("a", "Foo Bar"), ("b", "foo-bar"), ("good", "Geo Agent")):
        agent_yaml(root / folder, base_url, "- {input: capital, ground_truth: Paris}\n", name=name)
    (root / "bomb").mkdir()
    (root / "bomb" / "agent.yaml").write_text(LAUGHS)
    (root / "holodeck.yaml").write_text(
        "agents: [a/agent.yaml, b/agent.yaml, good/agent.yaml, bomb/agent.yaml]\n"
    )
    return Project.discover(root)


def test_the_first_listed_agent_keeps_a_slug_and_the_later_one_is_refused(
    tmp_path: Path,
) -> None:
    colliding_project(tmp_path, "http://127.0.0.1:9/v1")
    proc = run_cli(["validate", str(tmp_path / "b" / "agent.yaml")])
    no_traceback(proc)
    assert proc.returncode == 2 and "'foo-bar'" in proc.stderr, proc.stderr
    message = " ".join(proc.stderr.split())
    assert str(tmp_path / "a" / "agent.yaml") in message
    assert f"give the agent in {tmp_path / 'b' / 'agent.yaml'} a name of its own" in message
    for kept in ("a", "good"):
        assert run_cli(["validate", str(tmp_path / kept / "agent.yaml")]).returncode == 0


def test_an_unlisted_agent_with_a_listed_agents_slug_is_refused(tmp_path: Path) -> None:
    colliding_project(tmp_path, "http://127.0.0.1:9/v1")
    url = "http://127.0.0.1:9/v1"
    copy = agent_yaml(tmp_path / "copy", url, "- {input: q}\n", name="Geo Agent")
    proc = run_cli(["validate", str(copy)])
    no_traceback(proc)
    assert proc.returncode == 2 and str(tmp_path / "good" / "agent.yaml") in proc.stderr


def test_bad_agents_do_not_take_the_other_definitions_down(tmp_path: Path) -> None:
    with run_model_server({"default": {"reply": "Paris"}}) as server:
        project = colliding_project(tmp_path, server.openai_base_url)
        defs = build_definitions(project)
        keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
        assert {k.split("/")[0] for k in keys} == {"foo_bar", "geo_agent"}
        skipped = defs.metadata["holodeck/skipped_agents"].value  # type: ignore[union-attr]
        assert isinstance(skipped, dict) and len(skipped) == 2
        assert str(tmp_path / "b" / "agent.yaml") in skipped
        assert any("alias" in reason for reason in skipped.values())
        with dg.instance_for_test() as instance:
            [key] = register(defs, instance)
            job = defs.resolve_job_def("Geo_agent_eval")
            result = job.execute_in_process(partition_key=f"default|{key}", instance=instance)
    assert result.success
    with duckdb.connect(str(project.history_db), read_only=True) as con:
        assert con.execute("SELECT agent_slug FROM eval_runs").fetchall() == [("geo-agent",)]


@pytest.mark.parametrize("version", ['"v1\\n"', '"v1 "', "x" * 300, '"../v1"', '"v1\\u0000"'])
def test_prompt_versions_must_be_file_names(tmp_path: Path, version: str) -> None:
    agent = agent_yaml(tmp_path, "http://127.0.0.1:9/v1", "- {input: q}\n")
    (tmp_path / "prompt.md").write_text(f"---\nversion: {version}\n---\nBe brief.\n")
    agent.write_text(
        agent.read_text().replace(
            'instructions: {inline: "You are helpful."}', "instructions: {file: prompt.md}"
        )
    )
    proc = run_cli(["validate", str(agent)])
    no_traceback(proc)
    assert proc.returncode == 2 and "prompt.md" in proc.stderr and "version" in proc.stderr


def test_a_version_of_64_characters_is_fine(tmp_path: Path) -> None:
    agent = agent_yaml(tmp_path, "http://127.0.0.1:9/v1", "- {input: q}\n")
    (tmp_path / "prompt.md").write_text(textwrap.dedent(f"---\nversion: {'v' * 64}\n---\nHi.\n"))
    agent.write_text(
        agent.read_text().replace(
            'instructions: {inline: "You are helpful."}', "instructions: {file: prompt.md}"
        )
    )
    assert run_cli(["validate", str(agent)]).returncode == 0
