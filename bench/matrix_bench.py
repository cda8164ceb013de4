"""Matrix: 2 prompt versions x 3 candidates, each candidate on its own loopback server, against
the busiest endpoint alone.

    .venv/bin/python bench/matrix_bench.py [--cases 200] [--latency 0.5] [--parallel 20]
        [--repeat 3]

The project (a temp folder): an agent with N single-turn cases and two prompt versions
(``v1``, ``v2``), and in holodeck.yaml three model candidates (``mini``, ``large``, ``huge``),
each with the ``endpoint`` of its own ``holodeck model-server`` at latency L. ``holodeck matrix
--fresh --parallel C`` (a subprocess each, spawn to exit) runs the six cells: every endpoint
serves 2N calls at C at once (docs/cli.md: one limit per endpoint). Interleaved with it,
*busiest alone* is ``holodeck matrix --models mini``: the same 2N calls on one endpoint at C,
what the matrix cannot beat. The ideal is ``ceil(2N / C) * L``. Medians of ``--repeat`` runs;
each run must make exactly 2N calls on each server it uses. The last line holds the ratios
(the target: ``matrix/busiest`` <= 1.15).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import common as c

PROMPTS = ("v1", "v2")
# name -> the candidate's model name; the first is the agent's own model (an empty block, its
# endpoint from $HOLODECK_BENCH_ENDPOINT: docs/agent-yaml.md)
CANDIDATES = {"mini": "", "large": "gpt-4o", "huge": "gpt-4.1"}
BUSIEST = "mini"  # every endpoint serves the same calls; the first stands for them


@dataclass
class Config:
    label: str
    models: tuple[str, ...]
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="N test cases (default 200)")
    parser.add_argument("--latency", type=float, default=0.5, help="model latency L in seconds")
    parser.add_argument("--parallel", type=int, default=c.EQUAL_CONCURRENCY, help="C per endpoint")
    parser.add_argument("--repeat", type=int, default=3, help="runs per config (median)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run at most")
    args = parser.parse_args(argv)
    if args.cases < 1 or args.latency < 0 or args.parallel < 1 or args.repeat < 1:
        parser.error("--cases, --parallel and --repeat must be >= 1 and --latency >= 0")
    return args


def write_project(folder: Path, n_cases: int, endpoints: dict[str, str]) -> Path:
    """``bench/common.py``'s agent with two prompt versions; its candidates in holodeck.yaml."""
    agent = c.write_agent(folder, n_cases)
    for version in PROMPTS:
        text = f"---\nversion: {version}\n---\n{c.SYSTEM_PROMPT}"
        (folder / f"{version}.md").write_text(text, encoding="utf-8")
    single = "  file: instructions/system-prompt.md\n"
    text = agent.read_text(encoding="utf-8")
    if single not in text:
        raise SystemExit("bench/common.py's agent changed: no instructions file line")
    variants = ", ".join(f"{v}.md" for v in PROMPTS[1:])
    agent.write_text(text.replace(single, f"  file: v1.md\n  variants: [{variants}]\n"))
    lines = ["agents:", "  - path: agent.yaml", "    models:"]
    for name, model in CANDIDATES.items():
        block = f'name: {model}, endpoint: "{endpoints[name]}"' if model else ""
        lines.append(f"      {name}: {{{block}}}")
    (folder / "holodeck.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return agent


def run_config(
    cfg: Config,
    agent: Path,
    servers: dict[str, c.ModelServer],
    args: argparse.Namespace,
    home: Path,
) -> None:
    for server in servers.values():
        server.reset()
    cmd = [str(c.our_holodeck()), "matrix", str(agent), "--fresh"]
    cmd += ["--parallel", str(args.parallel), "--models", ",".join(cfg.models)]
    env = c.our_env(home, servers[BUSIEST].openai_base_url)
    timed = c.run_timed(cmd, env=env, cwd=agent.parent, timeout=args.timeout)
    expected = len(PROMPTS) * args.cases
    stats = {name: servers[name].stats() for name in cfg.models}
    calls = {name: int(s.get("total_calls", 0)) for name, s in stats.items()}
    peaks = {name: s.get("peak_concurrency") for name, s in stats.items()}
    problem = ""
    if timed.timed_out:
        problem = f"timed out after {args.timeout:g} s"
    elif timed.returncode != 0:
        problem = f"exit code {timed.returncode}"
    elif any(n != expected for n in calls.values()):
        problem = f"calls per endpoint {calls}, expected {expected} each"
    if problem:
        cfg.failures.append(problem)
        print(f"  {cfg.label}: FAILED ({problem})\n{timed.tail()}", flush=True)
        return
    cfg.walls.append(timed.wall)
    cfg.cpus.append(timed.cpu)
    print(
        f"  {cfg.label:<14} {timed.wall:6.2f} s, CPU {timed.cpu:.2f} s, load {c.load1():.2f}, "
        f"peak concurrency per endpoint {peaks}, peak RSS {timed.max_rss_mb:.0f} MB",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(c.machine_line(), flush=True)
    c.precompile_ours()
    ideal = c.ideal(len(PROMPTS) * args.cases, args.parallel, args.latency)
    configs = [
        Config("matrix 2x3", tuple(CANDIDATES)),
        Config(f"busiest alone ({BUSIEST})", (BUSIEST,)),
    ]
    with tempfile.TemporaryDirectory(prefix="matrix-bench-") as tmp, contextlib.ExitStack() as st:
        root = Path(tmp)
        rules = root / "rules.yaml"
        rules.write_text(c.RULES_YAML, encoding="utf-8")
        servers = {
            name: st.enter_context(c.ModelServer(rules, args.latency, log=root / f"{name}.log"))
            for name in CANDIDATES
        }
        endpoints = {name: s.openai_base_url for name, s in servers.items()}
        agent = write_project(root / "project", args.cases, endpoints)
        for rep in range(args.repeat):
            for cfg in configs:  # interleaved: the load drifts over both alike
                run_config(cfg, agent, servers, args, root / f"home-{rep}")
    matrix, alone = (c.median(cfg.walls) if cfg.walls else None for cfg in configs)
    print(f"\n{args.cases} cases x {len(PROMPTS)} prompts x {len(CANDIDATES)} candidates, "
          f"L = {args.latency:g} s, C = {args.parallel} per endpoint; "
          f"medians of {args.repeat}")  # fmt: skip
    for cfg in configs:
        cpu = c.median(cfg.cpus) if cfg.cpus else None
        print(f"  {cfg.label:<22} wall {c.fmt(c.median(cfg.walls))} s "
              f"{c.runs_text(cfg.walls)}, client CPU {c.fmt(cpu)} s")  # fmt: skip
    print(f"  {'ideal':<22} {ideal:.2f} s (ceil({len(PROMPTS) * args.cases}/{args.parallel}) x L)")
    print(c.ratio_line([("matrix/busiest", c.ratio(matrix, alone)),
                        ("matrix/ideal", c.ratio(matrix, ideal)),
                        ("busiest/ideal", c.ratio(alone, ideal))]))  # fmt: skip
    return 1 if any(cfg.failures for cfg in configs) else 0


if __name__ == "__main__":
    sys.exit(main())
