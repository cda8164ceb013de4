"""What crosses the process boundary between ``process_file`` and a conversion worker."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from holodeck_core.models.base import StrictModel
from holodeck_core.models.test_case import FileType


class ConversionJob(StrictModel):
    """Convert the local file ``path`` (already size-checked) to Markdown."""

    path: str
    type: FileType
    pages: list[int] | None = Field(None, description="1-based, sorted, unique.")
    sheet: str | None = None
    range: str | None = None
    scratch_dir: str | None = Field(
        None, description="Where page/slide subsets go (set with pages); the parent removes it."
    )
    extension: str | None = Field(None, description="e.g. '.pdf', when the path lacks one.")
    mimetype: str | None = None
    url: str | None = Field(None, description="Where a download came from (HTML converters).")
    max_unpacked_bytes: int | None = Field(
        None, description="Largest total uncompressed size of an Office file's ZIP parts."
    )


class ConversionOutput(StrictModel):
    """A conversion's Markdown and what was learnt on the way, or the reason it failed."""

    markdown: str = ""
    details: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
