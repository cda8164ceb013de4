"""``--target`` of ``holodeck test`` and ``holodeck validate`` (docs/targets.md), and how a
target is shown (redacted)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from holodeck_core.models.target import Target


def add_target_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target",
        metavar="YAML",
        help="evaluate the agent where it runs: a YAML file holding a target, or one inline, "
        "e.g. '{holodeck_serve: {url: \"http://127.0.0.1:8000\"}}' (docs/targets.md; "
        "wins over holodeck.yaml's)",
    )


def describe_target(target: Target) -> str:
    """``http POST https://host/chat (limit 8, timeout 30 s)``, credentials scrubbed."""
    from holodeck_core.redaction import redact_text

    spec = target.spec
    settings = [
        f"{name} {value}{' s' if name == 'timeout' else ''}"
        for name in ("limit", "timeout", "attempts")
        if (value := getattr(spec, name)) is not None
    ]
    headers = sorted(getattr(spec, "headers", {}) or {})
    if headers:
        settings.append(f"headers {', '.join(headers)} (secret)")
    return redact_text(target.label) + (f" ({'; '.join(settings)})" if settings else "")
