"""Defaults and limits of file processing, and how ``agent.yaml``'s ``execution`` sets them."""

from __future__ import annotations

from pydantic import Field

from holodeck_core.defaults import DOWNLOAD_TIMEOUT_S, FILE_TIMEOUT_S, MAX_FILE_BYTES
from holodeck_core.models.agent import ExecutionConfig
from holodeck_core.models.base import StrictModel

UNPACKED_RATIO = 10
"""An Office (ZIP) file may unpack to at most this many times the file-size limit: a 1 MB
``.docx`` bomb that inflates to 1 GB is refused before any parser sees it."""
DOWNLOAD_RETRIES = 3
"""Retries after the first attempt, on transient errors only (timeouts, 429, 5xx)."""
DOWNLOAD_BACKOFF_S = 0.5
"""First retry delay; doubles per retry, plus up to the same again in jitter."""


class FileLimits(StrictModel):
    """The limits ``process_file`` takes as keyword arguments (``**limits.model_dump()``)."""

    file_timeout: float = Field(FILE_TIMEOUT_S, gt=0, description="Seconds per conversion.")
    download_timeout: float = Field(DOWNLOAD_TIMEOUT_S, gt=0, description="Seconds.")
    max_bytes: int = Field(MAX_FILE_BYTES, gt=0, description="Largest file accepted.")

    @classmethod
    def from_execution(cls, execution: ExecutionConfig | None) -> FileLimits:
        """Limits from ``agent.yaml``'s ``execution`` block; unset keys keep the defaults."""
        if execution is None:
            return cls()
        return cls(
            file_timeout=execution.file_timeout or FILE_TIMEOUT_S,
            download_timeout=execution.download_timeout or DOWNLOAD_TIMEOUT_S,
            max_bytes=(
                int(execution.max_file_mb * 1024 * 1024)
                if execution.max_file_mb
                else MAX_FILE_BYTES
            ),
        )


def unpacked_error(size: int, limit: int) -> str:
    return (
        f"file unpacks to {human_size(size)} ({size} bytes) of uncompressed parts, over the "
        f"limit of {human_size(limit)} ({UNPACKED_RATIO}x the file-size limit; a ZIP bomb?)"
    )


def human_size(size: int) -> str:
    """``52428800`` → ``50.0 MB`` (binary units, as ``max_file_mb`` is read)."""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def size_error(size: int, limit: int) -> str:
    return (
        f"file is too large: {human_size(size)} ({size} bytes) exceeds the limit of "
        f"{human_size(limit)} ({limit} bytes)"
    )
