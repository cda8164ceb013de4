"""The loopback model server: a scripted fake of the OpenAI and Anthropic HTTP APIs.

It is a real aiohttp HTTP server, bound to 127.0.0.1 only, that the official ``openai`` and
``anthropic`` SDK clients talk to unchanged (``base_url`` pointing at it). Tests, benchmarks and
the demo all use it (docs/cli.md). Run it with ``holodeck model-server --port P --script
RULES.yaml [--latency S]`` or in-process with :func:`holodeck_core.testing.run_model_server`.

Routes
------
- ``POST /v1/chat/completions`` (also ``/chat/completions``, ``/openai/v1/chat/completions``
  and Azure's ``/openai/deployments/{deployment}/chat/completions?api-version=…``)
- ``POST /v1/responses`` (also ``/responses``, ``/openai/responses``, ``/openai/v1/responses``);
  ``previous_response_id`` continues a stored conversation
- ``POST /v1/messages`` (also ``/messages``): Anthropic Messages
- ``POST /v1/embeddings`` (also ``/embeddings``, ``/openai/v1/embeddings``, Azure's
  ``/openai/deployments/{deployment}/embeddings``; Ollama's native ``/api/embed``, answered in
  its shape): lexical vectors, see :mod:`.embeddings`
- ``GET /v1/models``, ``GET /v1/models/{id}``: a small list both SDKs can parse
- OpenAI's batches (:mod:`.batch_openai`): ``POST /v1/files`` (``purpose=batch``),
  ``GET /v1/files/{id}``, ``GET /v1/files/{id}/content``, ``DELETE /v1/files/{id}``,
  ``POST /v1/batches``, ``GET /v1/batches[/{id}]``, ``POST /v1/batches/{id}/cancel``
- Anthropic's Message Batches (:mod:`.batch_anthropic`): ``POST /v1/messages/batches``,
  ``GET /v1/messages/batches[/{id}]``, ``GET /v1/messages/batches/{id}/results``,
  ``POST /v1/messages/batches/{id}/cancel``, ``DELETE /v1/messages/batches/{id}``
- ``GET /_stats``, ``GET /_requests`` (every model request: route, path, query if
  any, JSON body, ``streamed: true`` if answered as a stream),
  ``POST /_reset``, ``GET /_health``

Streaming: ``stream: true`` on the chat, responses and messages routes answers
``text/event-stream`` (:mod:`.streaming`): Chat Completions chunks (``delta.content`` pieces,
``delta.tool_calls`` with index, id and name, then argument pieces; the usage in a last chunk
with ``choices: []`` when ``stream_options: {include_usage: true}``; ``data: [DONE]``), the
Responses API's typed events (``response.created`` … ``response.completed`` with the usage,
numbered by ``sequence_number``), Anthropic's ``message_start`` (input tokens), ``ping``,
``content_block_start``/``_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``)
/``_stop``, ``message_delta`` (stop reason, output tokens) and ``message_stop``. Text and
arguments go out in pieces (at words, each of at most ``MODEL_SERVER_STREAM_PIECE_CHARS``
non-blank characters), and the message an SDK accumulates equals the non-streamed answer of the
same call. Logprobs ride on the first text delta.

Rules file
----------
::

    default: {reply: "I don't know."}          # a rule without match; a plain string is a reply
    faults:                                      # optional, for every model call
      rate: {"429": 0.2, "500": 0.1}             # kind -> probability per call (sum <= 1)
      first: {"503": 1}                          # kind -> count: first calls of each request key
      retry_after: 1                             # seconds, Retry-After header of a 429
      seed: 7                                    # rate faults are reproducible per seed
      slow_seconds: 30                           # how long a `slow` fault waits
      cut_after_events: 3                        # events a `cut` fault lets through
    seed: 0                                      # seeds the choice among a rule's `replies`
    rules:                                       # first matching rule wins, else `default`
      - name: weather                            # optional; the rule's label in /_stats
        match:                                   # all optional, all must hold
          user: "weather in (\\w+)"              # re.search in the last user message text
          system: "forecaster"                   # re.search in the system prompt
          model: "^gpt-4o$"                      # re.search in the request's model name
          route: chat                            # chat | messages | responses | embeddings
          tool_result: false                     # does the last message carry a tool result?
          nth: 1                                 # only the Nth call (1-based) of the request key
        tool_calls: [{name: get_weather, arguments: {city: "$1"}}]  # or arguments_raw: "{bad"
        reply: "It is {tool_result} in $1."      # or json: {...} (serialized as the content)
        thinking: "Let me see."                  # messages route: a thinking block first
        replies: [{p: 0.6, reply: "Paris"}, {p: 0.4, reply: "Lyon"}]  # one at random (seed)
        logprobs: true                           # or {"8": 0.7, "7": 0.2, "9": 0.1}
        latency: 0.2                             # seconds, added to --latency
        fault: {kind: "429", first: 2}           # or rate: 0.1, or neither (= every call)
        # fault: {kind: cut, after_events: 3}    # a stream closed after 3 events
        usage: {prompt_tokens: 0, completion_tokens: 0}  # reported instead of counted
    batches:                                     # optional, read when a batch is submitted
      complete_after: 2                          # seconds until all requests are answered
      expire_after: 1                            # seconds: then the batch ends expired
      fail: {custom_ids: [r3], rate: 0.1, status: 500, message: "…"}  # requests that fail

Semantics:

- **Request key** = first 16 hex digits of ``sha256(route + "\\n" + last user message text)``
  (see :func:`request_key`); ``route`` is ``chat`` (also for Azure), ``messages`` or
  ``responses``. Calls are numbered per request key from 1 (reset by ``/_reset``); ``nth``,
  ``fault.first`` and the rate generator use that number, so a client's retries and the later
  turns of a tool loop (same last user message) count as calls 2, 3, … of the same key.
- **Last user message**: chat: the last ``user`` message; messages: the last ``user`` message
  that is not only ``tool_result`` blocks; responses: the last ``user`` input item (earlier turns
  come from ``previous_response_id``). Its text joins the text parts of the content.
- **Templates** in ``reply``, in the string values of ``json`` and of tool-call ``arguments``:
  ``$1``..``$9`` are the groups of the ``user`` regex (empty if absent), ``{tool_result}`` is the
  text of the conversation's last tool result, ``{tool_results}`` all results of the last batch
  of tool results joined by newlines. ``arguments_raw`` is sent verbatim (no templates); on the
  messages route a raw string that is not a JSON object is sent as the ``tool_use.input`` string.
- **What a rule answers**: tool calls and a reply/json → the tool calls while the last message
  carries no tool result, the reply once it does (one rule scripts a whole round trip); tool
  calls alone → tool calls on every call (a model that never stops calling tools); a reply
  alone → the reply; neither (e.g. a rule that only injects a fault) → the ``default`` reply.
- **Random replies**: ``replies`` answers ``replies[i].reply`` with probability ``p`` (the rest,
  if the probabilities add up to less than 1, goes to ``reply``), drawn from
  ``sha256(seed, scope|replies, request key, call number)``: reproducible for a seed, different
  for each call of a key (so K trials of a case draw K times), and another ``seed`` draws anew.
- **Faults** (rule fault first, then global ``first``, then global ``rate``): ``429`` with a
  ``Retry-After`` header, ``500``/``503`` with the protocol's error body (OpenAI
  ``{"error": {"message", "type", "code", "param"}}``, Anthropic
  ``{"type": "error", "error": {"type", "message"}}``), ``drop`` closes the connection without
  a response, ``malformed`` answers 200 with a truncated (non-JSON) ``application/json`` body
  (the SDKs raise ``json.JSONDecodeError``), ``slow`` waits ``slow_seconds`` and then answers,
  ``cut`` closes the connection mid-answer: a stream after ``after_events`` events (default
  ``faults.cut_after_events``; never its last event, so ``[DONE]``, ``response.completed`` or
  ``message_stop`` is missing), a non-streamed answer after half of its declared body (the SDKs
  raise a connection error). The other faults come before a stream starts, as errors do.
  Latency (``--latency`` + the rule's ``latency``) is applied before every answer, faults
  included. A rate fault is decided by ``sha256(seed, scope, request key, call number)``, so the
  same calls fault the same way in every run, whatever the concurrency.
- **Usage**: tokens are whitespace-separated words: prompt = all text of the request (system,
  messages, tool calls and results), completion = the reply (or tool names and arguments) and
  the thinking. A rule's ``usage`` reports its counts instead (either or both), as a server
  that under-reports.
- **Logprobs** (chat: request ``logprobs: true`` [+ ``top_logprobs``]; responses: ``include``
  ``message.output_text.logprobs``) are given when the rule says ``logprobs``. A number token
  gets probability 0.78 and its neighbours (n±1: 0.08, n±2: 0.02, …) as ``top_logprobs``, so a
  judge reading the score distribution of "8" sees "7" and "9"; a mapping sets the distribution
  of the first token found in it. Other tokens get probability 0.99 and only themselves.

- **Batches** (:mod:`.batches`): a background task on the server's loop answers each request
  of a batch as its synchronous route would (the same rules, call numbering per request key,
  tool calls and usage), the requests finishing evenly over ``batches.complete_after``
  seconds (default 0). With ``expire_after`` below it, the requests not answered by then are
  expired and the batch ends ``expired``; a cancel ends it ``cancelled`` the same way.
  ``fail`` makes the named ``custom_ids`` and a seeded fraction ``rate`` of the others fail
  with ``status`` and ``message`` (the protocol's error body); so does a rule's HTTP fault
  (400/401/429/500/503) and a body the synchronous route refuses. Connection faults, latency
  and ``stream`` do not apply in a batch.

``GET /_stats``::

    {"total_calls": 7,                       # model calls (bad requests are not counted here)
     "streamed": 2,                          # of which answered as a stream
     "by_route": {"chat": 5, "messages": 2},
     "by_path": {"/v1/chat/completions": 5, "/v1/messages": 2},
     "by_rule": {"weather": 2, "1": 3, "default": 2},   # rule name, else index, else "default"
     "by_key": {"3f2a…16 hex": 2, …},        # calls per request key
     "faults": {"429": 2, "drop": 1},        # faults injected per kind
     "peak_concurrency": 5, "in_flight": 0, "bad_requests": 0,
     "batches": {"submitted": 2, "completed": 1, "failed": 0, "cancelled": 0, "expired": 1,
                 "requests": {"submitted": 9, "succeeded": 6, "errored": 1,
                              "cancelled": 0, "expired": 2},
                 "by_route": {"chat": 4, "messages": 5}}}

Batch requests are counted under ``batches`` only, never in the synchronous counters above.

The package's modules follow a request through the server: :mod:`.requests` parses the three
protocols into a :class:`~.requests.Conversation`, :mod:`.planning` decides the answer and the
fault from the rules, :mod:`.responses` writes the protocol's body (:mod:`.streaming` its
events), :mod:`.state` holds the counters, :mod:`.app` is the aiohttp application,
:mod:`.inprocess` runs it in a background thread (``holodeck model-server`` is
:mod:`holodeck_core.cli.model_server`).
"""

from holodeck_core.testing.server.app import LOOPBACK_HOST, app_state, create_app
from holodeck_core.testing.server.inprocess import ModelServer, run_model_server
from holodeck_core.testing.server.requests import count_tokens, request_key
from holodeck_core.testing.server.state import ServerState, Stats

__all__ = [
    "LOOPBACK_HOST",
    "ModelServer",
    "ServerState",
    "Stats",
    "app_state",
    "count_tokens",
    "create_app",
    "request_key",
    "run_model_server",
]
