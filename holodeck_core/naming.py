"""Names shared by the CLI and the pipelines (docs/architecture.md)."""

from __future__ import annotations

import hashlib
import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
MAX_SLUG_LENGTH = 64
"""Slugs become folder and file names (``results/<slug>/``, ``journal/<slug>/``): kept far
below the 255-byte limit of a file name."""


def slugify(name: str) -> str:
    """Lowercase ASCII, runs of ``[^a-z0-9]`` become ``-``, trimmed: ``Customer Support!`` →
    ``customer-support``. Used for results folders and file names.

    Never empty for a non-empty name and at most :data:`MAX_SLUG_LENGTH` characters:
    non-ASCII letters are transliterated (``客服助手`` → ``ke-fu-zhu-shou``); a name with no
    letter or digit left (``🤖``, ``...``) gets a hash of itself (``n-3f2a9c01``); a long slug
    is cut and ends with a hash of the full name, so different names stay different."""
    from text_unidecode import unidecode

    slug = _NON_ALNUM.sub("-", unidecode(name).lower()).strip("-")
    if not name or (slug and len(slug) <= MAX_SLUG_LENGTH):
        return slug
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    if not slug:
        return f"n-{digest}"
    return f"{slug[: MAX_SLUG_LENGTH - 9].rstrip('-')}-{digest}"


def dagster_name(name: str) -> str:
    """The slug with ``-`` → ``_``: a valid Dagster group, asset-key prefix and check name."""
    return slugify(name).replace("-", "_")


def partitions_def_name(agent_name: str) -> str:
    return f"{dagster_name(agent_name)}_prompt_versions"


def job_name(agent_name: str) -> str:
    """The agent's Dagster job, capitalized: ``Geo_agent_eval``. The UI's asset graph launches
    the first job (by name) that holds every selected asset, and Dagster's implicit
    ``__ASSET_JOB`` sorts before any lower-case name; a capital or a digit sorts before it, so
    a materialization from the graph runs as the agent's job (docs/dagster.md)."""
    name = dagster_name(agent_name)
    return f"{name[:1].upper()}{name[1:]}_eval"
