"""YAML files in, validated models out, with errors a person can act on.

Every problem names the file, the YAML path (``test_cases[3].files[0].pages``), the line where
known, and what is allowed. Nothing here raises anything but :class:`ConfigError` for bad input.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from holodeck_core.config.validation_errors import YamlPath as YamlPath
from holodeck_core.config.validation_errors import validation_problems
from holodeck_core.errors import ConfigError, Problem

M = TypeVar("M", bound=BaseModel)

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_YAML_BYTES = 64 * 1024 * 1024
MAX_YAML_DEPTH = 100
MAX_YAML_NODES = 1_000_000
"""Values aliases may add to a file once followed (a 1 KB "billion laughs" file adds 10⁹);
what the file writes out itself is bounded by :data:`MAX_YAML_BYTES` only."""
MAX_YAML_CHARS = 128 * 1024 * 1024
"""Characters of scalars aliases may add (one big anchored string repeated)."""


def format_path(path: YamlPath) -> str:
    """``('test_cases', 3, 'files', 0, 'pages')`` → ``test_cases[3].files[0].pages``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass
class YamlDocument:
    """Parsed YAML plus the line of every node, so later errors can point at the source."""

    file: Path
    data: Any
    lines: dict[YamlPath, int] = field(default_factory=dict)
    display: str = ""

    def line_of(self, path: YamlPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None

    def problem(self, path: YamlPath, message: str) -> Problem:
        return Problem(
            file=self.display or str(self.file),
            path=format_path(path),
            line=self.line_of(path),
            message=message,
        )


@dataclass
class ScopedDocument(YamlDocument):
    """A subtree of a document (``data`` is the subtree) whose problems still name their full
    path and line (a target or a model candidate of ``holodeck.yaml``)."""

    prefix: YamlPath = ()

    def problem(self, path: YamlPath, message: str) -> Problem:
        return super().problem((*self.prefix, *path), message)

    @classmethod
    def of(cls, doc: YamlDocument, data: Any, prefix: YamlPath) -> ScopedDocument:
        return cls(doc.file, data, doc.lines, doc.display, prefix)


def read_yaml(file: Path, display: str | None = None) -> YamlDocument:
    """Parse ``file``. Syntax errors and duplicate keys become a :class:`ConfigError` with
    file:line:column and the offending line."""
    name = display or str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"file not found: {file}", file=name) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {file}: {exc}", file=name) from None
    return parse_yaml(text, file, name)


def parse_yaml(text: str, file: Path, name: str) -> YamlDocument:
    """:func:`read_yaml` of text already read (``name`` is how problems name its source)."""
    lines: dict[YamlPath, int] = {}
    problems: list[Problem] = []
    try:
        aliased = _check_bounds(text, name)
        loader = _Loader(text)
        try:  # one parse: the data is constructed from the node tree that was checked
            node = loader.get_single_node()
            if node is not None:
                if aliased:  # a file without one writes out all it holds: nothing to expand
                    _check_expansion(node, name)
                # before construction, which merges `<<` keys into the tree in place
                _index_lines(node, (), lines, problems, name)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        raise ConfigError([_syntax_problem(name, text, exc)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=name) from None
    doc = YamlDocument(file=file, data=data, lines=lines, display=name)
    if problems:
        raise ConfigError(problems)
    return doc


def _check_bounds(text: str, name: str) -> bool:
    """Size and nesting depth, from the parser's event stream: it is flat, so a file nested
    100,000 levels deep is refused before anything recurses into it. Whether the file holds
    an alias (``*name``), the only way its document can grow beyond what it writes out."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(
            f"the file is {len(text):,} characters; a config may hold at most "
            f"{MAX_YAML_BYTES:,} (split the test cases into several files)",
            file=name,
        )
    depth, aliased = 0, False
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.AliasEvent):
            aliased = True
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else None
                raise ConfigError(
                    [
                        Problem(
                            file=name,
                            line=line,
                            message=f"YAML nested more than {MAX_YAML_DEPTH} levels deep; "
                            "flatten the structure",
                        )
                    ]
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return aliased


def _check_expansion(root: yaml.Node, name: str) -> None:
    """What aliases add to the document once expanded, counted without expanding it (each
    node measured once, memoized): at most :data:`MAX_YAML_NODES` values and
    :data:`MAX_YAML_CHARS` characters more than the file writes out, bounded depth, no cycles.
    A file with no alias adds nothing, however many values it writes (the size cap bounds it).

    Each node is met once where the file writes it; every later meeting is an alias, which
    adds the whole (expanded) subtree again, so the sum of those is exactly what aliases add."""
    sizes: dict[int, tuple[int, int, int]] = {}  # id -> (nodes, characters, height)
    active: set[int] = set()
    added = [0, 0]  # nodes, characters that aliases add

    def refuse(node: yaml.Node, message: str) -> ConfigError:
        return ConfigError([Problem(file=name, line=node.start_mark.line + 1, message=message)])

    def size(node: yaml.Node, depth: int) -> tuple[int, int, int]:
        key = id(node)
        known = sizes.get(key)
        if known is None:
            if key in active:
                raise refuse(
                    node,
                    "a YAML alias refers to its own anchor (a recursive "
                    "structure); write the value out",
                )
            if depth > MAX_YAML_DEPTH:
                raise refuse(
                    node,
                    f"YAML aliases nest values more than {MAX_YAML_DEPTH} "
                    "levels deep; flatten the structure",
                )
            active.add(key)
            known = _measure(node, lambda child: size(child, depth + 1))
            active.discard(key)
            sizes[key] = known
        else:  # an alias: its subtree once more
            added[0] += known[0]
            added[1] += known[1]
            if added[0] > MAX_YAML_NODES or added[1] > MAX_YAML_CHARS:
                raise refuse(
                    node,
                    "YAML aliases (*name) expand this file by more than "
                    f"{MAX_YAML_NODES:,} values or {MAX_YAML_CHARS:,} characters "
                    "(a 'billion laughs' file?); use fewer aliases or write the values out",
                )
        if depth + known[2] > MAX_YAML_DEPTH:
            raise refuse(
                node,
                f"YAML aliases nest values more than {MAX_YAML_DEPTH} levels "
                "deep; flatten the structure",
            )
        return known

    size(root, 0)


def _measure(
    node: yaml.Node, child_size: typing.Callable[[yaml.Node], tuple[int, int, int]]
) -> tuple[int, int, int]:
    nodes, chars, height = 1, len(str(node.value)) if isinstance(node, yaml.ScalarNode) else 0, 0
    children: list[yaml.Node] = []
    if isinstance(node, yaml.SequenceNode):
        children = list(node.value)
    elif isinstance(node, yaml.MappingNode):
        children = [part for pair in node.value for part in pair]
    for child in children:
        child_nodes, child_chars, child_height = child_size(child)
        nodes, chars = nodes + child_nodes, chars + child_chars
        height = max(height, child_height + 1)
    return nodes, chars, height


def _syntax_problem(name: str, text: str, exc: yaml.MarkedYAMLError) -> Problem:
    what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "invalid YAML"
    lines = text.splitlines()
    mark = exc.problem_mark
    if mark is None or mark.line >= len(lines) or not lines[mark.line].strip():
        mark = exc.context_mark or mark  # at the end of the file: show where it started
    if mark is None:
        return Problem(file=name, message=f"YAML syntax error: {what}")
    source = lines[mark.line] if mark.line < len(lines) else ""
    caret = " " * mark.column + "^"
    return Problem(
        file=f"{name}:{mark.line + 1}:{mark.column + 1}",
        message=f"YAML syntax error: {what}\n    {source}\n    {caret}",
    )


def _index_lines(
    node: yaml.Node,
    path: YamlPath,
    lines: dict[YamlPath, int],
    problems: list[Problem],
    name: str,
) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            if key == "<<":
                continue
            if key in seen:
                problems.append(
                    Problem(
                        file=name,
                        line=key_node.start_mark.line + 1,
                        path=format_path((*path, key)),
                        message="duplicate key (YAML keeps only the last one); remove one",
                    )
                )
            seen.add(key)
            _index_lines(value_node, (*path, key), lines, problems, name)
            lines[(*path, key)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index_lines(item, (*path, index), lines, problems, name)


def validate_document(doc: YamlDocument, model: type[M], data: Any | None = None) -> M:
    """Validate ``data`` (default: the document's data) as ``model``."""
    payload = doc.data if data is None else data
    if not isinstance(payload, dict):
        raise ConfigError([doc.problem((), "the file must hold a YAML mapping (key: value)")])
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, model, payload, doc.problem)) from None


def load_yaml_model(file: Path, model: type[M]) -> M:
    """Read and validate a small YAML file (``holodeck.yaml``, rules files...)."""
    return validate_document(read_yaml(file), model)
