"""Our additions to ``agent.yaml``, kept out of HoloDeck's file (docs/agent-yaml.md).

``agent.yaml`` stays a file HoloDeck 0.7.1 loads; what only holodeck-pipelines reads (prompt
variants, gates, trials, case ids and tags, tool mocks, our metric kinds and options) lives in
one sidecar file beside it: the one its ``holodeck.yaml`` entry names (``extensions:``), else
``<stem>.pipelines.yaml``. The sidecar mirrors agent.yaml's shape, with test cases and tools
keyed by name; :func:`apply_sidecar` merges it in (lists of metrics are appended, HoloDeck's
first), so the loaded agent is the one a single file holding both would give.
:func:`find_extensions` finds our fields still in an agent.yaml, for ``holodeck validate`` and
``holodeck validate --fix``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodeck_core.config.env import substitute
from holodeck_core.config.yaml_source import YamlDocument, YamlPath, format_path, read_yaml
from holodeck_core.errors import ConfigError, Problem
from holodeck_core.models.evaluation import HOLODECK_STANDARD_METRICS

SIDECAR_SUFFIX = ".pipelines.yaml"
METRICS: YamlPath = ("evaluations", "metrics")

_COMMON = {"type", "threshold", "enabled", "fail_on_error"}
HOLODECK_METRIC_KEYS: dict[str, frozenset[str]] = {
    "standard": frozenset(
        _COMMON
        | {"metric", "scale", "model", "retry_on_failure", "timeout_ms", "custom_prompt"}
        | {"case_insensitive", "strip_whitespace", "strip_punctuation", "response_path"}
        | {"absolute_tolerance", "relative_tolerance", "accept_percent"}
        | {"accept_thousands_separators"}
    ),
    "geval": frozenset(
        _COMMON
        | {"name", "criteria", "evaluation_steps", "evaluation_params", "strict_mode"}
        | {"model"}
    ),
    "rag": frozenset(_COMMON | {"metric_type", "include_reason", "model"}),
    "code": frozenset(_COMMON | {"grader", "name"}),
}
"""The keys HoloDeck 0.7.1's metric models accept (``models/evaluation.py``: extra forbidden)."""

OUR_KEYS: dict[str, frozenset[str]] = {
    "instructions": frozenset({"variants"}),
    "evaluations": frozenset(
        {"gate", "regression", "alpha", "baseline", "judge_control", "judge_drift_max"}
        | {"min_judge_kappa", "max_error_share", "max_cost_increase"}
    ),
    "execution": frozenset(
        {"trials", "reducer", "budget", "max_tool_turns", "tool_timeout", "max_file_mb"}
        | {"batch", "batch_max_wait"}
    ),
    "test_case": frozenset({"id", "tags", "metadata", "weight"}),
    "tool": frozenset({"mock"}),
}
"""Fields of ours in HoloDeck's blocks (each absent from its HoloDeck 0.7.1 model)."""


@dataclass(frozen=True)
class Extension:
    """One of our fields in an agent.yaml: where it is and how ``validate`` names it."""

    path: YamlPath
    label: str


def metric_extension(metric: Any) -> str | None:
    """Why HoloDeck 0.7.1 refuses this metric (our kind or option), or None."""
    if not isinstance(metric, dict):
        return None
    kind = metric.get("type", "standard")
    keys = HOLODECK_METRIC_KEYS.get(kind) if isinstance(kind, str) else None
    if keys is None:
        return None  # not a metric of any kind: validation says so
    name = metric.get("metric")
    if kind == "standard" and isinstance(name, str) and name not in HOLODECK_STANDARD_METRICS:
        return f"metric {name}"
    extra = sorted(str(key) for key in metric if key not in keys)
    return f"{kind} metric option {extra[0]}" if extra else None


def find_extensions(data: Any) -> list[Extension]:
    """Our fields in an agent document (raw or substituted), in file order."""
    if not isinstance(data, dict):
        return []
    found: list[Extension] = []
    for block in ("instructions", "evaluations", "execution"):
        value = data.get(block)
        if isinstance(value, dict):
            found += [
                Extension((block, key), f"{block}.{key}") for key in value if key in OUR_KEYS[block]
            ]
    evaluations = data.get("evaluations")
    if isinstance(evaluations, dict):
        found += _metric_extensions(("evaluations", "metrics"), evaluations.get("metrics"))
    for i, tool in enumerate(_items(data.get("tools"))):
        found += [
            Extension(("tools", i, key), f"tools[].{key}")
            for key in tool
            if key in OUR_KEYS["tool"]
        ]
    for i, case in enumerate(_items(data.get("test_cases"))):
        found += _case_extensions(i, case)
    return found


def _case_extensions(index: int, case: dict[str, Any]) -> list[Extension]:
    found = [
        Extension(("test_cases", index, key), f"test_cases[].{key}")
        for key in case
        if key in OUR_KEYS["test_case"]
    ]
    found += _metric_extensions(("test_cases", index, "evaluations"), case.get("evaluations"))
    for t, turn in enumerate(_items(case.get("turns"))):
        path = ("test_cases", index, "turns", t, "evaluations")
        found += _metric_extensions(path, turn.get("evaluations"))
    return found


def _metric_extensions(path: YamlPath, metrics: Any) -> list[Extension]:
    if not isinstance(metrics, list):
        return []
    found = []
    for i, metric in enumerate(metrics):
        why = metric_extension(metric)
        if why:
            found.append(Extension((*path, i), why))
    return found


def _items(value: Any) -> list[dict[str, Any]]:
    """The mappings of a list (other items are left to validation); an empty list else."""
    return (
        [item if isinstance(item, dict) else {} for item in value]
        if isinstance(value, list)
        else []
    )


def grouped(found: list[Extension]) -> dict[str, list[YamlPath]]:
    """One entry per field (``test_cases[].id``, ``metric contains``), with its places."""
    groups: dict[str, list[YamlPath]] = {}
    for item in found:
        groups.setdefault(item.label, []).append(item.path)
    return groups


def relocation_warnings(found: list[Extension], agent_display: str, sidecar: str) -> list[str]:
    """``holodeck validate``'s warnings: one per field, naming where it belongs."""
    warnings = []
    for label, paths in grouped(found).items():
        where = format_path(paths[0]) + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
        warnings.append(
            f"{label} ({where}): ours, and HoloDeck 0.7.1 refuses it in agent.yaml; it "
            f"belongs in {sidecar} beside it (`holodeck validate --fix {agent_display}` "
            "moves it)"
        )
    return warnings


# --- the sidecar --------------------------------------------------------------------------


_SIDECAR_SHAPE: dict[str, frozenset[str]] = {
    "": frozenset({"instructions", "evaluations", "execution", "tools", "test_cases"}),
    "instructions": OUR_KEYS["instructions"],
    "evaluations": OUR_KEYS["evaluations"] | {"metrics", "model", "optimizer"},
    "execution": OUR_KEYS["execution"],
    "tools": OUR_KEYS["tool"],
    "test_cases": OUR_KEYS["test_case"] | {"evaluations", "turns"},
    "turns": frozenset({"evaluations"}),
}
"""The keys a sidecar may hold at each level: ours only (HoloDeck's stay in agent.yaml;
``evaluations.model`` and ``metrics`` too, for an agent whose metrics are all ours)."""


def sidecar_problems(data: Any) -> list[tuple[YamlPath, str]]:
    """What is wrong with a sidecar's shape (its values are validated with the agent)."""
    if not isinstance(data, dict):
        return [((), "a sidecar holds a YAML mapping (instructions, evaluations, ...)")]
    problems = _unknown_keys(data, (), "")
    for block in ("instructions", "evaluations", "execution"):
        problems += _unknown_keys(data.get(block), (block,), block)
    for block in ("tools", "test_cases"):
        named = data.get(block)
        if named is not None and not isinstance(named, dict):
            problems.append(((block,), "a mapping of names (as in agent.yaml) to their fields"))
            continue
        for name, value in (named or {}).items():
            problems += _unknown_keys(value, (block, name), block)
            turns = value.get("turns") if isinstance(value, dict) else None
            for t, turn in enumerate(turns if isinstance(turns, list) else []):
                problems += _unknown_keys(turn or {}, (block, name, "turns", t), "turns")
    return problems


def _unknown_keys(value: Any, path: YamlPath, level: str) -> list[tuple[YamlPath, str]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(path, "must be a mapping")]
    allowed = _SIDECAR_SHAPE[level]
    return [
        (
            (*path, key),
            f"not a field of the sidecar; here it holds {', '.join(sorted(allowed))} "
            "(HoloDeck's own fields stay in agent.yaml)",
        )
        for key in value
        if key not in allowed
    ]


@dataclass
class MergedAgentDocument:
    """An agent document with a sidecar merged in; ``origins`` maps a path of the merged
    document to the sidecar's path it came from (errors then name the sidecar's line)."""

    data: dict[str, Any]
    origins: dict[YamlPath, YamlPath] = field(default_factory=dict)
    problems: list[tuple[YamlPath, str]] = field(default_factory=list)

    def origin(self, path: YamlPath) -> YamlPath | None:
        for end in range(len(path), 0, -1):
            if path[:end] in self.origins:
                return (*self.origins[path[:end]], *path[end:])
        return None


def apply_sidecar(data: dict[str, Any], sidecar: dict[str, Any]) -> MergedAgentDocument:
    """``data`` with the (validated) sidecar's additions; a field set in both, or a case or
    tool the agent does not have, is a problem at the sidecar's path."""
    out = MergedAgentDocument(data={**data})
    for block in ("instructions", "evaluations", "execution"):
        if isinstance(sidecar.get(block), dict):
            out.data[block] = _merge_block(data.get(block), sidecar[block], (block,), out)
    for name, additions in (sidecar.get("tools") or {}).items():
        _merge_named(out, "tools", name, additions, lambda t: t.get("name"))
    for name, additions in (sidecar.get("test_cases") or {}).items():
        _merge_named(out, "test_cases", name, additions, lambda c: c.get("name"))
    return out


def _merge_block(
    current: Any, additions: dict[str, Any], path: YamlPath, out: MergedAgentDocument
) -> dict[str, Any]:
    merged = dict(current) if isinstance(current, dict) else {}
    for key, value in additions.items():
        if isinstance(value, list) and (key == "evaluations" or (*path, key) == METRICS):
            existing = merged.get(key)
            base: list[Any] = existing if isinstance(existing, list) else []
            for i in range(len(value)):
                out.origins[(*path, key, len(base) + i)] = (*path, key, i)
            merged[key] = [*base, *value]
        elif key == "turns":
            merged[key] = _merge_turns(merged.get(key), value, path, out)
        elif key in merged:
            out.problems.append(
                ((*path, key), f"{format_path((*path, key))} is set in agent.yaml too; keep one")
            )
        else:
            out.origins[(*path, key)] = (*path, key)
            merged[key] = value
    return merged


def _merge_turns(
    current: Any, additions: list[Any], path: YamlPath, out: MergedAgentDocument
) -> Any:
    turns = list(current) if isinstance(current, list) else []
    if len(additions) > len(turns):
        out.problems.append(
            ((*path, "turns"), f"lists {len(additions)} turns; the case has {len(turns)}")
        )
        return current
    for t, turn in enumerate(additions):
        if turn:
            turns[t] = _merge_block(turns[t], turn, (*path, "turns", t), out)
    return turns


def _merge_named(
    out: MergedAgentDocument,
    key: str,
    name: str,
    additions: dict[str, Any],
    name_of: Callable[[dict[str, Any]], Any],
) -> None:
    items = list(out.data.get(key) or [])
    matches = [
        i for i, item in enumerate(items) if isinstance(item, dict) and name_of(item) == name
    ]
    if len(matches) != 1:
        what = "no" if not matches else f"{len(matches)}"
        out.problems.append(
            (
                (key, name),
                f"agent.yaml has {what} {key.rstrip('s').replace('_', ' ')}s named {name!r}",
            )
        )
        return
    index = matches[0]
    before, problems = set(out.origins), len(out.problems)
    items[index] = _merge_block(items[index], additions, (key, index), out)
    for merged_path in set(out.origins) - before:  # the sidecar keys cases by name
        out.origins[merged_path] = (key, name, *out.origins[merged_path][2:])
    out.problems[problems:] = [((key, name, *p[2:]), m) for p, m in out.problems[problems:]]
    out.data[key] = items


def sidecar_file(agent_file: Path, named: str | None) -> Path:
    """The sidecar of an agent: the one its ``holodeck.yaml`` entry names (relative to the
    agent's folder), else ``<stem>.pipelines.yaml`` beside it."""
    if named:
        candidate = Path(named).expanduser()
        return candidate if candidate.is_absolute() else agent_file.parent / candidate
    return agent_file.with_name(agent_file.stem + SIDECAR_SUFFIX)


@dataclass
class LoadedSidecar:
    """A sidecar read, ``${VAR}`` resolved and its shape checked."""

    doc: YamlDocument
    data: dict[str, Any]
    secrets: set[str]


def load_sidecar(agent_file: Path, env: dict[str, str]) -> LoadedSidecar | None:
    """The agent's sidecar (:func:`sidecar_file`), or None when it has none; a named file
    that is missing, or a bad shape, is a :class:`ConfigError` naming the file."""
    from holodeck_core.config.project import Project

    named = Project.discover(agent_file.parent).extensions_of(agent_file)
    path = sidecar_file(agent_file, named)
    if not path.is_file():
        if named:
            raise ConfigError(
                f"the sidecar {path} that holodeck.yaml names for this agent (extensions:) "
                "does not exist",
                file=str(path),
            )
        return None
    doc = read_yaml(path, str(path))
    result = substitute(doc, env)
    problems: list[Problem] = [doc.problem(p, m) for p, m in sidecar_problems(result.data)]
    if problems or result.problems:
        raise ConfigError([*result.problems, *problems])
    return LoadedSidecar(doc=doc, data=result.data or {}, secrets=result.secrets)
