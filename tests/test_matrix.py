"""``holodeck matrix AGENT`` (docs/cli.md): every prompt version x model candidate on the same
cases in one process, against the loopback model server, which plays the two candidates
differently (its rules match the request's model name): one table with each cell's pass rate,
its verdict against the baseline (paired, raw and Benjamini-Hochberg p) and the ties with the
best; the gate per cell decides the exit code; every cell's run is recorded; a killed matrix
resumes only what is unfinished; cells on one endpoint share its limit, cells on two do not."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.project import Project
from holodeck_core.history import store
from holodeck_core.history.backend import project_history
from holodeck_core.testing import run_model_server
from tests.hostile import run_cli

CASES = 20
WRONG = "1[3-9]|20"
"""Cases v1 with the small model gets wrong (8 of 20: 60% against 100% elsewhere)."""
RULES: dict[str, Any] = {
    "rules": [
        {"match": {"model": "mini", "system": "briefly", "user": rf"^question ({WRONG})$"},
         "reply": "No idea."},
        {"match": {"user": r"^question (\d+)"}, "reply": "Answer $1."},
    ]
}  # fmt: skip
AGENT = """\
name: grid
model:
  provider: openai
  name: gpt-4o-mini
  endpoint: "{url}"
  api_key: sk-test-key-1234
  temperature: 0.0
  max_tokens: 20
instructions: {{file: v1.md, variants: [v2.md]}}
evaluations:
  gate: {{min_pass_rate: 0.8}}
  metrics:
    - {{type: standard, metric: contains, pattern: Answer}}
test_cases:
{cases}"""


def write_project(
    folder: Path, url: str, large: str = "", cases: int = CASES, extra: str = ""
) -> Path:
    """The agent ``grid`` (v1, v2) with candidates ``mini`` (its own model) and ``large``."""
    (folder / "v1.md").write_text("---\nversion: v1\n---\nAnswer briefly.\n")
    (folder / "v2.md").write_text("---\nversion: v2\n---\nAnswer every question.\n")
    listed = "".join(f"  - {{id: c{i:02d}, input: 'question {i}'}}\n" for i in range(1, cases + 1))
    agent = folder / "agent.yaml"
    agent.write_text(AGENT.format(url=url, cases=listed) + extra)
    (folder / "holodeck.yaml").write_text(
        "agents:\n  - path: agent.yaml\n    models:\n      mini: {}\n"
        f"      large: {{name: gpt-4o{large}}}\n"
    )
    return agent


def table_rows(out: str) -> dict[str, list[str]]:
    """The console table's rows by ``prompt:model`` (rich's box characters split cells)."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line)[1:-1]]
        if len(cells) > 2 and cells[0] in ("v1", "v2"):
            rows[f"{cells[0]}:{cells[1]}"] = cells
    return rows


def test_a_two_by_two_matrix_prints_one_table_with_verdicts_ties_and_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url)
        report, summary = tmp_path / "matrix.json", tmp_path / "pr.md"
        code = main(["matrix", str(agent), "-o", str(report), "--summary", str(summary)])
        out = capsys.readouterr().out
        assert server.stats()["total_calls"] == 4 * CASES  # one process, every cell once
    assert code == 1, out  # v1 x mini passes 60% under a gate of 80%
    rows = table_rows(out)
    assert sorted(rows) == ["v1:large", "v1:mini", "v2:large", "v2:mini"], out
    assert rows["v1:mini"][2].startswith("60.0% (12/20)") and rows["v1:mini"][7] == "FAIL"
    assert rows["v1:mini"][8] == "baseline"
    for cell in ("v1:large", "v2:mini", "v2:large"):
        assert rows[cell][2].startswith("100.0% (20/20)") and rows[cell][7] == "pass"
        assert rows[cell][8] == "+40.0 pp improvement", rows[cell]
    assert "≈ tie" not in rows["v1:mini"][10] and "★" not in rows["v1:mini"][10]
    assert sum("★ best" in r[10] for r in rows.values()) == 1
    assert sum("≈ tie" in r[10] for r in rows.values()) == 2
    assert "Benjamini-Hochberg" in out

    table = json.loads(report.read_text())
    assert table["baseline"] == "v1:mini"
    by_ref = {f"{c['prompt']}:{c['model']}": c for c in table["cells"]}
    improved = by_ref["v2:mini"]["against_baseline"]
    # McNemar mid-p on 8 discordant cases, all one way; BH over the three cells' equal p's
    assert improved["discordant"] == [0, 8] and improved["p_value"] == pytest.approx(1 / 2**8)
    assert improved["p_adjusted"] == pytest.approx(improved["p_value"])
    assert improved["family_size"] == 3
    assert improved["verdict"] == "improvement"
    assert "| v1 | mini | 60\\.0% (12/20)" in summary.read_text()  # literal Markdown

    with store.reader(project_history(Project.discover(tmp_path))) as con:
        recorded = con.execute(
            "SELECT prompt_version, model_candidate, passed FROM eval_runs ORDER BY 1, 2"
        ).fetchall()
    assert recorded == [("v1", "large", 20), ("v1", "mini", 12), ("v2", "large", 20),
                        ("v2", "mini", 20)]  # fmt: skip
    assert len(list((tmp_path / "results" / "grid" / "holodeck-pipelines").glob("*.json"))) == 4


def test_cells_that_all_pass_exit_0_and_a_baseline_names_its_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, cases=4)
        argv = ["matrix", str(agent), "--prompts", "v2", "--baseline", "v2:large"]
        assert main([*argv, "--trials", "2"]) == 0
        assert server.stats()["total_calls"] == 2 * 4 * 2  # two cells, 4 cases, 2 trials each
        rows = table_rows(capsys.readouterr().out)
        assert sorted(rows) == ["v2:large", "v2:mini"] and rows["v2:large"][8] == "baseline"
        assert rows["v2:mini"][8] == "+0.0 pp no significant change"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--models", "mini,huge"], "--models 'huge': not a model candidate of this agent; "
         "choose from: mini, large"),
        (["--prompts", "v7"], "v7"),
        (["--baseline", "v2:huge"], "--baseline 'v2:huge' is not a cell of this matrix"),
        (["--trials", "0"], "--trials: must be at least 1, got 0"),
        (["--trials", "101"], "--trials: must be between 1 and"),
    ],
)  # fmt: skip
def test_an_unknown_candidate_prompt_or_baseline_is_exit_2_before_any_call(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, cases=2)
        ran = run_cli(["matrix", str(agent), *argv])
        assert ran.returncode == 2
        assert message in ran.stderr and "Traceback" not in ran.stderr, ran.stderr
        assert server.stats()["total_calls"] == 0


def test_cells_on_one_endpoint_share_its_limit_and_two_endpoints_have_their_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES, latency=0.15) as a, run_model_server(RULES, latency=0.15) as b:
        agent = write_project(tmp_path, a.openai_base_url, f', endpoint: "{b.openai_base_url}"',
                              cases=6)  # fmt: skip
        assert main(["matrix", str(agent), "--parallel", "2"]) == 0
        capsys.readouterr()
        # two cells per endpoint, each with 2 cases at once: the endpoint's limit holds them
        # to 2 calls at a time; the other endpoint's cells run at the same time all the same
        assert a.stats()["peak_concurrency"] == 2 and b.stats()["peak_concurrency"] == 2
        assert a.stats()["total_calls"] == b.stats()["total_calls"] == 2 * 6


def test_a_killed_matrix_resumes_only_its_unfinished_cells_and_cases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with run_model_server(RULES, latency=0.1) as server:
        agent = write_project(tmp_path, server.openai_base_url, cases=10)
        argv = ["matrix", str(agent), "--parallel", "2"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "holodeck_core.cli", *argv], env=env, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while server.stats()["total_calls"] < 16 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        first = server.stats()["total_calls"]
        assert 16 <= first < 40
        assert main(argv) == 0
        err = capsys.readouterr().err
        resumed = sum(int(n) for n in re.findall(r"resuming (\d+) of 10 case trials", err))
        # every case the killed run journaled comes back without a call; only the rest is paid
        assert resumed >= first - 2 * 4, err  # at most the calls in flight were lost
        assert server.stats()["total_calls"] - first == 40 - resumed


def test_the_agents_budget_covers_the_whole_matrix_not_each_cell(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each cell alone costs less than the budget, the two together more: the matrix stops
    within it (the unpaid cases ERROR, budget: exit 3)."""
    measured, budgeted = tmp_path / "measured", tmp_path / "budgeted"
    measured.mkdir(), budgeted.mkdir()
    with run_model_server(RULES) as server:
        agent = write_project(measured, server.openai_base_url, cases=40)
        assert main(["test", str(agent), "-q"]) == 0
        [run] = (measured / "results" / "grid" / "holodeck-pipelines").glob("*.json")
        cell = json.loads(run.read_text())["report"]["summary"]["cost"]["total_usd"]
        budget = f"execution: {{budget: {{usd: {cell * 1.5:.10f}}}}}\n"
        agent = write_project(budgeted, server.openai_base_url, cases=40, extra=budget)
        assert main(["test", str(agent), "-q", "--parallel", "1", "--fresh"]) == 0  # one cell fits
        capsys.readouterr()
        argv = ["matrix", str(agent), "--models", "mini", "--parallel", "1", "--fresh"]
        assert main([*argv, "-o", str(tmp_path / "m.json")]) == 3
        capsys.readouterr()
    table = json.loads((tmp_path / "m.json").read_text())
    assert sum(c["errored"] for c in table["cells"]) > 0
    spent = [json.loads(Path(c["eval_run"]).read_text())["report"]["summary"]["cost"]
             for c in table["cells"]]  # fmt: skip
    assert sum(s["total_usd"] for s in spent) <= cell * 1.5 + 1e-12


def test_a_cell_whose_endpoint_is_down_is_exit_3_and_names_from_configs_stay_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``large`` on a port nothing listens on: its cases ERROR, the matrix exits 3 and the other
    cells are whole; an agent named with markup, a terminal escape and a table pipe is printed
    as the characters it is, on the console and in the Markdown report."""
    with run_model_server(RULES) as server:
        agent = write_project(tmp_path, server.openai_base_url, ', endpoint: "http://127.0.0.1:9/v1"',
                              cases=2)  # fmt: skip
        hostile = "[bold red]grid[/] |x| \x1b[2J"
        agent.write_text(agent.read_text().replace("name: grid", f"name: {json.dumps(hostile)}"))
        report = tmp_path / "matrix.md"
        assert main(["matrix", str(agent), "--timeout", "2", "-o", str(report)]) == 3
        out = capsys.readouterr().out
    rows = table_rows(out)
    assert rows["v1:large"][3] == "2" and rows["v1:large"][7] == "error (exit 3)"
    assert rows["v2:mini"][2].startswith("100.0% (2/2)")
    assert "[bold red]grid[/] |x|" in out and "\x1b" not in out
    text = report.read_text()
    assert "\x1b" not in text and "[bold red]grid[/] \\|x\\|" in text.replace("\\[", "[").replace(
        "\\]", "]"
    )
