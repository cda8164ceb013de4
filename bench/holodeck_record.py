"""Record what HoloDeck 0.7.1 itself says, for the CI tests that run without it
(docs/holodeck-fidelity.md).

Run with HoloDeck's own interpreter (``bash bench/peer_setup.sh`` first; never in CI):

    bench/.peer-venv/bin/python bench/holodeck_record.py [--corpus ../shared/corpus/holodeck]

It writes, under ``tests/fixtures/holodeck/``:

* ``eval_run.schema.json``: the JSON Schema of HoloDeck's ``EvalRun`` model (``extra="forbid"``
  everywhere, so every field we add is caught), for ``tests/test_holodeck_files.py``;
* ``config_resolution.json``: HoloDeck's effective model, judge model, execution and tool
  database settings for every corpus sample with a ``config.yaml`` and for the probes in
  ``tests/fixtures/holodeck/probes/`` (a user-level ``~/.holodeck/config.yaml`` and ``.env``
  included), each under the fixed environment :data:`ENV`, for ``tests/test_config_merge.py``;
* ``structured_chunks.json``: HoloDeck's ``hierarchical_document`` chunks of every document
  of the corpus samples' ``data/`` folders (a PDF through its heading extractor first), for
  each ``document_domain``, a few ``max_chunk_tokens`` and depths: their count and the sha256
  of their ``[content, parent_chain, section_id]`` list (header chunks dropped, as HoloDeck
  drops them before embedding) and each ``DEFINITION`` chunk's defined term, for
  ``tests/test_structure_chunks.py``;
* ``pdf_attachments.json``: the user message HoloDeck's executor composes for test cases that
  attach corpus PDFs (``../shared/corpus/documents``; its ``FileProcessor``, then
  ``_compose_agent_input``, the text ``holodeck test`` sends the model): its length and sha256,
  for ``tests/test_pdf_attachments.py``.

This file imports HoloDeck, never our package: it is the oracle's side of the comparison."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "holodeck"
PROBES = FIXTURES / "probes"

ENV: dict[str, str] = {
    "OPENAI_API_KEY": "sk-fixture-openai",
    "AZURE_OPENAI_API_KEY": "fixture-azure-key",
    "AZURE_OPENAI_ENDPOINT": "https://fixture.openai.azure.com/",
    "AZURE_OPENAI_DEPLOYMENT_NAME": "fixture-deployment",
    "AZURE_OPENAI_EMBEDDING_DEPLOYMENT_NAME": "fixture-embeddings",
    "CLAUDE_CODE_OAUTH_TOKEN": "fixture-oauth-token",
    "OPENSEARCH_PASSWORD": "fixture-opensearch",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317",
    "QDRANT_REMOTE_URL": "http://127.0.0.1:6333",
    "QDRANT_URL": "http://127.0.0.1:6333",
}
"""The environment every resolution is recorded under (the CI test uses the same)."""

MODEL_KEYS = ("provider", "name", "temperature", "max_tokens", "top_p", "endpoint", "api_version")


def _secret(value: Any) -> Any:
    getter = getattr(value, "get_secret_value", None)
    return getter() if getter else value


def _model(model: Any) -> dict[str, Any] | None:
    if model is None:
        return None
    dumped = {key: _secret(getattr(model, key, None)) for key in MODEL_KEYS}
    dumped["provider"] = getattr(dumped["provider"], "value", dumped["provider"])
    dumped["api_key"] = _secret(getattr(model, "api_key", None))
    return dumped


def _database(db: Any) -> Any:
    if not hasattr(db, "model_dump"):
        return db
    dumped = db.model_dump(mode="python", exclude_none=True)
    return {key: _secret(value) for key, value in dumped.items()}


def resolve(agent_file: Path, home: Path) -> dict[str, Any]:
    """HoloDeck's resolution of one agent as ``holodeck test`` would make it, run from the
    agent's folder with ``HOME=home`` and exactly :data:`ENV`: HoloDeck reads
    ``Path.home()``, the process environment, and loads the working directory's ``.env``
    then ``~/.holodeck/.env`` (without overriding) before anything else."""
    from dotenv import load_dotenv

    saved, cwd = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update({"PATH": saved.get("PATH", ""), "HOME": str(home), **ENV})
    os.chdir(agent_file.parent)
    try:
        for dotenv in (Path.cwd() / ".env", Path.home() / ".holodeck" / ".env"):
            if dotenv.exists():
                load_dotenv(dotenv, override=False)
        return resolve_here(agent_file)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


def resolve_here(agent_file: Path) -> dict[str, Any]:
    from holodeck.config.loader import load_agent_with_config

    try:
        agent, execution, _ = load_agent_with_config(str(agent_file))
    except Exception as exc:  # the oracle's refusal is the fixture
        return {"error": type(exc).__name__, "message": str(exc).splitlines()[0][:300]}
    evaluations = agent.evaluations
    return {
        "model": _model(agent.model),
        "evaluation_model": _model(evaluations.model if evaluations else None),
        "execution": execution.model_dump(mode="json"),
        "databases": {
            tool.name: _database(getattr(tool, "database", None))
            for tool in agent.tools or []
            if getattr(tool, "type", None) == "vectorstore"
        },
    }


def agents(corpus: Path) -> list[tuple[str, Path, Path]]:
    """(fixture key, agent file, HOME) of every sample with a config.yaml, then the probes."""
    empty_home = PROBES / "no-home"
    found = [
        (str(p.parent.relative_to(corpus)), p, empty_home)
        for p in sorted((corpus / "samples").glob("*/*/agent.yaml"))
        if (p.parent / "config.yaml").is_file()
    ]
    for probe in sorted(PROBES.glob("*/agent.yaml")):
        home = probe.parent / "home"
        found.append((f"probes/{probe.parent.name}", probe, home if home.is_dir() else empty_home))
    return found


def chunk_digest(chunks: list[list[Any]]) -> str:
    """The sha256 of the chunks' canonical JSON (the CI test computes ours the same way)."""
    import hashlib

    return hashlib.sha256(json.dumps(chunks, ensure_ascii=False).encode()).hexdigest()


def structured_chunks(corpus: Path) -> list[dict[str, Any]]:
    """HoloDeck's chunks of every corpus document, per domain, size and depth (a PDF's are
    of its Markdown, whose sha256 is recorded too)."""
    import hashlib

    from holodeck.lib.pdf_processor import extract_pdf_with_headings
    from holodeck.lib.structured_chunker import DOMAIN_PATTERNS, ChunkType, StructuredChunker

    cases = []
    documents = sorted(
        p for p in (corpus / "samples").glob("*/*/data/*") if p.suffix in {".md", ".txt", ".pdf"}
    )
    for document in documents:
        pdf = document.suffix == ".pdf"
        text = extract_pdf_with_headings(document) if pdf else document.read_text()
        grid = (
            [(d, n, None) for d in ("none", "us_legislative") for n in (800, 1500)]
            if pdf
            else [
                (d, n, depth)
                for d in ("none", *DOMAIN_PATTERNS)
                for n in (60, 300, 800)
                for depth in ((None,) if d == "none" else (None, 1))
            ]
        )
        for domain, size, depth in grid:
            patterns = DOMAIN_PATTERNS.get(domain)
            chunker = StructuredChunker(size, patterns, depth)
            kept = [c for c in chunker.parse(text, "x") if c.chunk_type != ChunkType.HEADER]
            chunks = [[c.content, c.parent_chain, c.section_id] for c in kept]
            terms = [[n, c.defined_term] for n, c in enumerate(kept) if c.defined_term]
            case = {
                "document": str(document.relative_to(corpus)),
                "document_domain": domain,
                "max_chunk_tokens": size,
                "max_subsection_depth": depth,
                "count": len(chunks),
                "sha256": chunk_digest(chunks),
            }
            if pdf:
                case["markdown_sha256"] = hashlib.sha256(text.encode()).hexdigest()
            if terms:  # a DEFINITION chunk's term: three more copies in its BM25 document
                case["defined_terms"] = terms
            cases.append(case)
    return cases


PDF_CASES: list[dict[str, Any]] = [
    {"input": "Summarise the attachment.", "files": [{"path": "docs/test.pdf"}]},
    {
        "input": "What is on these pages?",
        "files": [{"path": "docs/pdf_multipage.pdf", "pages": [2, 3]}],
    },
    {
        "input": "What are the totals?",
        "files": [
            {"path": "docs/REPAIR-2022-INV-001_multipage.pdf"},
            {"path": "docs/SPARSE-2024-INV-1234_borderless_table.pdf"},
        ],
    },
    {"input": "Which sections?", "files": [{"path": "docs/masterformat_partial_numbering.pdf"}]},
]
"""Test cases attaching corpus PDFs, ``docs/`` being ``../shared/corpus/documents``; ``pages``
1-based as ours: HoloDeck extracts 0-based pages but refuses 0 (docs/holodeck-fidelity.md), so it is
given each minus one and cannot select the first page."""


def pdf_attachments(documents: Path) -> list[dict[str, Any]]:
    """The message HoloDeck sends for each of :data:`PDF_CASES`: its length and sha256."""
    import hashlib
    import tempfile

    from holodeck.lib.file_processor import FileProcessor
    from holodeck.lib.test_runner.executor import TestExecutor
    from holodeck.models.test_case import FileInput

    found = []
    cwd = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / "docs").symlink_to(documents)
        os.chdir(scratch)  # its FileProcessor reads a relative path from the working folder
        try:
            processor = FileProcessor(cache_dir=str(Path(scratch) / "cache"))
            for case in PDF_CASES:
                processed = [
                    processor.process_file(
                        FileInput(
                            path=f["path"],
                            type="pdf",
                            pages=[p - 1 for p in f["pages"]] if "pages" in f else None,
                        )
                    )
                    for f in case["files"]
                ]
                text = TestExecutor._compose_agent_input(None, case["input"], processed)  # type: ignore[arg-type]
                digest = hashlib.sha256(text.encode()).hexdigest()
                found.append({**case, "chars": len(text), "sha256": digest})
        finally:
            os.chdir(cwd)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=REPO.parent / "shared/corpus/holodeck")
    args = parser.parse_args()
    if "TIKTOKEN_CACHE_DIR" not in os.environ:  # the cl100k_base file LiteLLM ships: offline
        lib = Path(sys.prefix) / "lib"
        [tokenizers] = lib.glob("python*/site-packages/litellm/litellm_core_utils/tokenizers")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
    from importlib.metadata import version

    from holodeck.models.eval_run import EvalRun

    FIXTURES.mkdir(parents=True, exist_ok=True)
    (PROBES / "no-home").mkdir(parents=True, exist_ok=True)
    schema = EvalRun.model_json_schema(mode="validation")
    schema["$comment"] = f"holodeck-ai {version('holodeck-ai')} EvalRun, bench/holodeck_record.py"
    text = json.dumps(schema, indent=1, sort_keys=True) + "\n"
    (FIXTURES / "eval_run.schema.json").write_text(text)
    resolutions = {
        key: resolve(agent_file, home) for key, agent_file, home in agents(args.corpus.resolve())
    }
    document = {"holodeck": version("holodeck-ai"), "env": ENV, "agents": resolutions}
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    (FIXTURES / "config_resolution.json").write_text(text)
    chunks = structured_chunks(args.corpus.resolve())
    document = {"holodeck": version("holodeck-ai"), "cases": chunks}
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    (FIXTURES / "structured_chunks.json").write_text(text)
    attachments = pdf_attachments(args.corpus.resolve().parent / "documents")
    document = {"holodeck": version("holodeck-ai"), "cases": attachments}
    text = json.dumps(document, indent=1, sort_keys=True) + "\n"
    (FIXTURES / "pdf_attachments.json").write_text(text)
    print(
        f"wrote {FIXTURES}: EvalRun schema, {len(resolutions)} resolutions, {len(chunks)} "
        f"chunkings, {len(attachments)} PDF attachment messages"
    )


if __name__ == "__main__":
    main()
