"""Resources: the project (where state lives), provider keys (from the environment) and the
run history."""

from pathlib import Path

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_core.models import ProviderEnum


class HoloDeckProject(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The holodeck project: ``holodeck.yaml`` and ``HOLODECK_HOME`` (DESIGN §6.3)."""

    root: str

    def project(self) -> Project:
        return Project.discover(Path(self.root))


class ModelProviderKeys(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Provider API keys for agents whose ``agent.yaml`` sets none. Bound to ``dg.EnvVar``s
    in ``definitions.py``; a key given in ``agent.yaml`` always wins."""

    openai_api_key: str | None = None
    azure_openai_api_key: str | None = None
    anthropic_api_key: str | None = None

    def fallbacks(self) -> dict[ProviderEnum, str]:
        keys = {
            ProviderEnum.OPENAI: self.openai_api_key,
            ProviderEnum.AZURE_OPENAI: self.azure_openai_api_key,
            ProviderEnum.ANTHROPIC: self.anthropic_api_key,
        }
        return {provider: key for provider, key in keys.items() if key}


class RunHistory(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The DuckDB history. Writers hold the file for one short transaction (DESIGN §3.6)."""

    db_path: str

    @property
    def path(self) -> Path:
        return Path(self.db_path)
