"""Images: markitdown gives them no text (no exiftool, no LLM captioner here), so an image
attachment is passed to the model as an image input instead. ``process_file`` checks it and
records its type; :func:`load_image` gives the agent backends its bytes and a data URL."""

from __future__ import annotations

import base64
import tempfile
from dataclasses import dataclass
from pathlib import Path

from holodeck_core.defaults import DOWNLOAD_TIMEOUT_S, MAX_FILE_BYTES
from holodeck_core.files.errors import FileProcessingError
from holodeck_core.files.limits import size_error
from holodeck_core.models.results import ProcessedFileInput

ACCEPTED = "PNG, JPEG, GIF or WebP"
"""The formats OpenAI and Anthropic both accept as image input."""


def sniff_image_type(head: bytes) -> str | None:
    """The MIME type of an image from its first bytes, if it is one models accept."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_type_of(path: Path) -> str:
    """The MIME type of the image at ``path``; raises :class:`FileProcessingError` if it is not
    an image a model accepts."""
    with path.open("rb") as handle:
        mime = sniff_image_type(handle.read(16))
    if mime is None:
        raise FileProcessingError(f"not an image models accept (expected {ACCEPTED})")
    return mime


@dataclass(frozen=True)
class ImageInput:
    """An image ready for a model's image input (in memory only, never serialized)."""

    mime_type: str
    data: bytes

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


def load_image(
    processed: ProcessedFileInput,
    *,
    base_dir: Path,
    download_timeout: float = DOWNLOAD_TIMEOUT_S,
    max_bytes: int = MAX_FILE_BYTES,
) -> ImageInput:
    """The bytes of a processed image: from the local file, the cached download, or (cache
    off) a fresh download. Raises :class:`FileProcessingError` if it is not a usable image."""
    from holodeck_core.files.download import download

    original = processed.original
    if processed.error is not None:
        raise FileProcessingError(f"image was not processed: {processed.error}")
    if original.type != "image":
        raise FileProcessingError(f"not an image attachment (type {original.type})")
    if processed.cached_path and Path(processed.cached_path).is_file():
        data = Path(processed.cached_path).read_bytes()
    elif original.path is not None:
        path = base_dir / original.path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise FileProcessingError(f"cannot read image {path}: {exc.strerror}") from None
    else:
        assert original.url is not None  # FileInput guarantees path or url
        with tempfile.TemporaryDirectory(prefix="holodeck-image-") as scratch:
            found = download(
                original.url, Path(scratch), timeout=download_timeout, max_bytes=max_bytes
            )
            data = Path(found.path).read_bytes()
    if len(data) > max_bytes:
        raise FileProcessingError(size_error(len(data), max_bytes))
    mime = sniff_image_type(data[:16])
    if mime is None:
        raise FileProcessingError(f"not an image models accept (expected {ACCEPTED})")
    return ImageInput(mime_type=mime, data=data)
