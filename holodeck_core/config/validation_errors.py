"""Pydantic's validation errors as problems a person can act on: one per location of the
YAML file, in source order, with the path (``test_cases[3].files[0].pages``), what was given
where that helps, and what is allowed (the closest known key for a typo)."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from holodeck_core.errors import Problem

YamlPath = tuple[str | int, ...]


def validation_problems(
    exc: ValidationError,
    model: type[BaseModel],
    data: Any,
    locate: typing.Callable[[YamlPath, str], Problem],
) -> list[Problem]:
    """Turn pydantic errors into one problem per location, in source order.

    ``loc`` tuples from pydantic also hold union tags and member names; they are dropped by
    walking the input data and the model's annotations, so paths read exactly like the YAML."""
    errors = exc.errors(include_url=False)
    merged: dict[YamlPath, list[str]] = {}
    shown_input: dict[YamlPath, str] = {}
    for error in errors:
        if _is_wrong_branch(error, errors):
            continue
        path, parent = _data_path(error["loc"], data, model)
        message = _message(error, parent)
        bucket = merged.setdefault(path, [])
        if message not in bucket:
            bucket.append(message)
        if error["type"] not in _NO_INPUT_ECHO and "input" in error:
            shown = repr(error["input"])
            shown_input.setdefault(path, shown if len(shown) <= 60 else shown[:57] + "...")
    problems = []
    for path, messages in merged.items():
        text = _join(messages)
        if path in shown_input and any(m.startswith("should be ") for m in messages):
            text += f" (got {shown_input[path]})"
        problems.append(locate(path, text))
    return sorted(problems, key=lambda p: (p.file, p.line or 0, p.path))


_NO_INPUT_ECHO = frozenset({"missing", "extra_forbidden", "union_tag_invalid", "value_error"})
_TYPE_ERRORS = frozenset(
    {"string_type", "int_type", "float_type", "bool_type", "list_type", "int_parsing"}
)


def _is_wrong_branch(error: Any, errors: list[Any]) -> bool:
    """In ``str | Model`` unions a mapping fails the ``str`` branch too: that noise hides the
    real problem inside the mapping, so drop it when the mapping branch reported errors."""
    if error["type"] not in _TYPE_ERRORS or not isinstance(error.get("input"), dict):
        return False
    prefix = error["loc"][:-1]
    return any(
        other is not error
        and other["loc"][: len(prefix)] == prefix
        and len(other["loc"]) > len(prefix)
        and other["type"] not in _TYPE_ERRORS
        for other in errors
    )


def _join(messages: list[str]) -> str:
    type_messages = [m for m in messages if m.startswith("should be ")]
    others = [m for m in messages if not m.startswith("should be ")]
    if type_messages:
        alternatives = " or ".join(m.removeprefix("should be ") for m in type_messages)
        others.append(f"should be {alternatives}")
    return "; ".join(others)


def _data_path(loc: tuple[int | str, ...], data: Any, model: Any) -> tuple[YamlPath, Any]:
    """The YAML path of ``loc`` and the annotation of the last mapping it passed through."""
    path: list[str | int] = []
    annotation: Any = model
    parent: Any = model
    for part in loc:
        if isinstance(part, str) and _is_union(annotation):
            chosen = _choose_member(annotation, part, data)
            if chosen is not None:
                annotation = chosen
                continue
        parent = annotation
        path.append(part)
        annotation = _step(annotation, part)
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            data = None
    return tuple(path), parent


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete alternatives behind Optional / Union / Annotated."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [alt for arg in get_args(annotation) for alt in _unwrap(arg)]
    return [annotation]


def _is_union(annotation: Any) -> bool:
    return len([a for a in _unwrap(annotation) if a is not type(None)]) > 1


def _step(annotation: Any, part: str | int) -> Any:
    for alt in _unwrap(annotation):
        origin = get_origin(alt)
        if isinstance(part, int) and origin is list:
            return get_args(alt)[0]
        if isinstance(part, str):
            if origin is dict:
                return get_args(alt)[1]
            if isinstance(alt, type) and issubclass(alt, BaseModel) and part in alt.model_fields:
                return alt.model_fields[part].annotation
    return None


def _choose_member(annotation: Any, label: str, data: Any) -> Any:
    """The union member that pydantic's ``loc`` element ``label`` names: a discriminator tag,
    a model class name, or a non-model member label such as ``str`` or ``dict[str,any]``."""
    members = [a for a in _unwrap(annotation) if a is not type(None)]
    models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
    for alt in models:
        if alt.__name__ == label:
            return alt
        for name, info in alt.model_fields.items():
            is_tag = get_origin(info.annotation) is Literal and label in get_args(info.annotation)
            if is_tag and isinstance(data, dict) and data.get(name) == label:
                return alt
    if isinstance(data, dict) and label in data:
        return None
    for alt in members:
        if alt not in models and label.split("[")[0] in str(alt) + getattr(alt, "__name__", ""):
            return alt
    return None


def _allowed_keys(annotation: Any) -> list[str]:
    keys: list[str] = []
    for alt in _unwrap(annotation):
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            keys.extend(k for k in alt.model_fields if k not in keys)
    return keys


def _message(error: Any, parent: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = _allowed_keys(parent)
        hint = difflib.get_close_matches(str(error["loc"][-1]), allowed, n=1)
        text = "unknown key" + (f"; did you mean '{hint[0]}'?" if hint else "")
        return text + (f" (allowed: {', '.join(allowed)})" if allowed else "")
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        ctx = error.get("ctx", {})
        field = str(ctx.get("discriminator", "type")).strip("'")
        return f"{field} {ctx.get('tag')!r} is not one of: {ctx.get('expected_tags', '')}"
    if kind == "union_tag_not_found":
        field = str(error.get("ctx", {}).get("discriminator", "type")).strip("'")
        return f"required field '{field}' is missing"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    if message.startswith("Input should be "):
        message = "should be " + message.removeprefix("Input should be ")
    return message
