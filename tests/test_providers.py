"""The one provider table (docs/architecture.md): every provider the schema accepts has a
row, an unknown one is a config error naming the field, and what reads the table (the
client factory, the retrieval tools, the judges, the Dagster key resource) follows it."""

from __future__ import annotations

from importlib import import_module

import pytest

from holodeck_core.errors import ConfigError
from holodeck_core.models import LLMProvider, ProviderEnum
from holodeck_core.providers.factory import api_key_for, make_client
from holodeck_core.providers.table import PROVIDERS, provider_spec


def test_every_provider_of_the_schema_has_a_row() -> None:
    assert set(PROVIDERS) == set(ProviderEnum)
    for provider, spec in PROVIDERS.items():
        assert spec.provider is provider
        for path in {spec.client_class(), spec.client_class(agent=True)}:
            module, _, name = path.partition(":")
            client = getattr(import_module(module), name)
            assert callable(client.complete) and callable(client.aclose), path


@pytest.mark.parametrize("name", ["mistral", "", "OPENAI", "google"])
def test_an_unknown_provider_is_a_config_error_never_openai(name: str) -> None:
    with pytest.raises(ConfigError) as caught:
        provider_spec(name, where="evaluations.model")
    message = str(caught.value)
    assert message.startswith("evaluations.model.provider: ")
    assert all(p.value in message for p in ProviderEnum)


def test_the_key_variable_and_the_endpoint_rule_come_from_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for provider, spec in PROVIDERS.items():
        model = LLMProvider(provider=provider, name="m", endpoint="http://127.0.0.1:9/v1")
        if spec.key_variable is None:
            assert api_key_for(model)  # a local server wants none
            continue
        monkeypatch.delenv(spec.key_variable, raising=False)
        with pytest.raises(ConfigError, match=spec.key_variable):
            api_key_for(model, where="judge model")
        monkeypatch.setenv(spec.key_variable, "k-from-env")
        assert api_key_for(model) == "k-from-env"
    azure = LLMProvider(provider=ProviderEnum.AZURE_OPENAI, name="d", api_key="k")
    with pytest.raises(ConfigError, match=r"model\.endpoint is required for provider azure"):
        make_client(azure)


def test_the_dagster_key_resource_has_a_field_per_keyed_provider() -> None:
    """A provider with a key variable added to the table but not to the resource fails here,
    instead of its key silently never reaching Dagster's workers."""
    from holodeck_pipelines.resources import ModelProviderKeys, key_fields, key_variables

    keyed = {p for p, spec in PROVIDERS.items() if spec.key_variable}
    assert set(key_fields()) == keyed
    assert set(key_variables()) <= set(ModelProviderKeys.model_fields)
    keys = ModelProviderKeys(**{field: f"key-{field}" for field in key_variables()})
    assert set(keys.fallbacks()) == keyed


def test_retrieval_embeddings_follow_the_table() -> None:
    from holodeck_core.models import VectorstoreTool
    from holodeck_core.tools.retrieval.settings import embedding_spec

    tool = VectorstoreTool.model_validate(
        {"name": "kb", "type": "vectorstore", "description": "d", "source": "docs"}
    )
    for provider, spec in PROVIDERS.items():
        model = LLMProvider(provider=provider, name="m")
        if not spec.embeddings:
            with pytest.raises(ConfigError, match="has no embeddings"):
                embedding_spec(model, None, tool, where="tools[0] (kb)")
            continue
        chosen = embedding_spec(model, None, tool, where="tools[0] (kb)")
        assert chosen.model == spec.default_embedding_model
