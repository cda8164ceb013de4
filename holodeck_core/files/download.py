"""Downloading a ``url:`` attachment: a timeout, a size limit and bounded retries.

With the cache on, a download is kept under ``<cache>/downloads/`` beside a JSON record, so
other selections of the same URL (``pages``, ``sheet``) reuse the bytes: like the conversion
cache, a URL is fetched once until the cache is cleared or the file sets ``cache: false``."""

from __future__ import annotations

import email.utils
import hashlib
import mimetypes
import os
import random
import re
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from holodeck_core.files.cache import atomic_write
from holodeck_core.files.errors import FileProcessingError
from holodeck_core.files.limits import DOWNLOAD_BACKOFF_S, DOWNLOAD_RETRIES, size_error
from holodeck_core.models.base import StrictModel

if TYPE_CHECKING:
    import httpx

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_CHUNK = 64 * 1024
_MAX_RETRY_AFTER_S = 30.0


class DownloadedFile(StrictModel):
    """A downloaded file and where it came from (the record kept beside a cached download)."""

    url: str
    path: str
    content_type: str | None = None
    size_bytes: int
    sha256: str
    fetched_at: str


def display_url(url: str) -> str:
    """The URL without query and fragment, for messages: query strings often carry tokens."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def url_digest(url: str) -> str:
    return hashlib.sha256(url.encode()).hexdigest()


def _file_name(url: str, content_type: str | None, default_suffix: str) -> str:
    """A safe local name that keeps the extension markitdown uses to pick a converter."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", PurePosixPath(urlsplit(url).path).name).strip("._")
    name = name or "download"
    if not PurePosixPath(name).suffix:
        guessed = mimetypes.guess_extension(content_type.split(";")[0]) if content_type else None
        name += guessed or default_suffix
    return name[-120:]


def cached_download(url: str, downloads_dir: Path) -> DownloadedFile | None:
    """A previous download of ``url`` whose bytes are still there, else ``None``."""
    record = downloads_dir / f"{url_digest(url)}.json"
    try:
        found = DownloadedFile.model_validate_json(record.read_bytes())
    except (OSError, ValueError):
        return None
    path = Path(found.path)
    if found.url != url or not path.is_file() or path.stat().st_size != found.size_bytes:
        return None
    return found


def _retry_delay(attempt: int, response: httpx.Response | None) -> float:
    """Exponential backoff with jitter; a server's ``Retry-After`` wins (capped)."""
    header = response.headers.get("retry-after") if response is not None else None
    if header:
        try:
            wait = float(header)
        except ValueError:
            try:
                wait = (
                    email.utils.parsedate_to_datetime(header) - datetime.now(UTC)
                ).total_seconds()
            except (TypeError, ValueError):
                wait = 0.0
        return min(max(wait, 0.0), _MAX_RETRY_AFTER_S)
    base: float = DOWNLOAD_BACKOFF_S * (2**attempt)
    return base + random.uniform(0, base)


class _Fetched(StrictModel):
    content_type: str | None
    size: int
    sha256: str


def _fetch_once(
    client: httpx.Client, url: str, target: Path, *, timeout: float, max_bytes: int
) -> _Fetched:
    """One GET streamed into ``target``. Raises ``httpx.HTTPStatusError`` for a bad status,
    ``httpx.TimeoutException`` past the deadline, ``FileProcessingError`` for a file too large."""
    import httpx

    started = time.monotonic()
    with client.stream("GET", url) as response:
        response.raise_for_status()
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise FileProcessingError(f"download refused: {size_error(int(declared), max_bytes)}")
        digest = hashlib.sha256()
        size = 0
        with target.open("wb") as out:
            for chunk in response.iter_bytes(_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise FileProcessingError(f"download stopped: {size_error(size, max_bytes)}")
                if time.monotonic() - started > timeout:
                    # httpx's timeout is per read; this bounds the whole transfer.
                    raise httpx.ReadTimeout(f"download took longer than {timeout:g} s")
                digest.update(chunk)
                out.write(chunk)
        return _Fetched(
            content_type=response.headers.get("content-type"), size=size, sha256=digest.hexdigest()
        )


def _fetch_with_retries(
    url: str, target: Path, *, timeout: float, max_bytes: int, retries: int
) -> _Fetched:
    import httpx  # here, not at import: a run without a ``url:`` file never loads it (0.14 s)

    shown = display_url(url)
    problem = ""
    with httpx.Client(timeout=timeout, follow_redirects=True) as client:
        for attempt in range(retries + 1):
            response: httpx.Response | None = None
            try:
                return _fetch_once(client, url, target, timeout=timeout, max_bytes=max_bytes)
            except FileProcessingError as exc:
                raise FileProcessingError(f"{exc} ({shown})") from None
            except httpx.HTTPStatusError as exc:
                response = exc.response
                problem = f"HTTP {response.status_code} {response.reason_phrase}".strip()
                if response.status_code not in TRANSIENT_STATUS:
                    raise FileProcessingError(f"download failed: {problem} ({shown})") from None
            except httpx.TimeoutException:
                problem = f"timed out after {timeout:g} s"
            except httpx.TransportError as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            except httpx.HTTPError as exc:  # an invalid URL and the like: permanent
                raise FileProcessingError(f"download failed: {exc} ({shown})") from None
            if attempt < retries:
                time.sleep(_retry_delay(attempt, response))
    raise FileProcessingError(f"download failed after {retries + 1} attempts: {problem} ({shown})")


def download(
    url: str,
    dest_dir: Path,
    *,
    timeout: float,
    max_bytes: int,
    default_suffix: str = "",
    keep_record: bool = False,
    retries: int = DOWNLOAD_RETRIES,
) -> DownloadedFile:
    """Download ``url`` into ``dest_dir/<sha256(url)>/``, retrying transient failures
    (timeouts, connection errors, 408/425/429/5xx) ``retries`` times; other HTTP errors fail at
    once. ``keep_record`` writes the record :func:`cached_download` finds (cache on).
    Raises :class:`FileProcessingError` with the reason."""
    digest = url_digest(url)
    folder = dest_dir / digest
    folder.mkdir(parents=True, exist_ok=True)
    fd, partial_name = tempfile.mkstemp(dir=folder, prefix=".partial-")
    os.close(fd)
    partial = Path(partial_name)
    try:
        fetched = _fetch_with_retries(
            url, partial, timeout=timeout, max_bytes=max_bytes, retries=retries
        )
        target = folder / _file_name(url, fetched.content_type, default_suffix)
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    found = DownloadedFile(
        url=url,
        path=str(target),
        content_type=fetched.content_type,
        size_bytes=fetched.size,
        sha256=fetched.sha256,
        fetched_at=datetime.now(UTC).isoformat(),
    )
    if keep_record:
        atomic_write(dest_dir / f"{digest}.json", found.model_dump_json().encode())
    return found
