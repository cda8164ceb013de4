"""The README and the docs as a new user meets them: their commands run as written in a fresh
checkout, do what they say, and leave `git status` clean; their links lead somewhere; the
README stays a two-minute read; the package builds without warnings."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

BIN = Path(sys.executable).parent
UV = REPO / ".uv" / "bin" / "uv"
"""The uv that `make venv` installs (requirements-uv.txt); .venv itself has no pip."""
README_PORT = 18080  # the port the docs' commands use; the tests substitute a free one
README = REPO / "README.md"
CLI_DOC = REPO / "docs" / "cli.md"
DAGSTER_DOC = REPO / "docs" / "dagster.md"
TOUR = [
    (README, "### Run an agent"),
    (README, "### See the history"),
    (README, "### Open Dagster"),
    (README, "### Open the dashboard"),
]
"""The README's short tour, block after block, as a person pastes it into one shell."""
REFERENCE = [(CLI_DOC, "## Run and score an agent"), (CLI_DOC, "## The history, by run id")]
"""The CLI reference's blocks, in one shell."""
SERVED = " dev "
"""A command that serves until Ctrl-C and is left to the slow test: `dg dev`."""


def bash_blocks(path: Path, section: str) -> list[str]:
    """The ```bash blocks of one section of a Markdown file (up to the next heading)."""
    text = path.read_text()
    assert f"\n{section}\n" in text, f"{path.name} has no section {section!r}"
    body = text.split(f"\n{section}\n", 1)[1]
    body = re.split(r"\n#{1,6} ", body, maxsplit=1)[0]
    return re.findall(r"```bash\n(.*?)```", body, flags=re.S)


def command_lines(sections: list[tuple[Path, str]]) -> list[str]:
    return [
        line
        for path, section in sections
        for block in bash_blocks(path, section)
        for line in block.splitlines()
        if line
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fresh_checkout(tmp_path: Path) -> Path:
    """The working tree's tracked files, committed in a new repository (as after a clone)."""
    root = tmp_path / "checkout"
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, files):
        source = REPO / name.decode()
        if source.is_file():  # a tracked file deleted in the working tree is gone
            target = root / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "clone"], cwd=root, check=True)
    return root


def user_env(port: int) -> dict[str, str]:
    """A shell as the README assumes: no test isolation variables, the model on ``port``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HOLODECK_", "DAGSTER_HOME"))}
    return {**env, "HOLODECK_MODEL_ENDPOINT": f"http://127.0.0.1:{port}/v1"}


def as_run_here(command: str, port: int) -> str:
    return command.replace(".venv/bin/", f"{BIN}/").replace(str(README_PORT), str(port))


def untracked(root: Path) -> list[str]:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return status.stdout.splitlines()


@dataclass
class Walked:
    """What a fresh checkout looks like after a person ran a document's commands in one shell."""

    root: Path
    outcomes: list[tuple[str, int]]
    """Each command that reports an exit code, with the code it exited with."""
    stdout: str
    stderr: str


def walk(tmp_path: Path, sections: list[tuple[Path, str]]) -> Walked:
    """Run every command line of ``sections`` in one bash, in a fresh checkout, as written:
    a background model server is waited for; a dashboard is started on a free port, asked for
    its first page and stopped; `dg dev` is left to the slow test."""
    root = fresh_checkout(tmp_path)
    port = free_port()
    lines = [line for line in command_lines(sections) if SERVED not in line]
    script, commands = [], []
    for line in lines:
        if "model-server" in line:  # a person waits a moment; a script waits for the port
            script += [as_run_here(line, port), wait_for(port, tries=200)]
        elif "holodeck dashboard" in line:  # a person opens the page, then presses Ctrl-C
            web = free_port()
            script += [
                f"{as_run_here(line.split('#')[0], port)} --port {web} &",
                wait_for(web, tries=600),
                f'{BIN}/python -c "import urllib.request; '
                f"urllib.request.urlopen('http://127.0.0.1:{web}/', timeout=60)\"",
                'echo "[exit $?]"',
                "kill $! && wait $!",
            ]
            commands.append(line)
        else:
            script += [as_run_here(line, port), 'echo "[exit $?]"']
            commands.append(line)
    proc = subprocess.Popen(
        ["bash", "-c", "\n".join(script)],
        cwd=root,
        env=user_env(port),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so a hung command is stopped with everything it started
    )
    stdout, stderr = finish(proc, signal.SIGKILL, timeout=400)
    codes = [int(code) for code in re.findall(r"^\[exit (\d+)\]$", stdout, flags=re.M)]
    return Walked(root, list(zip(commands, codes, strict=False)), stdout, stderr)


def wait_for(port: int, *, tries: int) -> str:
    return (
        f"for _ in $(seq {tries}); do (: </dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; "
        "sleep 0.1; done"
    )


def expected(sections: list[tuple[Path, str]], codes: list[int]) -> list[tuple[str, int]]:
    """Every command the walk runs with the exit code it must give: one code per command, so
    a command added to the docs must be added here too."""
    run = [line for line in command_lines(sections) if "model-server" not in line]
    return list(zip([line for line in run if SERVED not in line], codes, strict=True))


def test_the_readme_tour_works_as_written_and_leaves_git_status_clean(tmp_path: Path) -> None:
    walked = walk(tmp_path, TOUR)
    assert walked.outcomes == expected(
        TOUR,
        # validate, test v1 (its gate fails), test v2 --trials, matrix (v1 x mini fails its
        # gate), kill; history runs, sql; pools, partitions; the dashboard's first page
        [0, 1, 0, 1, 0, 0, 0, 0, 0, 0],
    ), walked.stderr[-3000:]
    assert "Traceback" not in walked.stderr
    assert "gate (min_pass_rate 80%, max_errors 0): FAILED" in walked.stdout
    assert re.search(r"│ v2 +│ large +│ 100\.0% \(25/25\)", walked.stdout), walked.stdout[-4000:]
    assert untracked(walked.root) == []


def test_the_cli_reference_commands_work_as_written_and_leave_git_status_clean(
    tmp_path: Path,
) -> None:
    walked = walk(tmp_path, REFERENCE)
    assert walked.outcomes == expected(
        REFERENCE,
        # validate, schema, test v1 (its gate fails), test v2, test v2 --trials, plan,
        # rescore, register, list, kill; history runs, V1=, V2=, show, compare (v2
        # improves on v1), sql, sync
        [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ), walked.stderr[-3000:]
    assert "Traceback" not in walked.stderr
    assert "gate (min_pass_rate 80%, max_errors 0): FAILED" in walked.stdout
    assert json.loads((walked.root / "agent.schema.json").read_text())["title"]
    assert "**Prompt Version**: v2" in (walked.root / ".holodeck" / "report.md").read_text()
    assert untracked(walked.root) == []


def test_only_dg_dev_is_left_to_the_slow_test() -> None:
    """Every other command of the tour and the references runs in the walks above; the
    Dagster page runs the tour's Dagster block as it is."""
    served = [line for line in command_lines(TOUR + REFERENCE) if SERVED in line]
    assert len(served) == 1 and "dg dev" in served[0]
    assert bash_blocks(DAGSTER_DOC, "## Run it") == bash_blocks(README, "### Open Dagster")


@pytest.mark.slow
def test_dg_dev_as_written_serves_the_project_and_leaves_git_status_clean(
    tmp_path: Path,
) -> None:
    root = fresh_checkout(tmp_path)
    [block] = bash_blocks(README, "### Open Dagster")
    [command] = [line for line in block.splitlines() if SERVED in line]
    assert "dg dev" in command  # what Dagster 1.13 recommends over `dagster dev`
    web_port = free_port()
    command = as_run_here(command.split("#")[0], web_port) + f" -p {web_port}"
    proc = subprocess.Popen(
        ["bash", "-c", f"exec env {command}"],
        cwd=root,
        env=user_env(free_port()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{web_port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "dg dev did not start"
            try:
                urllib.request.urlopen(f"{url}/server_info", timeout=2).close()
                break
            except OSError:
                time.sleep(0.5)
        query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
        workspace = graphql(url, query)["workspaceOrError"]["locationEntries"]
        graphql(url, "mutation { setNuxSeen }")  # what dismissing the UI's welcome writes
    finally:
        sent = time.monotonic()
        output = finish(proc, signal.SIGINT, timeout=STOP_BOUND_S, session_ends=True)[0]
        stopped_after = time.monotonic() - sent
    # every process of it (webserver, daemon, code servers) has ended by itself: docs/dagster.md
    assert stopped_after < STOP_BOUND_S, f"dg dev was still running {stopped_after:.0f} s on"
    assert workspace == [{"name": "holodeck_pipelines", "loadStatus": "LOADED"}]
    assert "SupersessionWarning" not in output and "Traceback" not in output
    assert (root / ".nux" / "nux.yaml").is_file()
    assert untracked(root) == []


STOP_BOUND_S = 60.0
"""How long `dg dev` and every process it started may take to end after SIGINT (a bound, not
a speed: they end in about 5 s; docs/dagster.md, "Stopping `dg dev`")."""


def session_processes(session: int) -> list[int]:
    """The processes of ``session`` (a ``start_new_session`` child's id) still alive."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if entry.name.isdigit() and int(fields[3]) == session and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def finish(
    proc: subprocess.Popen[str], sig: signal.Signals, timeout: float, session_ends: bool = False
) -> tuple[str, str]:
    """Send ``sig`` (SIGINT: stop; SIGKILL: only on timeout) and collect the output (with
    ``session_ends``, also wait for the rest of the session to end); whatever is left of the
    session after ``timeout`` is killed."""
    deadline = time.monotonic() + timeout
    if sig is not signal.SIGKILL:
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = "", ""
    while session_ends and session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the session's leftovers (a background server)
    if proc.returncode is None:
        more = proc.communicate()
        out, err = out + (more[0] or ""), err + (more[1] or "")
    return out, err or ""


def graphql(url: str, query: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer = json.loads(response.read())
    assert "errors" not in answer, answer
    return dict(answer["data"])


def test_the_package_builds_without_deprecation_warnings(tmp_path: Path) -> None:
    """`make demo`'s install printed setuptools' `project.license` warning three times."""
    root = fresh_checkout(tmp_path)
    proc = subprocess.run(
        [
            str(UV),
            "build",
            "--wheel",
            "--python",
            sys.executable,
            "--out-dir",
            str(tmp_path / "dist"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    output = proc.stdout + proc.stderr
    assert "BuildBackendWarning" not in output, output[-3000:]
    assert "deprecat" not in output.lower(), output[-3000:]
    [wheel] = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        [metadata] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: MIT" in archive.read(metadata).decode()


def test_ports_are_documented_and_the_demo_moves_its_server_with_port(tmp_path: Path) -> None:
    """The CLI reference names `holodeck demo --port`, HOLODECK_MODEL_ENDPOINT
    and /_stats, and the README's tour links to it; `model-server --help` says /_stats; the demo
    runs on the port it is given, says how to reach it again, and leaves `git status` clean."""
    ports = CLI_DOC.read_text().split("\n### Ports and the loopback model server\n", 1)[1]
    for needle in (
        "holodeck demo --port",
        "HOLODECK_MODEL_ENDPOINT=http://127.0.0.1:P/v1",
        "/_stats",
    ):
        assert needle in ports
    assert "docs/cli.md#ports-and-the-loopback-model-server" in README.read_text()
    help_text = subprocess.run(
        [str(BIN / "holodeck"), "model-server", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "GET /_stats" in " ".join(help_text.split())
    assert "GET /_requests every model request" in " ".join(help_text.split())
    assert "HOLODECK_MODEL_ENDPOINT" in help_text
    root = fresh_checkout(tmp_path)
    port = free_port()
    env = {k: v for k, v in user_env(port).items() if k != "HOLODECK_MODEL_ENDPOINT"}
    proc = subprocess.run(
        [str(BIN / "holodeck"), "demo", "--port", str(port)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"loopback model server: http://127.0.0.1:{port}/v1" in proc.stdout
    assert f"model-server --port {port} --script" in proc.stdout
    assert f"HOLODECK_MODEL_ENDPOINT=http://127.0.0.1:{port}/v1 DAGSTER_HOME=" in proc.stdout
    # it ends with acme-support's 2 x 2 matrix: v1, v2 x the candidates the server plays apart
    matrix = proc.stdout.split("its prompt versions x model candidates", 1)[1]
    cells = re.findall(r"^  (v[12]) +(mini|large) +([\d.]+%) \((\d+)/25\)", matrix, flags=re.M)
    assert cells == [
        ("v1", "mini", "68.0%", "17"),
        ("v1", "large", "84.0%", "21"),
        ("v2", "mini", "100.0%", "25"),
        ("v2", "large", "100.0%", "25"),
    ], matrix
    assert matrix.count("+32.0 pp improvement") == 2 and "baseline v1:mini" in matrix
    assert untracked(root) == []
    with socket.socket() as busy:  # a taken port is refused with the fix, before any work
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        refused = subprocess.run(
            [str(BIN / "holodeck"), "demo", "--port", str(taken)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert refused.returncode == 2 and f"port {taken} is in use" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_readme_and_the_dagster_page_name_the_partitions_command() -> None:
    for path, section in ((README, "### Open Dagster"), (DAGSTER_DOC, "## Run it")):
        [block] = bash_blocks(path, section)
        assert "DAGSTER_HOME=$PWD .venv/bin/holodeck partitions" in block


def test_a_clone_without_shared_says_what_it_skipped_and_why(tmp_path: Path) -> None:
    """Tests that need ../shared skip without it; pytest then says so in one summary line."""
    root = fresh_checkout(tmp_path)  # tmp_path/checkout: no ../shared beside it
    selection = [
        "tests/test_metrics_code_graders.py::test_a_holodeck_grader_runs_unchanged",
        "tests/test_metrics_tools_cost_registry.py::"
        "test_tool_matcher_reproduces_holodeck_verdicts_on_the_corpus",
    ]
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [*command, *selection], cwd=root, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    [line] = [line for line in proc.stdout.splitlines() if " tests skipped because " in line]
    assert line == (
        f"2 tests skipped because {tmp_path / 'shared'} is absent (the seeds and the "
        "third-party corpus beside the checkout): test_metrics_code_graders.py (1), "
        "test_metrics_tools_cost_registry.py (1)"
    )
    assert untracked(root) == []
    if (REPO.parent / "shared" / "corpus").is_dir():  # here they run, and nothing is said
        here = subprocess.run(
            [*command, *selection], cwd=REPO, capture_output=True, text=True, check=False
        )
        assert "2 passed" in here.stdout and " tests skipped because " not in here.stdout


def test_the_history_block_compares_runs_of_the_agent_not_a_rescore() -> None:
    """The README's history block: after `holodeck rescore`, the newest v2 run is that rescore; V1
    and V2 are each version's newest run that ran the agent."""
    [history] = bash_blocks(CLI_DOC, "## The history, by run id")
    picks = [line for line in history.splitlines() if line.startswith(("V1=", "V2="))]
    assert len(picks) == 2
    assert all("trigger <> 'rescore'" in line for line in picks), picks


DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside code (fenced blocks and `inline code`)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (lowercased, punctuation dropped,
    spaces as hyphens; a repeated heading gets -1, -2 ...)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        counts[slug] = counts.get(slug, 0) + 1
        found.add(slug if counts[slug] == 1 else f"{slug}-{counts[slug] - 1}")
    return found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_relative_link_points_to_an_existing_file(path: Path) -> None:
    broken = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no such heading in {linked.name}")
    assert broken == []


def test_the_readme_stays_a_two_minute_read_with_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 120
    [block] = bash_blocks(README, "## Quick start")
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make demo", "make test"]
    for needle in ("`uv.lock`", "`make lock`", "docs/architecture.md"):
        assert needle in text
