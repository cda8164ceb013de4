"""Start-up: how long the CLI takes before it does any work.

    .venv/bin/python bench/startup.py [--repeat 7] [--peer bench/.peer-venv] [--peer-repeat 3]

Times (a subprocess each, spawn to exit, median of ``--repeat`` runs after one unrecorded
warm-up run) ``holodeck --help``, ``holodeck validate examples/acme-support/agent.yaml`` and
``holodeck test`` of a one-case suite against a loopback server answering at once (the CLI's
own overhead: start-up, the run's bookkeeping, the EvalRun file and the history write), and
with ``--peer`` HoloDeck 0.7.1's ``holodeck --version``. The last line holds the ratios
(``help/1s`` is the issue's "under 1 s" target; ``ours/peer`` below 1 means ours is faster).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import common as c

EXAMPLE = c.REPO / "examples" / "acme-support" / "agent.yaml"


def time_command(
    label: str, cmd: list[str], env: dict[str, str], repeat: int, timeout: float
) -> list[float]:
    warm = c.run_timed(cmd, env=env, cwd=c.REPO, timeout=timeout)
    if warm.returncode != 0 or warm.timed_out:
        print(f"  {label}: FAILED (exit {warm.returncode})\n{warm.tail()}")
        return []
    walls: list[float] = []
    for _ in range(repeat):
        timed = c.run_timed(cmd, env=env, cwd=c.REPO, timeout=timeout)
        if timed.returncode != 0 or timed.timed_out:
            print(f"  {label}: FAILED (exit {timed.returncode})\n{timed.tail()}")
            continue
        walls.append(timed.wall)
    print(
        f"  {label:<34} median {c.fmt(c.median(walls), 3)} s  {c.runs_text(walls)}  "
        f"(warm-up {warm.wall:.2f} s, peak RSS {warm.max_rss_mb:.0f} MB)",
        flush=True,
    )
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of ours (median)")
    parser.add_argument("--peer", metavar="PATH", help="HoloDeck 0.7.1 venv (bench/.peer-venv)")
    parser.add_argument("--peer-repeat", type=int, default=3, help="timed runs of the peer")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run at most")
    args = parser.parse_args(argv)
    if args.repeat < 1 or args.peer_repeat < 1:
        parser.error("--repeat and --peer-repeat must be >= 1")
    ours = str(c.our_holodeck())
    peer = str(c.peer_holodeck(args.peer)) if args.peer else None
    print(c.machine_line())
    peer_note = f", HoloDeck 0.7.1 x{args.peer_repeat}" if peer else ""
    print(f"start-up: ours x{args.repeat}{peer_note}")

    with tempfile.TemporaryDirectory(prefix="holodeck-bench-startup-") as tmp:
        env = c.our_env(Path(tmp) / "home", "http://127.0.0.1:9/v1")  # validate calls nothing
        help_walls = time_command("ours: holodeck --help", [ours, "--help"], env, args.repeat, 60)
        validate_walls = time_command(
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
            test_walls = time_command(
                "ours: holodeck test (1 case, L=0)",
                [ours, "test", str(agent), "-q", "--fresh"],
                test_env,
                args.repeat,
                args.timeout,
            )
        peer_walls: list[float] = []
        if peer:
            peer_walls = time_command(
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
    verdict = "n/a" if help_s is None else ("met" if help_s < 1.0 else "NOT met")
    print(f"target (issue 9): holodeck --help under 1 s: {c.fmt(help_s, 3)} s -> {verdict}")
    print(
        c.ratio_line(
            [
                ("ours-help/1s", help_s),
                ("ours-test-overhead/0.5s", c.ratio(test_s, 0.5)),
                ("ours-help/peer-version", c.ratio(help_s, peer_s)),
                ("ours-validate/peer-version", c.ratio(validate_s, peer_s)),
            ]
        )
    )
    return 0 if help_walls and validate_walls and test_walls else 1


if __name__ == "__main__":
    sys.exit(main())
