"""What a Dagster process reuses: one ``load_agent`` per unchanged config (definitions, the
sensor and every step of a run share it), and a reload as soon as anything it was read from
changes (the agent file, its prompt and cases files, ``.env``, ``holodeck.yaml``, the
environment)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from holodeck_core.config import cached
from holodeck_core.config.loader import LoadedAgent
from holodeck_core.testing import run_model_server
from holodeck_pipelines.builder import build_definitions
from tests.dagster_helpers import materialize, register
from tests.test_pipelines import RULES, make_project


def age(root: Path, seconds_ago: float = 3600) -> None:
    """Every file under ``root`` written ``seconds_ago`` (a config nobody is editing)."""
    moment = time.time() - seconds_ago
    for path in [root, *root.rglob("*")]:
        os.utime(path, (moment, moment))


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The paths ``load_agent`` really parsed (the cache starts empty)."""
    calls: list[Path] = []
    original = cached.load_agent

    def counting(path: str | Path, model: str | None = None) -> LoadedAgent:
        calls.append(Path(path))
        return original(path, model=model)

    monkeypatch.setattr(cached, "load_agent", counting)
    monkeypatch.setattr(cached, "_entries", {})
    yield calls


def test_one_run_parses_the_agent_once_and_the_next_sees_an_edit(
    tmp_path: Path, loads: list[Path]
) -> None:
    with run_model_server(RULES) as server, dg.instance_for_test() as instance:
        project = make_project(tmp_path / "p", server.openai_base_url, cases=2)
        age(tmp_path / "p")
        defs = build_definitions(project)
        register(defs, instance)
        assert materialize(defs, instance, "v2").success
        assert len(loads) == 1  # definitions; the sensor and all five steps reused it

        agent_file = project.agent_paths()[0]
        text = agent_file.read_text()
        agent_file.write_text(
            text + "  - {name: c9, input: 'capital of France (9)?', ground_truth: Paris}\n"
        )
        result = materialize(defs, instance, "v2")
        assert result.success
        report = result.output_for_node("geo_agent__report_summary")["default|v2"]
        assert report.eval_run.report.summary.total_tests == 3
        assert len(loads) > 1


def api_key(loaded: LoadedAgent) -> str | None:
    key = loaded.agent.model.api_key
    return key.get_secret_value() if key else None


@pytest.mark.parametrize(
    "change",
    ["agent.yaml", "prompt file", "cases file", ".env", "environment", "holodeck.yaml"],
)
def test_a_changed_source_is_reloaded(
    tmp_path: Path, loads: list[Path], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    project = make_project(tmp_path, "http://127.0.0.1:9/v1", cases=1)
    agent = project.agent_paths()[0]
    text = agent.read_text().replace("api_key: sk-test-123456", "api_key: '${GEO_KEY}'")
    inline = text[text.index("test_cases:\n") + len("test_cases:\n") :]
    agent.write_text(text[: text.index("test_cases:\n")] + "test_cases_file: cases.yaml\n")
    (agent.parent / "cases.yaml").write_text(
        textwrap.dedent(inline) + "- {name: f1, input: 'capital?'}\n"
    )
    (agent.parent / ".env").write_text("GEO_KEY=sk-from-dotenv-1\n")
    monkeypatch.delenv("GEO_KEY", raising=False)
    age(tmp_path)
    first = cached.loaded_agent(agent)
    assert cached.loaded_agent(agent) is first and len(loads) == 1

    prompt, cases, dotenv = (
        agent.parent / "prompts" / "v1.md",
        agent.parent / "cases.yaml",
        agent.parent / ".env",
    )
    edits: dict[str, tuple[Path | None, str]] = {
        "agent.yaml": (agent, agent.read_text().replace("name: Geo Agent", "name: Geo")),
        "prompt file": (prompt, "---\nversion: v1b\n---\nAnswer very briefly.\n"),
        "cases file": (cases, cases.read_text() + "- {name: f2, input: 'river?'}\n"),
        ".env": (dotenv, "GEO_KEY=sk-from-dotenv-2\n"),
        "environment": (None, ""),
        "holodeck.yaml": (
            tmp_path / "holodeck.yaml",
            "agents: [agents/geo/agent.yaml]\nnightly_cron: '0 3 * * *'\n",
        ),
    }
    changed, text = edits[change]
    if changed is None:
        monkeypatch.setenv("GEO_KEY", "sk-from-environ-3")
    else:
        changed.write_text(text)
        moment = time.time() - 60  # changed, yet no longer fresh: only the stamp can tell
        os.utime(changed, (moment, moment))
    second = cached.loaded_agent(agent)
    assert second is not first and len(loads) == 2
    assert cached.loaded_agent(agent) is second
    seen = {
        "agent.yaml": second.agent.name == "Geo",
        "prompt file": second.prompt.version.version == "v1b",
        "cases file": len(second.agent.cases) == len(first.agent.cases) + 1,
        ".env": api_key(second) == "sk-from-dotenv-2",
        "environment": api_key(second) == "sk-from-environ-3",
        "holodeck.yaml": True,  # nothing of it is in the agent; reloading is what counts
    }
    assert seen[change]


def test_a_config_written_just_now_is_not_kept(tmp_path: Path, loads: list[Path]) -> None:
    """A file still being edited (its mtime within a second of the load) may have changed
    after it was read: every call loads it again until it has settled."""
    project = make_project(tmp_path, "http://127.0.0.1:9/v1", cases=1)
    age(tmp_path)
    agent = project.agent_paths()[0]
    agent.write_text(agent.read_text().replace("name: Geo Agent", "name: Geo"))
    cached.loaded_agent(agent)
    cached.loaded_agent(agent)
    assert len(loads) == 2


HEAVY = ("openai", "anthropic", "duckdb", "pyarrow", "scipy")

LIGHT_STEPS = """\
import sys

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_pipelines.automation import register_versions
from holodeck_pipelines.builder import build_definitions, build_pipelines
from holodeck_pipelines.pools import apply_pools
from holodeck_pipelines.resources import HoloDeckProject

heavy = {HEAVY!r}
project = Project.discover()
defs = build_definitions(project)
loaded = sorted(name for name in heavy if name in sys.modules)
[pipeline] = build_pipelines(project)
_, keys = register_versions(pipeline.agent_file, HoloDeckProject(root=str(project.root)))
with dg.instance_for_test() as instance:
    instance.add_dynamic_partitions(pipeline.partitions.name, keys)
    apply_pools(instance, project)
    job = defs.resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        partition_key=f"default|{keys[0]}",
        instance=instance,
        asset_selection=[dg.AssetKey(["geo_agent", "processed_files"])],
    )
assert result.success
print("definitions:", ",".join(loaded))
print("processed_files:", ",".join(sorted(name for name in heavy if name in sys.modules)))
"""


def test_definitions_and_a_step_that_calls_no_model_import_no_sdk_nor_history_writer(
    tmp_path: Path,
) -> None:
    """The code server, the sensor and ``processed_files`` never pay for a model SDK, the
    history writer (duckdb, pyarrow) or scipy: only the steps that use them import them."""
    make_project(tmp_path, "http://127.0.0.1:9/v1", cases=1)
    script = tmp_path / "light.py"
    script.write_text(LIGHT_STEPS.replace("{HEAVY!r}", repr(HEAVY)))
    env = {**os.environ, "HOLODECK_PROJECT_ROOT": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "definitions: \n" in proc.stdout and "processed_files: \n" in proc.stdout, proc.stdout
