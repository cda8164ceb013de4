"""Throughput: N single-turn cases at model latency L through the loopback model server.

    .venv/bin/python bench/throughput.py [--cases 200] [--latency 0.5] [--repeat 3]
        [--peer bench/.peer-venv] [--inspect bench/.inspect-venv] [--promptfoo bench/.promptfoo]
        [--large-cases 2000] [--large-concurrency 100]

Every tool runs the same cases against the same loopback server, each from spawn to exit
(median of ``--repeat`` runs, interleaved), at its own default concurrency and at C = 20, against
the ideal ``ceil(N/C) * L`` (docs/benchmarks.md); then ``--large-cases`` cases at
``--large-concurrency`` (HoloDeck refuses more than 1,000 cases). Peers: HoloDeck 0.7.1
(``--peer``), Inspect AI and promptfoo (``--inspect``/``--promptfoo``, or their default folders
when ``bash bench/peer_setup.sh inspect|promptfoo`` made them). Each run must make exactly one
model call per case. Start-up is measured apart (1 case, L = 0). The last line holds the
ratios (wall / ideal, ours / peer: below 1 means ours is faster). ``floor`` is
``bench/sdk_floor.py``: the same cases through the bare ``openai`` SDK in one small script,
the least any tool built on the SDK can take on this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import common as c
import peers

# A run's command, environment and working folder, given the server's base URL and a home.
Launch = Callable[[str, Path], tuple[list[str], dict[str, str], Path]]


@dataclass
class Config:
    label: str
    who: str  # "ours" | "floor" | "holodeck" | "inspect" | "promptfoo"
    launch: Launch
    n_cases: int
    concurrency: int  # what the ideal uses; ours: read back from the EvalRun; 0: the peak seen
    agent_dir: Path | None = None  # ours: where the EvalRun lands
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # client CPU seconds (user + system)
    inner: list[float] = field(default_factory=list)  # ours: the suite's own wall time
    peak: int = 0
    rss_mb: float = 0.0
    failures: list[str] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="N test cases (default 200)")
    parser.add_argument("--latency", type=float, default=0.5, help="model latency L in seconds")
    parser.add_argument("--repeat", type=int, default=3, help="runs per config (median)")
    parser.add_argument("--peer", metavar="PATH", help="HoloDeck 0.7.1 venv (bench/.peer-venv)")
    parser.add_argument("--peer-repeat", type=int, default=3, help="runs of HoloDeck per config")
    parser.add_argument("--inspect", metavar="PATH", help="Inspect AI venv (bench/.inspect-venv)")
    parser.add_argument("--promptfoo", metavar="PATH", help="promptfoo folder (bench/.promptfoo)")
    parser.add_argument("--no-peers", action="store_true", help="ours only")
    parser.add_argument("--large-cases", type=int, default=2000, help="0 skips the large runs")
    parser.add_argument("--large-concurrency", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="also run an earlier commit's holodeck_core/holodeck_pipelines, exported into DIR "
        "(`git archive COMMIT holodeck_core holodeck_pipelines | tar -x -C DIR`), as base@…",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="LABEL",
        help="run only these configs (e.g. ours@20 floor@20 ours@100x2000 floor@100x2000)",
    )
    args = parser.parse_args(argv)
    if args.cases < 1 or args.latency < 0 or args.repeat < 1 or args.peer_repeat < 1:
        parser.error("--cases, --repeat and --peer-repeat must be >= 1 and --latency >= 0")
    if args.peer and args.cases > c.PEER_MAX_CASES:
        parser.error(f"--peer: HoloDeck 0.7.1 refuses more than {c.PEER_MAX_CASES} test cases")
    return args


def run_config(
    cfg: Config, server: c.ModelServer, home_root: Path, rep: int, timeout: float
) -> None:
    server.reset()
    cmd, env, cwd = cfg.launch(server.openai_base_url, home_root / f"{cfg.label}-{rep}")
    timed = c.run_timed(cmd, env=env, cwd=cwd, timeout=timeout)
    stats = server.stats()
    calls = int(stats.get("total_calls", 0))
    cfg.peak = max(cfg.peak, int(stats.get("peak_concurrency", 0)))
    cfg.rss_mb = max(cfg.rss_mb, timed.max_rss_mb)
    problem = ""
    if timed.timed_out:
        problem = f"timed out after {timeout:g} s"
    elif timed.returncode != 0:
        problem = f"exit code {timed.returncode}"
    elif calls != cfg.n_cases:
        problem = f"{calls} model calls for {cfg.n_cases} cases"
    if problem:
        cfg.failures.append(problem)
        print(f"  {cfg.label} run {rep + 1}: FAILED ({problem})\n{timed.tail()}", flush=True)
        return
    cfg.walls.append(timed.wall)
    cfg.cpus.append(timed.cpu)
    note = ""
    if cfg.who == "ours" and cfg.agent_dir is not None:
        run = c.latest_eval_run(cfg.agent_dir)
        if run is not None:
            report = run.get("report", {})
            cfg.concurrency = int(report.get("environment", {}).get("parallel", cfg.concurrency))
            inner = report.get("summary", {}).get("wall_time_ms")
            if inner is not None:
                cfg.inner.append(inner / 1000)
                note = f" (suite {inner / 1000:.2f} s)"
    print(
        f"  {cfg.label:<20} run {rep + 1}: {timed.wall:6.2f} s{note}, CPU {timed.cpu:.2f} s, "
        f"load {c.load1():.2f}, peak concurrency {stats.get('peak_concurrency')}, "
        f"peak RSS {timed.max_rss_mb:.0f} MB",
        flush=True,
    )


def ours_launch(agent: Path, parallel: int | None, source: Path | None = None) -> Launch:
    """Our CLI; ``source``: an earlier commit's packages (``--baseline``) imported first."""

    def launch(base_url: str, home: Path) -> tuple[list[str], dict[str, str], Path]:
        cmd = [str(c.our_holodeck()), "test", str(agent), "--fresh", "-q"]
        if parallel is not None:
            cmd += ["--parallel", str(parallel)]
        env = c.our_env(home, base_url)
        if source is not None:  # found before the editable install's finder
            env["PYTHONPATH"] = str(source)
        return cmd, env, agent.parent

    return launch


def target_launch(agent: Path, parallel: int) -> Launch:
    """Ours, the agent evaluated through an ``http`` target (docs/targets.md): the loopback
    server's chat completions as a JSON API, every case one HTTP call through the target's
    scheduler lane."""

    def launch(base_url: str, home: Path) -> tuple[list[str], dict[str, str], Path]:
        target = {
            "http": {
                "url": f"{base_url}/chat/completions",
                "body": {"model": "gpt-4o-mini", "messages": "{{messages}}"},
                "response": {"text": "choices[0].message.content", "usage": "usage"},
            }
        }
        cmd, env, cwd = ours_launch(agent, parallel)(base_url, home)
        return [*cmd, "--target", json.dumps(target)], env, cwd

    return launch


# The API the floor speaks beside each of ours: the generated agent is on ``openai``, whose
# agent calls go to the Responses API (holodeck_core/providers/table.py); an ``http`` target
# posts chat completions.
AGENT_API = "responses"
TARGET_API = "chat"


def holodeck_launch(exe: Path, agent: Path) -> Launch:
    def launch(base_url: str, home: Path) -> tuple[list[str], dict[str, str], Path]:
        del home
        return [str(exe), "test", agent.name, "-q"], c.peer_env(base_url), agent.parent

    return launch


def floor_launch(n_cases: int, concurrency: int, api: str = AGENT_API) -> Launch:
    """``bench/sdk_floor.py``: the same cases through the bare SDK on ``api``, in our venv."""

    def launch(base_url: str, home: Path) -> tuple[list[str], dict[str, str], Path]:
        del home
        script = c.REPO / "bench" / "sdk_floor.py"
        python = c.our_holodeck().parent / "python"
        cmd = [str(python), str(script), base_url, str(n_cases), str(concurrency), "--api", api]
        return cmd, c.base_env(), c.REPO / "bench"

    return launch


def peer_launch(peer: peers.Peer, concurrency: int | None) -> Launch:
    def launch(base_url: str, home: Path) -> tuple[list[str], dict[str, str], Path]:
        del home
        run = peer.run(base_url, concurrency)
        return run.cmd, run.env, run.cwd

    return launch


def build_configs(args: argparse.Namespace, tmp: Path) -> list[Config]:
    n, eq = args.cases, c.EQUAL_CONCURRENCY
    ours_agent = c.write_agent(tmp / "ours", n)
    configs = [
        Config("ours@default", "ours", ours_launch(ours_agent, None), n, 0, tmp / "ours"),
        Config(f"ours@{eq}", "ours", ours_launch(ours_agent, eq), n, eq, tmp / "ours"),
        Config(f"floor@{eq}", "floor", floor_launch(n, eq), n, eq),
        Config(f"target@{eq}", "ours", target_launch(ours_agent, eq), n, eq, tmp / "ours"),
        Config(f"floor-chat@{eq}", "floor", floor_launch(n, eq, TARGET_API), n, eq),
    ]
    if args.peer:
        exe = c.peer_holodeck(args.peer)
        folder = tmp / "holodeck"
        default_agent = c.write_agent(folder, n, peer=True)
        c20 = c.write_agent(folder, n, peer=True, parallel=eq, file_name="agent-c20.yaml")
        configs += [
            Config("holodeck@default", "holodeck", holodeck_launch(exe, default_agent), n, 1),
            Config(f"holodeck@{eq}", "holodeck", holodeck_launch(exe, c20), n, eq),
        ]
    large, big_c = args.large_cases, args.large_concurrency
    big_agent = c.write_agent(tmp / "ours-large", large) if large else None
    for kind, cls in (("inspect", peers.InspectPeer), ("promptfoo", peers.PromptfooPeer)):
        root = None if args.no_peers else peers.find(kind, getattr(args, kind))
        if root is None:
            print(f"({kind}: not set up; `bash bench/peer_setup.sh {kind}` adds it)")
            continue
        peer = cls(root, tmp / kind, n)
        peer.prepare()
        configs += [
            Config(f"{kind}@default", kind, peer_launch(peer, None), n, cls.default_concurrency),
            Config(f"{kind}@{eq}", kind, peer_launch(peer, eq), n, eq),
        ]
        if large:
            big = cls(root, tmp / f"{kind}-large", large)
            big.prepare()
            configs.append(
                Config(f"{kind}@{big_c}x{large}", kind, peer_launch(big, big_c), large, big_c)
            )
    if big_agent is not None:
        configs.insert(
            3, Config(f"floor@{big_c}x{large}", "floor", floor_launch(large, big_c), large, big_c)
        )
        configs.insert(
            3,
            Config(
                f"ours@{big_c}x{large}",
                "ours",
                ours_launch(big_agent, big_c),
                large,
                big_c,
                big_agent.parent,
            ),
        )
    if args.baseline:
        base = Path(args.baseline).absolute()
        configs.append(Config(f"base@{eq}", "ours", ours_launch(ours_agent, eq, base), n, eq))
        if big_agent is not None:
            big = ours_launch(big_agent, big_c, base)
            configs.append(Config(f"base@{big_c}x{large}", "ours", big, large, big_c))
    if args.only:
        configs = [cfg for cfg in configs if cfg.label in args.only]
    return configs


def measure_startup(
    cmd: list[str],
    who: str,
    server: c.ModelServer,
    cwd: Path,
    home_root: Path,
    repeat: int,
    timeout: float,
) -> list[float]:
    walls: list[float] = []
    for rep in range(repeat):
        server.reset()
        env = (
            c.our_env(home_root / f"startup-{who}-{rep}", server.openai_base_url)
            if who == "ours"
            else c.peer_env(server.openai_base_url)
        )
        timed = c.run_timed(cmd, env=env, cwd=cwd, timeout=timeout)
        if timed.returncode != 0 or timed.timed_out:
            print(f"  start-up {who} run {rep + 1}: FAILED (exit {timed.returncode})")
            print(timed.tail())
            continue
        walls.append(timed.wall)
    return walls


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    n, latency = args.cases, args.latency
    print(c.machine_line())
    c.precompile_ours()
    print(f"throughput: N = {n} cases, L = {latency:g} s, medians of {args.repeat}", flush=True)

    with tempfile.TemporaryDirectory(prefix="holodeck-bench-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        rules = tmp / "rules.yaml"
        rules.write_text(c.RULES_YAML, encoding="utf-8")
        homes = tmp / "homes"
        start_agent = c.write_agent(tmp / "ours-startup", 1)
        configs = build_configs(args, tmp)
        with (
            c.ModelServer(rules, latency, log=tmp / "server.log") as server,
            c.ModelServer(rules, 0.0, log=tmp / "server0.log") as server0,
        ):
            print(f"loopback servers: {server.url} (L = {latency:g} s), {server0.url} (L = 0)")
            print("start-up: `holodeck test` on a 1-case suite at zero latency", flush=True)
            ours_start = measure_startup(
                [str(c.our_holodeck()), "test", str(start_agent), "--fresh", "-q"],
                "ours",
                server0,
                start_agent.parent,
                homes,
                args.repeat,
                args.timeout,
            )
            print(f"  ours {c.runs_text(ours_start)} median {c.fmt(c.median(ours_start))} s")
            print("runs (interleaved):", flush=True)
            for rep in range(max(args.repeat, args.peer_repeat if args.peer else 0)):
                for cfg in configs:
                    wanted = args.peer_repeat if cfg.who == "holodeck" else args.repeat
                    if rep < wanted:
                        run_config(cfg, server, homes, rep, args.timeout)

    startup = c.median(ours_start) if ours_start else None
    med = {cfg.label: (c.median(cfg.walls) if cfg.walls else None) for cfg in configs}
    print()
    print(
        f"{'config':<22} {'N':>5} {'C':>4} {'ideal s':>8} {'median s':>9} {'runs s':<26} "
        f"{'/ideal':>7} {'peak C':>6} {'RSS MB':>7}"
    )
    for cfg in configs:
        cfg.concurrency = cfg.concurrency or cfg.peak  # adaptive defaults: the peak seen
        ideal = c.ideal(cfg.n_cases, cfg.concurrency, latency)
        m = med[cfg.label]
        print(
            f"{cfg.label:<22} {cfg.n_cases:>5} {cfg.concurrency:>4} {ideal:>8.2f} {c.fmt(m):>9} "
            f"{c.runs_text(cfg.walls):<26} {c.fmt(c.ratio(m, ideal)):>7} "
            f"{cfg.peak:>6} {cfg.rss_mb:>7.0f}"
            + (f"  FAILED: {'; '.join(cfg.failures)}" if cfg.failures else "")
        )
        if cfg.cpus:
            print(f"{'':<22} client CPU: median {c.median(cfg.cpus):.2f} s {c.runs_text(cfg.cpus)}")
        if cfg.inner:
            print(f"{'':<22} suite's own wall time (EvalRun): median {c.median(cfg.inner):.2f} s")
    print(f"start-up (1 case, L = 0): ours {c.fmt(startup)} s")
    print(c.ratio_line(ratios(configs, med, n, latency, args)))
    failed = any(cfg.failures for cfg in configs if cfg.who == "ours") or not ours_start
    return 1 if failed else 0


def ratios(
    configs: list[Config],
    med: dict[str, float | None],
    n: int,
    latency: float,
    args: argparse.Namespace,
) -> list[tuple[str, float | None]]:
    """ours / ideal and ours / each peer, at C = 20, at each tool's defaults, and large."""
    eq = c.EQUAL_CONCURRENCY
    big = f"{args.large_concurrency}x{args.large_cases}"
    out: list[tuple[str, float | None]] = [
        (f"ours/ideal@{eq}", c.ratio(med.get(f"ours@{eq}"), c.ideal(n, eq, latency))),
    ]
    if args.large_cases:
        ideal_big = c.ideal(args.large_cases, args.large_concurrency, latency)
        out.append((f"ours/ideal@{big}", c.ratio(med.get(f"ours@{big}"), ideal_big)))
    out += [
        (f"floor/ideal@{eq}", c.ratio(med.get(f"floor@{eq}"), c.ideal(n, eq, latency))),
        (f"ours/floor@{eq}", c.ratio(med.get(f"ours@{eq}"), med.get(f"floor@{eq}"))),
        (f"target/floor-chat@{eq}", c.ratio(med.get(f"target@{eq}"), med.get(f"floor-chat@{eq}"))),
    ]
    if args.large_cases:
        out += [
            (f"floor/ideal@{big}", c.ratio(med.get(f"floor@{big}"), ideal_big)),
            (f"ours/floor@{big}", c.ratio(med.get(f"ours@{big}"), med.get(f"floor@{big}"))),
        ]
    for setting in (str(eq), big):
        if f"base@{setting}" in med:
            base = med.get(f"base@{setting}")
            out += [
                (f"base/floor@{setting}", c.ratio(base, med.get(f"floor@{setting}"))),
                (f"ours/base@{setting}", c.ratio(med.get(f"ours@{setting}"), base)),
            ]
    for who in sorted({cfg.who for cfg in configs} - {"ours", "floor"}):
        for setting in ("default", str(eq), big):
            peer = med.get(f"{who}@{setting}")
            if f"{who}@{setting}" in med:
                out.append((f"ours/{who}@{setting}", c.ratio(med.get(f"ours@{setting}"), peer)))
    return out


if __name__ == "__main__":
    sys.exit(main())
