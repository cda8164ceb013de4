"""The worker pool and the small generated documents shared by the ``test_files_*`` modules (issue
3, item 1): ``process_file`` on a pool, a PDF written page by page, a PNG, and a three-page PDF."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holodeck_core.files import WorkerPool, process_file
from holodeck_core.models.results import ProcessedFileInput
from holodeck_core.models.test_case import FileInput


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


@pytest.fixture
def three_pages(tmp_path: Path) -> Path:
    return make_pdf(
        tmp_path / "three.pdf", ["Alpha page marker", "Bravo page marker", "Charlie page marker"]
    )
