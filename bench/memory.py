"""Memory: peak RSS of a 10,000-case run at zero model latency (docs/benchmarks.md: memory runs use
L = 0).

    .venv/bin/python bench/memory.py [--cases 10000] [--repeat 1]
                                     [--peer bench/.peer-venv] [--peer-cases 10000]

Peak RSS is the ``ru_maxrss`` that ``wait4`` reports for the ``holodeck test`` subprocess (the
process and the children it waited for; the model server is a separate process and not
counted). Ours runs at its default concurrency; a 1-case run gives the start-up footprint, so
the growth per 1,000 cases is ``(peak(N) - peak(1)) / (N - 1) * 1000``. With ``--peer``,
HoloDeck 0.7.1 and ours both run ``--peer-cases`` cases (default 1,000: HoloDeck 0.7.1's loader
refuses more than 1,000 test cases per agent) at C = 20 (``execution.parallel_test_cases`` for
the peer, which is sequential by default), and the last line compares them at equal N and C
(below 1 means ours uses less memory).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import common as c


@dataclass
class Sample:
    label: str
    cases: int
    rss_mb: list[float]
    walls: list[float]

    @property
    def peak(self) -> float | None:
        return c.median(self.rss_mb) if self.rss_mb else None

    @property
    def wall(self) -> float | None:
        return c.median(self.walls) if self.walls else None


def measure(
    label: str,
    cmd: list[str],
    env: dict[str, str],
    cwd: Path,
    server: c.ModelServer,
    cases: int,
    repeat: int,
    timeout: float,
) -> Sample:
    sample = Sample(label, cases, [], [])
    for rep in range(repeat):
        server.reset()
        timed = c.run_timed(cmd, env=env, cwd=cwd, timeout=timeout)
        calls = int(server.stats().get("total_calls", 0))
        if timed.timed_out or timed.returncode != 0 or calls != cases:
            print(
                f"  {label} run {rep + 1}: FAILED (exit {timed.returncode}, {calls} calls for "
                f"{cases} cases{', timed out' if timed.timed_out else ''})\n{timed.tail()}",
                flush=True,
            )
            continue
        sample.rss_mb.append(timed.max_rss_mb)
        sample.walls.append(timed.wall)
        print(
            f"  {label:<28} run {rep + 1}: peak RSS {timed.max_rss_mb:7.1f} MB, "
            f"wall {timed.wall:6.1f} s",
            flush=True,
        )
    return sample


def per_1000(big: Sample, small: Sample) -> float | None:
    if big.peak is None or small.peak is None or big.cases <= small.cases:
        return None
    return (big.peak - small.peak) / (big.cases - small.cases) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in the big run")
    parser.add_argument("--repeat", type=int, default=1, help="runs per measurement (median)")
    parser.add_argument("--peer", metavar="PATH", help="HoloDeck 0.7.1 venv (bench/.peer-venv)")
    parser.add_argument(
        "--peer-cases",
        type=int,
        help=f"cases for the peer comparison (default and most: {c.PEER_MAX_CASES})",
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run at most")
    args = parser.parse_args(argv)
    peer_cases = args.peer_cases or min(args.cases, c.PEER_MAX_CASES)
    if args.cases < 2 or peer_cases < 2 or args.repeat < 1:
        parser.error("--cases and --peer-cases must be >= 2, --repeat >= 1")
    if args.peer and peer_cases > c.PEER_MAX_CASES:
        parser.error(
            f"--peer-cases: HoloDeck 0.7.1 refuses more than {c.PEER_MAX_CASES} test cases "
            "per agent (its loader's limit)"
        )
    ours = str(c.our_holodeck())
    peer = str(c.peer_holodeck(args.peer)) if args.peer else None
    print(c.machine_line())
    print(
        f"memory: ours {args.cases} cases at its default concurrency, L = 0"
        + (f"; ours and HoloDeck 0.7.1 at {peer_cases} cases, C = 20" if peer else ""),
        flush=True,
    )

    with tempfile.TemporaryDirectory(prefix="holodeck-bench-memory-") as tmp_name:
        tmp = Path(tmp_name)
        rules = tmp / "rules.yaml"
        rules.write_text(c.RULES_YAML, encoding="utf-8")
        ours_one = c.write_agent(tmp / "ours-1", 1)
        ours_big = c.write_agent(tmp / "ours-big", args.cases)
        with c.ModelServer(rules, 0.0, log=tmp / "server.log") as server:
            url = server.openai_base_url

            def ours_run(label: str, agent: Path, n: int, extra: list[str]) -> Sample:
                home = tmp / f"home-{label}"
                return measure(
                    label,
                    [ours, "test", str(agent), "--fresh", "-q", *extra],
                    c.our_env(home, url),
                    agent.parent,
                    server,
                    n,
                    args.repeat,
                    args.timeout,
                )

            one = ours_run("ours 1 case", ours_one, 1, [])
            big = ours_run(f"ours {args.cases} cases", ours_big, args.cases, [])
            peer_one = peer_big = ours_eq = None
            if peer:
                ours_eq_agent = (
                    ours_big
                    if peer_cases == args.cases
                    else c.write_agent(tmp / "ours-eq", peer_cases)
                )
                ours_eq = ours_run(
                    f"ours {peer_cases} cases C=20",
                    ours_eq_agent,
                    peer_cases,
                    ["--parallel", str(c.EQUAL_CONCURRENCY)],
                )
                peer_dir = tmp / "peer"
                one_yaml = c.write_agent(peer_dir, 1, peer=True, file_name="agent-1.yaml")
                big_yaml = c.write_agent(
                    peer_dir, peer_cases, peer=True, parallel=c.EQUAL_CONCURRENCY
                )
                env = c.peer_env(url)
                peer_one = measure(
                    "peer 1 case",
                    [peer, "test", one_yaml.name, "-q"],
                    env,
                    peer_dir,
                    server,
                    1,
                    args.repeat,
                    args.timeout,
                )
                peer_big = measure(
                    f"peer {peer_cases} cases C=20",
                    [peer, "test", big_yaml.name, "-q"],
                    env,
                    peer_dir,
                    server,
                    peer_cases,
                    args.repeat,
                    args.timeout,
                )

    print()
    growth = per_1000(big, one)
    print(
        f"ours: peak RSS {c.fmt(one.peak, 1)} MB at 1 case, {c.fmt(big.peak, 1)} MB at "
        f"{args.cases} cases ({c.fmt(big.wall, 1)} s); "
        f"{c.fmt(None if big.peak is None else big.peak / args.cases * 1000, 1)} MB per 1,000 "
        f"cases gross, {c.fmt(growth, 1)} MB per 1,000 cases above the 1-case footprint"
    )
    pairs: list[tuple[str, float | None]] = [
        (f"ours-MB@{args.cases}", big.peak),
        ("ours-MB-per-1000", growth),
    ]
    if peer and peer_one is not None and peer_big is not None and ours_eq is not None:
        peer_growth = per_1000(peer_big, peer_one)
        ours_growth = per_1000(ours_eq, one)
        print(
            f"peer: peak RSS {c.fmt(peer_one.peak, 1)} MB at 1 case, {c.fmt(peer_big.peak, 1)} "
            f"MB at {peer_cases} cases, C=20 ({c.fmt(peer_big.wall, 1)} s); "
            f"{c.fmt(peer_growth, 1)} MB per 1,000 cases above its 1-case footprint"
        )
        print(
            f"ours at {peer_cases} cases, C=20: {c.fmt(ours_eq.peak, 1)} MB "
            f"({c.fmt(ours_eq.wall, 1)} s); {c.fmt(ours_growth, 1)} MB per 1,000 cases"
        )
        pairs += [
            (f"ours/peer-MB@{peer_cases}", c.ratio(ours_eq.peak, peer_big.peak)),
            ("ours/peer-MB-per-1000", c.ratio(ours_growth, peer_growth)),
        ]
    print(c.ratio_line(pairs))
    return 0 if one.rss_mb and big.rss_mb else 1


if __name__ == "__main__":
    sys.exit(main())
