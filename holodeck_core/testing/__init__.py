"""The loopback model server used by tests, benchmarks and the demo (docs/cli.md).

>>> from holodeck_core.testing import run_model_server
>>> with run_model_server({"rules": [{"match": {"user": "hi"}, "reply": "hello"}]}) as server:
...     server.openai_base_url  # doctest: +SKIP
'http://127.0.0.1:PORT/v1'

The rules format and the ``/_stats`` shape are documented in :mod:`holodeck_core.testing.server`.
"""

from holodeck_core.testing.rules import (
    Action,
    FaultSpec,
    GlobalFaults,
    Match,
    Rule,
    Rules,
    RulesError,
    ToolCallSpec,
)
from holodeck_core.testing.rules_loading import RulesInput, coerce_rules, load_rules, parse_rules
from holodeck_core.testing.server import (
    LOOPBACK_HOST,
    ModelServer,
    Stats,
    count_tokens,
    create_app,
    request_key,
    run_model_server,
)

__all__ = [
    "LOOPBACK_HOST",
    "Action",
    "FaultSpec",
    "GlobalFaults",
    "Match",
    "ModelServer",
    "Rule",
    "Rules",
    "RulesError",
    "RulesInput",
    "Stats",
    "ToolCallSpec",
    "coerce_rules",
    "count_tokens",
    "create_app",
    "load_rules",
    "parse_rules",
    "request_key",
    "run_model_server",
]
