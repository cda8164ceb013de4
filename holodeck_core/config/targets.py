"""A target's config (docs/targets.md): from the agent's ``holodeck.yaml`` entry or ``--target``,
with ``${VAR}`` substituted like ``agent.yaml``'s, validated, every header value and key
registered as a secret. Problems name the file, the field and the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from holodeck_core.config.env import environment_for, substitute
from holodeck_core.config.graders import check_grader_reference
from holodeck_core.config.project import PROJECT_FILE, Project
from holodeck_core.config.validation_errors import validation_problems
from holodeck_core.config.yaml_source import (
    ScopedDocument,
    YamlDocument,
    YamlPath,
    parse_yaml,
    read_yaml,
)
from holodeck_core.errors import ConfigError
from holodeck_core.models.target import HttpTarget, OpenAIChatTarget, PythonTarget, Target
from holodeck_core.redaction import register_secret


def project_target(agent_file: Path) -> tuple[Target, frozenset[str]] | None:
    """The target ``holodeck.yaml`` declares for ``agent_file`` and its secrets, if any."""
    project = Project.discover(agent_file.parent)
    found = project.agent_entry(agent_file)
    if found is None:
        return None
    index = found[0]
    settings_file = project.root / PROJECT_FILE
    doc = read_yaml(settings_file, str(settings_file))
    prefix: YamlPath = ("agents", index, "target")
    scoped = ScopedDocument.of(doc, doc.data["agents"][index]["target"], prefix)
    env = {**environment_for(settings_file), **environment_for(agent_file)}
    return _validated(scoped, env, agent_file.parent)


def option_target(value: str, agent_file: Path) -> tuple[Target, frozenset[str]]:
    """``--target``: a YAML file holding a target, or the target itself as inline YAML
    (``'{http: {url: "http://host/chat"}}'``); ``${VAR}`` from the environment and the
    ``.env`` beside the agent file; a python callable is found beside the agent file."""
    path = Path(value).expanduser()
    if not value.lstrip().startswith("{") and path.suffix in (".yaml", ".yml", ".json"):
        doc = read_yaml(path, value)
    else:
        doc = parse_yaml(value, Path("--target"), "--target")
    scoped = ScopedDocument.of(doc, doc.data, ())
    return _validated(scoped, environment_for(agent_file), agent_file.parent)


def _validated(
    doc: YamlDocument, env: dict[str, str], base_dir: Path
) -> tuple[Target, frozenset[str]]:
    if not isinstance(doc.data, dict):
        raise ConfigError(
            [
                doc.problem(
                    (),
                    "a target is a mapping with one of holodeck_serve, http, openai_chat, "
                    "python (docs/targets.md)",
                )
            ]
        )
    result = substitute(doc, env)
    if result.problems:
        raise ConfigError(result.problems)
    data: dict[str, Any] = result.data
    try:
        target = Target.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, Target, data, doc.problem)) from None
    spec = target.spec
    if isinstance(spec, PythonTarget):  # found without running it, as a code grader
        message = check_grader_reference(spec.callable, base_dir)
        if message:
            problem = message.replace("grader ", "", 1)
            raise ConfigError([doc.problem(("python", "callable"), problem)])
    secrets = set(result.secrets)
    if isinstance(spec, HttpTarget | OpenAIChatTarget):
        secrets |= {value.get_secret_value() for value in spec.headers.values()}
    if isinstance(spec, OpenAIChatTarget) and spec.api_key is not None:
        secrets.add(spec.api_key.get_secret_value())
    for secret in secrets:
        register_secret(secret)
    return target, frozenset(secrets)
