"""A temporary folder that is removed however the dashboard stops (``--seed``'s history):
at a normal exit, after Ctrl-C, and on SIGTERM (turned into a normal exit, so the same
clean-up runs). Standard library only: the command loads it before Dash."""

from __future__ import annotations

import atexit
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    sys.exit(128 + signum)


def scratch_folder(prefix: str) -> Path:
    """A new folder under the system's temporary directory, removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    return folder
