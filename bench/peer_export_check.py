"""Load every ``holodeck history export --format holodeck`` file in HoloDeck 0.7.1's own models.

The JSON Schema test in the suite (``tests/test_history_holodeck.py``) cannot see what HoloDeck's
pydantic models forbid beyond it (docs/holodeck-fidelity.md: ``agent_config.test_cases_file`` was
one); this script can, and needs the HoloDeck peer venv (``bash bench/peer_setup.sh``), so it never
runs in CI::

    .venv/bin/python bench/peer_export_check.py --peer bench/.peer-venv

It fills a temporary history with the corpus's HoloDeck EvalRun files (imported) and one run of
ours per sample ``agent.yaml`` of the corpus (every tool, metric and option those use), exports
them all, and validates each file with ``holodeck.models.eval_run.EvalRun`` in the peer's Python.
The last line: ``RESULT files=N loaded=N rejected=0``; exit 1 if any file is rejected.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import common
import yaml

sys.path.insert(0, str(common.REPO))

from holodeck_core.history import ingest
from holodeck_core.history.export import export_runs
from holodeck_core.models import Agent
from tests.history_helpers import make_run

CORPUS = common.REPO.parent / "shared" / "corpus" / "holodeck"

PEER_CHECK = """
import json, sys
from pathlib import Path
from pydantic import ValidationError
from holodeck.models.eval_run import EvalRun
failures = {}
for name in sys.argv[1:]:
    try:
        EvalRun.model_validate_json(Path(name).read_text(encoding="utf-8"))
    except ValidationError as exc:
        failures[name] = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
print(json.dumps(failures))
"""


def fill_history(db: Path, results: Path) -> int:
    """The corpus's HoloDeck EvalRuns and one run of ours per sample agent (written as EvalRun
    files first: export rebuilds from the files); the number of runs ingested."""
    results.mkdir()
    for index, config in enumerate(sorted(CORPUS.glob("samples/**/agent.yaml"))):
        agent = Agent.model_validate(yaml.safe_load(config.read_text(encoding="utf-8")))
        when = datetime(2026, 1, 1, tzinfo=UTC).replace(minute=index)
        run = make_run("PFE", when, run_id=f"ours-{index}", agent=agent, cases=("a", "b", "c"))
        (results / f"ours-{index}.json").write_text(run.to_json(), encoding="utf-8")
    corpus = sorted(CORPUS.glob("generated/*/evalrun_example.json"))
    return len(ingest.ingest_paths(db, [*corpus, results]).ingested)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer", required=True, help="the HoloDeck peer venv")
    args = parser.parse_args(argv)
    peer_python = Path(args.peer) / "bin" / "python"
    with tempfile.TemporaryDirectory(prefix="holodeck-export-check-") as tmp_name:
        tmp = Path(tmp_name)
        runs = fill_history(tmp / "history.duckdb", tmp / "results")
        report = export_runs(tmp / "history.duckdb", tmp / "out", "holodeck")
        files = [str(p) for p in report.written]
        answer = subprocess.run(
            [str(peer_python), "-c", PEER_CHECK, *files],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        failures: dict[str, list[str]] = json.loads(answer.stdout.strip().splitlines()[-1])
    for name, errors in failures.items():
        print(f"REJECTED {Path(name).name}: " + "; ".join(errors[:5]))
    print(f"history runs {runs}; export problems {len(report.problems)}")
    print(f"RESULT files={len(files)} loaded={len(files) - len(failures)} rejected={len(failures)}")
    return 1 if failures or report.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
