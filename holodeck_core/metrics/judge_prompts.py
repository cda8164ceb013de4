"""Judge prompt templates: package data files ``holodeck_core/metrics/prompts/<id>.txt``.

A file is a header of ``key: value`` lines (``version`` is required, it goes into every
judge-cache key and into the EvalRun's provenance), then ``=== system ===`` and
``=== user ===`` sections. Placeholders are ``{{name}}``; rendering is one pass, so text
from a test case that happens to contain ``{{x}}`` is never expanded.

The judge-cache key holds the rendered text, so a wording change never serves a stale
entry; the version is what makes scores comparable across runs in the history, so bump it
whenever the wording changes.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_CUSTOM_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}|\{(\w+)\}")
_SECTION = re.compile(r"^=== (system|user) ===\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    """One judge prompt: its id (the file name), version, system and user templates."""

    id: str
    version: str
    system: str
    user: str

    @property
    def label(self) -> str:
        """``id@version``, as recorded in results and provenance."""
        return f"{self.id}@{self.version}"

    def render(self, values: Mapping[str, str]) -> RenderedPrompt:
        return RenderedPrompt(
            label=self.label,
            system=render_text(self.system, values),
            user=render_text(self.user, values),
        )


@dataclass(frozen=True)
class RenderedPrompt:
    """What is sent to the judge: the template label and the two rendered texts."""

    label: str
    system: str
    user: str


class PromptFileError(ValueError):
    """A packaged prompt file is malformed (a bug in the package, not in the user's config)."""


def render_text(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{{name}}`` placeholders; unknown names are left as they are."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        return values[name] if name in values else match.group(0)

    return _PLACEHOLDER.sub(sub, template)


def render_custom(template: str, values: Mapping[str, str]) -> str:
    """A user's ``custom_prompt``: ``{{name}}`` or ``{name}`` for the known names only, so
    literal JSON such as ``{"score": 1}`` in the prompt is left alone."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values[name] if name in values else match.group(0)

    return _CUSTOM_PLACEHOLDER.sub(sub, template)


def placeholders_in(template: str) -> set[str]:
    """The placeholder names a custom prompt uses (either syntax)."""
    return {m.group(1) or m.group(2) for m in _CUSTOM_PLACEHOLDER.finditer(template)}


def custom_label(template: str) -> str:
    """The version label of a user's custom prompt: ``custom@<sha256[:8]>``."""
    return f"custom@{hashlib.sha256(template.encode()).hexdigest()[:8]}"


def parse_prompt(prompt_id: str, text: str) -> PromptTemplate:
    parts = _SECTION.split(text)
    if len(parts) != 5 or parts[1] != "system" or parts[3] != "user":
        raise PromptFileError(
            f"prompt {prompt_id!r}: expected a header, '=== system ===' and '=== user ==='"
        )
    header: dict[str, str] = {}
    for line in parts[0].splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep:
                raise PromptFileError(
                    f"prompt {prompt_id!r}: header line {line!r} is not key: value"
                )
            header[key.strip()] = value.strip()
    version = header.get("version")
    if not version:
        raise PromptFileError(f"prompt {prompt_id!r}: the header has no 'version'")
    return PromptTemplate(
        id=prompt_id, version=version, system=parts[2].strip(), user=parts[4].strip()
    )


@functools.cache
def load_prompt(prompt_id: str) -> PromptTemplate:
    """The packaged prompt ``prompts/<prompt_id>.txt``."""
    path = resources.files("holodeck_core.metrics").joinpath("prompts", f"{prompt_id}.txt")
    return parse_prompt(prompt_id, path.read_text("utf-8"))


def numbered(items: Sequence[str]) -> str:
    """``1. first`` / ``2. second`` ... (``(none)`` for an empty list)."""
    if not items:
        return "(none)"
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))
