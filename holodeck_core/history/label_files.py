"""Reading a labels file for ``holodeck labels import`` (docs/history.md): a ``.csv`` sheet, as
the dashboard offers it, or ``.jsonl``, one object a line. Whatever the file holds, a problem is
a :class:`~holodeck_core.errors.ConfigError` naming the file, line and field, never a
traceback: bytes that are not UTF-8, a field past
:data:`~holodeck_core.defaults.MAX_LABELS_FIELD_CHARS`, a row whose fields do not match the
header, JSON nested past :data:`~holodeck_core.defaults.MAX_JSON_DEPTH`.

A CSV record may span lines (a quoted field holding newlines); its line is the one it starts
on. Texts hold any character: a bare ``\\r``, U+2028, a form feed or a NUL stays in its field
(CSV is read with the csv module's own line handling, JSON Lines split at ``\\n`` only), and a
cell's neutralising ``'`` (:mod:`holodeck_core.history.csv_cells`) is taken off."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from holodeck_core.defaults import MAX_LABELS_FIELD_CHARS
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.history.csv_cells import restored
from holodeck_core.models.bounded_json import BoundedJSONError, loads

KEY_COLUMNS = ("run_id", "case_id", "metric_name")
_NOT_UTF8 = re.compile("[\ud800-\udfff]")
"""Bytes that were not UTF-8 (decoded with ``surrogateescape``) or a JSON escape of a lone
surrogate: no UTF-8 text holds one."""
NOT_UTF8 = "not UTF-8 text (a byte that is not, or a lone surrogate): save the file as UTF-8"
Rows = list[tuple[int, dict[str, Any]]]


def read_rows(path: Path) -> Rows:
    """(line, raw row) of a ``.csv`` or ``.jsonl`` file, every cell checked."""
    if not path.is_file():
        raise ConfigError(f"no such labels file: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise ConfigError(f"labels are a .csv or .jsonl file, not {path.name!r}", file=str(path))
    text = path.read_bytes().decode("utf-8-sig", errors="surrogateescape")
    rows = csv_rows(path, text) if suffix == ".csv" else jsonl_rows(path, text)
    problems = [problem for line, row in rows for problem in _cell_problems(path, line, row)]
    if problems:
        raise ConfigError(problems)
    return rows


def _cell_problems(path: Path, line: int, row: dict[str, Any]) -> Iterator[Problem]:
    for field, value in row.items():
        texts = (field, value) if isinstance(value, str) else (field,)
        if any(_NOT_UTF8.search(text) for text in texts):
            yield Problem(str(path), NOT_UTF8, path=_NOT_UTF8.sub("?", field), line=line)
        elif isinstance(value, str) and len(value) > MAX_LABELS_FIELD_CHARS:
            yield _too_long(path, line, field)


def _too_long(path: Path, line: int, field: str) -> Problem:
    return Problem(str(path), f"longer than {MAX_LABELS_FIELD_CHARS:,} characters "
                   "(MAX_LABELS_FIELD_CHARS): shorten it", path=field, line=line)  # fmt: skip


@contextmanager
def field_limit(chars: int) -> Iterator[None]:
    """The csv module's (process-wide) field size limit set to ``chars`` for a while."""
    before = csv.field_size_limit(chars)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def _records(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of each non-blank CSV record."""
    reader = csv.reader(io.StringIO(text, newline=""))
    line = 1
    for record in reader:
        if record:
            yield line, record
        line = reader.line_num + 1


def csv_rows(path: Path, text: str) -> Rows:
    records = _records(text)
    rows: Rows = []
    problems: list[Problem] = []
    try:
        with field_limit(MAX_LABELS_FIELD_CHARS):
            _, header = next(records, (1, []))
            header = [restored(name) for name in header]
            _check_header(path, header)
            for line, values in records:
                if len(values) == len(header):
                    rows.append((line, dict(zip(header, map(restored, values), strict=True))))
                else:
                    problems.append(Problem(
                        str(path), f"{len(values)} field(s) where the header has "
                        f"{len(header)}: a text holding a comma, quote or line break is quoted",
                        line=line,
                    ))  # fmt: skip
    except csv.Error as exc:
        problems.append(_csv_problem(path, text, exc))
    if problems:
        raise ConfigError(problems)
    return rows


def _check_header(path: Path, header: list[str]) -> None:
    missing = set(KEY_COLUMNS) - set(header)
    if missing:
        raise ConfigError(
            f"the header lacks {', '.join(sorted(missing))}: start from the labelling sheet "
            "the dashboard offers (Judges page)",
            file=str(path),
        )
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ConfigError([Problem(str(path), "a column named twice: keep one", path=name,
                                   line=1) for name in twice])  # fmt: skip


def _csv_problem(path: Path, text: str, exc: csv.Error) -> Problem:
    """The field past the limit the csv module stopped at (its record read again without the
    limit), or the record it could not read."""
    line, header = 1, list[str]()
    try:
        with field_limit(len(text) + 1):  # the file is in memory already
            for line, record in _records(text):
                header = header or record
                long = next((i for i, v in enumerate(record) if len(v) > MAX_LABELS_FIELD_CHARS),
                            None)  # fmt: skip
                if long is not None:
                    name = header[long] if long < len(header) else f"field {long + 1}"
                    return _too_long(path, line, restored(name))
    except csv.Error:
        pass
    return Problem(str(path), f"not readable as CSV: {exc}", line=line)


def jsonl_rows(path: Path, text: str) -> Rows:
    rows, problems = [], []
    for line, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = loads(raw)
        except json.JSONDecodeError as exc:
            shown = NOT_UTF8 if _NOT_UTF8.search(raw) else f"not JSON: {exc.msg}"
            problems.append(Problem(str(path), shown, line=line))
            continue
        except BoundedJSONError as exc:
            problems.append(Problem(str(path), str(exc), line=line))
            continue
        if not isinstance(value, dict):
            problems.append(Problem(str(path), "a line is one JSON object", line=line))
            continue
        rows.append((line, value))
    if problems:
        raise ConfigError(problems)
    return rows
