"""Generate the attachments of the acme-support example into ``files/``.

Run from anywhere: ``.venv/bin/python examples/acme-support/make_files.py``. The output is
committed, so the example runs without this script; rerun it after changing the content
below. The output is byte-for-byte reproducible: Office files get fixed timestamps.

Only libraries the project already installs are used: openpyxl (xlsx) and python-pptx (pptx).
The PDF and the Word document are small enough to write by hand (the PDF as text objects in
Helvetica, the .docx as a minimal WordprocessingML package).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from xml.sax.saxutils import escape

FILES = Path(__file__).resolve().parent / "files"
FIXED_TIME = datetime(2026, 5, 1, 9, 0, 0)
FIXED_ISO = "2026-05-01T09:00:00Z"
ZIP_TIME = (2026, 5, 1, 9, 0, 0)

# --- content -----------------------------------------------------------------------------

INVOICE_PAGES: list[list[str]] = [
    [
        "ACME Corporation - Invoice INV-1042",
        "Customer: Wile E. Coyote, 1 Desert Road, Mesa AZ",
        "Invoice date: 2026-05-02    Order: A-1001",
        "Rocket Skates X2    1 x 199.00 USD",
        "Giant Magnet    2 x 45.00 USD",
        "Subtotal: 289.00 USD",
        "Sales tax (8%): 23.12 USD",
        "Total due: 312.12 USD",
    ],
    [
        "Payment terms",
        "Payment is due within 30 days of the invoice date (net 30).",
        "Late payments incur a fee of 1.5% per month.",
        "Pay by bank transfer to ACME Bank, reference INV-1042.",
    ],
]

PRODUCTS: list[list[object]] = [
    ["SKU", "Product", "Price (USD)", "In stock"],
    ["RS-X2", "Rocket Skates X2", 199.0, 12],
    ["GM-01", "Giant Magnet", 45.0, 40],
    ["DB-10", "Dehydrated Boulders", 12.5, 300],
    ["PH-03", "Portable Hole", 89.9, 0],
    ["BS-07", "Bird Seed (5 kg)", 9.99, 120],
]
PRODUCTS_FOOTNOTE = (
    "Prices valid until 2026-12-31; clearance items are excluded from price matching."
)

SHIPPING: list[list[object]] = [
    ["Zone", "Region", "Rate (USD)", "Delivery (business days)"],
    [1, "Domestic", 7.5, "2-3"],
    [2, "Canada and Mexico", 15.0, "5-7"],
    [3, "Europe", 24.0, "7-10"],
    [4, "Rest of world", 32.0, "10-14"],
]

WARRANTY_TITLE = "ACME Limited Warranty"
WARRANTY_PARAGRAPHS = [
    "Every ACME product is covered by a two-year limited warranty from the date of delivery.",
    "The warranty covers defects in materials and workmanship. It does not cover damage "
    "caused by misuse, falls from cliffs or contact with road runners.",
    "To make a claim, send support your order number and a photo of the defect; we repair "
    "or replace the product within 10 business days.",
]
WARRANTY_TABLE = [
    ["Product line", "Warranty"],
    ["Rocket gear", "2 years"],
    ["Magnets", "5 years"],
]

SLIDES: list[tuple[str, list[str]]] = [
    ("ACME Spring Catalog 2026", ["Gear for the discerning coyote"]),
    (
        "Giant Magnet",
        ["Holding force: 500 kg", "Battery life: not needed (permanent magnet)", "Price: 45 USD"],
    ),
    (
        "Rocket Skates X2",
        ["Top speed: 40 km/h", "Battery life: 3 hours", "Weight: 2.4 kg", "Price: 199 USD"],
    ),
]

ORDERS: list[list[str]] = [
    ["order_id", "customer", "amount_usd", "status", "carrier"],
    ["A-1001", "Wile E. Coyote", "312.12", "shipped", "UPS"],
    ["A-1002", "Road Runner Fan Club", "45.00", "processing", ""],
    ["A-1003", "Elmer Fudd", "89.90", "delivered", "DHL"],
    ["A-1004", "Marvin Martian", "64.00", "processing", ""],
    ["A-1005", "Daffy Duck", "19.99", "cancelled", ""],
    ["A-1006", "Yosemite Sam", "150.00", "shipped", "FedEx"],
]

TICKET = """\
From: wile.e.coyote@example.com
Subject: Rocket Skates arrived damaged!!
Order: A-1001

Hi ACME,

my Rocket Skates X2 arrived today with a cracked wheel, and the box was crushed.
I need them for Saturday. Please send a replacement as soon as possible.

Wile E.
"""


# --- writers -----------------------------------------------------------------------------


def _pdf_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_bytes(pages: Sequence[Sequence[str]]) -> bytes:
    """A minimal PDF 1.4: one Helvetica text block per page, a correct xref table."""
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: (
            f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] "
            f"/Count {len(pages)} >>"
        ).encode(),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    }
    for page_id, lines in zip(page_ids, pages, strict=True):
        body = ["BT", "/F1 12 Tf", "16 TL", "72 760 Td"]
        for number, line in enumerate(lines):
            body.append(f"({_pdf_text(line)}) Tj" if number == 0 else f"T* ({_pdf_text(line)}) Tj")
        body.append("ET")
        stream = "\n".join(body).encode("latin-1")
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>"
        ).encode()
        objects[page_id + 1] = (
            f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream"
        )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = out.tell()
        out.write(f"{number} 0 obj\n".encode() + objects[number] + b"\nendobj\n")
    xref = out.tell()
    count = max(objects) + 1
    out.write(f"xref\n0 {count}\n0000000000 65535 f \n".encode())
    for number in range(1, count):
        out.write(f"{offsets[number]:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {count} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _w_paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f'<w:p>{props}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'


def _w_table(rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(
        "<w:tr>" + "".join(f"<w:tc>{_w_paragraph(cell)}</w:tc>" for cell in row) + "</w:tr>"
        for row in rows
    )
    return f"<w:tbl><w:tblPr/>{cells}</w:tbl>"


def docx_bytes(title: str, paragraphs: Sequence[str], table: Sequence[Sequence[str]]) -> bytes:
    """A minimal .docx: a Heading 1 title, body paragraphs and a table."""
    body = _w_paragraph(title, "Heading1") + "".join(_w_paragraph(p) for p in paragraphs)
    body += _w_table(table)
    parts = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" '
            'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
            '<Override PartName="/word/styles.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>'
            "</Types>"
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/officeDocument" Target="word/document.xml"/>'
            "</Relationships>"
        ),
        "word/_rels/document.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/styles" Target="styles.xml"/>'
            "</Relationships>"
        ),
        "word/styles.xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            f"<w:styles {_W}>"
            '<w:style w:type="paragraph" w:default="1" w:styleId="Normal">'
            '<w:name w:val="Normal"/></w:style>'
            '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/>'
            '<w:basedOn w:val="Normal"/><w:rPr><w:b/><w:sz w:val="32"/></w:rPr></w:style>'
            "</w:styles>"
        ),
        "word/document.xml": (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            f"<w:document {_W}><w:body>{body}</w:body></w:document>"
        ),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), text.encode(), zipfile.ZIP_DEFLATED)
    return out.getvalue()


def xlsx_bytes() -> bytes:
    from openpyxl import Workbook  # type: ignore[import-untyped]

    book = Workbook()
    products = book.active
    assert products is not None
    products.title = "Products"
    for row in PRODUCTS:
        products.append(row)
    products.append([])
    products.append([PRODUCTS_FOOTNOTE])
    shipping = book.create_sheet("Shipping")
    for row in SHIPPING:
        shipping.append(row)
    book.properties.creator = "acme-support example"
    book.properties.created = FIXED_TIME
    out = io.BytesIO()
    book.save(out)
    return reproducible_zip(out.getvalue())


def pptx_bytes() -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for number, (title, lines) in enumerate(SLIDES):
        layout = deck.slide_layouts[0 if number == 0 else 1]
        slide = deck.slides.add_slide(layout)
        assert slide.shapes.title is not None
        slide.shapes.title.text = title
        body = slide.placeholders[1]
        body.text_frame.text = lines[0]
        for line in lines[1:]:
            body.text_frame.add_paragraph().text = line
    props = deck.core_properties
    props.author = "acme-support example"
    props.last_modified_by = "acme-support example"
    props.created = FIXED_TIME
    props.modified = FIXED_TIME
    props.revision = 1
    out = io.BytesIO()
    deck.save(out)
    return reproducible_zip(out.getvalue())


def reproducible_zip(data: bytes) -> bytes:
    """Rewrite a zip package with fixed entry times and a fixed modification date."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            content = source.read(info.filename)
            if info.filename == "docProps/core.xml":
                content = re.sub(
                    rb"(<dcterms:(?:created|modified)[^>]*>)[^<]*(</dcterms:)",
                    rb"\g<1>" + FIXED_ISO.encode() + rb"\g<2>",
                    content,
                )
            archive.writestr(
                zipfile.ZipInfo(info.filename, ZIP_TIME), content, zipfile.ZIP_DEFLATED
            )
    return out.getvalue()


def csv_text(rows: Sequence[Sequence[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def main() -> None:
    FILES.mkdir(exist_ok=True)
    outputs: dict[str, bytes] = {
        "invoice-1042.pdf": pdf_bytes(INVOICE_PAGES),
        "price-list.xlsx": xlsx_bytes(),
        "warranty.docx": docx_bytes(WARRANTY_TITLE, WARRANTY_PARAGRAPHS, WARRANTY_TABLE),
        "spring-catalog.pptx": pptx_bytes(),
        "orders.csv": csv_text(ORDERS).encode(),
        "ticket-5521.txt": TICKET.encode(),
    }
    for name, data in outputs.items():
        (FILES / name).write_bytes(data)
        print(f"wrote files/{name} ({len(data):,} bytes)")


if __name__ == "__main__":
    main()
