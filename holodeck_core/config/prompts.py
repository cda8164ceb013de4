"""Prompt versions and the immutable snapshot store (docs/architecture.md, "Loading the agent").

A prompt file's identity is its frontmatter ``version`` (else ``auto-<sha256(body)[:8]>``), the
body being the text after the frontmatter; what the model is sent is the file as it is,
frontmatter and final newline included, as HoloDeck 0.7.1 sends it (docs/holodeck-fidelity.md).
The store under ``HOLODECK_HOME/prompts/<agent slug>/`` keeps every body ever registered, so
evaluating partition ``v2`` uses the stored v2 body even after the file moved on. A label that
comes back with a different body is stored as ``<label>+<sha8>``: nothing is overwritten."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from holodeck_core.errors import ConfigError, Problem
from holodeck_core.models.base import StrictModel
from holodeck_core.models.eval_run import PromptVersion
from holodeck_core.naming import slugify

KNOWN_KEYS = ("version", "author", "description", "tags")
MAX_VERSION_LENGTH = 64
KEY_PATTERN = re.compile(
    rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_VERSION_LENGTH - 1}}}(\+[a-f0-9]{{8}})?\Z"
)
"""A version label or a registered key: it becomes a file name and a Dagster partition key.
Matched with ``\\Z`` (``$`` would let ``v1\\n`` through)."""


@dataclass(frozen=True)
class Prompt:
    """A prompt body and its identity; ``text`` is what the model is sent (HoloDeck's
    instructions: a file as it is, frontmatter included; inline text as written)."""

    version: PromptVersion
    body: str
    text: str


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def inline_prompt(text: str) -> Prompt:
    digest = sha256(text)
    version = PromptVersion(
        version=f"auto-{digest[:8]}", source="inline", file_path=None, body_hash=digest
    )
    return Prompt(version=version, body=text, text=text)


def file_prompt(path: Path, display_path: str) -> Prompt:
    """Read a prompt file with python-frontmatter. Malformed frontmatter is a config error."""
    import frontmatter

    try:
        text = path.read_text(encoding="utf-8")
        post = frontmatter.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"prompt file not found: {path}", file=display_path) from None
    except Exception as exc:  # python-frontmatter surfaces YAML errors of several kinds
        raise ConfigError(
            f"malformed frontmatter: {_one_line(exc)}; fix the YAML between the '---' lines",
            file=display_path,
        ) from None
    meta: dict[str, Any] = dict(post.metadata)
    body = post.content
    digest = sha256(body)
    raw_version = meta.get("version")
    label = str(raw_version) if raw_version is not None else f"auto-{digest[:8]}"
    if not KEY_PATTERN.match(label):
        raise ConfigError(
            [
                Problem(
                    file=display_path,
                    path="version",
                    message=f"version {label!r} must be letters, digits, '.', '_' or '-', "
                    f"at most {MAX_VERSION_LENGTH} characters, starting with a letter or digit "
                    "(it becomes a Dagster partition key and a file name)",
                )
            ]
        )
    tags = meta.get("tags") or []
    if isinstance(tags, str):
        tags = [tags]
    try:
        version = PromptVersion(
            version=label,
            author=_optional_str(meta.get("author")),
            description=_optional_str(meta.get("description")),
            tags=[str(tag) for tag in tags],
            source="file",
            file_path=display_path,
            body_hash=digest,
            extra={k: v for k, v in meta.items() if k not in KNOWN_KEYS},
        )
    except ValidationError as exc:
        raise ConfigError(f"frontmatter: {_one_line(exc)}", file=display_path) from None
    return Prompt(version=version, body=body, text=text)


def _optional_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


class PromptSnapshot(StrictModel):
    """One stored prompt body. Immutable once written."""

    key: str = Field(description="Partition key: the label, or <label>+<sha8> on reuse.")
    agent: str
    prompt_version: PromptVersion
    body: str
    text: str | None = Field(
        None,
        description="What the model is sent (the file as it is); absent on snapshots "
        "registered before we sent frontmatter as HoloDeck does: their body was sent.",
    )
    registered_at: str

    def prompt(self) -> Prompt:
        return Prompt(version=self.prompt_version, body=self.body, text=self.text or self.body)


@dataclass(frozen=True)
class Registration:
    key: str
    created: bool
    warning: str | None = None


class PromptStore:
    """Snapshots of one agent's prompt bodies: ``<root>/<agent slug>/<key>.json``."""

    def __init__(self, root: Path, agent_name: str) -> None:
        self.agent_name = agent_name
        self.folder = root / slugify(agent_name)

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> PromptSnapshot | None:
        path = self._path(key) if KEY_PATTERN.match(key) else None
        if path is None or not path.is_file():
            return None
        return PromptSnapshot.model_validate_json(path.read_text(encoding="utf-8"))

    def require(self, key: str) -> PromptSnapshot:
        snapshot = self.get(key)
        if snapshot is None:
            known = ", ".join(s.key for s in self.list()) or "none yet"
            raise ConfigError(
                f"prompt version {key!r} is not registered for agent {self.agent_name!r} "
                f"(registered: {known}); run `holodeck prompts register AGENT_YAML`"
            )
        return snapshot

    def list(self) -> list[PromptSnapshot]:
        if not self.folder.is_dir():
            return []
        snapshots = [
            PromptSnapshot.model_validate_json(p.read_text(encoding="utf-8"))
            for p in self.folder.glob("*.json")
        ]
        return sorted(snapshots, key=lambda s: (s.registered_at, s.key))

    def key_for(self, prompt: Prompt) -> str | None:
        """The key under which this exact prompt (body and text sent) is already stored."""
        return self.find(prompt.version, prompt.text)

    def find(self, version: PromptVersion, text: str | None = None) -> str | None:
        """The key of the snapshot of this label with this body (and this text, if given)."""
        for key in (version.version, f"{version.version}+{version.body_hash[:8]}"):
            existing = self.get(key)
            if existing is None or existing.prompt_version.body_hash != version.body_hash:
                continue
            if text is None or existing.prompt().text == text:
                return key
        return None

    def register(self, prompt: Prompt) -> Registration:
        """Store ``prompt`` unless it is already stored. Never overwrites: when the label is
        taken by another body or text (or another process takes it first), this one gets
        ``<label>+<sha8>``."""
        existing = self.key_for(prompt)
        if existing is not None:
            return Registration(key=existing, created=False)
        label = prompt.version.version
        reused = f"{label}+{prompt.version.body_hash[:8]}"
        warning = (
            f"prompt version {label!r} of agent {self.agent_name!r} was registered before "
            f"with a different text (body or frontmatter); this one is registered as {reused!r} "
            "(bump 'version' in the frontmatter to name it yourself)"
        )
        for key in (label, reused):
            snapshot = PromptSnapshot(
                key=key,
                agent=self.agent_name,
                prompt_version=prompt.version,
                body=prompt.body,
                text=prompt.text,
                registered_at=datetime.now(UTC).isoformat(timespec="milliseconds"),
            )
            created = self._write_new(self._path(key), snapshot.model_dump_json(indent=2))
            if self.find(prompt.version, prompt.text) == key:
                return Registration(
                    key=key, created=created, warning=warning if key == reused else None
                )
        raise ConfigError(
            f"cannot register prompt version {label!r}: {self.folder} is inconsistent"
        )

    def _write_new(self, path: Path, text: str) -> bool:
        """Atomic and exclusive: a concurrent registration of the same key keeps the first.
        True when this call created the file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, path)  # fails if the key exists: never overwrite a snapshot
        except FileExistsError:
            return False
        finally:
            Path(tmp).unlink(missing_ok=True)
        return True
