"""``FileInput`` → ``ProcessedFileInput``: resolve or download, check, look up the cache,
convert in a worker process, store.

Every failure ends up in ``ProcessedFileInput.error`` with a reason; nothing raises to the
caller, so one bad attachment makes one ERROR case, never a crashed run."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodeck_core.defaults import DOWNLOAD_TIMEOUT_S, FILE_TIMEOUT_S, MAX_FILE_BYTES
from holodeck_core.files.cache import ResultCache, cache_key, converter_version, normalized_pages
from holodeck_core.files.download import cached_download, download
from holodeck_core.files.errors import FileProcessingError
from holodeck_core.files.images import image_type_of
from holodeck_core.files.jobs import ConversionJob
from holodeck_core.files.limits import UNPACKED_RATIO, size_error
from holodeck_core.files.worker import WorkerPool, default_pool
from holodeck_core.models.results import ProcessedFileInput
from holodeck_core.models.test_case import FileInput, FileType

log = logging.getLogger(__name__)

DOWNLOADS_DIR = "downloads"
_DEFAULT_SUFFIX: dict[FileType, str] = {
    "pdf": ".pdf",
    "word": ".docx",
    "excel": ".xlsx",
    "powerpoint": ".pptx",
    "csv": ".csv",
    "text": ".txt",
    "image": "",
}
_HASH_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class _Settings:
    base_dir: Path
    cache: ResultCache | None
    file_timeout: float
    download_timeout: float
    max_bytes: int
    pool: WorkerPool | None


@dataclass(frozen=True)
class _Local:
    """The bytes to convert, on local disk."""

    path: Path
    size: int
    sha256: str
    mimetype: str | None = None
    url: str | None = None
    cached_path: str | None = None


class _Scratch:
    """A temporary folder made on first use (most files need none) and removed at the end."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None

    def folder(self, name: str) -> Path:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="holodeck-file-")
        path = Path(self._dir.name) / name
        path.mkdir(exist_ok=True)
        return path

    def __enter__(self) -> _Scratch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._dir is not None:
            self._dir.cleanup()


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _local_file(file: FileInput, settings: _Settings) -> _Local:
    assert file.path is not None
    path = (settings.base_dir / Path(file.path).expanduser()).absolute()
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FileProcessingError(f"file not found: {file.path} (looked for {path})") from None
    except OSError as exc:
        raise FileProcessingError(f"cannot access {file.path}: {exc.strerror}") from None
    if not path.is_file():
        raise FileProcessingError(f"not a regular file: {file.path} ({path})")
    if stat.st_size > settings.max_bytes:
        raise FileProcessingError(size_error(stat.st_size, settings.max_bytes))
    try:
        sha = _sha256_of(path)
    except OSError as exc:
        raise FileProcessingError(f"cannot read {file.path}: {exc.strerror}") from None
    return _Local(path=path, size=stat.st_size, sha256=sha)


def _remote_file(
    file: FileInput, settings: _Settings, scratch: _Scratch, use_cache: bool
) -> _Local:
    assert file.url is not None
    found = None
    if use_cache and settings.cache is not None:
        target = settings.cache.root / DOWNLOADS_DIR
        found = cached_download(file.url, target)
    else:
        target = scratch.folder("download")
    if found is None:
        found = download(
            file.url,
            target,
            timeout=settings.download_timeout,
            max_bytes=settings.max_bytes,
            default_suffix=_DEFAULT_SUFFIX[file.type],
            keep_record=use_cache,
        )
    if found.size_bytes > settings.max_bytes:  # kept from a run with a higher limit
        raise FileProcessingError(size_error(found.size_bytes, settings.max_bytes))
    return _Local(
        path=Path(found.path),
        size=found.size_bytes,
        sha256=found.sha256,
        mimetype=found.content_type.split(";")[0].strip() if found.content_type else None,
        url=file.url,
        cached_path=found.path if use_cache else None,
    )


def _hit(
    settings: _Settings, key: str, metadata: dict[str, Any], file: FileInput
) -> tuple[str, str | None] | None:
    """A cached conversion: fill ``metadata`` and return (markdown, cached_path)."""
    if settings.cache is None:
        return None
    entry = settings.cache.get(key)
    if entry is None:
        return None
    metadata.clear()
    metadata.update(entry.metadata, cache_hit=True)
    cached_path = None
    if file.url is not None:
        found = cached_download(file.url, settings.cache.root / DOWNLOADS_DIR)
        cached_path = found.path if found else None
    return entry.markdown, cached_path


def _process(
    file: FileInput, settings: _Settings, scratch: _Scratch, metadata: dict[str, Any]
) -> tuple[str, str | None]:
    """The markdown and the cached download path; fills ``metadata`` as it learns."""
    use_cache = settings.cache is not None and file.cache is not False
    if file.url is not None:
        metadata["source"] = "url"
        key = cache_key(f"url:{file.url}", file)
        if use_cache and (hit := _hit(settings, key, metadata, file)):
            return hit
        local = _remote_file(file, settings, scratch, use_cache)
    else:
        metadata["source"] = "path"
        local = _local_file(file, settings)
        key = cache_key(f"sha256:{local.sha256}", file)
        if use_cache and (hit := _hit(settings, key, metadata, file)):
            return hit
    suffix = local.path.suffix.lower()
    metadata.update(
        size_bytes=local.size, sha256=local.sha256, format=suffix.lstrip(".") or file.type
    )
    if file.type == "image":
        metadata.update(mime_type=image_type_of(local.path), image=True)
        markdown = ""
    else:
        markdown = _convert(file, settings, scratch, local, suffix, metadata)
        metadata["markdown_chars"] = len(markdown)
    metadata.update(converter_version=converter_version(), cache_key=key)
    if use_cache and settings.cache is not None:
        settings.cache.put(key, markdown, metadata)
    return markdown, local.cached_path


def _convert(
    file: FileInput,
    settings: _Settings,
    scratch: _Scratch,
    local: _Local,
    suffix: str,
    metadata: dict[str, Any],
) -> str:
    pool = settings.pool or default_pool()
    job = ConversionJob(
        path=str(local.path),
        type=file.type,
        pages=normalized_pages(file.pages),
        sheet=file.sheet,
        range=file.range,
        scratch_dir=str(scratch.folder("convert")) if file.pages else None,
        extension=suffix or _DEFAULT_SUFFIX[file.type] or None,
        mimetype=local.mimetype,
        url=local.url,
        max_unpacked_bytes=settings.max_bytes * UNPACKED_RATIO,
    )
    output = pool.run(job, settings.file_timeout)
    metadata.update(output.details)
    if output.error is not None:
        raise FileProcessingError(output.error)
    return output.markdown


def process_file(
    file: FileInput,
    *,
    base_dir: Path,
    cache_dir: Path | None = None,
    file_timeout: float = FILE_TIMEOUT_S,
    download_timeout: float = DOWNLOAD_TIMEOUT_S,
    max_bytes: int = MAX_FILE_BYTES,
    pool: WorkerPool | None = None,
) -> ProcessedFileInput:
    """Convert one attachment to Markdown; never raises.

    ``base_dir`` is the agent file's folder (relative ``path:`` values start there);
    ``cache_dir`` is ``Project.file_cache_dir`` (``None``: no caching); ``pool`` defaults to
    the process-wide :func:`default_pool`. A PDF converts as HoloDeck's (its heading
    extractor, :mod:`holodeck_core.files.pdf_headings`; markitdown when that fails). An image
    gets empty Markdown and ``metadata.image`` (see :func:`holodeck_core.files.load_image`)."""
    started = time.perf_counter()
    settings = _Settings(
        base_dir=Path(base_dir),
        cache=ResultCache(Path(cache_dir)) if cache_dir is not None else None,
        file_timeout=file_timeout,
        download_timeout=download_timeout,
        max_bytes=max_bytes,
        pool=pool,
    )
    metadata: dict[str, Any] = {"type": file.type}
    markdown, cached_path, error = "", None, None
    try:
        with _Scratch() as scratch:
            markdown, cached_path = _process(file, settings, scratch, metadata)
    except FileProcessingError as exc:
        error = str(exc)
    except Exception as exc:  # the promise: no exception reaches the caller
        log.exception("unexpected error while processing %s", file.path or file.url)
        error = f"unexpected error while processing the file: {type(exc).__name__}: {exc}"
    metadata.setdefault("cache_hit", False)
    return ProcessedFileInput(
        original=file,
        markdown_content="" if error else markdown,
        metadata=metadata,
        cached_path=cached_path,
        processing_time_ms=int((time.perf_counter() - started) * 1000),
        error=error,
    )


def process_files(
    files: Sequence[FileInput],
    *,
    base_dir: Path,
    cache_dir: Path | None = None,
    file_timeout: float = FILE_TIMEOUT_S,
    download_timeout: float = DOWNLOAD_TIMEOUT_S,
    max_bytes: int = MAX_FILE_BYTES,
    pool: WorkerPool | None = None,
) -> list[ProcessedFileInput]:
    """:func:`process_file` for several files at once, in input order, through one worker
    pool (at most ``pool.size`` conversions run together; downloads and hashing overlap).
    Identical entries are processed once."""
    if not files:
        return []
    pool = pool or default_pool()
    unique: dict[str, FileInput] = {}
    for file in files:
        unique.setdefault(file.model_dump_json(), file)

    def one(file: FileInput) -> ProcessedFileInput:
        return process_file(
            file,
            base_dir=base_dir,
            cache_dir=cache_dir,
            file_timeout=file_timeout,
            download_timeout=download_timeout,
            max_bytes=max_bytes,
            pool=pool,
        )

    threads = min(len(unique), pool.size * 2)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="holodeck-files") as executor:
        done = dict(zip(unique, executor.map(one, unique.values()), strict=True))
    return [done[file.model_dump_json()].model_copy() for file in files]


async def aprocess_files(
    files: Sequence[FileInput],
    *,
    base_dir: Path,
    cache_dir: Path | None = None,
    file_timeout: float = FILE_TIMEOUT_S,
    download_timeout: float = DOWNLOAD_TIMEOUT_S,
    max_bytes: int = MAX_FILE_BYTES,
    pool: WorkerPool | None = None,
) -> list[ProcessedFileInput]:
    """:func:`process_files` for async callers (the runner): runs in a thread."""
    return await asyncio.to_thread(
        process_files,
        files,
        base_dir=base_dir,
        cache_dir=cache_dir,
        file_timeout=file_timeout,
        download_timeout=download_timeout,
        max_bytes=max_bytes,
        pool=pool,
    )
