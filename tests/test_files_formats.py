"""File processing by format, in worker processes (docs/architecture.md): markitdown, a PDF through
HoloDeck 0.7.1's heading extractor as HoloDeck converts it (docs/holodeck-fidelity.md); the real
documents of ``../shared/corpus/documents`` against its ``MANIFEST.json`` (whole files and their
parts), 1-based PDF pages, PowerPoint slides, Excel sheets and ranges, CSV, Word, text and images,
and corrupt, missing, oversized or hanging files reported as errors that never escape."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.files import NO_TEXT, WorkerPool, load_image
from holodeck_core.models.test_case import FileInput
from tests import files_helpers
from tests.conftest import no_shared
from tests.files_helpers import make_pdf, make_png, run

# Shared fixtures: pytest finds a fixture by its name in the test module.
pool = files_helpers.pool
three_pages = files_helpers.three_pages


SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "documents"
MANIFEST = CORPUS / "MANIFEST.json"
NO_CORPUS = no_shared(MANIFEST)


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


def _must_include(entry: dict[str, Any]) -> list[str]:
    """The manifest's strings, which are markitdown's: a PDF's table row (``| Total Revenue: |``)
    comes from HoloDeck's extractor as its cells' text lines, each of which must be there."""
    if entry["holodeck_type"] != "pdf":
        return list(entry["must_include"])
    found: list[str] = []
    for text in entry["must_include"]:
        row = text.strip()
        if row.startswith("|") and row.endswith("|"):
            found += [f"\n{cell.strip()}\n" for cell in row.strip("|").split("|")]
        else:
            found.append(text)
    return found


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
    for text in _must_include(entry):
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
    """HoloDeck's heading extractor: one line per text line, 18 pt text a ``#`` heading."""
    result = run(FileInput(path=three_pages.name, type="pdf"), three_pages.parent, pool)
    assert result.markdown_content == (
        "# Alpha page marker\n# Bravo page marker\n# Charlie page marker"
    )
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
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.base64()) == png.read_bytes()


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
    if file_type == "pdf":  # refused before either converter sees it
        assert result.error.startswith("not a readable PDF: "), result.error
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
