"""Reading rules (a YAML file, a mapping, or nothing) into :class:`~.rules.Rules`.

Loading never raises a pydantic ``ValidationError`` or a YAML error to the caller: every
problem becomes a :class:`~.rules.RulesError` whose message names the file, the field and
how to fix it (the closest known field name for a typo).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias, get_args

import yaml
from pydantic import BaseModel, ValidationError

from holodeck_core.testing.rules import Rules, RulesError


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that validates the object at ``loc`` (for "allowed fields" hints)."""
    current: type[BaseModel] | None = Rules
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        info = next(
            (f for n, f in current.model_fields.items() if part in (n, f.alias)),
            None,
        )
        if info is None:
            return None
        current = None
        pending: list[Any] = [info.annotation]
        while pending:
            ann = pending.pop()
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                current = ann
                break
            pending.extend(get_args(ann))
    return current


def _unknown_field(loc: tuple[int | str, ...]) -> str:
    key = str(loc[-1])
    model = _model_at(loc[:-1])
    if model is None:
        return f"unknown field '{key}'"
    allowed = _field_names(model)
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown field '{key}'; {hint}allowed fields here: {', '.join(allowed)}"


def _format_errors(exc: ValidationError) -> list[str]:
    problems: list[str] = []
    for err in exc.errors(include_url=False):
        # Drop pydantic's internal union/function tags from the location.
        loc = tuple(
            p
            for p in err["loc"]
            if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))
        )
        if err["type"] == "extra_forbidden" and loc:
            problems.append(f"{_loc(loc[:-1])}: {_unknown_field(loc)}")
            continue
        where = _loc(loc).replace("json_", "json")
        msg = str(err["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if err["type"] not in ("value_error", "assertion_error") and "input" in err:
            given = err["input"]
            if not isinstance(given, Mapping | list):
                msg = f"{msg} (got {given!r})"
        problems.append(f"{where}: {msg}")
    # Unions report one error per member; keep each distinct message once.
    return list(dict.fromkeys(problems))


def parse_rules(data: Any, source: str = "<rules>") -> Rules:
    """Validate a mapping (already parsed YAML/JSON) into :class:`Rules`."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RulesError(
            source,
            [
                "(top level): expected a mapping with 'default', 'faults' and 'rules', "
                f"got {type(data).__name__}"
            ],
        )
    try:
        return Rules.model_validate(data)
    except ValidationError as exc:
        raise RulesError(source, _format_errors(exc)) from None


def load_rules(path: str | os.PathLike[str]) -> Rules:
    """Read and validate a YAML rules file; any problem is a :class:`RulesError`."""
    p = Path(path)
    source = str(p)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesError(source, ["file not found; check the --script path"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(source, [f"cannot read the file: {exc}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "?"
        problem = getattr(exc, "problem", None) or str(exc)
        raise RulesError(
            source,
            [
                f"YAML syntax error at {where}: {problem} (quote regexes and strings "
                "that contain ':', '{' or '#')"
            ],
        ) from None
    return parse_rules(data, source)


RulesInput: TypeAlias = Rules | Mapping[str, Any] | str | os.PathLike[str] | None


def coerce_rules(rules: RulesInput) -> Rules:
    """Accept Rules, a mapping in the file format, a path to a YAML file, or None (defaults)."""
    if rules is None:
        return Rules()
    if isinstance(rules, Rules):
        return rules
    if isinstance(rules, Mapping):
        return parse_rules(rules)
    return load_rules(rules)
