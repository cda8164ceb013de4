"""Excel ``sheet:`` and ``range:`` selection with openpyxl, rendered like markitdown's
workbook output (``## <sheet>`` and a pipe table whose first row is the header).

markitdown converts whole workbooks only. Unlike its pandas route, blank cells stay empty
(not ``NaN``/``Unnamed: 1``), as in HoloDeck's sheet → CSV route (MANIFEST notes)."""

from __future__ import annotations

import zipfile
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from holodeck_core.files.errors import FileProcessingError


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime) and value.time() == time(0):
        text = value.date().isoformat()
    elif isinstance(value, date | time):
        text = value.isoformat()
    else:
        text = str(value)
    return " ".join(text.replace("|", "\\|").split())


def _trim(rows: list[list[str]]) -> list[list[str]]:
    """Drop trailing empty rows and columns (sheets often report a larger used area)."""
    while rows and not any(rows[-1]):
        rows.pop()
    width = max(
        (max((i + 1 for i, c in enumerate(row) if c), default=0) for row in rows), default=0
    )
    return [row[:width] + [""] * (width - len(row)) for row in rows]


def markdown_table(rows: list[list[str]]) -> str:
    header, *body = rows
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def excel_selection(
    path: Path, sheet: str | None, cell_range: str | None
) -> tuple[str, dict[str, Any]]:
    """Markdown of ``sheet`` (default: the active sheet), limited to ``cell_range`` if given.
    Raises :class:`FileProcessingError` for an unknown sheet or an unreadable workbook."""
    import openpyxl  # type: ignore[import-untyped]
    from openpyxl.utils.cell import range_boundaries  # type: ignore[import-untyped]
    from openpyxl.utils.exceptions import InvalidFileException  # type: ignore[import-untyped]

    try:
        workbook = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise FileProcessingError(f"not a readable Excel workbook (.xlsx): {exc}") from None
    try:
        names: list[str] = list(workbook.sheetnames)
        if sheet is not None and sheet not in names:
            listed = ", ".join(repr(name) for name in names)
            raise FileProcessingError(f"sheet {sheet!r} not found; the workbook has: {listed}")
        worksheet = workbook[sheet] if sheet is not None else workbook.active
        bounds: dict[str, int] = {}
        if cell_range:
            min_col, min_row, max_col, max_row = range_boundaries(cell_range.upper())
            bounds = {
                "min_col": min_col,
                "min_row": min_row,
                "max_col": max_col,
                "max_row": max_row,
            }
        rows = _trim(
            [
                [_cell_text(v) for v in row]
                for row in worksheet.iter_rows(values_only=True, **bounds)
            ]
        )
        title: str = worksheet.title
    finally:
        workbook.close()
    where = f"range {cell_range} of sheet {title!r}" if cell_range else f"sheet {title!r}"
    if not rows:
        raise FileProcessingError(f"no text extracted: {where} is empty")
    heading = f"## {title} ({cell_range.upper()})" if cell_range else f"## {title}"
    details = {"sheet": title, "sheets": names, "range": cell_range.upper() if cell_range else None}
    return f"{heading}\n{markdown_table(rows)}", details
