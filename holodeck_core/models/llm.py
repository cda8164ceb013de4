"""The model an agent (or a judge) talks to: HoloDeck's ``LLMProvider``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from holodeck_core.models.base import Secret, StrictModel


class ProviderEnum(StrEnum):
    OPENAI = "openai"
    AZURE_OPENAI = "azure_openai"
    ANTHROPIC = "anthropic"
    OLLAMA = "ollama"


class AuthProvider(StrEnum):
    API_KEY = "api_key"
    OAUTH_TOKEN = "oauth_token"
    BEDROCK = "bedrock"
    VERTEX = "vertex"
    FOUNDRY = "foundry"
    CUSTOM = "custom"


class LLMProvider(StrictModel):
    provider: ProviderEnum
    name: str = Field(min_length=1, description="Model or deployment name.")
    temperature: float | None = Field(0.3, ge=0.0, le=2.0)
    max_tokens: int | None = Field(1000, gt=0)
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    endpoint: str | None = Field(None, description="Base URL of the provider's API.")
    api_key: Secret | None = None
    api_version: str | None = None
    auth_provider: AuthProvider | None = None

    def fingerprint_fields(self) -> dict[str, object]:
        """The model identity for fingerprints: everything but the endpoint and the key."""
        return self.model_dump(mode="json", exclude={"endpoint", "api_key"})
