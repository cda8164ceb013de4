"""Helpers for the hardening tests (docs/agent-yaml.md): agents for the loopback server, a CLI run
in a subprocess with one write boundary failing, and a look at everything a run leaves behind."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from holodeck_core.cli.main import main
from tests.conftest import REPO

FAULTY_CLI = textwrap.dedent("""\
    import importlib, sys
    from tests.hostile import faulty
    target, after, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    module_name, attr = target.rsplit(".", 1)
    module = importlib.import_module(module_name)
    setattr(module, attr, faulty(getattr(module, attr), kind, after))
    from holodeck_core.cli.main import main
    sys.exit(main(sys.argv[4:]))
""")


def faulty(real: Callable[..., Any], kind: str, after: int = 0) -> Callable[..., Any]:
    """``real``, raising ``OSError(errno.KIND)`` (DuckDB's disk-full error for ``duckdb``)
    from its call number ``after + 1`` on."""
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > after:
            if kind == "duckdb":
                raise duckdb.IOException("IO Error: No space left on device")
            code = getattr(errno, kind)
            raise OSError(code, os.strerror(code), str(args[0]) if args else None)
        return real(*args, **kwargs)

    return wrapper


def run_cli_with_fault(
    target: str, kind: str, args: list[str], *, after: int = 0
) -> subprocess.CompletedProcess[str]:
    """``holodeck ARGS`` in a subprocess where ``target`` (``module.function``) fails as
    :func:`faulty` says: a full or read-only disk without touching the machine's disks."""
    return subprocess.run(
        [sys.executable, "-c", FAULTY_CLI, target, str(after), kind, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """``holodeck ARGS`` in this process, its output captured (a subprocess costs seconds of
    imports; :func:`run_cli_with_fault` pays them only where a fault must be injected)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def agent_yaml(
    folder: Path,
    base_url: str,
    cases: str,
    *,
    name: str = "hostile",
    api_key: str = "sk-test-key-1234",
    extra: str = "",
    metric: str = "{type: standard, metric: equality, case_insensitive: true}",
) -> Path:
    """An openai agent with an equality metric; ``cases`` is the YAML list of test cases."""
    folder.mkdir(parents=True, exist_ok=True)
    agent = folder / "agent.yaml"
    agent.write_text(
        textwrap.dedent(f"""\
            name: {name}
            model: {{provider: openai, name: test-model, endpoint: "{base_url}",
                     api_key: "{api_key}"}}
            instructions: {{inline: "You are helpful."}}
            evaluations:
              metrics:
                - {metric}
            """)
        + extra
        + "test_cases:\n"
        + textwrap.indent(textwrap.dedent(cases), "  ")
    )
    return agent


def everything_written(*folders: Path) -> str:
    """The text of every file under ``folders`` plus every row of every DuckDB table there."""
    parts: list[str] = []
    for folder in folders:
        for path in folder.rglob("*"):
            if not path.is_file():
                continue
            if path.suffix == ".duckdb":
                con = duckdb.connect(str(path), read_only=True)
                try:
                    for (table,) in con.execute("SHOW TABLES").fetchall():
                        parts.append(str(con.execute(f'SELECT * FROM "{table}"').fetchall()))
                finally:
                    con.close()
            else:
                parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
