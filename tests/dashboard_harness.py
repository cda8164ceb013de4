"""Run the dashboard in a child process and drive it with Chromium (tests, bench, docs).

The server is the real ``holodeck dashboard`` command on 127.0.0.1; it is ended by its own
process id. The browser is Debian's ``/usr/bin/chromium`` driven by Playwright (a dev
dependency, imported here only when a browser is launched).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
START_TIMEOUT_S = 60.0
VIEWPORT = {"width": 1400, "height": 1000}


def need_chromium(path: Path = CHROMIUM) -> None:
    """Skip without Chromium, except under CI=true, where a skip would hide the tests."""
    if path.exists():
        return
    reason = f"no Chromium at {path} (apt-get install -y chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot skip under CI=true: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running(
    db: Path | str,
    log: IO[Any],
    *,
    port: int | None = None,
    source: Path | None = None,
    lake: bool = False,
) -> Iterator[str]:
    """``holodeck dashboard --db DB`` (``--lake DB`` with ``lake``: DB is then a lake's URL) in
    a child process; yields its base URL once it answers. Its stdout and stderr go to ``log``.
    ``source``: a checkout of another commit whose ``holodeck_core`` is run instead (it runs
    from there, ahead of the installed package)."""
    port = port or free_port()
    where = "--lake" if lake else "--db"
    command = [sys.executable, "-m", "holodeck_core.cli", "dashboard", where, str(db)]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log,
                               cwd=source)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the dashboard exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"{base}/_dash-layout", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError("the dashboard did not answer in time") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


@contextmanager
def chromium() -> Iterator[Browser]:
    """Chromium through Playwright's sync API, closed after. That API runs an event loop in
    this thread: open it after whatever calls asyncio.run (the runs behind a history)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def new_page(browser: Browser) -> Iterator[Page]:
    """A page of :data:`VIEWPORT` in a context of its own (no cookies or storage of another
    test's)."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        yield context.new_page()
    finally:
        context.close()


@contextmanager
def serving(db: Path | str, log_path: Path, *, lake: bool = False) -> Iterator[str]:
    """:func:`running` with its output in ``log_path``, which holds no traceback once the
    dashboard stopped."""
    with log_path.open("w") as log, running(db, log, lake=lake) as base:
        yield base
    assert "Traceback" not in log_path.read_text(), log_path.read_text()
