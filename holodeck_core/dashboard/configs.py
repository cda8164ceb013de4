"""Configurations: what the dashboard compares (docs/dashboard.md).

A configuration is (agent, prompt version, model candidate). Every trend is one series per
configuration, a KPI tile compares a run with the previous run of its configuration, and the
Matrix page lays one agent's configurations out as a grid. Each configuration has one colour on
every chart of a page: a hue per agent, a shade per configuration of that agent.
"""

from __future__ import annotations

import colorsys
import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

COLUMNS = ["agent_name", "prompt_version", "model_candidate"]
"""The columns that name a run's configuration."""
SEPARATOR = " · "
GOLDEN_ANGLE = 137.508
"""Degrees between two agents' hues: neighbours in the agent list stay far apart."""
LIGHTNESS = (0.25, 0.72)
"""The darkest and the lightest shade of an agent's configurations, spread evenly between."""
HUE_STEP = 0.035
"""Neighbouring shades of one agent also turn its hue a little (a third of them each way)."""

Config = tuple[str, str, str]


def label(config: Iterable[Any]) -> str:
    """``acme-support · v2 · default``."""
    return SEPARATOR.join(str(part) for part in config)


def text(value: Any) -> str:
    """Outside text (an agent name, a prompt label, a candidate name) for a chart: Plotly
    reads tags and entities in names and labels, so ``<b>`` is written as text."""
    return html.escape(str(value), quote=False)


def of(row: Any) -> Config:
    """The configuration of a run (a row or a mapping with :data:`COLUMNS`)."""
    return (str(row["agent_name"]), str(row["prompt_version"]), str(row["model_candidate"]))


def series(runs: pd.DataFrame) -> Iterable[tuple[Config, pd.DataFrame]]:
    """The runs of each configuration, in configuration order (each a trend's series)."""
    for key, group in runs.groupby(COLUMNS, sort=True):
        yield (str(key[0]), str(key[1]), str(key[2])), group


def palette(configs: Iterable[Config]) -> dict[Config, str]:
    """A colour per configuration: the agents' hues apart, their configurations' shades apart."""
    chosen = sorted(set(configs))
    agents = sorted({c[0] for c in chosen})
    colours: dict[Config, str] = {}
    for a, agent in enumerate(agents):
        hue = (a * GOLDEN_ANGLE + 220) % 360 / 360
        own = [c for c in chosen if c[0] == agent]
        dark, light = LIGHTNESS
        for i, config in enumerate(own):
            lightness = dark + (light - dark) * i / max(1, len(own) - 1)
            turned = (hue + HUE_STEP * (i % 3 - 1)) % 1
            red, green, blue = colorsys.hls_to_rgb(turned, lightness, 0.65)
            colours[config] = f"rgb({red * 255:.0f}, {green * 255:.0f}, {blue * 255:.0f})"
    return colours


def translucent(colour: str, alpha: float) -> str:
    """``rgb(r, g, b)`` as ``rgba(r, g, b, alpha)`` (an interval band under its line)."""
    return colour.replace("rgb(", "rgba(").replace(")", f", {alpha})")
