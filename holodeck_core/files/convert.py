"""The conversion itself, run inside a worker process (:mod:`holodeck_core.files.worker`).

It turns a :class:`ConversionJob` into a :class:`ConversionOutput` and never raises: every
problem becomes ``ConversionOutput.error``. markitdown is imported here only, so the parent
process (the CLI, a Dagster step) does not pay its ~1 s import."""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holodeck_core.files.errors import FileProcessingError
from holodeck_core.files.jobs import ConversionJob, ConversionOutput
from holodeck_core.files.limits import unpacked_error
from holodeck_core.files.pdf_headings import pdf_markdown

if TYPE_CHECKING:
    from markitdown import MarkItDown

log = logging.getLogger(__name__)
NO_TEXT = "no text extracted (scanned PDF or image-only document?)"
_MAX_REASON = 600


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 1] + "…"


_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_OFFICE_NAMES = {
    "word": "Word document",
    "excel": "Excel workbook",
    "powerpoint": "PowerPoint file",
}
_OOXML_PARTS = {  # the main part every Office Open XML package of that kind holds
    "word": "word/document.xml",
    "excel": "xl/workbook.xml",
    "powerpoint": "ppt/presentation.xml",
}


def _check_container(path: Path, job: ConversionJob) -> None:
    """Refuse an Office file that is neither a ZIP package nor an OLE file (old .xls/.doc).

    Without this, markitdown's plain-text converter accepts a damaged file that happens to
    look like text and returns its raw bytes as "Markdown"."""
    if job.type not in _OFFICE_NAMES:
        return
    with path.open("rb") as handle:
        head = handle.read(8)
    if head == _OLE_MAGIC:
        return
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as package:
            parts = package.infolist()
        unpacked = sum(part.file_size for part in parts)
        if job.max_unpacked_bytes is not None and unpacked > job.max_unpacked_bytes:
            raise FileProcessingError(unpacked_error(unpacked, job.max_unpacked_bytes))
        if _OOXML_PARTS[job.type] in {part.filename for part in parts}:
            return
        raise FileProcessingError(
            f"not a {_OFFICE_NAMES[job.type]}: a ZIP archive without "
            f"{_OOXML_PARTS[job.type]} (another kind of file with the wrong type?)"
        )
    raise FileProcessingError(
        f"not a readable {_OFFICE_NAMES[job.type]} (damaged or another format)"
    )


class Converter:
    """One markitdown instance, reused for every job of a worker."""

    def __init__(self) -> None:
        from markitdown import MarkItDown

        for noisy in ("pdfminer", "pdfplumber"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        self._markitdown: MarkItDown = MarkItDown()

    def run(self, job: ConversionJob) -> ConversionOutput:
        from markitdown import FileConversionException, UnsupportedFormatException

        try:
            markdown, details = self._convert(job)
        except FileProcessingError as exc:
            return ConversionOutput(error=str(exc))
        except UnsupportedFormatException:
            return ConversionOutput(
                error="unsupported format: markitdown has no converter for this file"
            )
        except FileConversionException as exc:
            return ConversionOutput(error=f"conversion failed: {_reason(exc)}")
        except Exception as exc:
            return ConversionOutput(
                error=f"conversion failed: {type(exc).__name__}: {_reason(exc)}"
            )
        if not markdown.strip():
            return ConversionOutput(error=NO_TEXT, details=details)
        return ConversionOutput(markdown=markdown, details=details)

    def _markdown(self, path: Path, job: ConversionJob, *, extension: str | None = None) -> str:
        from markitdown import StreamInfo

        info = StreamInfo(extension=extension or job.extension, mimetype=job.mimetype, url=job.url)
        return self._markitdown.convert_local(str(path), stream_info=info).markdown

    def _pdf(self, path: Path, job: ConversionJob) -> str:
        """HoloDeck's text with its headings (:mod:`.pdf_headings`), markitdown's Markdown
        when that fails, as HoloDeck's ``FileProcessor`` falls back (attachments and tools
        alike)."""
        try:
            return pdf_markdown(path)
        except Exception:
            log.debug("PDF heading extraction failed; markitdown converts %s", path)
        return self._markdown(path, job, extension=".pdf")

    def _convert(self, job: ConversionJob) -> tuple[str, dict[str, Any]]:
        from holodeck_core.files import excel, selection

        path = Path(job.path)
        _check_container(path, job)
        if job.pages and job.scratch_dir is None:
            raise FileProcessingError("internal error: a page selection needs a scratch folder")
        scratch = Path(job.scratch_dir or ".")
        if job.type == "pdf":
            if job.pages:
                subset = scratch / "pages.pdf"
                total = selection.pdf_subset(path, job.pages, subset)
                details = {"page_count": total, "pages_selected": job.pages}
                return self._pdf(subset, job), details
            total = selection.pdf_page_count(path)  # also refuses what is no PDF
            return self._pdf(path, job), {"page_count": total}
        if job.type == "powerpoint":
            if job.pages:
                subset = scratch / "slides.pptx"
                total = selection.pptx_subset(path, job.pages, subset)
                markdown = self._markdown(subset, job, extension=".pptx")
                details = {"slide_count": total, "slides_selected": job.pages}
                return selection.renumber_slides(markdown, job.pages), details
            markdown = self._markdown(path, job)
            return markdown, {"slide_count": selection.count_slides(markdown)}
        if job.type == "excel" and (job.sheet is not None or job.range is not None):
            return excel.excel_selection(path, job.sheet, job.range)
        return self._markdown(path, job), {}
