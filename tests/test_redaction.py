"""Canary secrets planted in every place docs/architecture.md lists (the console, logs,
EvalRuns, the history, Dagster's metadata) never survive redaction."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from holodeck_core.config.loader import load_agent
from holodeck_core.models import EvalRun
from holodeck_core.redaction import redact, redact_argv, redact_text, register_secret
from tests.test_models import make_run

CANARIES = {
    "API_KEY": "sk-canary-apikey-0001",
    "MCP_ENV": "canary-mcp-env-0002",
    "HEADER": "canary-header-0003",
    "URL_PASS": "canary-urlpass-0004",
    "ARGV": "canary-argv-0005",
    "VAR_TOKEN": "canary-var-token-0006",
    "DB_CONN": "canary-conn-0007",
    "OPENSEARCH_PASSWORD": "canary-os-password-0008",
}


def test_canaries_never_reach_a_redacted_eval_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in CANARIES.items():
        monkeypatch.setenv(f"CANARY_{name}", value)
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text(
        textwrap.dedent("""\
        name: canary
        description: "uses token ${CANARY_VAR_TOKEN} in free text"
        model:
          provider: openai
          name: gpt-4o-mini
          api_key: ${CANARY_API_KEY}
          endpoint: https://user:${CANARY_URL_PASS}@llm.example/v1
        instructions: {inline: "Be brief."}
        tools:
          - type: mcp
            name: mem
            description: memory
            command: npx
            args: ["--api-key=${CANARY_ARGV}", "server"]
            env: {SOME_SETTING: "${CANARY_MCP_ENV}"}
            headers: {X-Custom: "${CANARY_HEADER}"}
          - type: hierarchical_document
            name: docs
            description: docs
            source: agent.yaml
            database: {provider: qdrant, connection_string: "${CANARY_DB_CONN}"}
            keyword_index: {provider: opensearch, password: "${CANARY_OPENSEARCH_PASSWORD}"}
        test_cases:
          - input: "q"
        """)
    )
    loaded = load_agent(agent_file)
    run = make_run()
    data = json.loads(run.to_json())
    data["metadata"]["agent_config"] = loaded.agent.model_dump(mode="json")
    data["metadata"]["agent_config"]["name"] = "demo"
    data["metadata"]["cli_args"] = ["test", "--api-key", CANARIES["ARGV"], "--token=abc12345"]
    data["report"]["results"][0]["errors"] = [
        f"upstream said: Authorization: Bearer {CANARIES['API_KEY']}",
        f"GET https://bob:{CANARIES['URL_PASS']}@host/x failed",
    ]
    data["report"]["results"][0]["agent_response"] = f"the token is {CANARIES['VAR_TOKEN']}"
    run = EvalRun.model_validate(data)

    redacted = redact(run)
    text = redacted.to_json()
    assert isinstance(redacted, EvalRun)
    for value in [*CANARIES.values(), "abc12345"]:
        assert value not in text, value
    config = json.loads(text)["metadata"]["agent_config"]
    assert config["model"]["api_key"] == "***"
    assert config["model"]["endpoint"] == "https://user:***@llm.example/v1"
    assert config["tools"][0]["env"] == {"SOME_SETTING": "***"}
    assert config["tools"][0]["args"] == ["--api-key=***", "server"]
    assert json.loads(text)["metadata"]["cli_args"][:3] == ["test", "--api-key", "***"]


def test_redaction_keeps_ordinary_values() -> None:
    data = {
        "token_usage": {"prompt_tokens": 3, "total_tokens": 5},
        "max_tokens": 100,
        "auth_provider": "oauth_token",
        "tags": ["a", "b"],
        "password": None,
    }
    assert redact(data) == data


def test_short_values_are_not_registered_but_patterns_still_apply() -> None:
    register_secret("short")
    assert redact_text("a short note") == "a short note"
    assert redact_text("postgres://u:pw@db/x") == "postgres://u:***@db/x"
    assert redact_argv(["--password", "hunter22", "--name", "x"]) == [
        "--password",
        "***",
        "--name",
        "x",
    ]


def test_a_map_keyed_by_a_secret_looking_id_keeps_its_numbers() -> None:
    """A case named ``secret`` or ``token`` keys maps of counts and prices: its text is
    masked, its numbers stay numbers (stage data and EvalRuns still validate)."""
    data = {"cases": {"secret": {"calls": 3, "usd": 0.25, "ok": True, "note": "sk-live-123"}}}
    assert redact(data) == {
        "cases": {"secret": {"calls": 3, "usd": 0.25, "ok": True, "note": "***"}}
    }


QUICK_SECRET = "Zq9canaryquick0009xy"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"the key {QUICK_SECRET} in prose", "in prose"),  # the whole secret
        (f"echoed {QUICK_SECRET[:11]}… by a provider", "by a provider"),  # a piece of it
        (f"{QUICK_SECRET}", ""),  # nothing but the secret
        ("header AUTHORIZATION: BEARER abcdefgh12345678", "AUTHORIZATION: BEARER ***"),
        ("see https://ops:hunter2pass@db.internal/x", "https://ops:***@"),
        ("https://h/p?sig=0a1b2c3d4e5f", "?sig=***"),
        ("run tool --api-token s3cr3tvalue99", "--api-token ***"),
        ("RUN --API-KEY=s3cr3tvalue99 now", "--API-KEY=***"),
        ("dsn postgres://app:pw:hunter2pass@db:5432/x", "postgres://app:***@db"),
    ],
)
def test_a_text_with_one_trace_of_a_secret_is_redacted_and_a_plain_one_kept(
    text: str, kept: str
) -> None:
    """Each kind of trace alone (a registered secret or a piece of it, a bearer token in any
    case, URL credentials, a signed query, an argv flag) is found: the scan that lets most of
    a run's texts through untouched (docs/benchmarks.md) misses none of them."""
    register_secret(QUICK_SECRET)
    redacted = redact_text(text)
    assert QUICK_SECRET[:11] not in redacted and "hunter2pass" not in redacted
    assert "abcdefgh12345678" not in redacted and "0a1b2c3d4e5f" not in redacted
    assert "s3cr3tvalue99" not in redacted and kept in redacted
    plain = "an answer of 42 words, nothing to hide; case 7 passed"
    assert redact_text(plain) is plain
