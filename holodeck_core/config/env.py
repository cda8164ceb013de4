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
from holodeck_core.redaction import (
    SECRET_MAPS,
    is_secret_key,
    is_secret_var,
    register_secret,
    secrets_in_text,
)

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def dotenv_files(agent_file: Path) -> list[Path]:
    """The ``.env`` files read, the first to set a variable winning: HoloDeck 0.7.1's (the
    working directory's, then ``~/.holodeck/.env``), with ours, beside the agent file, after
    the working directory's (the same file when HoloDeck is run from the agent's folder)."""
    found = [Path.cwd() / ".env", agent_file.parent / ".env", Path.home() / ".holodeck" / ".env"]
    unique = {p.resolve(): p for p in found if p.is_file()}
    return list(unique.values())


def environment_for(agent_file: Path) -> dict[str, str]:
    """The process environment over the :func:`dotenv_files` (the process environment wins,
    as with python-dotenv's default)."""
    from dotenv import dotenv_values

    values: dict[str, str] = {}
    for dotenv in reversed(dotenv_files(agent_file)):
        values.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
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
    if not isinstance(value, str):
        return value
    key = str(path[-1]) if path else ""
    in_map = len(path) >= 2 and str(path[-2]) in SECRET_MAPS
    secret_field = bool(key) and (is_secret_key(key) or (in_map and is_secret_var(key)))
    resolved_value = value if "${" not in value else _substitute(value, path, doc, env, out)
    # However a credential got into the config (a literal `api_key: sk-...`, a URL's
    # userinfo or `?api-key=`), its value is scrubbed from everything written later.
    if secret_field:
        out.secrets.add(resolved_value)
    out.secrets |= secrets_in_text(resolved_value)
    return resolved_value


def _substitute(
    value: str, path: YamlPath, doc: YamlDocument, env: Mapping[str, str], out: Substitution
) -> str:
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
