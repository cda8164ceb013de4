"""The data model: pydantic v2 contracts shared by the CLI, the runner and the pipelines."""

from holodeck_core.models.agent import Agent, ExecutionConfig, Instructions
from holodeck_core.models.base import StrictModel
from holodeck_core.models.eval_run import EvalRun, EvalRunMetadata, PromptVersion, Trigger
from holodeck_core.models.evaluation import (
    CodeMetric,
    Direction,
    EvaluationConfig,
    Gate,
    GEvalMetric,
    Metric,
    RAGMetric,
    StandardMetric,
)
from holodeck_core.models.llm import LLMProvider, ProviderEnum
from holodeck_core.models.report import JudgeControlScore, TestReport
from holodeck_core.models.results import (
    MetricResult,
    ProcessedFileInput,
    ReportSummary,
    RetrievedChunk,
    Status,
    TestResult,
    TokenUsage,
    ToolInvocation,
    TurnResult,
)
from holodeck_core.models.test_case import ExpectedTool, FileInput, TestCaseModel, Turn
from holodeck_core.models.tools import (
    FunctionTool,
    HierarchicalDocumentTool,
    MCPTool,
    PromptTool,
    Tool,
    ToolMock,
    VectorstoreTool,
)
from holodeck_core.redaction import REDACTED

__all__ = [
    "REDACTED",
    "Agent",
    "CodeMetric",
    "Direction",
    "EvalRun",
    "EvalRunMetadata",
    "EvaluationConfig",
    "ExecutionConfig",
    "ExpectedTool",
    "FileInput",
    "FunctionTool",
    "GEvalMetric",
    "Gate",
    "HierarchicalDocumentTool",
    "Instructions",
    "JudgeControlScore",
    "LLMProvider",
    "MCPTool",
    "Metric",
    "MetricResult",
    "ProcessedFileInput",
    "PromptTool",
    "PromptVersion",
    "ProviderEnum",
    "RAGMetric",
    "ReportSummary",
    "RetrievedChunk",
    "StandardMetric",
    "Status",
    "StrictModel",
    "TestCaseModel",
    "TestReport",
    "TestResult",
    "TokenUsage",
    "Tool",
    "ToolInvocation",
    "ToolMock",
    "Trigger",
    "Turn",
    "TurnResult",
    "VectorstoreTool",
]
