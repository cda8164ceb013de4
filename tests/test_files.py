"""File processing (issue 3, item 1): markitdown conversion in worker processes, 1-based
page/slide selection, Excel sheets and ranges, downloads with retries, the content-addressed
cache, limits, and errors that never escape.

The corpus tests run the real documents of ``../shared/corpus/documents`` against its
``MANIFEST.json``; everything else uses small files generated in ``tmp_path``."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.files import (
    NO_TEXT,
    FileLimits,
    WorkerPool,
    aprocess_files,
    cache_key,
    load_image,
    process_file,
    process_files,
)
from holodeck_core.files.cache import CacheEntry, ResultCache
from holodeck_core.models.agent import ExecutionConfig
from holodeck_core.models.results import ProcessedFileInput
from holodeck_core.models.test_case import FileInput

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "documents"
MANIFEST = CORPUS / "MANIFEST.json"
NO_CORPUS = f"corpus not available: {MANIFEST} is missing (../shared beside the repository)"


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    """One pool for the module: workers start once (about 1.5 s each) and are reused."""
    with WorkerPool(2) as shared:
        yield shared


def run(file: FileInput, base_dir: Path, pool: WorkerPool, **kwargs: Any) -> ProcessedFileInput:
    return process_file(file, base_dir=base_dir, pool=pool, **kwargs)


def make_pdf(path: Path, pages: list[str]) -> Path:
    """A minimal PDF with one line of Helvetica text per page ('' gives a page without text)."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        (
            f"<< /Type /Pages /Kids [{' '.join(f'{4 + 2 * i} 0 R' for i in range(len(pages)))}]"
            f" /Count {len(pages)} >>"
        ).encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, text in enumerate(pages):
        content = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode() if text else b""
        objects.append(
            (
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>"
            ).encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += (
        f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    )
    path.write_bytes(bytes(out))
    return path


def make_png(path: Path) -> Path:
    """A 1x1 RGB PNG."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    png += chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    path.write_bytes(png)
    return path


def make_xlsx(path: Path) -> Path:
    import openpyxl  # type: ignore[import-untyped]

    workbook = openpyxl.Workbook()
    data = workbook.active
    data.title = "Data"
    for row in (["Name", "Qty", "Price"], ["apple", 3, 1.5], ["pear|x", 7, 2.25], ["plum", 1, 9]):
        data.append(row)
    other = workbook.create_sheet("Other Sheet")
    other.append(["Only", "In", "Other"])
    other.append(["zebra-7731", None, "end"])
    workbook.save(path)
    return path


def make_pptx(path: Path, titles: list[str]) -> Path:
    from pptx import Presentation

    deck = Presentation()
    for title in titles:
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = title
    deck.save(str(path))
    return path


def make_docx(path: Path, paragraphs: list[str]) -> Path:
    """A minimal WordprocessingML package (what mammoth needs)."""
    body = "".join(f"<w:p><w:r><w:t>{text}</w:t></w:r></w:p>" for text in paragraphs)
    word = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    relationships = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    with zipfile.ZipFile(path, "w") as package:
        package.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        package.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{relationships}/officeDocument" '
            'Target="word/document.xml"/></Relationships>',
        )
        package.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{word}">'
            f"<w:body>{body}</w:body></w:document>",
        )
    return path


@dataclass
class FileServer:
    """A local HTTP server: serves ``files``, fails a path's first requests on demand."""

    base: str = ""
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    failures: dict[str, list[int]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"

    def count(self, name: str) -> int:
        return self.requests.count(f"/{name}")


@pytest.fixture
def server() -> Iterator[FileServer]:
    state = FileServer()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            state.requests.append(path)
            pending = state.failures.get(path.lstrip("/"))
            if pending:
                status = pending.pop(0)
                self.send_response(status)
                if status == 503:  # a 500 gets the client's own backoff, a 503 says "now"
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            found = state.files.get(path.lstrip("/"))
            if found is None:
                self.send_error(404)
                return
            body, content_type = found
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def three_pages(tmp_path: Path) -> Path:
    return make_pdf(
        tmp_path / "three.pdf", ["Alpha page marker", "Bravo page marker", "Charlie page marker"]
    )


# --------------------------------------------------------------------------- the corpus


def _manifest_files() -> list[dict[str, Any]]:
    if not MANIFEST.is_file():
        return []
    files: list[dict[str, Any]] = json.loads(MANIFEST.read_text(encoding="utf-8"))["files"]
    return files


def _whole_file_params() -> list[Any]:
    entries = _manifest_files()
    if not entries:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_CORPUS), id="no-corpus")]
    return [pytest.param(entry, id=entry["file"]) for entry in entries]


def _part_params() -> list[Any]:
    params = [
        pytest.param(entry, part, id=f"{entry['file']}-{entry['part_kind']}-{part}")
        for entry in _manifest_files()
        if entry.get("parts")
        for part in entry["parts"]
    ]
    return params or [
        pytest.param(None, None, marks=pytest.mark.skip(reason=NO_CORPUS), id="no-corpus")
    ]


def _corpus_type(entry: dict[str, Any]) -> Any:
    """HoloDeck has no type for .msg/.bin: a user would have to call them text."""
    return "text" if entry["holodeck_type"] == "(none)" else entry["holodeck_type"]


@pytest.mark.parametrize("entry", _whole_file_params())
def test_corpus_whole_file(entry: dict[str, Any], pool: WorkerPool) -> None:
    file = FileInput(path=entry["file"], type=_corpus_type(entry))
    result = run(file, CORPUS, pool)
    if entry["raises"] is not None:
        assert result.error, "a file markitdown cannot convert must be an error"
        if entry["needs_extra"]:
            assert f"[{entry['needs_extra']}]" in result.error  # markitdown's install hint
        else:
            assert result.error.startswith("unsupported format")
        assert result.markdown_content == ""
        return
    if entry["expected_empty"]:
        if file.type == "image":
            assert result.error is None
            assert result.markdown_content == ""
            assert result.metadata["image"] is True
            assert result.metadata["mime_type"] == "image/jpeg"
            assert result.metadata["size_bytes"] == entry["size_bytes"]
        else:
            assert result.error == NO_TEXT
        return
    assert result.error is None, result.error
    for text in entry["must_include"]:
        assert text in result.markdown_content
    for text in entry["must_not_include"]:
        assert text not in result.markdown_content
    assert result.metadata["sha256"] == entry["sha256"]
    assert result.metadata["size_bytes"] == entry["size_bytes"]


@pytest.mark.parametrize(("entry", "part"), _part_params())
def test_corpus_part(entry: dict[str, Any], part: str, pool: WorkerPool) -> None:
    """Each page, slide and sheet alone: its strings are in, every other part's are out."""
    kind = entry["part_kind"]
    selector: dict[str, Any] = {"sheet": part} if kind == "sheet" else {"pages": [int(part)]}
    file = FileInput(path=entry["file"], type=entry["holodeck_type"], **selector)
    result = run(file, CORPUS, pool)
    assert result.error is None, result.error
    expected = entry["parts"][part]
    for text in expected["must_include"] + expected["also_present_not_unique"]:
        assert text in result.markdown_content
    for text in expected["must_not_include"]:
        assert text not in result.markdown_content
    if kind == "slide":
        assert f"<!-- Slide number: {part} -->" in result.markdown_content  # original number
        assert result.metadata["slides_selected"] == [int(part)]
    elif kind == "page":
        assert result.metadata["pages_selected"] == [int(part)]
    else:
        assert result.markdown_content.startswith(f"## {part}\n")
        assert result.metadata["sheet"] == part


@pytest.mark.skipif(not MANIFEST.is_file(), reason=NO_CORPUS)
def test_corpus_first_page_is_page_one_and_not_page_two(pool: WorkerPool) -> None:
    """HoloDeck 0.7.1 read ``pages`` as 0-based; ours are the pages a human reads."""
    result = run(FileInput(path="pdf_multipage.pdf", type="pdf", pages=[1]), CORPUS, pool)
    assert "This is important text that appears BEFORE the image." in result.markdown_content
    assert "Page 2 - Content with image at end" not in result.markdown_content
    assert result.metadata["page_count"] == 3


# --------------------------------------------------------------------------- PDF pages


def test_first_page_alone(three_pages: Path, pool: WorkerPool) -> None:
    result = run(FileInput(path=three_pages.name, type="pdf", pages=[1]), three_pages.parent, pool)
    assert result.error is None
    assert "Alpha page marker" in result.markdown_content
    assert "Bravo" not in result.markdown_content
    assert "Charlie" not in result.markdown_content
    assert result.metadata["pages_selected"] == [1]
    assert result.metadata["page_count"] == 3


def test_later_page_alone(three_pages: Path, pool: WorkerPool) -> None:
    result = run(FileInput(path=three_pages.name, type="pdf", pages=[3]), three_pages.parent, pool)
    assert "Charlie page marker" in result.markdown_content
    assert "Alpha" not in result.markdown_content
    assert "Bravo" not in result.markdown_content


def test_several_pages_in_document_order(three_pages: Path, pool: WorkerPool) -> None:
    result = run(
        FileInput(path=three_pages.name, type="pdf", pages=[3, 1]), three_pages.parent, pool
    )
    text = result.markdown_content
    assert "Bravo" not in text
    assert text.index("Alpha page marker") < text.index("Charlie page marker")
    assert result.metadata["pages_selected"] == [1, 3]


def test_whole_pdf_has_every_page(three_pages: Path, pool: WorkerPool) -> None:
    result = run(FileInput(path=three_pages.name, type="pdf"), three_pages.parent, pool)
    for marker in ("Alpha", "Bravo", "Charlie"):
        assert f"{marker} page marker" in result.markdown_content
    assert result.metadata["page_count"] == 3


def test_page_beyond_the_document_names_page_and_count(three_pages: Path, pool: WorkerPool) -> None:
    result = run(
        FileInput(path=three_pages.name, type="pdf", pages=[2, 7]), three_pages.parent, pool
    )
    assert result.error == "page 7 is out of range: the document has 3 pages"
    assert result.markdown_content == ""


def test_pdf_without_text_is_an_error_not_silence(tmp_path: Path, pool: WorkerPool) -> None:
    make_pdf(tmp_path / "scan.pdf", ["", ""])
    result = run(FileInput(path="scan.pdf", type="pdf"), tmp_path, pool)
    assert result.error == NO_TEXT
    assert result.markdown_content == ""


# ---------------------------------------------------------------- PowerPoint, Excel, others


def test_pptx_slide_by_number(tmp_path: Path, pool: WorkerPool) -> None:
    make_pptx(tmp_path / "deck.pptx", ["First slide title", "Second slide title", "Third one"])
    result = run(FileInput(path="deck.pptx", type="powerpoint", pages=[2]), tmp_path, pool)
    assert result.error is None, result.error
    assert "<!-- Slide number: 2 -->" in result.markdown_content
    assert "Second slide title" in result.markdown_content
    assert "First slide title" not in result.markdown_content
    assert "Third one" not in result.markdown_content
    assert "<!-- Slide number: 1 -->" not in result.markdown_content
    assert result.metadata["slide_count"] == 3


def test_pptx_slide_beyond_the_deck(tmp_path: Path, pool: WorkerPool) -> None:
    make_pptx(tmp_path / "deck.pptx", ["Only slide"])
    result = run(FileInput(path="deck.pptx", type="powerpoint", pages=[2]), tmp_path, pool)
    assert result.error == "slide 2 is out of range: the presentation has 1 slide"


def test_excel_sheet_by_name(tmp_path: Path, pool: WorkerPool) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    result = run(FileInput(path="book.xlsx", type="excel", sheet="Other Sheet"), tmp_path, pool)
    assert result.error is None, result.error
    assert result.markdown_content == (
        "## Other Sheet\n| Only | In | Other |\n| --- | --- | --- |\n| zebra-7731 |  | end |"
    )
    assert result.metadata["sheet"] == "Other Sheet"
    assert result.metadata["sheets"] == ["Data", "Other Sheet"]


def test_excel_unknown_sheet_lists_the_sheets(tmp_path: Path, pool: WorkerPool) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    result = run(FileInput(path="book.xlsx", type="excel", sheet="Nope"), tmp_path, pool)
    assert result.error == "sheet 'Nope' not found; the workbook has: 'Data', 'Other Sheet'"


def test_excel_range(tmp_path: Path, pool: WorkerPool) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    result = run(FileInput(path="book.xlsx", type="excel", range="b1:c3"), tmp_path, pool)
    assert result.error is None, result.error
    assert result.markdown_content == (
        "## Data (B1:C3)\n| Qty | Price |\n| --- | --- |\n| 3 | 1.5 |\n| 7 | 2.25 |"
    )
    assert result.metadata["range"] == "B1:C3"


def test_excel_cells_escape_pipes(tmp_path: Path, pool: WorkerPool) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    result = run(FileInput(path="book.xlsx", type="excel", sheet="Data"), tmp_path, pool)
    assert "| pear\\|x | 7 | 2.25 |" in result.markdown_content


def test_excel_whole_workbook_through_markitdown(tmp_path: Path, pool: WorkerPool) -> None:
    make_xlsx(tmp_path / "book.xlsx")
    result = run(FileInput(path="book.xlsx", type="excel"), tmp_path, pool)
    assert "## Data" in result.markdown_content
    assert "## Other Sheet" in result.markdown_content


def test_csv(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "items.csv").write_text('id,label\n1,"first, quoted"\n2,second\n', encoding="utf-8")
    result = run(FileInput(path="items.csv", type="csv"), tmp_path, pool)
    assert result.error is None
    assert "| id | label |" in result.markdown_content
    assert "| 1 | first, quoted |" in result.markdown_content


def test_docx(tmp_path: Path, pool: WorkerPool) -> None:
    make_docx(tmp_path / "note.docx", ["Quarterly note", "Revenue grew by 12 percent."])
    result = run(FileInput(path="note.docx", type="word"), tmp_path, pool)
    assert result.error is None, result.error
    assert "Revenue grew by 12 percent." in result.markdown_content


def test_text(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "policy.md").write_text("# Refunds\n\nWithin 30 days.\n", encoding="utf-8")
    result = run(FileInput(path="policy.md", type="text"), tmp_path, pool)
    assert result.error is None
    assert "Within 30 days." in result.markdown_content
    assert result.metadata["format"] == "md"


def test_image_is_passed_as_an_image(tmp_path: Path, pool: WorkerPool) -> None:
    png = make_png(tmp_path / "dot.png")
    before = pool.stats().jobs
    result = run(FileInput(path="dot.png", type="image"), tmp_path, pool)
    assert result.error is None
    assert result.markdown_content == ""
    assert result.metadata["image"] is True
    assert result.metadata["mime_type"] == "image/png"
    assert result.metadata["size_bytes"] == png.stat().st_size
    assert pool.stats().jobs == before  # nothing to convert
    image = load_image(result, base_dir=tmp_path)
    assert image.mime_type == "image/png"
    assert image.data == png.read_bytes()
    assert image.data_url().startswith("data:image/png;base64,")
    assert base64.b64decode(image.data_url().split(",", 1)[1]) == png.read_bytes()


def test_an_image_that_is_not_one(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "fake.png").write_text("not really a picture", encoding="utf-8")
    result = run(FileInput(path="fake.png", type="image"), tmp_path, pool)
    assert result.error is not None
    assert "not an image" in result.error


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("name", "content", "file_type", "extra"),
    [
        ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog garbage", "pdf", {}),
        ("broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog garbage", "pdf", {"pages": [1]}),
        ("broken.xlsx", b"PK\x03\x04 this is no zip at all", "excel", {}),
        ("broken.xlsx", b"PK\x03\x04 this is no zip at all", "excel", {"sheet": "Data"}),
        ("broken.pptx", b"PK\x03\x04 truncated", "powerpoint", {"pages": [1]}),
        ("random.bin", bytes(range(256)) * 4, "text", {}),
    ],
    ids=["pdf", "pdf-pages", "xlsx", "xlsx-sheet", "pptx-slides", "random-bytes"],
)
def test_corrupt_files_are_errors_not_crashes(
    tmp_path: Path,
    pool: WorkerPool,
    name: str,
    content: bytes,
    file_type: Any,
    extra: dict[str, Any],
) -> None:
    (tmp_path / name).write_bytes(content)
    died = pool.stats().died
    result = run(FileInput(path=name, type=file_type, **extra), tmp_path, pool)
    assert result.error, "a corrupt file must be reported"
    assert result.markdown_content == ""
    assert pool.stats().died == died  # handled inside the worker, which lives on


def test_missing_file_and_folder(tmp_path: Path, pool: WorkerPool) -> None:
    missing = run(FileInput(path="nope/report.pdf", type="pdf"), tmp_path, pool)
    assert missing.error is not None
    assert missing.error.startswith("file not found: nope/report.pdf")
    (tmp_path / "folder.pdf").mkdir()
    folder = run(FileInput(path="folder.pdf", type="pdf"), tmp_path, pool)
    assert folder.error is not None
    assert folder.error.startswith("not a regular file")


def test_file_over_the_size_limit(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "big.txt").write_text("x" * 2048, encoding="utf-8")
    before = pool.stats().jobs
    result = run(FileInput(path="big.txt", type="text"), tmp_path, pool, max_bytes=1000)
    assert result.error == (
        "file is too large: 2.0 KB (2048 bytes) exceeds the limit of 1000 B (1000 bytes)"
    )
    assert pool.stats().jobs == before  # refused before any conversion


def test_conversion_timeout_kills_the_worker(tmp_path: Path, pool: WorkerPool) -> None:
    """A 3 MB CSV takes about a second to convert; at 0.05 s the worker must be killed."""
    rows = "".join(f"{i},{i * 7},row number {i},some padding text\n" for i in range(90_000))
    (tmp_path / "huge.csv").write_text("a,b,c,d\n" + rows, encoding="utf-8")
    killed = pool.stats().killed
    result = run(FileInput(path="huge.csv", type="csv"), tmp_path, pool, file_timeout=0.05)
    assert result.error == "conversion timed out after 0.05 s"
    assert pool.stats().killed == killed + 1
    (tmp_path / "small.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    after = run(FileInput(path="small.csv", type="csv"), tmp_path, pool)
    assert after.error is None  # the pool replaced the killed worker
    assert "| 1 | 2 |" in after.markdown_content


# --------------------------------------------------------------------------- the cache


def test_cache_hit_returns_without_converting(
    three_pages: Path, tmp_path: Path, pool: WorkerPool
) -> None:
    cache_dir = tmp_path / "cache"
    file = FileInput(path=three_pages.name, type="pdf", pages=[2])
    first = run(file, three_pages.parent, pool, cache_dir=cache_dir)
    assert first.error is None
    assert first.metadata["cache_hit"] is False
    jobs = pool.stats().jobs
    second = run(file, three_pages.parent, pool, cache_dir=cache_dir)
    assert second.metadata["cache_hit"] is True
    assert second.markdown_content == first.markdown_content
    assert pool.stats().jobs == jobs  # no conversion happened

    # Proof that the answer comes from the entry: change the entry, get the change back.
    key = first.metadata["cache_key"]
    store = ResultCache(cache_dir)
    entry = store.get(key)
    assert entry is not None
    store.path_for(key).write_text(
        CacheEntry(**{**entry.model_dump(), "markdown": "FROM THE CACHE"}).model_dump_json()
    )
    assert run(file, three_pages.parent, pool, cache_dir=cache_dir).markdown_content == (
        "FROM THE CACHE"
    )
    assert not [p for p in cache_dir.rglob("*") if p.name.endswith(".tmp")]  # atomic writes


def test_cache_key_changes_with_selection_and_content() -> None:
    base = FileInput(path="a.pdf", type="pdf")
    source = "sha256:" + "0" * 64
    keys = {
        cache_key(source, base),
        cache_key(source, FileInput(path="a.pdf", type="pdf", pages=[1])),
        cache_key(source, FileInput(path="a.pdf", type="pdf", pages=[2])),
        cache_key("sha256:" + "1" * 64, base),
        cache_key(source, FileInput(path="a.xlsx", type="excel")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="A")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="B")),
        cache_key(source, FileInput(path="a.xlsx", type="excel", sheet="A", range="A1:B2")),
        cache_key("url:http://x/a.pdf", base),
        cache_key("url:http://x/a.pdf", FileInput(url="http://x/a.pdf", type="pdf", pages=[1])),
    }
    assert len(keys) == 10
    same = FileInput(path="a.pdf", type="pdf", pages=[2, 1, 2])
    assert cache_key(source, same) == cache_key(
        source, FileInput(path="a.pdf", type="pdf", pages=[1, 2])
    )


def test_another_page_is_a_cache_miss(three_pages: Path, tmp_path: Path, pool: WorkerPool) -> None:
    cache_dir = tmp_path / "cache"
    run(FileInput(path=three_pages.name, type="pdf", pages=[1]), three_pages.parent, pool,
        cache_dir=cache_dir)  # fmt: skip
    jobs = pool.stats().jobs
    other = run(
        FileInput(path=three_pages.name, type="pdf", pages=[2]),
        three_pages.parent,
        pool,
        cache_dir=cache_dir,
    )
    assert other.metadata["cache_hit"] is False
    assert pool.stats().jobs == jobs + 1
    assert "Bravo page marker" in other.markdown_content


def test_cache_false_disables_the_cache(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "t.txt").write_text("plain words here", encoding="utf-8")
    cache_dir = tmp_path / "cache"
    file = FileInput(path="t.txt", type="text", cache=False)
    jobs = pool.stats().jobs
    for _ in range(2):
        result = run(file, tmp_path, pool, cache_dir=cache_dir)
        assert result.metadata["cache_hit"] is False
    assert pool.stats().jobs == jobs + 2
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))


def test_errors_are_not_cached(tmp_path: Path, pool: WorkerPool) -> None:
    make_pdf(tmp_path / "blank.pdf", [""])
    cache_dir = tmp_path / "cache"
    for _ in range(2):
        result = run(FileInput(path="blank.pdf", type="pdf"), tmp_path, pool, cache_dir=cache_dir)
        assert result.error == NO_TEXT
        assert result.metadata["cache_hit"] is False
    assert not cache_dir.exists() or not any(cache_dir.rglob("*.json"))


# --------------------------------------------------------------------------- URLs


def test_url_retries_after_a_500_and_caches_by_url_and_pages(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["docs/three.pdf"] = (
        make_pdf(tmp_path / "three.pdf", ["Alpha page marker", "Bravo page marker"]).read_bytes(),
        "application/pdf",
    )
    server.failures["docs/three.pdf"] = [500]
    cache_dir = tmp_path / "cache"
    url = server.url("docs/three.pdf")

    first = run(FileInput(url=url, type="pdf", pages=[1]), tmp_path, pool, cache_dir=cache_dir)
    assert first.error is None, first.error
    assert "Alpha page marker" in first.markdown_content
    assert "Bravo" not in first.markdown_content
    assert server.count("docs/three.pdf") == 2  # the 500, then the retry
    assert first.cached_path is not None
    assert Path(first.cached_path).is_relative_to(cache_dir)
    assert first.metadata["source"] == "url"

    again = run(FileInput(url=url, type="pdf", pages=[1]), tmp_path, pool, cache_dir=cache_dir)
    assert again.metadata["cache_hit"] is True
    assert server.count("docs/three.pdf") == 2  # no new request

    jobs = pool.stats().jobs
    page_two = run(FileInput(url=url, type="pdf", pages=[2]), tmp_path, pool, cache_dir=cache_dir)
    assert page_two.metadata["cache_hit"] is False  # the key has the pages
    assert pool.stats().jobs == jobs + 1
    assert "Bravo page marker" in page_two.markdown_content
    assert server.count("docs/three.pdf") == 2  # the downloaded bytes were reused


def test_url_permanent_error_is_not_retried(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    result = run(FileInput(url=server.url("missing.pdf?token=s3cr3t"), type="pdf"), tmp_path, pool)
    assert result.error is not None
    assert result.error.startswith("download failed: HTTP 404")
    assert "s3cr3t" not in result.error  # query strings stay out of messages
    assert server.count("missing.pdf") == 1


def test_url_gives_up_after_bounded_retries(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["flaky.txt"] = (b"eventually", "text/plain")
    server.failures["flaky.txt"] = [503, 503, 503, 503, 503]
    result = run(FileInput(url=server.url("flaky.txt"), type="text"), tmp_path, pool)
    assert result.error is not None
    assert result.error.startswith("download failed after 4 attempts: HTTP 503")
    assert server.count("flaky.txt") == 4


def test_url_over_the_size_limit(server: FileServer, tmp_path: Path, pool: WorkerPool) -> None:
    server.files["big.txt"] = (b"y" * 5000, "text/plain")
    result = run(FileInput(url=server.url("big.txt"), type="text"), tmp_path, pool, max_bytes=100)
    assert result.error is not None
    assert "5000 bytes" in result.error
    assert "100 bytes" in result.error


def test_url_without_cache_keeps_nothing(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    server.files["notes"] = (b"Plain notes from the web.", "text/plain; charset=utf-8")
    cache_dir = tmp_path / "cache"
    result = run(
        FileInput(url=server.url("notes"), type="text", cache=False),
        tmp_path,
        pool,
        cache_dir=cache_dir,
    )
    assert result.error is None, result.error
    assert "Plain notes from the web." in result.markdown_content
    assert result.cached_path is None
    assert not cache_dir.exists() or not any(p.is_file() for p in cache_dir.rglob("*"))


def test_url_image_loads_from_the_cached_download(
    server: FileServer, tmp_path: Path, pool: WorkerPool
) -> None:
    png = make_png(tmp_path / "dot.png").read_bytes()
    server.files["img/dot"] = (png, "image/png")
    result = run(
        FileInput(url=server.url("img/dot"), type="image"), tmp_path, pool, cache_dir=tmp_path / "c"
    )
    assert result.error is None, result.error
    assert result.metadata["mime_type"] == "image/png"
    requests = server.count("img/dot")
    assert load_image(result, base_dir=tmp_path).data == png
    assert server.count("img/dot") == requests  # read from the cache, not fetched again


# --------------------------------------------------------------------------- batches and limits


def test_process_files_keeps_order_isolates_errors_and_dedupes(
    three_pages: Path, pool: WorkerPool
) -> None:
    folder = three_pages.parent
    (folder / "a.txt").write_text("first text file", encoding="utf-8")
    files = [
        FileInput(path="a.txt", type="text"),
        FileInput(path="missing.pdf", type="pdf"),
        FileInput(path=three_pages.name, type="pdf", pages=[2]),
        FileInput(path="a.txt", type="text"),
    ]
    jobs = pool.stats().jobs
    results = process_files(files, base_dir=folder, pool=pool)
    assert [r.original for r in results] == files
    assert "first text file" in results[0].markdown_content
    assert results[1].error is not None
    assert "Bravo page marker" in results[2].markdown_content
    assert results[3].markdown_content == results[0].markdown_content
    assert pool.stats().jobs == jobs + 2  # the duplicate was converted once
    assert process_files([], base_dir=folder, pool=pool) == []


def test_aprocess_files(tmp_path: Path, pool: WorkerPool) -> None:
    (tmp_path / "a.txt").write_text("async words", encoding="utf-8")
    results = asyncio.run(
        aprocess_files([FileInput(path="a.txt", type="text")], base_dir=tmp_path, pool=pool)
    )
    assert "async words" in results[0].markdown_content


def test_limits_from_execution() -> None:
    assert FileLimits.from_execution(None) == FileLimits()
    limits = FileLimits.from_execution(
        ExecutionConfig(file_timeout=5, download_timeout=7, max_file_mb=1.5)
    )
    assert limits.model_dump() == {
        "file_timeout": 5.0,
        "download_timeout": 7.0,
        "max_bytes": 1572864,
    }
