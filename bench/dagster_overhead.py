"""What Dagster costs on top of the CLI: one partition materialized through Dagster (five
asset steps, a real instance, the IO manager, the history write and the checks) against the
same suite run by ``holodeck test``, side by side against one loopback model server.

    .venv/bin/python bench/dagster_overhead.py [--cases 50] [--latency 0.5] [--repeat 3]

Ends with ``RATIOS dagster/cli=… dagster-extra-s=…``."""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path

from common import (
    ENDPOINT_VAR,
    RULES_YAML,
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

from holodeck_core.models.agent import DEFAULT_PARALLEL_TEST_CASES

DAGSTER_RUN = textwrap.dedent("""\
    import sys
    from pathlib import Path

    import dagster as dg

    from holodeck_core.config.project import Project
    from holodeck_pipelines.automation import register_versions
    from holodeck_pipelines.builder import build_definitions, build_pipelines
    from holodeck_pipelines.resources import HoloDeckProject

    root, dagster_home = Path(sys.argv[1]), sys.argv[2]
    project = Project.discover(root)
    defs = build_definitions(project)
    [pipeline] = build_pipelines(project)
    active, registered = register_versions(pipeline.agent_file, HoloDeckProject(root=str(root)))
    with dg.instance_for_test(temp_dir=dagster_home) as instance:
        instance.add_dynamic_partitions(pipeline.partitions.name, registered)
        result = defs.resolve_job_def(pipeline.job.name).execute_in_process(
            partition_key=active[0],
            instance=instance,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        )
    sys.exit(0 if result.success else 1)
    """)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    python = our_holodeck().parent / "python"
    cli_times: list[float] = []
    dagster_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="holodeck-bench-") as scratch:
        work = Path(scratch)
        rules = work / "rules.yaml"
        rules.write_text(RULES_YAML, encoding="utf-8")
        with ModelServer(rules, args.latency, log=work / "server.log") as server:
            for attempt in range(args.repeat):
                for kind in ("cli", "dagster"):
                    root = work / f"{kind}-{attempt}"
                    agent = write_agent(root / "agent", args.cases)
                    (root / "holodeck.yaml").write_text("agents: [agent/agent.yaml]\n")
                    env = our_env(root / ".holodeck", server.openai_base_url)
                    env[ENDPOINT_VAR] = server.openai_base_url
                    if kind == "cli":
                        cmd = [our_holodeck(), "test", agent, "-q", "--fresh"]
                    else:
                        script = work / "dagster_run.py"
                        script.write_text(DAGSTER_RUN, encoding="utf-8")
                        (root / "dagster").mkdir()
                        cmd = [python, script, root, root / "dagster"]
                    timed = run_timed(cmd, env=env, cwd=root, timeout=600)
                    if timed.returncode not in (0, 1):
                        print(f"{kind} run failed:\n{timed.tail()}", file=sys.stderr)
                        return 1
                    (cli_times if kind == "cli" else dagster_times).append(timed.wall)
                    print(f"  {kind:<8} run {attempt + 1}: {timed.wall:.2f} s", flush=True)
    cli, dagster = median(cli_times), median(dagster_times)
    print(
        f"\n{args.cases} cases, latency {args.latency:g} s, default parallelism "
        f"({DEFAULT_PARALLEL_TEST_CASES}); "
        f"ideal {ideal(args.cases, DEFAULT_PARALLEL_TEST_CASES, args.latency):.2f} s"
    )
    print(f"  holodeck test : median {fmt(cli)} s ({runs_text(cli_times)})")
    print(
        f"  dagster (1 partition, 5 steps, in-process executor): median {fmt(dagster)} s "
        f"({runs_text(dagster_times)})"
    )
    print(ratio_line([("dagster/cli", ratio(dagster, cli)), ("dagster-extra-s", dagster - cli)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
