"""``${VAR}`` and ``${VAR:-default}`` substitution in parsed YAML values.

Substitution runs on parsed scalars, not on the raw text, so a variable can never inject YAML
structure, a comment that mentions ``${VAR}`` is harmless, and a missing variable is reported
with the exact field that needs it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodeck_core.config.yaml_source import YamlDocument, YamlPath
from holodeck_core.errors import Problem
from holodeck_core.redaction import is_secret_key, is_secret_var, register_secret

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def environment_for(agent_file: Path) -> dict[str, str]:
    """The process environment over a ``.env`` file beside the agent file (the process
    environment wins, as with python-dotenv's default)."""
    from dotenv import dotenv_values

    dotenv = agent_file.parent / ".env"
    values = {k: v for k, v in dotenv_values(dotenv).items() if v is not None}
    return {**values, **os.environ}


@dataclass
class Substitution:
    """The outcome of substituting one document."""

    data: Any
    problems: list[Problem] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)


def substitute(doc: YamlDocument, env: Mapping[str, str]) -> Substitution:
    result = Substitution(data=None)
    result.data = _walk(doc.data, (), doc, env, result)
    for secret in result.secrets:
        register_secret(secret)
    return result


def _walk(
    value: Any, path: YamlPath, doc: YamlDocument, env: Mapping[str, str], out: Substitution
) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, (*path, k), doc, env, out) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, (*path, i), doc, env, out) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    secret_field = bool(path) and is_secret_key(str(path[-1]))

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            resolved = env[name]
        elif default is not None:
            resolved = default
        else:
            out.problems.append(
                doc.problem(
                    path,
                    f"environment variable {name} is not set; export it, add it to a .env "
                    f"file beside the agent file, or write ${{{name}:-default}}",
                )
            )
            return match.group(0)
        if secret_field or is_secret_var(name):
            out.secrets.add(resolved)
        return resolved

    return _REFERENCE.sub(replace, value)
