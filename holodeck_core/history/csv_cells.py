"""CSV that a spreadsheet opens as data (docs/dashboard.md, docs/history.md): the dashboard's
``/runs.csv`` and ``/labels.csv`` and ``holodeck history … --format csv``.

A text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (OWASP's CSV
injection rule) gets a leading ``'``, so a spreadsheet shows it rather than running it as a
formula; so does one that already starts with ``'`` before such a character, which makes the
prefix reversible: :func:`restored` strips exactly the ``'`` :func:`neutral` added, and a
labelling sheet read back by ``holodeck labels import`` holds the texts unchanged. Files end
their rows in CRLF (RFC 4180), so a field holding a bare ``\\r`` is quoted and stays one field;
what a shell reads (``history … --format csv``) ends them in ``\\n``, as ``tail``/``cut`` expect,
unless a text holds a ``\\r``, which then needs the CRLF to be quoted."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

_FORMULA = re.compile(r"'*[=+\-@\t\r]")
"""A cell a spreadsheet would run, or one :func:`neutral` has neutralised (quotes before it)."""
LINE_END = "\r\n"
SHELL_LINE_END = "\n"


def neutral(value: Any) -> Any:
    """``value`` as a CSV cell: a formula-leading text prefixed with ``'``; others as they are."""
    if isinstance(value, str) and _FORMULA.match(value):
        return "'" + value
    return value


def restored(text: str) -> str:
    """The text :func:`neutral` was given for the cell ``text`` (its ``'`` taken off)."""
    return text[1:] if text.startswith("'") and _FORMULA.match(text, 1) else text


def csv_text(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, for_shell: bool = False
) -> str:
    """``header`` and ``rows`` as CSV, every text cell :func:`neutral`; None is an empty cell.
    ``for_shell``: rows end in ``\\n`` unless a text holds a ``\\r``."""
    cells = [[neutral(name) for name in header], *([neutral(v) for v in row] for row in rows)]
    carriage_return = any(isinstance(v, str) and "\r" in v for row in cells for v in row)
    out = io.StringIO()
    csv.writer(
        out, lineterminator=SHELL_LINE_END if for_shell and not carriage_return else LINE_END
    ).writerows(cells)
    return out.getvalue()
