"""The pull-request gate: `holodeck test --baseline … --summary FILE`, GitHub Actions' job
summary and `::error` annotations, and examples/ci's script and pipelines, run locally (there
is no GitHub here): a main run, then a pull request that regresses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from holodeck_core.cli.main import main
from holodeck_core.history import store
from holodeck_core.history.queries import compare_runs
from holodeck_core.reports.github import error_annotations
from holodeck_core.reports.pr_summary import render_pr_summary
from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.history_helpers import CASES, day, ingest_runs, make_run
from tests.test_hardening_text import run_with
from tests.test_pipelines import RULES, make_project

CI = REPO / "examples" / "ci"
EXAMPLE = REPO / "examples" / "acme-support"
BIN = Path(sys.executable).parent


def test_the_gate_script_restores_runs_gates_and_leaves_the_history_to_upload(
    tmp_path: Path,
) -> None:
    artifact, reports, step = tmp_path / "ci-history", tmp_path / "ci-reports", tmp_path / "step.md"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLODECK_", "GITHUB_"))}
    with run_model_server(RULES) as server:
        # 8 cases: v2 answers them all ("Paris"), v1 none, so the paired test is significant
        project = make_project(tmp_path / "repo", server.openai_base_url, cases=8, gate=0.0)
        env |= {
            "AGENT": "agents/geo/agent.yaml",
            "HISTORY_ARTIFACT": str(artifact),
            "REPORTS": str(reports),
            "HOLODECK": str(BIN / "holodeck"),
        }

        def gate(version: str, **extra: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["bash", str(CI / "eval-gate.sh")],
                env={**env, "PROMPT_VERSION": version, **extra},
                cwd=project.root,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )

        main_run = gate("v2")  # on main: nothing restored, so no baseline
        assert main_run.returncode == 0, main_run.stderr
        assert "no history restored, so no baseline" in main_run.stdout
        assert (artifact / "history.duckdb").is_file()  # what the CI uploads
        pull_request = gate("v1", GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(step))
    assert pull_request.returncode == 1, pull_request.stderr  # the gate fails the job
    summary = (reports / "summary.md").read_text()
    assert summary.startswith("## ❌ Geo Agent · prompt v1: gate failed\n")
    assert "- pass rate: 0.0% (95% CI 0.0% to 40.2%" in summary
    assert "- baseline: prompt v2 · model default, run `" in summary
    assert "against this run's prompt v1 · model default: 8 shared cases" in summary
    assert "another model candidate" not in summary
    assert "- paired: Δ -100.0 pp (95% CI -100.0 to -100.0 pp), p = 0.00391" in summary
    assert "- **regression**: the pass fraction fell significantly" in summary
    assert "### Regressions (passed in the baseline) (8)" in summary
    assert "- cost: unknown (no price for this model)" in summary
    assert step.read_text() == summary  # the job summary is the same Markdown
    annotations = [line for line in pull_request.stdout.splitlines() if line.startswith("::")]
    assert len(annotations) == 8
    assert annotations[0] == (
        "::error file=agents/geo/agent.yaml,title=Geo Agent · c0 FAIL::below threshold: equality"
    )
    assert (reports / "junit.xml").is_file()
    with duckdb.connect(str(artifact / "history.duckdb"), read_only=True) as con:
        versions = con.execute("SELECT prompt_version FROM eval_runs ORDER BY finished_at")
        assert versions.fetchall() == [("v2",), ("v1",)]  # both runs go back into the artifact


def test_an_improvement_passes_and_an_unknown_baseline_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with run_model_server(RULES) as server:
        project = make_project(tmp_path, server.openai_base_url, cases=8, gate=0.0)
        agent = str(project.root / "agents" / "geo" / "agent.yaml")
        assert main(["prompts", "register", agent]) == 0
        assert main(["test", agent, "-q", "--prompt-version", "v1"]) == 0  # all FAIL; gate 0%
        summary = tmp_path / "summary.md"
        code = main(
            [
                "test",
                agent,
                "-q",
                "--prompt-version",
                "v2",
                "--baseline",
                "v1",
                "--summary",
                str(summary),
            ]
        )
        assert code == 0
        assert "p = 0.00391 (McNemar mid-p, n = 8)" in capsys.readouterr().out
        assert summary.read_text().startswith("## ✅ Geo Agent · prompt v2: gate passed\n")
        assert main(["test", agent, "-q", "--baseline", "v7"]) == 2
    err = capsys.readouterr().err
    assert (
        "--baseline v7: no run of prompt version 'v7' with this run's model candidate "
        "'default' and no run with that id"
    ) in err
    assert "Traceback" not in err


def test_annotations_escape_what_github_reads_as_syntax() -> None:
    run = run_with(", b: c")  # one ERROR case named "case , b: c", its error ", b: c"
    result = run.report.results[0].model_copy(update={"errors": ["100% down\nsecond line"]})
    run = run.model_copy(update={"report": run.report.model_copy(update={"results": [result]})})
    assert error_annotations(run, file="x.yaml") == [
        "::error file=x.yaml,title=agent %2C b%3A c · case %2C b%3A c ERROR::"
        "100%25 down%0Asecond line"
    ]


def test_both_pipelines_run_the_script_and_carry_its_artifact_paths() -> None:
    github = yaml.safe_load((CI / "github-actions.yml").read_text())
    steps = github["jobs"]["eval"]["steps"]
    runs = "\n".join(str(step.get("run", "")) for step in steps)
    assert "bash examples/ci/eval-gate.sh" in runs
    assert '--name holodeck-history --dir "$HISTORY_ARTIFACT"' in runs
    assert '--body-file "$REPORTS/summary.md"' in runs
    uploads = {
        s["with"]["name"]: s["with"]["path"]
        for s in steps
        if "upload-artifact" in s.get("uses", "")
    }
    assert uploads == {"holodeck-history": "ci-history/", "holodeck-reports": "ci-reports/"}
    assert (
        github["env"]["HISTORY_ARTIFACT"] == "ci-history"
        and github["env"]["REPORTS"] == "ci-reports"
    )
    gitlab = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["holodeck-eval"]
    assert "bash examples/ci/eval-gate.sh" in gitlab["script"]
    assert gitlab["artifacts"]["paths"] == ["ci-history/", "ci-reports/"]
    assert gitlab["artifacts"]["reports"]["junit"] == "ci-reports/junit.xml"
    assert gitlab["variables"]["HISTORY_ARTIFACT"] == "ci-history"
    rules = "examples/acme-support/model-rules.yaml"  # the example answers from the loopback
    assert github["env"]["MODEL_SERVER_RULES"] == gitlab["variables"]["MODEL_SERVER_RULES"] == rules
    assert "jobs/artifacts/$CI_DEFAULT_BRANCH/download?job=holodeck-eval" in gitlab["script"][0]


def test_the_summary_lists_new_failures_flaky_cases_and_the_cost_change(tmp_path: Path) -> None:
    """The PR comment's other sections (docs/dashboard.md): a case the baseline did not have
    that fails is a new failure, not a regression; a case whose status flipped before in the
    history with the same fingerprint is flaky; the cost is shown with its change."""
    db = tmp_path / "history.duckdb"
    grown = (*CASES, "new-case")
    runs = [
        make_run("PFPP", day(0), run_id="old-flip", cost=0.01),  # order-status flips ...
        make_run("PPPP", day(1), run_id="baseline", cost=0.01),  # ... and back: flaky
        make_run("PFPPF", day(2), run_id="pull-req", cost=0.02, cases=grown),
    ]
    ingest_runs(db, runs)
    with store.reader(db) as con:
        comparison = compare_runs(con, "baseline", "pull-req")
    summary = render_pr_summary(runs[-1], comparison, baseline="v1", passed_gate=False)
    assert summary.startswith("## ❌ support-bot · prompt v1: gate failed\n")
    assert "- cost: $0.0200, $0.00667 per passing case (+$0.0100 vs the baseline)" in summary
    assert (
        "- baseline: prompt v1 · model default, run `baseline`, against this run's prompt v1 · "
        "model default: 4 shared cases"
    ) in summary
    sections = {
        block.split("\n", 1)[0]: block.split("\n\n", 1)[1].strip().splitlines()
        for block in summary.split("\n### ")[1:]
    }
    assert sections == {
        "New failures (cases the baseline did not have) (1)": [
            "- `new-case` FAIL: below threshold"
        ],
        "Other failing cases (1)": ["- `order-status` FAIL: below threshold"],
        "Flaky (trials or runs disagree) (1)": ["- `order-status` FAIL: below threshold"],
    }


def test_the_pipelines_example_runs_on_the_loopback_server_the_script_starts(
    tmp_path: Path,
) -> None:
    """As both pipelines run it: the example's agent, MODEL_SERVER_RULES set, no server of
    ours running. The script starts the loopback server, the run reaches it (v1 fails the
    example's gate: exit 1, not 3) on a port of its own with no HOLODECK_MODEL_ENDPOINT set
    (the script sets it), and the server is stopped when the script ends."""
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root / "examples" / "acme-support",
                    ignore=shutil.ignore_patterns(".holodeck", "results"))  # fmt: skip
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLODECK_", "GITHUB_"))}
    env |= {
        "AGENT": "examples/acme-support/agent.yaml",
        "HISTORY_ARTIFACT": "ci-history",
        "REPORTS": "ci-reports",
        "HOLODECK": str(BIN / "holodeck"),
        "MODEL_SERVER_RULES": "examples/acme-support/model-rules.yaml",
        "MODEL_SERVER_PORT": str(port),  # the script points the agent at it
    }
    done = subprocess.run(["bash", str(CI / "eval-gate.sh")], env=env, cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    summary = (root / "ci-reports" / "summary.md").read_text()
    assert "17 passed, 8 failed, 0 errored** of 25" in summary
    assert (root / "ci-reports" / "model-server.log").is_file()
    with socket.socket() as again:  # stopped: the port is free again
        again.bind(("127.0.0.1", port))


def test_the_readme_runs_the_script_locally_with_the_venvs_command() -> None:
    """Outside CI, `holodeck` is not on PATH (the venv is not activated): the local command
    must name it, or the script exits 3 with `holodeck: command not found` (docs/dashboard.md)."""
    text = (CI / "README.md").read_text()
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "HOLODECK=.venv/bin/holodeck bash examples/ci/eval-gate.sh" in block
