"""Test cases: inputs, attachments, expected tools and multi-turn conversations."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from holodeck_core.models.base import StrictModel
from holodeck_core.models.evaluation import Metric, check_unique_metric_names

MAX_FILES_PER_CASE = 10
FileType = Literal["image", "pdf", "text", "excel", "word", "powerpoint", "csv"]


class FileInput(StrictModel):
    path: str | None = Field(None, description="Local file, relative to the agent file.")
    url: str | None = None
    type: FileType
    description: str | None = None
    pages: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, description="1-based pages (PDF) or slides (PowerPoint) to extract."
    )
    sheet: str | None = None
    range: str | None = Field(None, pattern=r"^[A-Za-z]{1,3}[0-9]+(:[A-Za-z]{1,3}[0-9]+)?$")
    cache: bool | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FileInput:
        if (self.path is None) == (self.url is None):
            raise ValueError("set exactly one of 'path' or 'url'")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError("'url' must start with http:// or https://")
        if self.pages is not None and self.type not in ("pdf", "powerpoint"):
            raise ValueError("'pages' applies only to type pdf or powerpoint")
        if (self.sheet is not None or self.range is not None) and self.type != "excel":
            raise ValueError("'sheet' and 'range' apply only to type excel")
        return self


class FuzzyMatcher(StrictModel):
    fuzzy: str


class RegexMatcher(StrictModel):
    regex: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class ExpectedTool(StrictModel):
    name: str = Field(min_length=1, description="Case-sensitive substring of the tool name.")
    args: dict[str, Any] | None = None
    count: int = Field(1, ge=1, description="Minimum number of matching calls.")

    @field_validator("args")
    @classmethod
    def _matchers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for key, matcher in (value or {}).items():
            if isinstance(matcher, dict) and ({"fuzzy", "regex"} & matcher.keys()):
                if len(matcher) != 1 or not isinstance(next(iter(matcher.values())), str):
                    raise ValueError(
                        f"args.{key}: a matcher is {{fuzzy: text}} or {{regex: pattern}} alone"
                    )
                if "regex" in matcher:
                    RegexMatcher(regex=matcher["regex"])
        return value

    def matcher(self, arg: str) -> FuzzyMatcher | RegexMatcher | Any:
        """The typed matcher for one expected argument: ``{fuzzy: s}``, ``{regex: r}``, or any
        literal JSON value."""
        raw = (self.args or {})[arg]
        if isinstance(raw, dict) and raw.keys() == {"fuzzy"}:
            return FuzzyMatcher(**raw)
        if isinstance(raw, dict) and raw.keys() == {"regex"}:
            return RegexMatcher(**raw)
        return raw


ExpectedToolSpec = str | ExpectedTool
"""A bare string is HoloDeck's legacy name-only form (a substring of a called tool name)."""


def _check_files(files: list[FileInput] | None) -> list[FileInput] | None:
    if files is not None and len(files) > MAX_FILES_PER_CASE:
        raise ValueError(f"at most {MAX_FILES_PER_CASE} files per test case, got {len(files)}")
    return files


class Turn(StrictModel):
    input: str = Field(min_length=1)
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolSpec] | None = None
    files: list[FileInput] | None = None
    retrieval_context: list[str] | None = None
    evaluations: list[Metric] | None = None
    turn_config: dict[str, Any] | None = None

    _files = field_validator("files")(_check_files)


class TestCaseModel(StrictModel):
    __test__ = False  # not a pytest class

    id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$",
        description="Stable id (docs/architecture.md).",
    )
    name: str | None = Field(None, min_length=1)
    input: str | None = Field(None, min_length=1)
    ground_truth: str | None = None
    expected_tools: list[ExpectedToolSpec] | None = None
    files: list[FileInput] | None = None
    retrieval_context: list[str] | None = None
    evaluations: list[Metric] | None = None
    turns: list[Turn] | None = Field(None, min_length=1)
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    weight: float = Field(1.0, gt=0.0, description="Weight in the weighted pass rate.")

    _files = field_validator("files")(_check_files)

    @field_validator("evaluations")
    @classmethod
    def _unique_metrics(cls, value: list[Any] | None) -> list[Any] | None:
        if value:
            check_unique_metric_names(value)
        return value

    @model_validator(mode="after")
    def _input_or_turns(self) -> TestCaseModel:
        if self.turns is None:
            if self.input is None:
                raise ValueError("set 'input' (single turn) or 'turns' (multi-turn)")
            return self
        clashing = [
            key
            for key in ("input", "ground_truth", "expected_tools", "files", "retrieval_context")
            if getattr(self, key) is not None
        ]
        if clashing:
            raise ValueError(
                f"'turns' cannot be combined with {', '.join(clashing)}: move them into a turn"
            )
        return self

    @property
    def content_key(self) -> str:
        """What identifies the case's content: its input, or its turns' inputs."""
        if self.turns is None:
            return self.input or ""
        return json.dumps([turn.input for turn in self.turns], ensure_ascii=False)

    def derived_id(self) -> str:
        """Explicit id, else the slug of the name, else a hash of the input
        (docs/architecture.md)."""
        from holodeck_core.naming import slugify

        if self.id:
            return self.id
        if self.name and slugify(self.name):
            return slugify(self.name)
        return hashlib.sha256(self.content_key.encode()).hexdigest()[:12]
