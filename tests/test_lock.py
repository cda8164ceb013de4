"""The locked install (README's quick start, ``Makefile``): ``.venv`` holds exactly what
``uv.lock`` says, every locked distribution carries hashes, and ``make venv`` stops, naming the
command that refreshes the lock, when ``pyproject.toml`` asks for something the lock lacks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.test_readme import UV, fresh_checkout

PROJECT = "holodeck-pipelines"


def _locked() -> list[dict[str, Any]]:
    """Every locked package (a name may appear once per Python version it resolves for)."""
    return list(tomllib.loads((REPO / "uv.lock").read_text())["package"])


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_locked_distribution_has_hashes() -> None:
    for package in _locked():
        name = package["name"]
        if name == PROJECT:
            continue
        files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
        assert files, f"{name}: no files in uv.lock"
        for file in files:
            assert str(file["hash"]).startswith("sha256:"), (name, file)


def test_the_venv_holds_exactly_the_locked_versions() -> None:
    locked: dict[str, set[str]] = {}
    for package in _locked():
        locked.setdefault(package["name"], set()).add(package["version"])
    installed = {
        _normal(dist.metadata["Name"]): dist.version
        for dist in metadata.distributions(path=[p for p in sys.path if "site-packages" in p])
    }
    assert installed, "no distributions found in the venv"
    for name, version in installed.items():
        assert name in locked, f"{name} {version} is installed but not in uv.lock"
        assert version in locked[name], (name, version, locked[name])


def test_make_venv_stops_when_pyproject_asks_for_what_the_lock_lacks(tmp_path: Path) -> None:
    root = fresh_checkout(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            "dependencies = [\n", 'dependencies = [\n    "tomli-w==1.2.0",\n', 1
        )
    )
    proc = subprocess.run(
        # -o: the repository's uv is taken as it is (not bootstrapped again in the checkout)
        ["make", "-o", str(UV), "venv", f"UV={UV}", f"VENV={tmp_path / 'venv'}"],
        cwd=root,
        env={k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pyproject.toml and uv.lock disagree" in proc.stderr
    assert "run 'make lock'" in proc.stderr
    assert not (tmp_path / "venv").exists(), "nothing is installed from a lock that disagrees"
