"""The one error type of file processing. It never leaves ``process_file``: it becomes
``ProcessedFileInput.error``."""

from __future__ import annotations

from holodeck_core.errors import HolodeckError


class FileProcessingError(HolodeckError):
    """A file could not be turned into model input; the message is the reason shown to users."""
