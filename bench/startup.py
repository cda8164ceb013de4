"""Start-up: how long the CLI takes before it does any work, and what a run costs beyond its
model calls.

    .venv/bin/python bench/startup.py [--repeat 7] [--peer bench/.peer-venv] [--peer-repeat 3]
                                      [--end-cases 2000]

Times (a subprocess each, spawn to exit, median of ``--repeat`` runs after one unrecorded
warm-up run) ``holodeck --help``, ``holodeck validate examples/acme-support/agent.yaml``,
``holodeck test`` of a one-case suite against a loopback server answering at once (L = 0), and
beside it ``bench/sdk_floor.py`` making the same one call (the least a Python program does:
import openai, one call). Ours minus the floor is the CLI's own overhead (start-up, the run's
bookkeeping, the EvalRun file and the history write; the target is under 0.5 s). Each of
our test runs is also split, from its EvalRun (``metadata.started_at``, ``wall_time_ms``), into
*before the suite* (spawn to the suite's start: imports, loading agent.yaml), *suite* and
*after the suite* (the EvalRun built, redacted and written, the history row, exit). One
``--end-cases`` run (default 2,000 cases, L = 0; 0 skips it) shows how *after the suite*
grows with N. With ``--peer``, HoloDeck 0.7.1's ``holodeck --version``. The last line holds
the ratios (``help/1s`` is the "under 1 s" target; ``ours/peer`` below 1 means ours is
faster).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import common as c

EXAMPLE = c.REPO / "examples" / "acme-support" / "agent.yaml"
FLOOR = c.REPO / "bench" / "sdk_floor.py"


PHASES = ("before the suite", "suite", "after the suite")


def phases(agent_dir: Path, spawned: float, wall: float) -> tuple[float, float, float] | None:
    """A test run's wall split at the suite's start and end, from its EvalRun (the clock
    of this machine, read by both processes)."""
    data = c.latest_eval_run(agent_dir)
    if data is None:
        return None
    started = datetime.fromisoformat(data["metadata"]["started_at"]).timestamp()
    suite = data["report"]["summary"]["wall_time_ms"] / 1000
    before = started - spawned
    return before, suite, wall - before - suite


def time_command(
    label: str,
    cmd: list[str],
    env: dict[str, str],
    repeat: int,
    timeout: float,
    *,
    agent_dir: Path | None = None,
) -> tuple[list[float], list[tuple[float, float, float]]]:
    """Walls of ``repeat`` runs after a warm-up; with ``agent_dir`` (a test run) each run's
    phases too."""
    warm = c.run_timed(cmd, env=env, cwd=c.REPO, timeout=timeout)
    if warm.returncode != 0 or warm.timed_out:
        print(f"  {label}: FAILED (exit {warm.returncode})\n{warm.tail()}")
        return [], []
    walls: list[float] = []
    split: list[tuple[float, float, float]] = []
    for _ in range(repeat):
        spawned = time.time()
        timed = c.run_timed(cmd, env=env, cwd=c.REPO, timeout=timeout)
        if timed.returncode != 0 or timed.timed_out:
            print(f"  {label}: FAILED (exit {timed.returncode})\n{timed.tail()}")
            continue
        walls.append(timed.wall)
        found = phases(agent_dir, spawned, timed.wall) if agent_dir is not None else None
        if found is not None:
            split.append(found)
    print(
        f"  {label:<34} median {c.fmt(c.median(walls), 3)} s  {c.runs_text(walls)}  "
        f"(warm-up {warm.wall:.2f} s, peak RSS {warm.max_rss_mb:.0f} MB)",
        flush=True,
    )
    if split:
        print(
            "    "
            + ", ".join(
                f"{name} {c.fmt(c.median([p[i] for p in split]), 3)} s"
                for i, name in enumerate(PHASES)
            )
            + " (medians)",
            flush=True,
        )
    return walls, split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of ours (median)")
    parser.add_argument("--peer", metavar="PATH", help="HoloDeck 0.7.1 venv (bench/.peer-venv)")
    parser.add_argument("--peer-repeat", type=int, default=3, help="timed runs of the peer")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run at most")
    parser.add_argument(
        "--end-cases", type=int, default=2000, help="cases of the end-of-run run (0: none)"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.peer_repeat < 1 or args.end_cases < 0:
        parser.error("--repeat and --peer-repeat must be >= 1, --end-cases >= 0")
    ours = str(c.our_holodeck())
    peer = str(c.peer_holodeck(args.peer)) if args.peer else None
    print(c.machine_line())
    peer_note = f", HoloDeck 0.7.1 x{args.peer_repeat}" if peer else ""
    print(f"start-up: ours x{args.repeat}{peer_note}")

    with tempfile.TemporaryDirectory(prefix="holodeck-bench-startup-") as tmp:
        env = c.our_env(Path(tmp) / "home", "http://127.0.0.1:9/v1")  # validate calls nothing
        help_walls, _ = time_command(
            "ours: holodeck --help", [ours, "--help"], env, args.repeat, 60
        )
        validate_walls, _ = time_command(
            "ours: holodeck validate acme-support",
            [ours, "validate", str(EXAMPLE.relative_to(c.REPO))],
            env,
            args.repeat,
            args.timeout,
        )
        rules = Path(tmp) / "rules.yaml"
        rules.write_text(c.RULES_YAML, encoding="utf-8")
        with c.ModelServer(rules, 0.0, log=Path(tmp) / "server.log") as server:
            agent = c.write_agent(Path(tmp) / "one-case", 1)
            test_env = {**env, c.ENDPOINT_VAR: server.openai_base_url}
            test_walls, test_split = time_command(
                "ours: holodeck test (1 case, L=0)",
                [ours, "test", str(agent), "-q", "--fresh"],
                test_env,
                args.repeat,
                args.timeout,
                agent_dir=agent.parent,
            )
            floor_walls, _ = time_command(
                "floor: sdk_floor.py (1 call, L=0)",
                [sys.executable, str(FLOOR), server.openai_base_url, "1", "1"],
                test_env,
                args.repeat,
                args.timeout,
            )
            end_split: list[tuple[float, float, float]] = []
            if args.end_cases:
                big = c.write_agent(Path(tmp) / "end-of-run", args.end_cases)
                _, end_split = time_command(
                    f"ours: holodeck test ({args.end_cases} cases, L=0)",
                    [ours, "test", str(big), "-q", "--fresh"],
                    test_env,
                    1,
                    max(args.timeout, 600.0),
                    agent_dir=big.parent,
                )
        peer_walls: list[float] = []
        if peer:
            peer_walls, _ = time_command(
                "peer: holodeck --version",
                [peer, "--version"],
                c.peer_env("http://127.0.0.1:9/v1"),
                args.peer_repeat,
                args.timeout,
            )

    help_s = c.median(help_walls) if help_walls else None
    validate_s = c.median(validate_walls) if validate_walls else None
    peer_s = c.median(peer_walls) if peer_walls else None
    test_s = c.median(test_walls) if test_walls else None
    floor_s = c.median(floor_walls) if floor_walls else None
    overhead = test_s - floor_s if test_s is not None and floor_s is not None else None
    after_1 = c.median([p[2] for p in test_split]) if test_split else None
    after_n = c.median([p[2] for p in end_split]) if end_split else None
    verdict = "n/a" if help_s is None else ("met" if help_s < 1.0 else "NOT met")
    print(f"target: holodeck --help under 1 s: {c.fmt(help_s, 3)} s -> {verdict}")
    print(
        c.ratio_line(
            [
                ("ours-help/1s", help_s),
                ("ours-test-overhead/0.5s", c.ratio(test_s, 0.5)),
                ("ours-test-overhead-over-floor", overhead),
                ("ours-test/floor", c.ratio(test_s, floor_s)),
                ("ours-after-suite-1-case", after_1),
                (f"ours-after-suite-{args.end_cases}-cases", after_n),
                ("ours-help/peer-version", c.ratio(help_s, peer_s)),
                ("ours-validate/peer-version", c.ratio(validate_s, peer_s)),
            ]
        )
    )
    return 0 if help_walls and validate_walls and test_walls and floor_walls else 1


if __name__ == "__main__":
    sys.exit(main())
