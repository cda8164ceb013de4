"""DuckDB's extensions for a DuckLake history, from their PyPI packages
(``duckdb-extension-ducklake`` ...), never downloaded: each wheel's file is installed once per
user into a private extension directory, then loaded by name in every connection; DuckDB's
signature check is skipped only where it adds nothing (:func:`_trusted`, docs/history.md)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from holodeck_core.errors import ConfigError
from holodeck_core.history.tabular import literal

if TYPE_CHECKING:
    import duckdb


def extension_file(name: str) -> Path:
    """The ``.duckdb_extension`` file the package ``duckdb-extension-<name>`` installed."""
    try:
        package = importlib.import_module(f"duckdb_extension_{name}")
    except ImportError:
        raise ConfigError(
            f"the DuckDB extension {name!r} is not installed: pip install "
            f"duckdb-extension-{name} (the release pinned with duckdb)"
        ) from None
    import duckdb

    folder = Path(str(package.__file__)).parent / "extensions" / f"v{duckdb.__version__}"
    found = folder / f"{name}.duckdb_extension"
    if not found.is_file():
        raise ConfigError(
            f"duckdb-extension-{name} has no build for DuckDB {duckdb.__version__} ({found}); "
            "install the duckdb-extension packages of the pinned DuckDB release"
        )
    return found


def extension_directory() -> Path:
    """Where the wheels' extensions are installed once for every process of this user:
    ``$XDG_CACHE_HOME/holodeck/duckdb-extensions`` (``~/.cache/…``), private to the user;
    DuckDB keys what it installs there by its version and platform."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser()
    folder = base / "holodeck" / "duckdb-extensions"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"cannot create the DuckDB extension directory {folder} ({exc.strerror}); "
            "point XDG_CACHE_HOME at a folder this user can write"
        ) from None
    return folder


def _trusted(folder: Path, files: list[Path]) -> bool:
    """Whether DuckDB's signature check may be skipped for ``files`` (installed copies in
    ``folder``): each comes from a wheel beside DuckDB's own module, owned as it is and
    writable by nobody else, and ``folder`` is this user's alone. Whoever could change such a
    file could change DuckDB's own library, which nothing checks: the check adds nothing
    there and costs 0.1-0.3 s per extension per connection (docs/history.md)."""
    import duckdb

    module = Path(duckdb.__file__).resolve()
    site, owner = module.parent.parent, module.stat().st_uid
    mode = folder.stat()
    if mode.st_uid != os.getuid() or mode.st_mode & 0o077:
        return False
    for file in files:
        path = file.resolve()
        stat = path.stat()
        if not path.is_relative_to(site) or stat.st_uid != owner or stat.st_mode & 0o022:
            return False
    return True


def extensions_connection(names: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the extensions ``names`` loaded from the pinned wheels."""
    import duckdb

    files = [extension_file(name) for name in names]
    folder = extension_directory()
    con = duckdb.connect(
        config={
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "extension_directory": str(folder),
            "allow_unsigned_extensions": _trusted(folder, files),
        }
    )
    try:
        load_extensions(con, names)
    except BaseException:
        con.close()
        raise
    return con


def load_extensions(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """``LOAD`` each extension not loaded yet, first installing the wheel's file into the
    connection's extension directory when the copy there is missing or older than it (once
    per user and DuckDB release, not once per connection)."""
    known = {
        alias: (bool(loaded), Path(path) if path else None)
        for name, aliases, loaded, path in con.execute(
            "SELECT extension_name, aliases, loaded, install_path FROM duckdb_extensions()"
        ).fetchall()
        for alias in (name, *aliases)
    }
    for name in names:
        loaded, installed = known.get(name, (False, None))
        if loaded:
            continue
        wheel = extension_file(name)
        if not _up_to_date(installed, wheel):
            con.execute(f"FORCE INSTALL {literal(str(wheel))}")
        con.execute(f"LOAD {name}")


def _up_to_date(installed: Path | None, wheel: Path) -> bool:
    if installed is None or not installed.is_file():
        return False
    copy, source = installed.stat(), wheel.stat()
    return copy.st_size == source.st_size and copy.st_mtime >= source.st_mtime
