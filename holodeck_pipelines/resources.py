"""Resources: the project (where state lives), provider keys (from the environment) and the
run history."""

from pathlib import Path

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_core.history.lake import Lake
from holodeck_core.history.store import History
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
    """The run history: the DuckDB file, whose writers hold it for one short transaction
    (DESIGN §3.6), or a lake (``lake_url``, DESIGN §7.10), whose writers never wait."""

    db_path: str
    lake_url: str | None = None

    @property
    def path(self) -> History:
        return Lake(self.lake_url) if self.lake_url else Path(self.db_path)
