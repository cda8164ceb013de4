"""Remote endpoints that never answer, refuse, babble or forbid (docs/agent-yaml.md): the
history's PostgreSQL catalog, its data on S3, EvalRuns on S3 (a run's results, ``rescore
s3://``). Each is a real server on 127.0.0.1 started here (a socket that accepts and stays
silent, one that answers garbage, an HTTP server answering S3's 403, a closed port); every
command ends by the timeout of ``HOLODECK_REMOTE_TIMEOUT`` with a message naming the endpoint,
exit 3 (exit 2 for credentials), no traceback, and a run keeps its journal and EvalRun."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from tests.history_helpers import build_history, run_cli
from tests.test_lake import said

SECRET = "remote-canary-5ecret-7f3a"
Server = Callable[[str], str]
"""A shape's name → ``127.0.0.1:PORT`` of a server of that shape."""


class _Forbidden(http.server.BaseHTTPRequestHandler):
    """Every request answered as S3 answers credentials it refuses."""

    def _refuse(self) -> None:
        body = (
            b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
            b"<Message>Access Denied</Message></Error>"
        )
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _refuse

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    """Servers of each shape, on 127.0.0.1, stopped after the test."""
    monkeypatch.setenv("HOLODECK_REMOTE_TIMEOUT", "2")
    stops: list[Callable[[], None]] = []

    def start(shape: str) -> str:
        if shape == "refused":
            probe = socket.socket()
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            probe.close()
            return f"127.0.0.1:{port}"
        if shape == "forbidden":
            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forbidden)
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
            stops.append(httpd.shutdown)
            stops.append(httpd.server_close)
            return f"127.0.0.1:{httpd.server_address[1]}"
        listener = socket.create_server(("127.0.0.1", 0))
        held: list[socket.socket] = [listener]

        def serve() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                held.append(conn)  # "hang": accepted, never answered
                if shape == "garbage":
                    conn.sendall(b"\x00\xff not a protocol \r\n\r\n" * 8)

        threading.Thread(target=serve, daemon=True).start()
        stops.append(lambda: [s.close() for s in held])
        return f"127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for stop in reversed(stops):
        stop()


def use_s3(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "holodeck-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{address}")


def no_s3_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))


def clean(err: str) -> str:
    assert "Traceback" not in err and "failed unexpectedly" not in err and SECRET not in err
    return said(err)


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("hang", "no answer within 2 s (HOLODECK_REMOTE_TIMEOUT sets the seconds)"),
        ("refused", "the connection was refused"),
        ("garbage", "Unable to connect to Postgres"),
    ],
)
def test_a_postgres_catalog_that_hangs_refuses_or_babbles_is_exit_3(
    server: Server,
    shape: str,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = server(shape)
    monkeypatch.setenv("PGPASSWORD", SECRET)
    lake = f"ducklake:postgresql://holodeck@{address}/lake?data={tmp_path / 'data'}"
    db = tmp_path / "history.duckdb"
    build_history(db)
    for argv in (("runs", "--lake", lake), ("sync", "--db", str(db), "--to", lake)):
        code, _, err = run_cli(capsys, *argv)
        text = clean(err)
        assert code == 3, err
        assert f"cannot open history lake ducklake:postgresql://***@{address}/lake" in text
        assert expected in text


@pytest.mark.parametrize(
    ("shape", "code", "expected"),
    [
        ("hang", 3, "did not answer within 2 s (2 attempts; HOLODECK_REMOTE_TIMEOUT"),
        ("refused", 3, "cannot connect to s3://bucket/runs/run.json (endpoint http://"),
        ("garbage", 3, "did not answer as S3 does"),
        ("forbidden", 2, "refused the credentials"),
    ],
)
def test_rescore_of_an_s3_evalrun_on_a_bad_endpoint(
    server: Server,
    shape: str,
    code: int,
    expected: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    address = server(shape)
    use_s3(monkeypatch, address)
    assert main(["rescore", "s3://bucket/runs/run.json"]) == code
    text = clean(capsys.readouterr().err)
    assert expected in text and address in text


@pytest.mark.parametrize(
    ("shape", "code", "expected"),
    [
        ("hang", 3, "no answer within 2 s"),
        ("garbage", 3, "cannot write to the history database"),
        ("forbidden", 2, "S3 refused the credentials (check AWS_ACCESS_KEY_ID"),
    ],
)
def test_a_lake_whose_s3_data_hangs_babbles_or_forbids(
    server: Server,
    shape: str,
    code: int,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    use_s3(monkeypatch, server(shape))
    db = tmp_path / "history.duckdb"
    build_history(db)
    lake = f"ducklake:{tmp_path / 'catalog.ducklake'}?data=s3://bucket/lake"
    got, _, err = run_cli(capsys, "sync", "--db", str(db), "--to", lake)
    assert got == code, err
    assert expected in clean(err)


def test_s3_without_credentials_names_the_variables_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    no_s3_credentials(monkeypatch, tmp_path)
    db = tmp_path / "history.duckdb"
    build_history(db)
    lake = f"ducklake:{tmp_path / 'catalog.ducklake'}?data=s3://bucket/lake"
    with pytest.raises(SystemExit) as usage:  # a results URL is an argument: argparse says it
        main(["history", "sync", "s3://bucket/results", "--db", str(db)])
    assert usage.value.code == 2
    assert "no S3 credentials are set" in clean(capsys.readouterr().err)
    for argv in (
        ["history", "sync", "--db", str(db), "--to", lake],
        ["rescore", "s3://bucket/runs/run.json"],
    ):
        assert main(argv) == 2, argv
        text = clean(capsys.readouterr().err)
        assert "no S3 credentials are set: export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in (
            text
        ), argv
    assert not (tmp_path / "catalog.ducklake.files").exists()


def test_a_run_whose_results_store_hangs_keeps_its_cases_and_resumes(
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from holodeck_core.testing import run_model_server
    from tests.test_pipelines import RULES, make_project

    use_s3(monkeypatch, server("hang"))
    with run_model_server(RULES) as model:
        project = make_project(tmp_path, model.openai_base_url, cases=3)
        agent = str(project.root / "agents" / "geo" / "agent.yaml")
        monkeypatch.setenv("HOLODECK_RESULTS_URL", "s3://bucket/results")
        assert main(["test", agent, "-q"]) == 3
        text = clean(capsys.readouterr().err)
        assert "the EvalRun could not be written" in text and "did not answer within 2 s" in text
        assert "the finished cases are journaled in" in text
        paid = model.stats()["total_calls"]
        assert paid == 3
        monkeypatch.delenv("HOLODECK_RESULTS_URL")  # the store is back (here: a local folder)
        # exit 1: v1's answers FAIL the gate (the run completed; its cases were not redone)
        assert main(["test", agent, "-q"]) == 1, capsys.readouterr().err
        assert model.stats()["total_calls"] == paid  # resumed from the journal: no new call
    assert list((project.root / "agents" / "geo" / "results").rglob("*.json"))


def test_a_run_and_a_partition_whose_history_hangs_still_write_the_evalrun(
    server: Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import dagster as dg

    from holodeck_core.testing import run_model_server
    from holodeck_pipelines.builder import build_definitions
    from tests.dagster_helpers import materialize, register
    from tests.test_pipelines import RULES, make_project

    address = server("hang")
    monkeypatch.setenv("PGPASSWORD", SECRET)
    lake = f"ducklake:postgresql://holodeck@{address}/lake?data={tmp_path / 'data'}"
    monkeypatch.setenv("HOLODECK_HISTORY_URL", lake)
    with run_model_server(RULES) as model, dg.instance_for_test() as instance:
        project = make_project(tmp_path, model.openai_base_url, cases=2)
        agent = project.root / "agents" / "geo" / "agent.yaml"
        code = main(["test", str(agent), "-q"])
        text = clean(capsys.readouterr().err)
        assert code == 3, text  # the history is infrastructure (docs/cli.md) ...
        assert "the run history was not updated" in text and address in text
        assert "the EvalRun is safe" in text  # ... and the run is on disk
        assert "holodeck history sync" in text
        results = agent.parent / "results"
        written = set(results.rglob("*.json"))
        assert written
        defs = build_definitions(type(project).discover(tmp_path))
        register(defs, instance)
        result = materialize(defs, instance, "v2")
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "geo_agent__eval_history"
    data = failure.step_failure_data
    assert data.error is not None
    headline = data.error.message.splitlines()[0]
    assert "Traceback" not in headline and SECRET not in data.error.message
    assert f"cannot open history lake ducklake:postgresql://***@{address}/lake" in headline
    assert "no answer within 2 s" in headline and "the EvalRun is safe" in headline
    succeeded = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"}
    assert "geo_agent__report_summary" in succeeded  # the partition's EvalRun is written
    assert len(set(results.rglob("*.json"))) > len(written)
