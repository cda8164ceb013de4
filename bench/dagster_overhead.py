"""What Dagster costs on top of the CLI per partition, measured the way a deployment runs one.

    .venv/bin/python bench/dagster_overhead.py [--cases 50] [--latency 0.5] [--repeat 3]
        [--versions 10]

Three commands, interleaved, each timed from spawn to exit against one loopback model server:

- ``holodeck test agent.yaml -q --fresh``: the CLI.
- ``dagster asset materialize -m holodeck_pipelines.definitions --select
  '<agent>/processed_files*' --partition <version>``: one partition of our five assets (the
  IO manager, the history write, the four checks), a fresh process per partition. Why this
  command: in Dagster 1.13 ``dg launch --assets`` calls this very function in its own
  process (``dagster_dg_cli/cli/launch.py`` says so; dg's own CLI import adds ~0.3 s on top,
  which no deployment pays), and a run launched from the UI, a sensor or a schedule is
  likewise a fresh run-worker process that imports Dagster, loads the definitions and
  executes the run against the instance (plus a code server and a daemon, left out here).
  The console logger is set to WARNING (as the CLI runs with ``-q``); every event still goes
  to the event log.
- the same command on a *Dagster floor*: a tiny module (written to the temp dir) with a
  dynamically partitioned chain of five assets that do nothing, on the same executor
  (in-process, our default) and the same instance. It is what Dagster itself costs per
  partition: interpreter, Dagster's import, definitions, run and its events; what our run
  costs beyond it is ours.

The instance is persistent, as in a deployment: ``DAGSTER_HOME`` is the project root holding
the repository's own ``dagster.yaml`` (SQLite storage in ``.holodeck/dagster/``), created and
migrated once before anything is timed (as ``dg dev`` would have). Before each timed run, and
untimed, the prompt version is registered and added as a partition (the prompt-version
sensor's job), and every run gets a fresh ``HOLODECK_HOME`` so nothing is resumed from a
journal or a cache.

Then a backfill (docs/scale-out.md): an agent with ``--versions`` prompt versions, all registered as
partitions, evaluated by ``holodeck test --prompt-version V`` once per version one after
another (the CLI's way, timed as the sum) and by one ``dagster asset materialize
--partition-range v1...v10`` (a single-run backfill, ``BackfillPolicy.single_run``: Dagster's
launch paid once, every step iterating its partitions), each with a fresh ``HOLODECK_HOME``.

Ends with ``RATIOS dagster/cli=… dagster-extra-s=… dagster-floor-s=… ours-over-floor-s=…``
(``ours-over-floor-s`` = our partition minus the floor: the evaluation itself plus what our
assets add to an empty Dagster run) and ``backfill/cli-sequence=…``."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

from common import (
    REPO,
    RULES_YAML,
    SYSTEM_PROMPT,
    ModelServer,
    fmt,
    ideal,
    machine_line,
    median,
    our_env,
    our_holodeck,
    ratio,
    ratio_line,
    run_timed,
    runs_text,
    write_agent,
)

from holodeck_core.defaults import PARALLEL_TEST_CASES as DEFAULT_PARALLEL_TEST_CASES

AGENT_GROUP = "bench_agent"  # dagster_name("bench-agent")
OURS = "holodeck_pipelines.definitions"
FLOOR_MODULE = "dagster_floor_defs"
FLOOR_ASSETS = 5
QUIET = '{"loggers": {"console": {"config": {"log_level": "WARNING"}}}}'

FLOOR_DEFS = textwrap.dedent(f'''\
    """The Dagster floor: {FLOOR_ASSETS} dynamically partitioned assets in a chain that do
    nothing, on the in-process executor (what holodeck_pipelines uses by default)."""

    import dagster as dg

    floor = dg.DynamicPartitionsDefinition(name="floor")


    @dg.asset(partitions_def=floor, group_name="floor")
    def step_1() -> int:
        return 1


    def chained(previous: dg.AssetsDefinition, n: int) -> dg.AssetsDefinition:
        @dg.asset(name=f"step_{{n}}", partitions_def=floor, group_name="floor", deps=[previous])
        def step() -> int:
            return n

        return step


    assets = [step_1]
    for n in range(2, {FLOOR_ASSETS + 1}):
        assets.append(chained(assets[-1], n))
    defs = dg.Definitions(assets=assets, executor=dg.in_process_executor)
    ''')

# Untimed, before each timed Dagster run: what the prompt-version sensor does (snapshot the
# prompt under this run's HOLODECK_HOME, add the partitions); prints the active version.
PREPARE = textwrap.dedent("""\
    import sys
    from pathlib import Path

    import dagster as dg

    from holodeck_pipelines.automation import register_versions
    from holodeck_pipelines.builder import build_pipelines
    from holodeck_core.config.project import Project
    from holodeck_pipelines.pools import apply_pools
    from holodeck_pipelines.resources import HoloDeckProject

    root, floor_key = Path(sys.argv[1]), sys.argv[2]
    [pipeline] = build_pipelines(Project.discover(root))
    active, registered = register_versions(pipeline.agent_file, HoloDeckProject(root=str(root)))
    instance = dg.DagsterInstance.get()
    apply_pools(instance, Project.discover(root))  # what `holodeck pools` does at set-up
    instance.add_dynamic_partitions(pipeline.partitions.name, registered)
    instance.add_dynamic_partitions("floor", [floor_key])
    print(active[0])
    """)


def materialize(
    select: str, partition: str, *, module: str, flag: str = "--partition"
) -> list[str | Path]:
    dagster = our_holodeck().parent / "dagster"
    return [
        dagster,
        "asset",
        "materialize",
        "-m",
        module,
        "--select",
        select,
        flag,
        partition,
        "--config-json",
        QUIET,
    ]


def write_versions(agent: Path, versions: int) -> list[str]:
    """Give the bench agent ``versions`` prompt versions (the file and its variants)."""
    prompts = agent.parent / "instructions"
    keys = [f"v{n}" for n in range(1, versions + 1)]
    for n, key in enumerate(keys, start=1):
        body = f"---\nversion: {key}\n---\n{SYSTEM_PROMPT.strip()} (variant {n})\n"
        (prompts / f"{key}.md").write_text(body, encoding="utf-8")
    variants = ", ".join(f"instructions/{key}.md" for key in keys[1:])
    text = agent.read_text(encoding="utf-8").replace(
        "  file: instructions/system-prompt.md",
        f"  file: instructions/{keys[0]}.md\n  variants: [{variants}]",
    )
    agent.write_text(text, encoding="utf-8")
    return keys


def make_root(work: Path, name: str, cases: int, versions: int) -> tuple[Path, Path, list[str]]:
    """A project root (also DAGSTER_HOME, docs/dagster.md) with the bench agent, the repository's
    dagster.yaml, the floor module and the preparation script; its prompt versions."""
    root = work / name
    agent = write_agent(root / "agent", cases)
    keys = write_versions(agent, versions) if versions > 1 else []
    (root / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n", encoding="utf-8")
    shutil.copy(REPO / "dagster.yaml", root / "dagster.yaml")
    (root / f"{FLOOR_MODULE}.py").write_text(FLOOR_DEFS, encoding="utf-8")
    (root / "prepare.py").write_text(PREPARE, encoding="utf-8")
    return root, agent, keys


def env_for(home: Path, root: Path, server: ModelServer) -> dict[str, str]:
    env = our_env(home, server.openai_base_url)
    env |= {"DAGSTER_HOME": str(root), "HOLODECK_PROJECT_ROOT": str(root)}
    # the floor module, as `-m` needs (after any PYTHONPATH given to the bench)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(root)) if p)
    return env


def migrate(root: Path, env: dict[str, str]) -> bool:
    """The persistent instance, created and migrated once (untimed)."""
    setup = run_timed(
        [our_holodeck().parent / "dagster", "instance", "migrate"], env=env, cwd=root, timeout=300
    )
    if setup.returncode != 0:
        print(f"dagster instance migrate failed:\n{setup.tail()}", file=sys.stderr)
    return setup.returncode == 0


def prepare(root: Path, env: dict[str, str], floor_key: str) -> str | None:
    """Untimed: the prompt-version sensor's and `holodeck pools`' work; the active version."""
    python = our_holodeck().parent / "python"
    prepared = run_timed(
        [python, root / "prepare.py", root, floor_key], env=env, cwd=root, timeout=300
    )
    if prepared.returncode != 0:
        print(f"setup failed:\n{prepared.tail()}", file=sys.stderr)
        return None
    return prepared.stdout.strip().splitlines()[-1]


def timed_ok(
    cmd: list[str | Path], env: dict[str, str], root: Path, ok: tuple[int, ...]
) -> float | None:
    timed = run_timed(cmd, env=env, cwd=root, timeout=600)
    if timed.returncode not in ok:
        print(f"{cmd[1]} run failed:\n{timed.tail()}", file=sys.stderr)
        return None
    return timed.wall


def partition_runs(
    work: Path, server: ModelServer, args: argparse.Namespace
) -> dict[str, list[float]] | None:
    """One partition through Dagster, the CLI and the floor, interleaved."""
    times: dict[str, list[float]] = {"cli": [], "dagster": [], "floor": []}
    root, agent, _ = make_root(work, "project", args.cases, 1)
    if not migrate(root, env_for(work / "setup-home", root, server)):
        return None
    for attempt in range(args.repeat):
        for kind in times:
            env = env_for(work / f"{kind}-{attempt}", root, server)
            if kind == "cli":
                cmd: list[str | Path] = [our_holodeck(), "test", agent, "-q", "--fresh"]
            else:
                version = prepare(root, env, f"p{attempt}")
                if version is None:
                    return None
                cmd = (
                    materialize(f"{AGENT_GROUP}/processed_files*", version, module=OURS)
                    if kind == "dagster"
                    else materialize("step_1*", f"p{attempt}", module=FLOOR_MODULE)
                )
            wall = timed_ok(cmd, env, root, (0, 1) if kind == "cli" else (0,))
            if wall is None:
                return None
            times[kind].append(wall)
            print(f"  {kind:<8} run {attempt + 1}: {wall:.2f} s", flush=True)
    return times


def backfill_runs(
    work: Path, server: ModelServer, args: argparse.Namespace
) -> dict[str, list[float]] | None:
    """The versions through the CLI one after another (the sum) and one single-run backfill."""
    times: dict[str, list[float]] = {"cli-sequence": [], "backfill": []}
    root, agent, keys = make_root(work, "backfill", args.cases, args.versions)
    if not migrate(root, env_for(work / "setup-home-backfill", root, server)):
        return None
    for attempt in range(args.repeat):
        for kind in times:
            env = env_for(work / f"{kind}-{attempt}", root, server)
            if prepare(root, env, f"b{attempt}") is None:
                return None
            if kind == "cli-sequence":
                walls = [
                    timed_ok(
                        [our_holodeck(), "test", agent, "-q", "--fresh", "--prompt-version", key],
                        env,
                        root,
                        (0, 1),
                    )
                    for key in keys
                ]
                if any(wall is None for wall in walls):
                    return None
                wall = sum(w for w in walls if w is not None)
            else:
                cmd = materialize(
                    f"{AGENT_GROUP}/processed_files*",
                    f"{keys[0]}...{keys[-1]}",
                    module=OURS,
                    flag="--partition-range",
                )
                found = timed_ok(cmd, env, root, (0,))
                if found is None:
                    return None
                wall = found
            times[kind].append(wall)
            print(f"  {kind:<12} run {attempt + 1}: {wall:.2f} s", flush=True)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--versions", type=int, default=10, help="0: no backfill")
    args = parser.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="holodeck-bench-") as scratch:
        work = Path(scratch)
        rules = work / "rules.yaml"
        rules.write_text(RULES_YAML, encoding="utf-8")
        with ModelServer(rules, args.latency, log=work / "server.log") as server:
            times = partition_runs(work, server, args)
            backfill = backfill_runs(work, server, args) if args.versions > 1 else {}
    if times is None or backfill is None:
        return 1
    cli, dagster, floor = (median(times[kind]) for kind in ("cli", "dagster", "floor"))
    print(
        f"\n{args.cases} cases, latency {args.latency:g} s, default parallelism "
        f"({DEFAULT_PARALLEL_TEST_CASES}); "
        f"ideal {ideal(args.cases, DEFAULT_PARALLEL_TEST_CASES, args.latency):.2f} s"
    )
    print(f"  holodeck test : median {fmt(cli)} s ({runs_text(times['cli'])})")
    print(
        "  dagster asset materialize, 1 partition, 5 assets + 5 checks, persistent instance: "
        f"median {fmt(dagster)} s ({runs_text(times['dagster'])})"
    )
    print(
        f"  dagster floor (same command, {FLOOR_ASSETS} empty assets): median {fmt(floor)} s "
        f"({runs_text(times['floor'])})"
    )
    ratios = [
        ("dagster/cli", ratio(dagster, cli)),
        ("dagster-extra-s", dagster - cli),
        ("dagster-floor-s", floor),
        ("ours-over-floor-s", dagster - floor),
    ]
    if backfill:
        sequence, single = median(backfill["cli-sequence"]), median(backfill["backfill"])
        print(
            f"  {args.versions} versions, holodeck test --prompt-version V one after another: "
            f"median {fmt(sequence)} s ({runs_text(backfill['cli-sequence'])})"
        )
        print(
            f"  {args.versions} versions, one single-run backfill (--partition-range): "
            f"median {fmt(single)} s ({runs_text(backfill['backfill'])})"
        )
        ratios.append(("backfill/cli-sequence", ratio(single, sequence)))
    print(ratio_line(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
