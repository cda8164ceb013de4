"""Attachments → Markdown (docs/architecture.md): markitdown in killable worker processes,
1-based page/slide selection, Excel sheets and ranges, downloads, a content-addressed cache.

Typical use (the runner)::

    limits = FileLimits.from_execution(agent.execution)
    processed = process_files(case.files, base_dir=agent_dir,
                              cache_dir=project.file_cache_dir, **limits.model_dump())

Failures are never raised: they are ``ProcessedFileInput.error``."""

from holodeck_core.files.cache import FORMAT_VERSION, cache_key, converter_version
from holodeck_core.files.convert import NO_TEXT
from holodeck_core.files.errors import FileProcessingError
from holodeck_core.files.images import ImageInput, load_image
from holodeck_core.files.limits import FileLimits
from holodeck_core.files.process import aprocess_files, process_file, process_files
from holodeck_core.files.worker import PoolStats, WorkerPool, default_pool

__all__ = [
    "FORMAT_VERSION",
    "NO_TEXT",
    "FileLimits",
    "FileProcessingError",
    "ImageInput",
    "PoolStats",
    "WorkerPool",
    "aprocess_files",
    "cache_key",
    "converter_version",
    "default_pool",
    "load_image",
    "process_file",
    "process_files",
]
