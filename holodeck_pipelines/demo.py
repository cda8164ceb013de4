"""``holodeck demo``: the whole product, offline, on a real Dagster instance.

Starts the loopback model server with each agent's ``model-rules.yaml``, registers the prompt
versions, materializes every partition through Dagster (storage in ``.holodeck/dagster/``),
lets the assets ingest the history, prints a summary per version and one SQL query, ends with
the first agent's prompt versions x model candidates (``holodeck matrix``), and says how to open
the UI on the same state."""

import os
import time
from pathlib import Path
from typing import Any

from holodeck_core.config.project import Project
from holodeck_core.defaults import MODEL_SERVER_PORT as DEMO_PORT
from holodeck_core.engine.demo import demo_matrix, read_demo_runs, scripted_model_server
from holodeck_core.errors import ConfigError
from holodeck_pipelines.automation import register_versions
from holodeck_pipelines.builder import build_definitions, build_pipelines
from holodeck_pipelines.cells import cell_of, rows_of
from holodeck_pipelines.instance import project_instance
from holodeck_pipelines.pools import apply_pools
from holodeck_pipelines.resources import HoloDeckProject
from holodeck_pipelines.run_tags import TRIALS_TAG, TRIGGER_TAG

DEMO_TRIALS = 3
"""Every case runs this many times (the ``holodeck/trials`` run tag), so the summary shows
intervals clustered by case, pass@k and pass^k (docs/cli.md)."""
RULES_FILE = "model-rules.yaml"
EXAMPLE_QUERY = (
    "SELECT agent_name, prompt_version, model_candidate, count(*) AS runs, "
    "round(avg(pass_rate) * 100, 1) AS pass_rate_pct, sum(errored) AS errored "
    "FROM eval_runs GROUP BY ALL ORDER BY ALL"
)


def run_demo(root: Path, *, port: int | None = None) -> int:
    """``port``: the model server's (``None``: :data:`DEMO_PORT`, or a free one when taken)."""
    started = time.perf_counter()
    project = Project.discover(root)
    agents = project.agent_paths()
    if not agents:
        raise ConfigError(f"{root / 'holodeck.yaml'} lists no agents to run")
    rules_file = agents[0].parent / RULES_FILE
    if not rules_file.is_file():
        raise ConfigError(f"the demo needs loopback-server rules at {rules_file}")
    if port is None:
        port = DEMO_PORT if _port_free(DEMO_PORT) else 0
    elif port and not _port_free(port):
        raise ConfigError(
            f"port {port} is in use: choose another --port, or --port 0 for a free one"
        )
    with scripted_model_server(rules_file, port=port) as server:
        os.environ["HOLODECK_MODEL_ENDPOINT"] = server.openai_base_url
        print(f"loopback model server: {server.openai_base_url} (scripted by {rules_file})")
        defs = build_definitions(project)
        resource = HoloDeckProject(root=str(project.root))
        with project_instance(root) as instance:
            apply_pools(instance, project)
            run_ids: list[str] = []
            gates: dict[str, bool] = {}
            for pipeline in build_pipelines(project):
                active, registered = register_versions(pipeline.agent_file, resource)
                instance.add_dynamic_partitions(pipeline.partitions.name or "", registered)
                job = defs.resolve_job_def(pipeline.job.name)
                for key in rows_of(active, pipeline.candidates):
                    print(
                        f"materializing {pipeline.name} {cell_of(key).label} "
                        f"({DEMO_TRIALS} trials per case) ...",
                        flush=True,
                    )
                    result = job.execute_in_process(
                        partition_key=key,
                        instance=instance,
                        tags={TRIGGER_TAG: "manual", TRIALS_TAG: str(DEMO_TRIALS)},
                        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
                        raise_on_error=False,
                    )
                    run_ids.append(result.run_id)
                    gates.update(
                        (result.run_id, check.passed)
                        for check in result.get_asset_check_evaluations()
                        if check.check_name == "pass_rate_gate"
                    )
                    if not result.success:
                        print(f"  run {result.run_id} failed; see it in the Dagster UI")
        print(f"running {agents[0].parent.name}'s matrix (holodeck matrix) ...", flush=True)
        matrix = demo_matrix(agents[0], print)
        endpoint = server.openai_base_url
        server_port = server.port
    _print_summary(project, run_ids, gates)
    print("\nits prompt versions x model candidates (`holodeck matrix`, one agent only):")
    print("\n".join(f"  {line}" for line in matrix))
    moved = "" if server_port == DEMO_PORT else f"HOLODECK_MODEL_ENDPOINT={endpoint} "
    print(
        f"\ndone in {time.perf_counter() - started:.0f}s. What it means: a prompt version whose "
        "pass rate is under its agent's gate (evaluations.gate) fails the pass_rate_gate check, "
        "as `holodeck test` exits 1 for it in a pull request; the paired comparison says "
        "whether the newer version's change is more than noise.\n"
        "Open next:\n"
        "  .venv/bin/holodeck dashboard   # trends, cases and comparisons at "
        "http://127.0.0.1:8501\n"
        f"  .venv/bin/holodeck model-server --port {server_port} --script "
        f"{rules_file.relative_to(project.root)} &   # for reruns from the UI\n"
        f"  {moved}DAGSTER_HOME={project.root} .venv/bin/dg dev -h 127.0.0.1"
        "   # the same runs, partitions, checks and schedule at http://127.0.0.1:3000\n"
        "  .venv/bin/holodeck history runs   # the history from the shell "
        "(and `holodeck history sql` for SQL)"
    )
    return 0


def _print_summary(project: Project, run_ids: list[str], gates: dict[str, bool]) -> None:
    """Each run with its gate, then per agent its newest version against its first (never
    across agents: each agent's versions answer its own cases), then the example query."""
    runs = read_demo_runs(project, run_ids, EXAMPLE_QUERY)
    print("\nthis demo's runs (from the DuckDB history):")
    for row in runs.rows:
        print(_run_lines(row, gates.get(row[-2])))
    for agent, (newer, older, paired) in runs.comparisons.items():
        if paired is not None:
            print(
                f"\n  {agent} {newer} vs {older}, paired over the shared cases: "
                f"{paired.pass_fraction.render()}"
            )
    print(f"\n{EXAMPLE_QUERY}\n  " + " | ".join(runs.columns))
    for values in runs.query:
        print("  " + " | ".join(str(value) for value in values))


def _run_lines(row: tuple[Any, ...], gate: bool | None) -> str:
    agent, version, passed, failed, errored, total, rate = row[:7]
    k, p, low, high, at_k, hat_k, flaky = row[7:14]
    verdict = {True: "gate passed", False: "gate FAILED", None: "no gate"}[gate]
    return (
        f"  {agent} {version:<10} {passed} passed, {failed} failed, {errored} errored of "
        f"{total}: {rate:.0%} ({verdict})\n"
        f"    {k} trials per case: pass fraction {p:.1%} (95% CI {low:.1%} to {high:.1%}, "
        f"clustered by case); pass@{k} {at_k:.1%}, pass^{k} {hat_k:.1%}; {flaky} flaky case(s)"
    )


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0
