"""A retrieval tool's ``source``: a file, a folder or a glob, read into documents (Markdown,
text, and PDF/Word/… through the markitdown path) or into records (JSON with ``record_path``,
JSONL, CSV with ``delimiter``).

Every problem is a ConfigError naming the tool and the field, raised while the suite opens
its tools, before any model call: a missing source, an empty one, a ``record_path`` that
matches nothing, an ``id_field`` absent from records, a document that converts to no text."""

from __future__ import annotations

import csv
import glob
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodeck_core.defaults import MAX_SOURCE_BYTES, MAX_SOURCE_FILE_BYTES, MAX_SOURCE_FILES
from holodeck_core.errors import ConfigError
from holodeck_core.files import process_files
from holodeck_core.models import FileInput, VectorstoreTool, bounded_json

TEXT_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst", ".json", ".jsonl", ".csv"})
CONVERTED_SUFFIXES = {
    ".pdf": "pdf",
    ".docx": "word",
    ".doc": "word",
    ".pptx": "powerpoint",
    ".xlsx": "excel",
    ".html": "text",
    ".htm": "text",
}
SUPPORTED_SUFFIXES = TEXT_SUFFIXES | frozenset(CONVERTED_SUFFIXES)
RECORD_SUFFIXES = frozenset({".json", ".jsonl", ".csv"})
DOCUMENT_BATCH_FILES = 256
DOCUMENT_BATCH_BYTES = 8 * 1024 * 1024
"""The most files and bytes of a source read into memory at once (:func:`document_batches`)."""
SOURCE_CONVERSION_TIMEOUT_S = 600.0
"""Sources are converted once per content (the file cache keeps them), so a long PDF gets
far more time than a test case's attachment."""


@dataclass(frozen=True)
class SourceFile:
    path: Path
    display: str
    sha256: str


@dataclass(frozen=True)
class Document:
    source: str
    text: str


@dataclass(frozen=True)
class Record:
    source: str
    id: str
    content: str
    metadata: dict[str, str]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_files(
    source: str, base_dir: Path, resolve: Callable[[str], Path], *, where: str
) -> list[SourceFile]:
    """The files ``source`` names, sorted, with their content hashes."""
    if glob.has_magic(source):
        anchor = Path(Path(source).anchor or base_dir)
        pattern = str(Path(source).relative_to(anchor)) if Path(source).anchor else source
        paths = [p for p in anchor.glob(pattern) if p.is_file()]
        if not paths:
            raise ConfigError(f"{where}.source: the glob {source!r} matches no file")
    else:
        root = resolve(source)
        if not root.exists():
            raise ConfigError(
                f"{where}.source: file not found: {root} (paths are relative to the agent "
                "file's folder)"
            )
        paths = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else [root]
    supported = sorted(p for p in paths if p.suffix.lower() in SUPPORTED_SUFFIXES)
    if not supported:
        raise ConfigError(
            f"{where}.source: no supported file in {source!r} (supported: "
            f"{', '.join(sorted(SUPPORTED_SUFFIXES))})"
        )
    _check_size(supported, source, base_dir, where=where)
    return [SourceFile(p, _display(p, base_dir), _sha256(p)) for p in supported]


def _check_size(paths: list[Path], source: str, base_dir: Path, *, where: str) -> None:
    """The caps of a source (an index holds all of it in memory), checked before any file is
    read: how many files, how big each, how big all."""
    if len(paths) > MAX_SOURCE_FILES:
        raise ConfigError(
            f"{where}.source: {source!r} holds {len(paths):,} files; a retrieval source may hold "
            f"at most {MAX_SOURCE_FILES:,} (merge small files, or split the corpus over tools)"
        )
    total = 0
    for path in paths:
        size = path.stat().st_size
        if size > MAX_SOURCE_FILE_BYTES:
            raise ConfigError(
                f"{where}.source: {_display(path, base_dir)} is {size:,} bytes; a retrieval "
                f"source file may hold at most {MAX_SOURCE_FILE_BYTES:,} (split it)"
            )
        total += size
    if total > MAX_SOURCE_BYTES:
        raise ConfigError(
            f"{where}.source: {source!r} holds {total:,} bytes; a retrieval source may hold at "
            f"most {MAX_SOURCE_BYTES:,} (split the corpus over several tools)"
        )


def _display(path: Path, base_dir: Path) -> str:
    try:
        return path.resolve().relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return str(path)


def document_batches(files: list[SourceFile]) -> Iterator[list[SourceFile]]:
    """``files`` in order, in batches of at most :data:`DOCUMENT_BATCH_FILES` files and
    :data:`DOCUMENT_BATCH_BYTES` bytes (a bigger file is a batch of its own)."""
    batch: list[SourceFile] = []
    size = 0
    for file in files:
        grown = size + file.path.stat().st_size
        if batch and (len(batch) >= DOCUMENT_BATCH_FILES or grown > DOCUMENT_BATCH_BYTES):
            yield batch
            batch, grown = [], file.path.stat().st_size
        batch.append(file)
        size = grown
    if batch:
        yield batch


def read_documents(
    files: list[SourceFile], *, base_dir: Path, cache_dir: Path, where: str
) -> list[Document]:
    """Each file as text. Text files are read directly; the rest go through markitdown (in
    its worker processes, with the file cache), a PDF through HoloDeck's heading extractor
    first. No text at all is an error, not a skip."""
    texts: dict[Path, str] = {}
    converted = [f for f in files if f.path.suffix.lower() in CONVERTED_SUFFIXES]
    for file in files:
        if file.path.suffix.lower() in TEXT_SUFFIXES:
            try:
                texts[file.path] = file.path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ConfigError(f"{where}.source: {file.display} is not UTF-8 text") from None
    if converted:
        inputs = [
            FileInput(path=str(f.path), type=CONVERTED_SUFFIXES[f.path.suffix.lower()])
            for f in converted
        ]
        outputs = process_files(
            inputs,
            base_dir=base_dir,
            cache_dir=cache_dir,
            file_timeout=SOURCE_CONVERSION_TIMEOUT_S,
        )
        for file, out in zip(converted, outputs, strict=True):
            if out.error:
                raise ConfigError(f"{where}.source: {file.display}: {out.error}")
            texts[file.path] = out.markdown_content
    documents: list[Document] = []
    for file in files:
        text = texts[file.path]
        if not text.strip():
            raise ConfigError(f"{where}.source: {file.display} holds no text")
        documents.append(Document(file.display, text))
    return documents


def _at_path(data: Any, record_path: str, *, where: str, display: str) -> Any:
    """Follow a dotted ``record_path`` (``data.items``, ``results.0.rows``) into ``data``."""
    node = data
    walked: list[str] = []
    for part in record_path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            keys = sorted(node) if isinstance(node, dict) else f"a {type(node).__name__}"
            at = ".".join(walked) or "the top level"
            raise ConfigError(
                f"{where}.record_path: {record_path!r} matches nothing in {display} "
                f"(no {part!r} at {at}; found {keys})"
            )
        walked.append(part)
    return node


def _raw_records(file: SourceFile, tool: VectorstoreTool, *, where: str) -> list[Any]:
    suffix = file.path.suffix.lower()
    try:
        if suffix == ".csv":
            with file.path.open(newline="", encoding="utf-8") as handle:
                sample = handle.read(8192)
                handle.seek(0)
                delimiter = tool.delimiter or _sniff(sample)
                return list(csv.DictReader(handle, delimiter=delimiter))
        if suffix == ".jsonl":
            lines = file.path.read_text(encoding="utf-8").splitlines()
            return [bounded_json.loads(line) for line in lines if line.strip()]
        data = bounded_json.loads(file.path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}.source: {file.display} cannot be read: {exc}") from None
    if tool.record_path:
        data = _at_path(data, tool.record_path, where=where, display=file.display)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        field = "record_path" if tool.record_path else "source"
        raise ConfigError(
            f"{where}.{field}: {file.display} holds a {type(data).__name__} where a list "
            "of records is expected"
        )
    return data


def _sniff(sample: str) -> str:
    try:
        return csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
    except csv.Error:
        return ","


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def read_records(files: list[SourceFile], tool: VectorstoreTool, *, where: str) -> list[Record]:
    """Structured mode (``vector_field`` set): one record per JSON object or CSV row. The
    embedded text is the ``vector_field`` values joined by ``field_separator``."""
    fields = [tool.vector_field] if isinstance(tool.vector_field, str) else tool.vector_field or []
    id_field = tool.id_field or ""
    records: list[Record] = []
    for file in files:
        if file.path.suffix.lower() not in RECORD_SUFFIXES:
            raise ConfigError(
                f"{where}.source: {file.display} is not JSON, JSONL or CSV, but vector_field "
                "asks for records"
            )
        raw = _raw_records(file, tool, where=where)
        objects = [r for r in raw if isinstance(r, dict)]
        if not objects:
            raise ConfigError(f"{where}.source: {file.display} holds no records")
        available = sorted({key for r in objects for key in r})
        lacking = [i for i, r in enumerate(objects) if id_field not in r]
        if lacking:
            raise ConfigError(
                f"{where}.id_field: {id_field!r} is absent from {len(lacking)} of "
                f"{len(objects)} records in {file.display} (first: record {lacking[0]}; "
                f"fields: {', '.join(available)})"
            )
        for name, label in [(f, "vector_field") for f in fields] + [
            (f, "meta_fields") for f in tool.meta_fields or []
        ]:
            if not any(name in r for r in objects):
                raise ConfigError(
                    f"{where}.{label}: {name!r} is in no record of {file.display} "
                    f"(fields: {', '.join(available)})"
                )
        meta_names = (
            tool.meta_fields
            if tool.meta_fields is not None
            else [k for k in available if k != id_field and k not in fields]
        )
        for r in objects:
            content = tool.field_separator.join(
                _text(r.get(f)) for f in fields if r.get(f) not in (None, "")
            )
            if not content.strip():
                continue
            meta = {f: _text(r.get(f)) for f in meta_names}
            records.append(Record(file.display, _text(r[id_field]), content, meta))
    if not records:
        raise ConfigError(f"{where}.vector_field: every record's {fields} is empty")
    return records
