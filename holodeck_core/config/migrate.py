"""``holodeck validate --fix AGENT_YAML``: move our fields out of agent.yaml into its sidecar
(docs/agent-yaml.md), so HoloDeck 0.7.1 loads the file again.

agent.yaml is edited as text, whole lines (or a ``- `` item's first key) cut out, so its
comments, anchors and layout stay; the sidecar is written from the data. The edit is checked
before anything is written: the new agent.yaml has none of our fields, and it merged with the
sidecar is the agent the old file was. What cannot be cut safely (a key inside a ``{...}``
flow mapping, an anchor still used elsewhere, a nameless case with our fields) is refused,
saying what to do by hand; nothing is written then."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from holodeck_core.config.extensions import (
    METRICS,
    Extension,
    apply_sidecar,
    find_extensions,
    sidecar_file,
)
from holodeck_core.config.yaml_source import YamlPath, format_path, parse_yaml
from holodeck_core.errors import ConfigError

SIDECAR_HEADER = (
    "# holodeck-pipelines' additions to {agent} (docs/agent-yaml.md): HoloDeck 0.7.1 does not\n"
    "# read this file; `holodeck` merges it into the agent. Test cases and tools by name.\n"
)


@dataclass
class _Node:
    """A node of the YAML text with its character span (aliases kept as themselves)."""

    start: int
    end: int
    kind: str = "scalar"
    flow: bool = False
    anchor: str | None = None
    alias: str | None = None
    value: str | None = None
    pairs: list[tuple[_Node, _Node]] = field(default_factory=list)
    items: list[_Node] = field(default_factory=list)

    def child(self, key: str | int) -> _Node:
        if isinstance(key, int):
            return self.items[key]
        return next(v for k, v in self.pairs if k.value == key)

    def content_end(self) -> int:
        """Where the node's own text ends (a block collection's end mark is the next token)."""
        if self.flow or not (self.pairs or self.items):
            return self.end
        last = self.pairs[-1][1] if self.pairs else self.items[-1]
        return last.content_end()


def _tree(text: str) -> _Node:
    stack: list[_Node] = []
    pending: list[_Node | None] = [None]  # a mapping's key waiting for its value
    root: _Node | None = None

    def add(node: _Node) -> None:
        nonlocal root
        if not stack:
            root = node
            return
        parent = stack[-1]
        if parent.kind == "seq":
            parent.items.append(node)
        elif pending[-1] is None:
            pending[-1] = node
        else:
            key = pending[-1]
            pending[-1] = None
            parent.pairs.append((key, node))

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        assert event.start_mark is not None and event.end_mark is not None  # the pure parser
        start, end = event.start_mark.index, event.end_mark.index
        if isinstance(event, yaml.ScalarEvent):
            add(_Node(start, end, anchor=event.anchor, value=event.value))
        elif isinstance(event, yaml.AliasEvent):
            add(_Node(start, end, alias=event.anchor))
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            kind = "seq" if isinstance(event, yaml.SequenceStartEvent) else "map"
            node = _Node(start, end, kind, flow=bool(event.flow_style), anchor=event.anchor)
            add(node)
            stack.append(node)
            pending.append(None)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            stack.pop().end = end
            pending.pop()
    if root is None:
        raise ConfigError("the file holds no YAML document")
    return root


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


def _line_end(text: str, index: int) -> int:
    """Just past the newline of the line holding ``index`` (the rest must be a comment)."""
    newline = text.find("\n", index)
    rest = text[index : newline if newline >= 0 else len(text)].strip()
    if rest and not rest.startswith("#"):
        raise _unsafe(f"more text follows on its line: {rest[:40]!r}")
    return newline + 1 if newline >= 0 else len(text)


def _unsafe(why: str) -> ConfigError:
    return ConfigError(f"cannot cut this field out safely ({why}); move it by hand")


def _span(text: str, root: _Node, path: YamlPath) -> tuple[int, int]:
    """The characters to cut to remove ``path`` (a mapping entry or a sequence item)."""
    parent = root
    for part in path[:-1]:
        parent = parent.child(part)
    if parent.flow:
        raise _unsafe(f"{format_path(path[:-1])} is written as a flow {{...}} or [...]")
    last = path[-1]
    if isinstance(last, int):
        item = parent.items[last]
        dash = text.rfind("-", 0, item.start)
        if text[_line_start(text, dash) : dash].strip():
            raise _unsafe("the item does not start its own line")
        return _line_start(text, dash), _line_end(text, item.content_end())
    keys = [k for k, _ in parent.pairs]
    index = next(i for i, k in enumerate(keys) if k.value == last)
    key, value = parent.pairs[index]
    prefix = text[_line_start(text, key.start) : key.start]
    if not prefix.strip():
        return _line_start(text, key.start), _line_end(text, value.content_end())
    if prefix.strip() != "-" or index + 1 >= len(keys):  # `- id: x` starts a case's mapping
        raise _unsafe("it shares its line with other text")
    between = text[_line_end(text, value.content_end()) : keys[index + 1].start]
    if between.strip():
        raise _unsafe("a comment follows it")
    return key.start, keys[index + 1].start


def _anchors(node: _Node, out: dict[str, int], aliases: list[tuple[str, int]]) -> None:
    if node.anchor:
        out[node.anchor] = node.start
    if node.alias:
        aliases.append((node.alias, node.start))
    for key, value in node.pairs:
        _anchors(key, out, aliases)
        _anchors(value, out, aliases)
    for item in node.items:
        _anchors(item, out, aliases)


def _cut(text: str, paths: list[YamlPath]) -> str:
    root = _tree(text)
    spans = sorted({_span(text, root, path) for path in paths})
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    defined: dict[str, int] = {}
    aliases: list[tuple[str, int]] = []
    _anchors(root, defined, aliases)

    def cut(index: int) -> bool:
        return any(start <= index < end for start, end in merged)

    for name, at in aliases:
        if name in defined and cut(defined[name]) and not cut(at):
            raise _unsafe(f"the anchor &{name} moves out, and *{name} stays in agent.yaml")
    out, position = [], 0
    for start, end in merged:
        out.append(text[position:start])
        position = end
    return "".join(out) + text[position:]


def _removals(data: dict[str, Any], found: list[Extension]) -> list[YamlPath]:
    """The paths to cut: a list or block all of whose entries go is cut whole."""
    paths = {item.path for item in found}
    metrics = (data.get("evaluations") or {}).get("metrics")
    if isinstance(metrics, list) and all((*METRICS, i) in paths for i in range(len(metrics))):
        paths = {p for p in paths if p[0] != "evaluations"} | {("evaluations",)}
    changed = True
    while changed:
        changed = False
        for parent in {p[:-1] for p in paths if len(p) > 1}:
            value = _at(data, parent)
            size = len(value) if isinstance(value, dict | list) else -1
            if size > 0 and sum(1 for p in paths if p[:-1] == parent) == size:
                paths = {p for p in paths if p[: len(parent)] != parent} | {parent}
                changed = True
    ordered = [p for item in found for p in paths if item.path[: len(p)] == p]
    return list(dict.fromkeys(ordered))  # in file order, each once


def _at(data: Any, path: YamlPath) -> Any:
    for part in path:
        data = data[part]
    return data


def split(data: dict[str, Any], removals: list[YamlPath]) -> dict[str, Any]:
    """The sidecar holding what ``removals`` cut out of ``data``."""
    sidecar: dict[str, Any] = {}
    for path in removals:
        value = _at(data, path)
        if path[0] in ("tools", "test_cases"):
            item = data[path[0]][path[1]]
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                what = "test case" if path[0] == "test_cases" else "tool"
                raise ConfigError(
                    f"{format_path(path[:2])}: a {what} with holodeck-pipelines' fields needs a "
                    "'name' (the sidecar keys it by name); add one, then migrate again"
                )
            target = sidecar.setdefault(path[0], {}).setdefault(name, {})
            rest = path[2:]
        else:
            target, rest = sidecar, path
        _place(target, rest, value)
    return sidecar


def _place(target: dict[str, Any], rest: YamlPath, value: Any) -> None:
    if len(rest) == 1:
        if isinstance(value, list) and rest[0] in ("evaluations", "metrics"):
            target.setdefault(rest[0], []).extend(value)
        else:
            target[str(rest[0])] = value
        return
    key, index = rest[0], rest[1]
    if key == "turns" and isinstance(index, int):
        turns = target.setdefault("turns", [])
        turns.extend({} for _ in range(index + 1 - len(turns)))
        _place(turns[index], rest[2:], value)
    elif isinstance(index, int):  # a metric of a list
        target.setdefault(str(key), []).append(value)
    else:
        _place(target.setdefault(str(key), {}), rest[1:], value)


def _canonical(data: Any) -> str:
    """The document with every list of metrics sorted (a merge appends ours after HoloDeck's)."""

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: walk(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            items = [walk(v) for v in value]
            metrics = key in ("metrics", "evaluations")
            return sorted(items, key=lambda v: json.dumps(v, sort_keys=True)) if metrics else items
        return value

    return json.dumps(walk(data), sort_keys=True, default=str)


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


@dataclass
class Migration:
    agent_text: str
    sidecar_text: str
    sidecar: Path
    moved: list[Extension]


def plan_migration(agent_file: Path) -> Migration | None:
    """The new agent.yaml and its sidecar, checked; None when there is nothing to move."""
    text = agent_file.read_text(encoding="utf-8")
    data = parse_yaml(text, agent_file, str(agent_file)).data
    found = find_extensions(data)
    if not found:
        return None
    target = sidecar_file(agent_file, None)
    if target.exists():
        raise ConfigError(
            f"{target} exists already; move the fields `holodeck validate` lists into it by "
            "hand, or move it away and migrate again",
            file=str(agent_file),
        )
    removals = _removals(data, found)
    sidecar = split(data, removals)
    new_text = _cut(text, removals)
    new_data = parse_yaml(new_text, agent_file, str(agent_file)).data
    merged = apply_sidecar(new_data, sidecar)
    if find_extensions(new_data) or merged.problems or _canonical(merged.data) != _canonical(data):
        raise _unsafe("the edited file and the sidecar would not give the same agent")
    body = yaml.dump(
        sidecar,
        Dumper=_NoAliases,
        sort_keys=False,
        allow_unicode=True,
        width=100,
        default_flow_style=None,
    )
    return Migration(new_text, SIDECAR_HEADER.format(agent=agent_file.name) + body, target, found)


def write_migration(agent_file: Path, migration: Migration) -> None:
    """Write the sidecar, then agent.yaml, each whole (a temporary file renamed); the sidecar
    is removed again if agent.yaml cannot be written."""
    _write_whole(migration.sidecar, migration.sidecar_text)
    try:
        _write_whole(agent_file, migration.agent_text)
    except OSError:
        migration.sidecar.unlink(missing_ok=True)
        raise


def _write_whole(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.migrating")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)
