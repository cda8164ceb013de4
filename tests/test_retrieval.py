"""vectorstore and hierarchical_document for real (docs/agent-yaml.md): sources, chunking, the index
built once, the search modes, the LLM steps, bad input, outages, and the loopback server's
embeddings. Everything talks to the loopback server through the official SDKs."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from holodeck_core.calls.ledger import Ledger
from holodeck_core.calls.prices import packaged_price_table
from holodeck_core.calls.scheduler import CallScheduler, RetryPolicy
from holodeck_core.cli.main import main
from holodeck_core.models import LLMProvider
from holodeck_core.providers.factory import make_client
from holodeck_core.testing import ModelServer, run_model_server
from holodeck_core.tools.registry import runtime_for
from holodeck_core.tools.retrieval.chunking import count_tokens, pack, token_chunks
from holodeck_core.tools.retrieval.domains import DOMAIN_PATTERNS
from holodeck_core.tools.retrieval.runtime import RetrievalRuntime
from holodeck_core.tools.retrieval.structure import StructureChunker
from holodeck_core.tools.runtime import ToolContext
from tests.conftest import corpus_path
from tests.retrieval_samples import set_sample_env

DOCS = {
    "returns.md": "# Returns\n\nReturns are accepted within 30 days of delivery with a receipt.",
    "shipping.md": "# Shipping\n\nStandard shipping takes 5 business days; express takes 2.",
    "warranty.md": "# Warranty\n\nEvery blender carries a two year warranty against defects.",
}


def tool_of(kind: str = "vectorstore", **fields: Any) -> dict[str, Any]:
    return {"type": kind, "name": "kb", "description": "the store's policies", **fields}


def search_rule(query: str, tool: str = "kb") -> dict[str, Any]:
    return {
        "match": {"user": f"(?s)^(?!# Task:)(.*{query}.*)"},
        "tool_calls": [{"name": f"{tool}_search", "arguments": {"query": "$1"}}],
        "reply": "{tool_result}",
    }


def write_agent(
    folder: Path, server: ModelServer, tools: list[dict[str, Any]], **extra: Any
) -> Path:
    model = extra.pop(
        "model", {"provider": "openai", "name": "gpt-4o", "endpoint": server.openai_base_url}
    )
    agent = {
        "name": "retrieval-test",
        "model": {"api_key": "sk-test-key-1234", **model},
        "instructions": {"inline": "Answer from the knowledge base."},
        "tools": tools,
        "test_cases": extra.pop("cases", [{"name": "returns", "input": "How long for returns?"}]),
        **extra,
    }
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump(agent, sort_keys=False))
    return path


def write_docs(folder: Path, docs: dict[str, str] = DOCS) -> None:
    (folder / "docs").mkdir(exist_ok=True)
    for name, text in docs.items():
        (folder / "docs" / name).write_text(text)


def last_run(folder: Path) -> dict[str, Any]:
    path = sorted((folder / "results").glob("*/holodeck-pipelines/*.json"))[-1]
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def embedding_calls(server: ModelServer) -> int:
    return int(server.stats()["by_route"].get("embeddings", 0))


def test_vectorstore_searches_a_glob_of_documents_once_indexed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path)
    grader = "def cites(ctx):\n    return any('30 days' in c for c in ctx.retrieval_context)\n"
    (tmp_path / "graders.py").write_text(grader)
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        agent = write_agent(
            tmp_path,
            server,
            [tool_of(source="docs/*.md", top_k=2, min_similarity_score=0.5)],
            evaluations={"metrics": [{"type": "code", "grader": "graders:cites"}]},
        )
        assert main(["test", str(agent)]) == 0, capsys.readouterr().err
        assert embedding_calls(server) == 2  # the index (one batch) and the query
        call = last_run(tmp_path)["report"]["results"][0]["tool_invocations"][0]
        assert call["name"] == "kb_search"
        assert call["result"].startswith("Found 2 result(s):\n\n[1] Score: ")
        # HoloDeck's chunks (the lines, blank ones dropped) and its local source: the file's path
        returns = (tmp_path / "docs" / "returns.md").resolve()
        assert f"| Source: {returns}\n# Returns\nReturns are accepted" in call["result"]
        first = call["chunks"][0]
        assert (first["source"], first["chunk_id"]) == ("docs/returns.md", "docs/returns.md#0")
        assert first["score"] > call["chunks"][1]["score"]
        assert call["retrieval_context"][0] == first["text"]
        cost = last_run(tmp_path)["report"]["summary"]["cost"]
        embedding = cost["headings"]["embedding"]  # text-embedding-3-small: $0.02 per 1M
        assert embedding["calls"] == 2 and cost["outside"]["embedding"]["calls"] == 1
        assert embedding["usd"] == pytest.approx(embedding["prompt_tokens"] * 0.02 / 1e6)
        case_cost = last_run(tmp_path)["report"]["results"][0]["cost"]
        assert case_cost["embedding"]["calls"] == 1  # the query; the index is the run's

        server.reset()
        assert main(["test", str(agent)]) == 0
        assert embedding_calls(server) == 0  # index and query embedding both cached

        (tmp_path / "docs" / "shipping.md").write_text("# Shipping\n\nShipping is free.")
        server.reset()
        assert main(["test", str(agent)]) == 0
        assert embedding_calls(server) == 1  # only the changed chunk is embedded again
    home = tmp_path / "holodeck-home" / "cache" / "indexes"
    assert len(list(home.iterdir())) == 2 and not list(home.glob(".*"))


def context(tmp_path: Path, server: ModelServer, **extra: Any) -> ToolContext:
    model = LLMProvider(
        provider="openai", name="gpt-4o", endpoint=server.openai_base_url, api_key="sk-x"
    )  # type: ignore[call-arg]
    return ToolContext(
        base_dir=tmp_path,
        resolve=lambda p: (tmp_path / p).resolve(),
        scheduler=CallScheduler(
            4,
            RetryPolicy(max_attempts=2, base_delay=0.01, timeout=10),
            ledger=Ledger(packaged_price_table()),
        ),
        agent_model=model,
        client_factory=lambda m: make_client(m),
        cache_dir=tmp_path / "home" / "cache",
        **extra,
    )


def runtime(tool: dict[str, Any], ctx: ToolContext) -> RetrievalRuntime:
    from pydantic import TypeAdapter

    from holodeck_core.models import Tool

    built = runtime_for(TypeAdapter(Tool).validate_python(tool), ctx, where="tools[0] (kb)")
    assert isinstance(built, RetrievalRuntime)
    return built


async def search(rt: RetrievalRuntime, *queries: str) -> list[Any]:
    await rt.open()
    try:
        return [await rt.call(rt.function, {"query": q}) for q in queries]
    finally:
        await rt.aclose()


def test_records_from_json_record_path_and_csv(tmp_path: Path) -> None:
    (tmp_path / "faq.json").write_text(
        json.dumps(
            {
                "data": {
                    "items": [
                        {
                            "sku": 1,
                            "q": "Can I return a blender?",
                            "a": "Yes, in 30 days.",
                            "cat": "returns",
                        },
                        {
                            "sku": 2,
                            "q": "Do you ship abroad?",
                            "a": "Only to Canada.",
                            "cat": "shipping",
                        },
                    ]
                }
            }
        )
    )
    (tmp_path / "plans.csv").write_text(
        "id;text;price\np1;Basic plan with email support;5\np2;Pro plan with phone support;20\n"
    )
    with run_model_server() as server:
        ctx = context(tmp_path, server)
        faq = tool_of(
            source="faq.json",
            record_path="data.items",
            id_field="sku",
            vector_field=["q", "a"],
            field_separator=" | ",
            meta_fields=["cat"],
            record_prefix="faq-",
            meta_prefix="m_",
            top_k=1,
        )
        [out] = asyncio.run(search(runtime(faq, ctx), "return a blender"))
        assert out.result == (
            "Found 1 result(s):\n\n[1] ID: faq-1 | Score: "
            f"{out.chunks[0].score:.2f}\nContent: Can I return a blender? | Yes, in 30 days.\n"
            "Metadata: m_cat: returns"
        )
        assert (out.chunks[0].source, out.chunks[0].chunk_id) == ("faq.json", "faq-1")
        plans = tool_of(source="plans.csv", delimiter=";", id_field="id", vector_field="text")
        [out] = asyncio.run(search(runtime(plans, ctx), "phone support"))
        assert out.chunks[0].chunk_id == "p2"
        assert "Metadata: price: 20" in out.result  # meta_fields unset: every other field


LAW = """# Act

SEC. 1. SHORT TITLE.
This Act may be cited as the Blender Safety Act.

SEC. 2. DEFINITIONS.
(a) In General.
The term "blender" means a kitchen appliance with rotating blades.
(b) Exception.
A hand mixer is not a blender.

SEC. 3. REPORTING.
Manufacturers shall report injuries within 10 days.
"""


def test_structure_chunks_keep_the_heading_path_and_domain_sections() -> None:
    """HoloDeck's shapes (tests/test_structure_chunks.py compares every corpus document with
    its recorded chunks): with a domain, a heading's body is its own chunk, the heading ending
    its path, its id ``chunk_<n>``; without one, a section keeps its heading line."""
    pieces = StructureChunker(800, DOMAIN_PATTERNS["us_legislative"]).chunks(LAW)
    definitions = next(p for p in pieces if "hand mixer" in p.text)
    assert definitions.parent_chain == ("Act", "(2) DEFINITIONS.")
    assert "(a) In General." in definitions.text and definitions.section_id.startswith("chunk_")
    assert any(p.text.startswith("Manufacturers shall report") for p in pieces)
    plain = StructureChunker(800).chunks("# A\n\nintro\n\n## B\n\nbody of b\n\n### C\n\ndeep")
    assert [(p.parent_chain, p.section_id) for p in plain] == [
        ((), "h1_a"),
        (("A",), "h2_a_b"),
        (("A", "B"), "h3_a_b_c"),
    ]
    assert plain[2].text == "### C\n\ndeep"


def test_token_chunks_honour_size_and_overlap() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    pieces = token_chunks(text, 30, 10)
    assert len(pieces) > 3 and all(count_tokens(p.text) <= 30 for p in pieces)
    for before, after in itertools.pairwise(pieces):
        b, a = before.text.split(), after.text.split()
        assert any(a[:k] == b[-k:] for k in range(3, 11)), (before.text, after.text)
    assert pack(["one two three"], 2) == ["one two", "three"]


def test_hierarchical_modes_rank_the_relevant_section(tmp_path: Path) -> None:
    (tmp_path / "law.md").write_text(LAW)
    with run_model_server() as server:
        ctx = context(tmp_path, server)
        base = tool_of(
            "hierarchical_document",
            source="law.md",
            document_domain="us_legislative",
            contextual_embeddings=False,
            top_k=2,
        )
        for mode in ("semantic", "keyword", "hybrid"):
            [out] = asyncio.run(
                search(runtime({**base, "search_mode": mode}, ctx), "report injuries manufacturers")
            )
            assert out.chunks[0].text.startswith("Manufacturers shall report"), mode
        law = tmp_path / "law.md"  # the absolute path, as HoloDeck shows a source
        assert out.result.startswith(f"Score: 1.000 | Source: {law}\nLocation: Act > (3) REP")
        assert "\nSection: chunk_6\n\nManufacturers" in out.result  # a body: HoloDeck's id
        # HoloDeck keeps a pattern heading that ends a sentence as a chunk of its own
        assert "\nSection: section_act_3_reporting\n\nSEC. 3. REPORTING." in out.result
        exact = {**base, "semantic_weight": 0.0, "keyword_weight": 0.0, "exact_weight": 1.0}
        [out] = asyncio.run(search(runtime(exact, ctx), 'what does "hand mixer" mean'))
        assert len(out.chunks) == 1 and "hand mixer" in out.chunks[0].text
        [none] = asyncio.run(search(runtime({**base, "search_mode": "keyword"}, ctx), "zebra"))
        assert none.result == "No results found." and none.retrieval_context == []


GLOSSARY = """# Terms

## Definitions

"Widget" means a device.

## Use

Widget widget widget: a widget is used in many other ways here.

## Alpha

Nothing of the kind is said in this section at all.

## Beta

Another section about something else entirely.

## Gamma

And a last one, for the keyword statistics.
"""


def test_a_definition_chunks_term_weighs_three_more_times_in_keyword_search(
    tmp_path: Path,
) -> None:
    """HoloDeck 0.7.1 adds a ``"X" means`` chunk's term three more times to its BM25
    document (recorded per corpus chunk in structured_chunks.json): the short definition
    outranks a section that only repeats the word."""
    (tmp_path / "glossary.md").write_text(GLOSSARY)
    with run_model_server() as server:
        ctx = context(tmp_path, server)
        tool = tool_of(
            "hierarchical_document",
            source="glossary.md",
            contextual_embeddings=False,
            search_mode="keyword",
            top_k=2,
        )
        [out] = asyncio.run(search(runtime(tool, ctx), "widget"))
    assert [c.text.splitlines()[-1] for c in out.chunks] == [
        '"Widget" means a device.',
        "Widget widget widget: a widget is used in many other ways here.",
    ]


def test_contextual_embeddings_and_reranking_are_cached_llm_calls(tmp_path: Path) -> None:
    write_docs(tmp_path)
    rules = {
        "rules": [
            {"match": {"user": "^<document>"}, "reply": "Part of the store policy."},
            {"match": {"system": "rank passages"}, "reply": "[2, 1]"},
        ]
    }
    tool = tool_of(
        "hierarchical_document",
        source="docs",
        search_mode="semantic",
        top_k=2,
        enable_reranking=True,
        reranker_model={"provider": "openai", "name": "ranker", "api_key": "sk-r"},
    )
    with run_model_server(rules) as server:
        tool["reranker_model"]["endpoint"] = server.openai_base_url
        ctx = context(tmp_path, server)
        rt = runtime(tool, ctx)
        [plain] = asyncio.run(search(runtime({**tool, "enable_reranking": False}, ctx), "returns"))
        [out] = asyncio.run(search(rt, "returns"))
        assert [c.text for c in out.chunks] == [c.text for c in reversed(plain.chunks)]
        assert rt.index is not None and all(
            c.embed_text.startswith("Part of the store policy.\n\n") for c in rt.index.chunks
        )
        assert out.usage is not None and out.usage.total_tokens > 0
        chat = server.stats()["by_route"]["chat"]
        assert chat == 3 + 1  # a summary per chunk, one rerank
        assert ctx.scheduler.ledger is not None
        booked = ctx.scheduler.ledger.snapshot().outside  # summaries are part of the embeddings
        assert (booked["reranker"].calls, booked["embedding"].calls) == (1, 3 + 2)
        assert booked["reranker"].usd is None  # "ranker" has no price: unknown, not 0
        shutil.rmtree(ctx.cache_dir / "indexes")
        asyncio.run(search(runtime(tool, ctx), "returns"))
        assert server.stats()["by_route"]["chat"] == chat  # summaries and rerank cached


def test_two_builders_of_one_index_leave_one_whole_index(tmp_path: Path) -> None:
    write_docs(tmp_path)
    with run_model_server() as server:
        ctx = context(tmp_path, server)

        async def both() -> list[Any]:
            return await asyncio.gather(
                *(search(runtime(tool_of(source="docs"), ctx), "warranty") for _ in range(2))
            )

        first, second = asyncio.run(both())
    assert first[0].chunks == second[0].chunks
    indexes = ctx.cache_dir / "indexes"
    assert len(list(indexes.iterdir())) == 1 and not list(indexes.glob(".*"))


BAD = [
    ("missing source", {"source": "nope.md"}, "agent.yaml:13: tools[0].source: file not found"),
    ("empty source", {"source": "empty.md"}, "tools[0] (kb).source: empty.md holds no text"),
    (
        "record_path",
        {"source": "rows.json", "record_path": "data.rows", "id_field": "id", "vector_field": "t"},
        "tools[0] (kb).record_path: 'data.rows' matches nothing in rows.json",
    ),
    (
        "id_field",
        {"source": "rows.json", "id_field": "sku", "vector_field": "t"},
        "tools[0] (kb).id_field: 'sku' is absent from 1 of 2 records in rows.json",
    ),
    ("scanned pdf", {"source": "scan.pdf"}, "tools[0] (kb).source: scan.pdf: no text extracted"),
    ("glob", {"source": "docs/*.pdf"}, "tools[0] (kb).source: the glob 'docs/*.pdf' matches no"),
    (
        "vector_field",
        {"source": "rows.json", "id_field": "id", "vector_field": "body"},
        "tools[0] (kb).vector_field: 'body' is in no record of rows.json (fields: id, sku, t)",
    ),
]


@pytest.mark.parametrize(("case", "fields", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_sources_are_config_errors_before_any_model_call(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
    fields: dict[str, Any],
    message: str,
) -> None:
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "rows.json").write_text(
        json.dumps([{"id": 1, "sku": "a", "t": "x"}, {"id": 2, "t": "y"}])
    )
    if case == "scanned pdf":
        scan = corpus_path("documents", "MEDRPT-2024-PAT-3847_medical_report_scan.pdf")
        shutil.copy(scan, tmp_path / "scan.pdf")
    with run_model_server() as server:
        agent = write_agent(tmp_path, server, [tool_of(**fields)])
        capsys.readouterr()
        assert main(["test", str(agent)]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
        assert server.stats()["total_calls"] == 0


def test_anthropic_agent_needs_an_embedding_provider(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path)
    with run_model_server({"rules": [search_rule("returns")]}) as server:
        claude = {"provider": "anthropic", "name": "claude", "endpoint": server.url}
        agent = write_agent(tmp_path, server, [tool_of(source="docs")], model=claude)
        for command in ("validate", "test"):
            assert main([command, str(agent)]) == 2
            err = capsys.readouterr().err
            assert "tools[0] (kb): the agent's provider (anthropic) has no embeddings API" in err
            assert "add an embedding_provider block" in err and "Traceback" not in err
        assert server.stats()["total_calls"] == 0
        embeddings = {
            "provider": "azure_openai",
            "name": "embed-deploy",
            "endpoint": server.url,
            "api_key": "sk-az",
            "api_version": "2024-10-21",
        }
        agent = write_agent(
            tmp_path,
            server,
            [tool_of(source="docs")],
            model=claude,
            embedding_provider=embeddings,
            execution={"anthropic_path": "direct"},  # counts /v1/messages of our own loop
        )
        assert main(["test", str(agent)]) == 0, capsys.readouterr().err
        paths = server.stats()["by_path"]  # the provider's default model, never the block's name
        assert paths["/openai/deployments/text-embedding-3-small/embeddings"] == 2
        assert paths["/v1/messages"] == 2


def test_embeddings_outage_is_a_transient_error_that_a_rerun_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_docs(tmp_path)
    cases = [
        {"name": "returns", "input": "How long for returns?"},
        {"name": "warranty", "input": "Is there a warranty?"},
    ]
    outage = {"match": {"route": "embeddings", "user": "^Is there"}, "fault": {"kind": "503"}}
    rules = {"rules": [outage, search_rule("returns"), search_rule("warranty")]}
    with run_model_server(rules) as server:
        agent = write_agent(
            tmp_path, server, [tool_of(source="docs")], cases=cases, execution={"llm_timeout": 5}
        )
        assert main(["test", str(agent)]) == 3
        results = {r["test_name"]: r for r in last_run(tmp_path)["report"]["results"]}
        assert results["returns"]["status"] == "PASS"
        assert results["warranty"]["status"] == "ERROR"
    with run_model_server({"rules": [search_rule("returns"), search_rule("warranty")]}) as server:
        write_agent(
            tmp_path, server, [tool_of(source="docs")], cases=cases, execution={"llm_timeout": 5}
        )
        assert main(["test", str(agent)]) == 0, capsys.readouterr().err
        assert server.stats()["by_route"]["responses"] == 2  # only the errored case ran again


def test_validate_names_the_substituted_database_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = corpus_path("holodeck", "samples", "legal-assistant", "claude", "agent.yaml")
    set_sample_env(agent, monkeypatch)
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert out.count("served by an embedded index") == 1
    assert "the connection_string of legislation_search is accepted, redacted and not used" in out
    assert "http://localhost:8000" not in out
    assert "extract_definitions / extract_cross_references of legislation_search: no effect" in out
    assert "warning:" not in out
    assert "embedding_provider" not in out.split("ignored:")[-1]


def test_loopback_embeddings_route_carries_lexical_similarity() -> None:
    rules = {
        "rules": [{"match": {"route": "embeddings", "user": "boom"}, "fault": {"kind": "400"}}]
    }
    with run_model_server(rules) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-x", max_retries=0)
        texts = ["returns within 30 days", "return policy: 30 days", "blender warranty"]
        vectors = [d.embedding for d in client.embeddings.create(model="m", input=texts).data]
        assert len(vectors[0]) == 1536
        dot = [sum(a * b for a, b in zip(vectors[0], v, strict=True)) for v in vectors]
        assert dot[0] == pytest.approx(1.0, abs=1e-5) and dot[1] > dot[2] >= 0.6
        small = client.embeddings.create(
            model="m", input="x", dimensions=64, encoding_format="float"
        )
        assert len(small.data[0].embedding) == 64 and small.usage.prompt_tokens == 1
        with pytest.raises(openai.BadRequestError):
            client.embeddings.create(model="m", input="boom")
        azure = openai.AzureOpenAI(
            azure_endpoint=server.url, api_key="k", api_version="2024-10-21", max_retries=0
        )
        assert len(azure.embeddings.create(model="dep", input="hi").data) == 1
        stats = server.stats()
        assert stats["by_route"]["embeddings"] == 4 and stats["faults"] == {"400": 1}
        assert stats["by_path"]["/openai/deployments/dep/embeddings"] == 1


def test_embeddings_outage_fails_the_dagster_partition_after_journaling(tmp_path: Path) -> None:
    import dagster as dg

    from holodeck_core.config.project import Project
    from holodeck_pipelines.builder import build_definitions
    from tests.dagster_helpers import materialize, register

    folder = tmp_path / "agents" / "geo"
    folder.mkdir(parents=True)
    write_docs(folder)
    rules = {"rules": [search_rule("returns")]}
    outage = {"match": {"route": "embeddings", "user": r"\(3\)"}, "fault": {"kind": "503"}}
    cases = [{"name": f"c{i}", "input": f"returns ({i})?"} for i in range(4)]
    with run_model_server({"rules": [outage, *rules["rules"]]}) as server:
        agent = write_agent(folder, server, [tool_of(source="docs")], cases=cases)
        agent.write_text(agent.read_text().replace("retrieval-test", "Geo Agent"))
        (tmp_path / "holodeck.yaml").write_text("agents: [agents/geo/agent.yaml]\n")
        defs = build_definitions(Project.discover(tmp_path))
        with dg.instance_for_test() as instance:
            [key] = register(defs, instance)
            assert not materialize(defs, instance, key).success
            agent_calls = server.stats()["by_route"]["responses"]
            server.set_rules(rules)
            assert materialize(defs, instance, key).success
            assert server.stats()["by_route"]["responses"] == agent_calls + 2  # only case 3 again


def test_vectorstore_chunks_as_holodeck_makes_them_without_overlap() -> None:
    """customer-support's knowledge_base (chunk_size 512, chunk_overlap 128): HoloDeck 0.7.1
    makes 2 chunks (its paragraph splitter takes no overlap); carrying the overlap made 3."""
    from holodeck_core.tools.retrieval.chunking import paragraph_chunks
    from tests.conftest import corpus_path

    source = corpus_path("holodeck", "samples", "customer-support", "openai", "data")
    text = (source / "knowledge_base.md").read_text()
    first, second = paragraph_chunks(text, 512)
    assert first.text.split()[-8:] != second.text.split()[:8]  # nothing carried over
