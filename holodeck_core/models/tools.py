"""Agent tools, discriminated by ``type`` (HoloDeck 0.7.1).

We run ``function``, ``mcp``, ``prompt``, ``vectorstore`` and ``hierarchical_document`` tools
(:mod:`holodeck_core.tools`) and any tool with a ``mock:`` result. The other types parse and
validate fully, so configs stay HoloDeck-compatible, but need a ``mock:`` to run."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from holodeck_core.models.base import Secret, StrictModel
from holodeck_core.models.llm import LLMProvider

ToolName = Annotated[str, Field(pattern=r"^[0-9A-Za-z_]+$")]


class ToolMock(StrictModel):
    """A fixed result returned instead of running the tool (any tool type)."""

    result: Any = Field(description="Returned to the model as the tool's output.")
    error: str | None = Field(None, description="Return this error instead of a result.")


class _ToolBase(StrictModel):
    name: ToolName
    description: str
    defer_loading: bool = True
    mock: ToolMock | None = None

    @property
    def runnable(self) -> bool:
        """Whether the runner can execute this tool (natively or by its mock)."""
        return self.mock is not None


class FunctionTool(_ToolBase):
    type: Literal["function"] = "function"
    file: str = Field(description="Python file, relative to the agent file.")
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    parameters: dict[str, Any] | None = None

    @property
    def runnable(self) -> bool:
        return True


class TransportType(StrEnum):
    STDIO = "stdio"
    SSE = "sse"
    WEBSOCKET = "websocket"
    HTTP = "http"


class CommandType(StrEnum):
    NPX = "npx"
    NODE = "node"
    UVX = "uvx"
    DOCKER = "docker"


class MCPTool(_ToolBase):
    type: Literal["mcp"] = "mcp"
    transport: TransportType = TransportType.STDIO
    command: CommandType | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    env_file: str | None = None
    encoding: str | None = None
    url: str | None = None
    headers: dict[str, str] | None = None
    timeout: float | None = None
    sse_read_timeout: float | None = None
    terminate_on_close: bool | None = None
    config: dict[str, Any] | None = None
    load_tools: bool = True
    load_prompts: bool = True
    request_timeout: int = 60
    is_retrieval: bool = False
    registry_name: str | None = None

    @property
    def runnable(self) -> bool:
        return True


class DatabaseConfig(StrictModel):
    model_config = ConfigDict(extra="allow")

    provider: Literal[
        "postgres",
        "azure-ai-search",
        "qdrant",
        "weaviate",
        "chromadb",
        "faiss",
        "azure-cosmos-mongo",
        "azure-cosmos-nosql",
        "sql-server",
        "pinecone",
        "in-memory",
    ]
    connection_string: Secret | None = Field(
        None, description="Accepted and never used: the index is embedded (docs/agent-yaml.md)."
    )


class KeywordIndexConfig(StrictModel):
    model_config = ConfigDict(extra="allow")

    provider: Literal["in-memory", "opensearch"] = "in-memory"
    endpoint: str | None = None
    index_name: str | None = None
    username: str | None = None
    password: Secret | None = None
    api_key: Secret | None = None
    verify_certs: bool = True
    timeout_seconds: int = Field(10, ge=1, le=120)


class VectorstoreTool(_ToolBase):
    type: Literal["vectorstore"] = "vectorstore"
    source: str
    vector_field: str | list[str] | None = None
    meta_fields: list[str] | None = None
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    database: DatabaseConfig | str | None = None
    top_k: int = 5
    min_similarity_score: float | None = None
    record_path: str | None = None
    record_prefix: str | None = None
    meta_prefix: str | None = None
    id_field: str | None = None
    field_separator: str = "\n"
    delimiter: str | None = None

    @property
    def runnable(self) -> bool:
        return True


class PromptTool(_ToolBase):
    type: Literal["prompt"] = "prompt"
    template: str | None = None
    file: str | None = None
    parameters: dict[str, Any]
    model: dict[str, Any] | None = None

    @property
    def runnable(self) -> bool:
        return True

    @model_validator(mode="after")
    def _template_or_file(self) -> PromptTool:
        if (self.template is None) == (self.file is None):
            raise ValueError("set exactly one of 'template' or 'file'")
        return self


class HierarchicalDocumentTool(_ToolBase):
    type: Literal["hierarchical_document"] = "hierarchical_document"
    source: str
    chunking_strategy: Literal["structure", "token"] = "structure"
    max_chunk_tokens: int = Field(800, ge=100, le=2000)
    chunk_overlap: int = Field(50, ge=0, le=200)
    document_domain: Literal[
        "none", "us_legislative", "au_legislative", "academic", "technical", "legal_contract"
    ] = "none"
    max_subsection_depth: int | None = None
    search_mode: Literal["semantic", "keyword", "hybrid"] = "hybrid"
    top_k: int = Field(10, ge=1, le=100)
    min_score: float | None = None
    semantic_weight: float = Field(0.5, ge=0.0, le=1.0)
    keyword_weight: float = Field(0.3, ge=0.0, le=1.0)
    exact_weight: float = Field(0.2, ge=0.0, le=1.0)
    rrf_k: int = Field(60, ge=1)
    contextual_embeddings: bool = True
    context_max_tokens: int = Field(100, ge=50, le=200)
    context_concurrency: int = Field(10, ge=1, le=50)
    extract_definitions: bool = True
    extract_cross_references: bool = True
    enable_reranking: bool = False
    reranker_model: LLMProvider | None = None
    context_model: LLMProvider | None = None
    embedding_model: str | None = None
    database: DatabaseConfig | str | None = None
    keyword_index: KeywordIndexConfig | None = None

    @property
    def runnable(self) -> bool:
        return True


Tool = Annotated[
    FunctionTool | MCPTool | VectorstoreTool | PromptTool | HierarchicalDocumentTool,
    Field(discriminator="type"),
]
