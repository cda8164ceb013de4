"""Throughput: N single-turn cases at model latency L through the loopback model server.

    .venv/bin/python bench/throughput.py [--cases 200] [--latency 0.5] [--repeat 5]
                                         [--peer bench/.peer-venv] [--peer-repeat 3]

Measures the wall time of ``holodeck test`` (a subprocess, from spawn to exit, median of
``--repeat`` runs) at its default concurrency and at C = 20, against the ideal ``ceil(N/C) * L``
(DESIGN §6.16). Start-up is measured apart: ``holodeck test`` on a 1-case suite against a
zero-latency server. With ``--peer``, HoloDeck 0.7.1 runs the same cases in the same run, at its
default (sequential) and with ``execution.parallel_test_cases: 20``. The last line holds the
ratios (wall / ideal, ours / peer: below 1 means ours is faster).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import common as c


@dataclass
class Config:
    label: str
    who: str  # "ours" | "peer"
    cmd: list[str]
    cwd: Path
    agent_dir: Path
    concurrency: int  # what the ideal uses; ours: read back from the EvalRun
    walls: list[float] = field(default_factory=list)
    inner: list[float] = field(default_factory=list)  # ours: the suite's own wall time
    peak: int = 0
    rss_mb: float = 0.0
    failures: list[str] = field(default_factory=list)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="N test cases (default 200)")
    parser.add_argument("--latency", type=float, default=0.5, help="model latency L in seconds")
    parser.add_argument("--repeat", type=int, default=5, help="runs of ours per config (median)")
    parser.add_argument("--peer", metavar="PATH", help="HoloDeck 0.7.1 venv (bench/.peer-venv)")
    parser.add_argument("--peer-repeat", type=int, default=3, help="runs of the peer per config")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    parser.add_argument(
        "--our-default", type=int, default=8, help="our default parallelism if not read back"
    )
    args = parser.parse_args(argv)
    if args.cases < 1 or args.latency < 0 or args.repeat < 1 or args.peer_repeat < 1:
        parser.error("--cases, --repeat and --peer-repeat must be >= 1 and --latency >= 0")
    if args.peer and args.cases > c.PEER_MAX_CASES:
        parser.error(f"--peer: HoloDeck 0.7.1 refuses more than {c.PEER_MAX_CASES} test cases")
    return args


def run_config(
    cfg: Config, server: c.ModelServer, n_cases: int, home_root: Path, rep: int, timeout: float
) -> None:
    server.reset()
    home = home_root / f"{cfg.label}-{rep}"
    env = (
        c.our_env(home, server.openai_base_url)
        if cfg.who == "ours"
        else c.peer_env(server.openai_base_url)
    )
    timed = c.run_timed(cfg.cmd, env=env, cwd=cfg.cwd, timeout=timeout)
    stats = server.stats()
    calls = int(stats.get("total_calls", 0))
    cfg.peak = max(cfg.peak, int(stats.get("peak_concurrency", 0)))
    cfg.rss_mb = max(cfg.rss_mb, timed.max_rss_mb)
    problem = ""
    if timed.timed_out:
        problem = f"timed out after {timeout:g} s"
    elif timed.returncode != 0:
        problem = f"exit code {timed.returncode}"
    elif calls != n_cases:
        problem = f"{calls} model calls for {n_cases} cases"
    if problem:
        cfg.failures.append(problem)
        print(f"  {cfg.label} run {rep + 1}: FAILED ({problem})\n{timed.tail()}", flush=True)
        return
    cfg.walls.append(timed.wall)
    note = ""
    if cfg.who == "ours":
        run = c.latest_eval_run(cfg.agent_dir)
        if run is not None:
            report = run.get("report", {})
            cfg.concurrency = int(report.get("environment", {}).get("parallel", cfg.concurrency))
            inner = report.get("summary", {}).get("wall_time_ms")
            if inner is not None:
                cfg.inner.append(inner / 1000)
                note = f" (suite {inner / 1000:.2f} s)"
    print(
        f"  {cfg.label:<14} run {rep + 1}: {timed.wall:6.2f} s{note}, "
        f"peak concurrency {stats.get('peak_concurrency')}, peak RSS {timed.max_rss_mb:.0f} MB",
        flush=True,
    )


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
    ours_exe = str(c.our_holodeck())
    peer_exe = str(c.peer_holodeck(args.peer)) if args.peer else None
    print(c.machine_line())
    print(
        f"throughput: N = {n} cases, L = {latency:g} s, ours x{args.repeat}"
        + (f", HoloDeck 0.7.1 x{args.peer_repeat} ({peer_exe})" if peer_exe else ""),
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="holodeck-bench-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        rules = tmp / "rules.yaml"
        rules.write_text(c.RULES_YAML, encoding="utf-8")
        homes = tmp / "homes"
        ours_dir, start_dir = tmp / "ours", tmp / "ours-startup"
        ours_agent = c.write_agent(ours_dir, n)
        start_agent = c.write_agent(start_dir, 1)
        configs = [
            Config(
                "ours@default",
                "ours",
                [ours_exe, "test", str(ours_agent), "--fresh", "-q"],
                ours_dir,
                ours_dir,
                args.our_default,
            ),
            Config(
                f"ours@{c.EQUAL_CONCURRENCY}",
                "ours",
                [
                    *[ours_exe, "test", str(ours_agent), "--fresh", "-q"],
                    *["--parallel", str(c.EQUAL_CONCURRENCY)],
                ],
                ours_dir,
                ours_dir,
                c.EQUAL_CONCURRENCY,
            ),
        ]
        peer_start: Path | None = None
        peer_dir = tmp / "peer"
        if peer_exe:
            default_agent = c.write_agent(peer_dir, n, peer=True)
            c20_agent = c.write_agent(
                peer_dir, n, peer=True, parallel=c.EQUAL_CONCURRENCY, file_name="agent-c20.yaml"
            )
            peer_start = c.write_agent(peer_dir, 1, peer=True, file_name="agent-startup.yaml")
            configs += [
                Config(
                    "peer@default",
                    "peer",
                    [peer_exe, "test", default_agent.name, "-q"],
                    peer_dir,
                    peer_dir,
                    1,
                ),
                Config(
                    f"peer@{c.EQUAL_CONCURRENCY}",
                    "peer",
                    [peer_exe, "test", c20_agent.name, "-q"],
                    peer_dir,
                    peer_dir,
                    c.EQUAL_CONCURRENCY,
                ),
            ]

        with (
            c.ModelServer(rules, latency, log=tmp / "server.log") as server,
            c.ModelServer(rules, 0.0, log=tmp / "server0.log") as server0,
        ):
            print(f"loopback servers: {server.url} (L = {latency:g} s), {server0.url} (L = 0)")
            print("start-up: `holodeck test` on a 1-case suite at zero latency", flush=True)
            ours_start = measure_startup(
                [ours_exe, "test", str(start_agent), "--fresh", "-q"],
                "ours",
                server0,
                start_dir,
                homes,
                args.repeat,
                args.timeout,
            )
            peer_start_walls: list[float] = []
            if peer_exe and peer_start is not None:
                peer_start_walls = measure_startup(
                    [peer_exe, "test", peer_start.name, "-q"],
                    "peer",
                    server0,
                    peer_dir,
                    homes,
                    args.peer_repeat,
                    args.timeout,
                )
            print(f"  ours {c.runs_text(ours_start)} median {c.fmt(c.median(ours_start))} s")
            if peer_exe:
                print(
                    f"  peer {c.runs_text(peer_start_walls)} "
                    f"median {c.fmt(c.median(peer_start_walls))} s"
                )
            print("runs (interleaved):", flush=True)
            for rep in range(max(args.repeat, args.peer_repeat if peer_exe else 0)):
                for cfg in configs:
                    wanted = args.repeat if cfg.who == "ours" else args.peer_repeat
                    if rep < wanted:
                        run_config(cfg, server, n, homes, rep, args.timeout)

    startup = c.median(ours_start) if ours_start else None
    peer_startup = c.median(peer_start_walls) if peer_start_walls else None
    med = {cfg.label: (c.median(cfg.walls) if cfg.walls else None) for cfg in configs}
    print()
    print(
        f"{'config':<14} {'C':>3} {'ideal s':>8} {'median s':>9} {'runs s':<34} "
        f"{'/ideal':>7} {'-startup /ideal':>16} {'peak C':>6} {'RSS MB':>7}"
    )
    for cfg in configs:
        ideal = c.ideal(n, cfg.concurrency, latency)
        m = med[cfg.label]
        start = startup if cfg.who == "ours" else peer_startup
        net = None if m is None or start is None else m - start
        print(
            f"{cfg.label:<14} {cfg.concurrency:>3} {ideal:>8.2f} {c.fmt(m):>9} "
            f"{c.runs_text(cfg.walls):<34} {c.fmt(c.ratio(m, ideal)):>7} "
            f"{c.fmt(c.ratio(net, ideal)):>16} {cfg.peak:>6} {cfg.rss_mb:>7.0f}"
            + (f"  FAILED: {'; '.join(cfg.failures)}" if cfg.failures else "")
        )
        if cfg.inner:
            print(f"{'':<14} suite's own wall time (EvalRun): median {c.median(cfg.inner):.2f} s")
    print(f"start-up (1 case, L = 0): ours {c.fmt(startup)} s, peer {c.fmt(peer_startup)} s")

    ours_default, ours_20 = configs[0], configs[1]
    ideal_default = c.ideal(n, ours_default.concurrency, latency)
    ideal_20 = c.ideal(n, c.EQUAL_CONCURRENCY, latency)
    r_default = c.ratio(med[ours_default.label], ideal_default)
    r_20 = c.ratio(med[ours_20.label], ideal_20)
    r_peer_default = c.ratio(med[ours_default.label], med.get("peer@default"))
    r_peer_20 = c.ratio(med[ours_20.label], med.get(f"peer@{c.EQUAL_CONCURRENCY}"))

    print()
    print("targets (informative; the issues state them for N, L below):")
    print(
        f"  issue 4 (N=100, L=0.5, defaults): ours/ideal@{ours_default.concurrency} = "
        f"{c.fmt(r_default)} <= 2.00 -> {_verdict(r_default, 2.0)}"
        + ("" if (n, latency) == (100, 0.5) else f"   [this run: N={n}, L={latency:g}]")
    )
    budget = None if startup is None else 1.25 * ideal_20 + startup
    print(
        f"  issue 9 (N=200, L=0.5): ours@20 = {c.fmt(med[ours_20.label])} s <= 1.25 x ideal "
        f"+ start-up = {c.fmt(budget)} s -> "
        f"{_verdict(c.ratio(med[ours_20.label], budget), 1.0)}"
        + ("" if (n, latency) == (200, 0.5) else f"   [this run: N={n}, L={latency:g}]")
    )
    if peer_exe:
        print(
            f"  issue 9: ours/peer@default = {c.fmt(r_peer_default)} <= 0.20 (5x faster) -> "
            f"{_verdict(r_peer_default, 0.2)}; ours/peer@20 = {c.fmt(r_peer_20)} <= 0.67 "
            f"(1.5x faster) -> {_verdict(r_peer_20, 1 / 1.5)}"
            + ("" if (n, latency) == (200, 0.5) else f"   [this run: N={n}, L={latency:g}]")
        )
    print(
        c.ratio_line(
            [
                (f"ours/ideal@{ours_default.concurrency}", r_default),
                (f"ours/ideal@{c.EQUAL_CONCURRENCY}", r_20),
                ("ours/peer@default", r_peer_default),
                (f"ours/peer@{c.EQUAL_CONCURRENCY}", r_peer_20),
            ]
        )
    )
    failed = any(cfg.failures for cfg in configs if cfg.who == "ours") or not ours_start
    return 1 if failed else 0


def _verdict(value: float | None, limit: float) -> str:
    if value is None:
        return "n/a"
    return "met" if value <= limit else "NOT met"


if __name__ == "__main__":
    sys.exit(main())
