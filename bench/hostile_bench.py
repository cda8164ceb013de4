"""Big inputs (docs/agent-yaml.md): peak memory (RSS) and time of each, before and
after the caps.

Each measurement is a fresh interpreter running ``holodeck`` in-process (``main(argv)``) or
the explorer page, reporting its own wall time and peak RSS (``ru_maxrss``). ``--source DIR``
runs another checkout's ``holodeck_core`` instead (``git archive main holodeck_core | tar -x
-C DIR``: the "before"). Only the loopback model server on 127.0.0.1 is called.

    .venv/bin/python bench/hostile_bench.py [--source DIR] [--files 25000] [--response-mb 10]
        [--big-mb 60]

Nothing here is timed in tests; the figures go to docs/benchmarks.md."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from holodeck_core.defaults import MAX_SOURCE_FILE_BYTES
from holodeck_core.testing import run_model_server

REPO = Path(__file__).resolve().parents[1]
MEASURE = textwrap.dedent("""\
    import json, resource, sys, time
    start = time.perf_counter()
    kind, arg = sys.argv[1], sys.argv[2]
    if kind == "cli":
        from holodeck_core.cli.main import main
        import contextlib, io
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(json.loads(arg))
        out = {"code": code}
    else:  # the explorer page of run "huge", case "refund-policy", in the history at arg
        from pathlib import Path
        from plotly.utils import PlotlyJSONEncoder
        from holodeck_core.dashboard.explorer_view import page
        shown = json.dumps(page(Path(arg), {"run": ["huge"], "case": ["refund-policy"]}),
                           cls=PlotlyJSONEncoder)
        out = {"page_bytes": len(shown)}
    out["seconds"] = round(time.perf_counter() - start, 2)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(out))
""")
AGENT = """\
name: big
model: {{provider: openai, name: m, endpoint: "{endpoint}", api_key: sk-bench-offline-1234}}
instructions: {{inline: "Answer from the knowledge base."}}
evaluations: {{metrics: [{{type: standard, metric: equality}}]}}
tools:
{tools}
test_cases:
  - {{name: q, input: "returns?", ground_truth: "ok"}}
"""


def measure(kind: str, arg: str, source: Path | None, home: Path) -> dict[str, Any]:
    env = {**os.environ, "HOLODECK_HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (source, REPO) if p)
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, kind, arg],
        capture_output=True,
        text=True,
        env=env,
        cwd=source or REPO,
        timeout=1800,
    )
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip().splitlines()[-1][:200]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def small_files(folder: Path, count: int) -> None:
    docs = folder / "docs"
    docs.mkdir(parents=True)
    for i in range(count):
        (docs / f"d{i:06d}.md").write_text(f"# Page {i}\n\nReturns are accepted for item {i}.\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, help="a checkout to run instead (the before)")
    parser.add_argument("--files", type=int, default=25_000)
    parser.add_argument("--response-mb", type=int, default=10)
    parser.add_argument("--big-mb", type=int, default=60, help="the one big file (> 50: refused)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, run_model_server() as server:
        root = Path(scratch)
        endpoint = server.openai_base_url
        rows: dict[str, dict[str, Any]] = {}

        kb = "  - {type: vectorstore, name: kb, description: kb, source: docs}\n"
        small_files(root / "many", args.files)
        (root / "many" / "agent.yaml").write_text(AGENT.format(endpoint=endpoint, tools=kb))
        argv = json.dumps(["test", str(root / "many" / "agent.yaml"), "-q"])
        rows[f"retrieval over {args.files:,} small files"] = measure(
            "cli", argv, args.source, root / "home-many"
        )

        (root / "big" / "docs").mkdir(parents=True)
        line = "Returns are accepted within 30 days of purchase with a receipt.\n"
        big = args.big_mb * 1024 * 1024
        (root / "big" / "docs" / "big.md").write_text(line * (big // len(line)))
        (root / "big" / "agent.yaml").write_text(AGENT.format(endpoint=endpoint, tools=kb))
        argv = json.dumps(["test", str(root / "big" / "agent.yaml"), "-q"])
        # before the caps, an index of 60 MB of text took minutes and GBs: not run
        if args.source is None or big <= MAX_SOURCE_FILE_BYTES:
            rows[f"retrieval over one {args.big_mb} MB file"] = measure(
                "cli", argv, args.source, root / "home-big"
            )

        (root / "tpl").mkdir()
        (root / "tpl" / "big.hbs").write_text("{{text}} " + "Summarize this. " * 65_536)
        tool = (
            "  - {type: prompt, name: s, description: s, file: big.hbs,"
            " parameters: {text: {type: string}}}\n"
        )
        (root / "tpl" / "agent.yaml").write_text(AGENT.format(endpoint=endpoint, tools=tool))
        argv = json.dumps(["test", str(root / "tpl" / "agent.yaml"), "-q"])
        if args.source is None:  # before: the compile alone takes minutes (see docs)
            rows["a 1 MB prompt tool template"] = measure(
                "cli", argv, args.source, root / "home-tpl"
            )

        db = root / "history.duckdb"
        subprocess.run(
            [sys.executable, "-c", HISTORY, str(db), str(args.response_mb)],
            check=True,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            timeout=600,
        )
        rows[f"explorer page, a {args.response_mb} MB response"] = measure(
            "page", str(db), args.source, root / "home-page"
        )
    print(json.dumps({"source": str(args.source or REPO), **rows}, indent=2))


HISTORY = textwrap.dedent("""\
    import sys
    from pathlib import Path
    from tests.history_helpers import day, ingest_runs, make_run
    run = make_run("PPPP", day(0), run_id="huge")
    huge = "word " * (int(sys.argv[2]) * 1024 * 1024 // 5)
    first = run.report.results[0]
    run.report.results[0] = first.model_copy(update={"agent_response": huge, "test_input": huge})
    ingest_runs(Path(sys.argv[1]), [run])
""")

if __name__ == "__main__":
    main()
