"""Resources: the project (where state lives), provider keys (from the environment) and the
run history."""

from pathlib import Path

import dagster as dg

from holodeck_core.config.project import Project
from holodeck_core.engine import History, resolve_history
from holodeck_core.engine.launch import provider_key_variables
from holodeck_core.models import ProviderEnum


class HoloDeckProject(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The holodeck project: ``holodeck.yaml`` and ``HOLODECK_HOME`` (docs/cli.md)."""

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
        """The keys given, by provider (a field per keyed provider of the provider table)."""
        keys = {provider: getattr(self, field) for provider, field in key_fields().items()}
        return {provider: key for provider, key in keys.items() if key}


def key_fields() -> dict[ProviderEnum, str]:
    """The field of :class:`ModelProviderKeys` holding each keyed provider's key."""
    return {provider: f"{provider.value}_api_key" for provider in provider_key_variables()}


def key_variables() -> dict[str, str]:
    """Each field of :class:`ModelProviderKeys` and the environment variable it is bound to."""
    variables = provider_key_variables()
    return {field: variables[provider] for provider, field in key_fields().items()}


class RunHistory(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The run history: the DuckDB file, whose writers hold it for one short transaction
    (docs/architecture.md), or a lake (``lake_url``, docs/history.md), whose writers never wait."""

    db_path: str
    lake_url: str | None = None

    @property
    def path(self) -> History:
        return resolve_history(db=self.db_path, lake=self.lake_url)
