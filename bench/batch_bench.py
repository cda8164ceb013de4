"""Batch mode against ordinary calls: one suite through ``holodeck test --batch off|on``.

    .venv/bin/python bench/batch_bench.py [--cases 200] [--latency 0.5] [--complete-after 3]
        [--repeat 1] [--timeout 900]

``--cases`` cases (every other one asks the weather: a call of the ``get_weather`` function
tool, then the agent's second turn; the rest one plain question) with a G-Eval judge, run by the
real CLI (a subprocess, a fresh ``HOLODECK_HOME`` and ``--fresh`` each time) against the
loopback model server: every ordinary call waits ``--latency`` seconds, every batch is answered
over ``--complete-after`` seconds (``batches.complete_after`` of its rules, docs/cost.md). The
modes run interleaved, ``off`` first. Per mode: wall time, the server's ordinary calls and
batched requests (``/_stats``), the agent's and the judge's calls (the EvalRun's cost headings),
batches submitted, the EvalRun's cost and ``batch_usd``, and whether every case's verdict
equals the ``off`` run's. The judge fails the cases whose answer names Lyon, so both verdicts
occur. The last line holds the ratios (batch / off: below 1 means batch mode takes less).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common as c

MODES = ("off", "on")
CITIES = ("Oslo", "Lyon", "Porto", "Turin", "Ghent")
TOOLS_PY = "def get_weather(city: str) -> str:\n    return f'sunny in {city}'\n"

# Agent turns, the tool's follow-up and the judge's two prompts (G-Eval's steps, its score).
RULES: dict[str, Any] = {
    "rules": [
        {
            "name": "judge-steps",
            "match": {"user": "Task: write G-Eval evaluation steps"},
            "json": {"steps": ["Read the answer.", "Check it answers the question."]},
        },
        {
            "name": "judge-fail",
            "match": {"user": r"Task: score a test case[\s\S]*Lyon"},
            "json": {"score": 2, "reason": "not Lyon"},
        },
        {
            "name": "judge-score",
            "match": {"user": "Task: score a test case"},
            "json": {"score": 8, "reason": "fine"},
        },
        {
            "name": "weather",
            "match": {"user": r"weather in (\w+)"},
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "$1"}}],
            "reply": "It is {tool_result}.",
        },
        {"name": "question", "match": {"user": r"^question (\d+)"}, "reply": "Answer $1: Paris."},
    ],
}


@dataclass
class Mode:
    name: str
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # client CPU seconds (user + system)
    runs: list[dict[str, Any]] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="N test cases (default 200)")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per ordinary call")
    parser.add_argument(
        "--complete-after", type=float, default=3.0, help="seconds until a batch is answered"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode (median)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    args = parser.parse_args(argv)
    if args.cases < 2 or args.repeat < 1 or args.latency < 0 or args.complete_after < 0:
        parser.error("--cases >= 2, --repeat >= 1, --latency and --complete-after >= 0")
    return args


def case_line(i: int) -> str:
    if i % 2 == 0:
        city = CITIES[(i // 2) % len(CITIES)]
        return f"  - {{name: 'case {i:04d}', input: 'weather in {city}?'}}\n"
    return f"  - {{name: 'case {i:04d}', input: 'question {i}'}}\n"


def write_agent(folder: Path, n_cases: int) -> Path:
    """The suite: a function tool, a G-Eval judge on the agent's own model (the bench server)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    model = (
        f"{{provider: openai, name: gpt-4o-mini, endpoint: '${{{c.ENDPOINT_VAR}}}', "
        f"api_key: {c.OFFLINE_KEY}, max_tokens: 60}}"
    )
    text = (
        "name: batch-bench\n"
        f"model: {model}\n"
        "instructions: {inline: 'Answer briefly.'}\n"
        "tools:\n"
        "  - {type: function, name: get_weather, description: Weather of a city,\n"
        "     file: tools.py, function: get_weather}\n"
        "evaluations:\n"
        f"  model: {model}\n"
        "  metrics: [{type: geval, name: Helpful, criteria: 'Does it answer the question?'}]\n"
        "test_cases:\n" + "".join(case_line(i) for i in range(n_cases))
    )
    agent = folder / "agent.yaml"
    agent.write_text(text, encoding="utf-8")
    return agent


def newest_run(agent_dir: Path) -> dict[str, Any] | None:
    """The newest EvalRun under ``results/<agent>/holodeck-pipelines/`` (beside it: the
    HoloDeck export, which has no cost headings)."""
    found = (agent_dir / "results").glob("*/holodeck-pipelines/*.json")
    files = sorted(found, key=lambda p: p.stat().st_mtime)
    if not files:
        return None
    data: dict[str, Any] = json.loads(files[-1].read_text(encoding="utf-8"))
    return data


def run_mode(
    mode: Mode, server: c.ModelServer, work: Path, args: argparse.Namespace, rep: int
) -> None:
    folder = work / f"{mode.name}-{rep}"
    agent = write_agent(folder, args.cases)
    server.reset()
    cmd = [str(c.our_holodeck()), "test", str(agent), "--fresh", "-q", "--batch", mode.name]
    env = c.our_env(folder / "home", server.openai_base_url)
    timed = c.run_timed(cmd, env=env, cwd=folder, timeout=args.timeout)
    stats = server.stats()
    run = newest_run(folder)
    problem = ""
    if timed.timed_out:
        problem = f"timed out after {args.timeout:g} s"
    elif timed.returncode not in (0, 1):  # 1: a case failed (the judge fails the Lyon ones)
        problem = f"exit code {timed.returncode}"
    elif run is None:
        problem = "no EvalRun written"
    if problem or run is None:
        mode.failures.append(problem)
        print(f"  {mode.name} run {rep + 1}: FAILED ({problem})\n{timed.tail()}", flush=True)
        return
    mode.walls.append(timed.wall)
    mode.cpus.append(timed.cpu)
    mode.runs.append(run)
    mode.stats.append(stats)
    print(
        f"  batch {mode.name:<3} run {rep + 1}: {timed.wall:6.2f} s, CPU {timed.cpu:.2f} s, "
        f"load {c.load1():.2f}, exit {timed.returncode}",
        flush=True,
    )


def verdicts(run: dict[str, Any]) -> dict[str, str]:
    results = run["report"]["results"]
    return {str(r.get("test_name")): str(r.get("status")) for r in results}  # PASS/FAIL/ERROR


def headings(run: dict[str, Any]) -> dict[str, Any]:
    cost = run["report"]["summary"].get("cost") or {}
    found: dict[str, Any] = cost.get("headings", {})
    return found


def run_usd(run: dict[str, Any]) -> tuple[float | None, float | None]:
    """The run's cost and what its batched calls cost (None: unknown / nothing batched)."""
    batch = [h["batch_usd"] for h in headings(run).values() if h.get("batch_usd") is not None]
    usd: float | None = run["report"]["summary"].get("cost_usd")
    return usd, (sum(batch) if batch else None)


def calls(heads: dict[str, Any], heading: str) -> int:
    return int(heads.get(heading, {}).get("calls", 0))


def all_equal(mode: Mode, reference: dict[str, str]) -> bool:
    """Every run of ``mode`` gave each case the verdict it had in the first ``off`` run."""
    return bool(mode.runs) and all(verdicts(run) == reference for run in mode.runs)


def row(mode: Mode, reference: dict[str, str] | None) -> str:
    run, stats = mode.runs[-1], mode.stats[-1]
    heads = headings(run)
    batches = stats.get("batches", {})
    usd, batch_usd = run_usd(run)
    outcome = verdicts(run)
    fails = sum(1 for v in outcome.values() if v != "PASS")
    same = "n/a" if reference is None else ("yes" if all_equal(mode, reference) else "NO")
    return (
        f"| {mode.name} | {c.median(mode.walls):.2f} s {c.runs_text(mode.walls)} "
        f"| {c.median(mode.cpus):.2f} s | {calls(heads, 'agent')} / {calls(heads, 'judge')} "
        f"| {stats.get('total_calls', 0)} | {batches.get('requests', {}).get('submitted', 0)} "
        f"| {batches.get('submitted', 0)} | ${c.fmt(usd, 6)} | ${c.fmt(batch_usd, 6)} "
        f"| {len(outcome) - fails} / {fails} | {same} |"
    )


def report(modes: dict[str, Mode], args: argparse.Namespace) -> int:
    print(
        f"\n{args.cases} cases, ordinary call {args.latency:g} s, batch answered over "
        f"{args.complete_after:g} s, load {c.load1():.2f}"
    )
    print(
        "| batch | wall (runs) | client CPU | agent / judge calls | ordinary calls "
        "| batched requests | batches | cost | batch_usd | pass / fail | verdicts as off |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    off, on = modes["off"], modes["on"]
    reference = verdicts(off.runs[0]) if off.runs else None
    for mode in (off, on):
        if mode.runs:
            print(row(mode, None if mode is off else reference))
    same = reference is not None and all_equal(off, reference) and all_equal(on, reference)
    off_usd = run_usd(off.runs[-1])[0] if off.runs else None
    on_usd = run_usd(on.runs[-1])[0] if on.runs else None
    wall = c.ratio(c.median(on.walls), c.median(off.walls))
    print(c.ratio_line([("batch/off wall", wall), ("cost", c.ratio(on_usd, off_usd))]))
    failed = off.failures or on.failures or not same
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(c.machine_line(), flush=True)
    modes = {name: Mode(name) for name in MODES}
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        work = Path(tmp)
        rules = {**RULES, "batches": {"complete_after": args.complete_after}}
        (work / "rules.json").write_text(json.dumps(rules), encoding="utf-8")
        with c.ModelServer(work / "rules.json", args.latency, log=work / "server.log") as server:
            for rep in range(args.repeat):
                for name in MODES:
                    run_mode(modes[name], server, work, args, rep)
    return report(modes, args)


if __name__ == "__main__":
    sys.exit(main())
