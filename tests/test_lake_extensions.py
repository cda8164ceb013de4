"""DuckDB's extensions for a DuckLake (docs/scale-out.md): installed from the pinned wheels once per
user into a private extension directory, then only loaded; each process after the first finds them
there and installs nothing; a stale copy is replaced. DuckDB's signature check is skipped only while
that directory is the user's alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from holodeck_core.history import store
from holodeck_core.history.ducklake import DuckLake
from holodeck_core.history.extensions import extension_directory, extensions_connection

REPO = Path(__file__).resolve().parents[1]
NAMES = ("ducklake", "httpfs", "postgres")
OPEN = """
import sys
from holodeck_core.history import store
from holodeck_core.history.ducklake import DuckLake
with store.writer(DuckLake.parse(sys.argv[1])) as con:
    con.execute("SELECT count(*) FROM eval_runs").fetchall()
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "holodeck" / "duckdb-extensions"


def installed(folder: Path) -> dict[str, tuple[int, int]]:
    """Each installed extension file's inode and modification time."""
    return {
        path.name: (path.stat().st_ino, path.stat().st_mtime_ns)
        for path in folder.rglob("*.duckdb_extension")
    }


def open_in_a_process(lake: DuckLake) -> None:
    subprocess.run([sys.executable, "-c", OPEN, lake.url], check=True, cwd=REPO, env=os.environ)


def test_the_first_process_installs_the_extensions_and_the_next_only_loads_them(
    cache: Path, tmp_path: Path
) -> None:
    lake = DuckLake.parse(str(tmp_path / "lake"))
    open_in_a_process(lake)
    first = installed(cache)
    assert set(first) == {"ducklake.duckdb_extension"}  # a local lake needs no more
    assert cache.stat().st_mode & 0o777 == 0o700
    open_in_a_process(lake)
    with store.reader(lake) as con:
        assert con.execute("SELECT count(*) FROM eval_runs").fetchall() == [(0,)]
    assert installed(cache) == first  # the same files: nothing installed again


def test_a_stale_copy_is_installed_again(cache: Path, tmp_path: Path) -> None:
    lake = DuckLake.parse(str(tmp_path / "lake"))
    open_in_a_process(lake)
    copy = next(cache.rglob("ducklake.duckdb_extension"))
    wheel_size = copy.stat().st_size
    stale = copy.with_name("stale")
    stale.write_bytes(b"not the wheel's file")
    stale.replace(copy)  # a new file (a process that mapped the old one keeps it)
    open_in_a_process(lake)
    assert copy.stat().st_size == wheel_size


def test_the_signature_check_stays_on_when_the_extension_directory_is_not_private(
    cache: Path,
) -> None:
    def unsigned_allowed() -> bool:
        with extensions_connection(NAMES) as con:
            (value,) = con.execute("SELECT current_setting('allow_unsigned_extensions')").fetchone()
            return bool(value)

    assert unsigned_allowed()
    extension_directory().chmod(0o775)  # the group may write: the copies are not ours alone
    assert not unsigned_allowed()  # the check runs, and the wheels' signed files pass it


RUNS = """
import sys
from holodeck_core.cli.main import main
code = main(["history", "runs", *sys.argv[1:], "--format", "csv"])
print("pandas imported" if "pandas" in sys.modules else "no pandas", file=sys.stderr)
raise SystemExit(code)
"""


@pytest.mark.parametrize("backend", ["--db", "--lake"])
def test_history_runs_imports_no_pandas(cache: Path, tmp_path: Path, backend: str) -> None:
    """DuckDB 1.5 imports pandas (0.7 s) for any bound parameter: `history runs` binds none."""
    from tests.history_helpers import build_history

    target = tmp_path / ("history.duckdb" if backend == "--db" else "lake")
    build_history(target if backend == "--db" else DuckLake.parse(str(target)))  # type: ignore[arg-type]
    done = subprocess.run(
        [sys.executable, "-c", RUNS, backend, str(target), "--agent", "support-bot"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert done.returncode == 0, done.stderr
    assert "support-bot" in done.stdout and "no pandas" in done.stderr, done.stderr
