"""Does HoloDeck 0.7.1 read our results folders? Run with HoloDeck's own interpreter:

    bench/.peer-venv/bin/python bench/holodeck_load.py RESULTS_FOLDER...

For each folder (``results/<slug>/``, or a ``results/`` folder of several slugs) it prints, as
JSON, how many ``*.json`` files HoloDeck's loader would see, how many validate in
``holodeck.models.eval_run.EvalRun``, how many runs the dashboard's data loader lists, and
the first error of each file that does not validate. Exit 1 when any file is refused.

HoloDeck's ``EvalRun`` imports the code graders its ``agent_config`` names while it validates,
so a file of an agent with a ``code`` metric loads only where the grader's module imports:
``holodeck test view`` run from the agent's folder. Each ``results/<slug>/`` folder is checked
with its agent's folder (two levels up) on ``sys.path``, as that would be, and a file HoloDeck
refuses for any reason is counted as refused, as its dashboard's loader skips it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def check(folder: Path) -> dict[str, Any]:
    from holodeck.dashboard.data_loader import load_all
    from holodeck.models.eval_run import EvalRun
    from pydantic import ValidationError

    agent_dir = str(folder.resolve().parent.parent)
    if agent_dir not in sys.path:
        sys.path.insert(0, agent_dir)
    files = sorted(folder.glob("*.json"))
    refused: dict[str, str] = {}
    for path in files:
        try:
            EvalRun.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            refused[path.name] = f"{exc.error_count()} errors; {where}: {first['msg']}"
        except Exception as exc:  # HoloDeck's ConfigError (a grader that does not import)
            refused[path.name] = f"{type(exc).__name__}: {exc}"
    return {
        "folder": str(folder),
        "files": len(files),
        "valid": len(files) - len(refused),
        "dashboard_runs": len(load_all(folder)),
        "refused": refused,
    }


def main() -> None:
    folders: list[Path] = []
    for arg in sys.argv[1:]:
        path = Path(arg)
        slugs = [p for p in sorted(path.iterdir()) if p.is_dir() and any(p.glob("*.json"))]
        folders.extend([path] if any(path.glob("*.json")) or not slugs else slugs)
    report = [check(folder) for folder in folders]
    print(json.dumps({"folders": report}, indent=1))
    sys.exit(1 if any(r["refused"] for r in report) else 0)


if __name__ == "__main__":
    main()
