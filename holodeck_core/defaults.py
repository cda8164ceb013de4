"""The one table of defaults (docs/architecture.md): what a run does when ``agent.yaml``, the
command line and ``holodeck.yaml`` say nothing. The loader's bounds, the CLI's help, the runner, the
statistics and the SQL macros of the history all read these names; none repeats a value.

No gate is the default gate: any FAIL fails the run and any ERROR is an error
(:func:`holodeck_core.runner.gates.exit_code`). Plain constants and nothing else: this module
imports nothing, so every layer may read it."""

from __future__ import annotations

# --------------------------------------------------------------------- execution.* (agent.yaml)

PARALLEL_TEST_CASES = 32
"""Cases (and model calls per endpoint) at once; the call scheduler halves it on 429."""
MAX_PARALLEL_TEST_CASES = 1000
"""The largest ``execution.parallel_test_cases`` the loader accepts."""
LLM_TIMEOUT_S = 60.0
"""Seconds per model call (``execution.llm_timeout``, ``--timeout``)."""
MAX_TOOL_TURNS = 20
"""Model calls per case turn before the case is an ERROR: HoloDeck 0.7.1's default
``openai.max_turns`` / ``claude.max_turns`` (both backends: 20)."""
MAX_TOOL_TURNS_LIMIT = 100
"""The largest ``execution.max_tool_turns`` the loader accepts."""
CLAUDE_CLI_PROCESSES = 4
"""Claude Code CLI processes at once for ``anthropic``/``ollama`` agents, whatever
``parallel_test_cases`` says: one per case turn, its memory and start-up in
docs/holodeck-fidelity.md."""
CLAUDE_TOOL_DESCRIPTION_CHARS = 200
"""The longest description of one of the agent's own tools on the Claude path: HoloDeck 0.7.1's
Claude backend cuts a longer one to this many characters, ``...`` included
(docs/holodeck-fidelity.md)."""
FILE_TIMEOUT_S = 30.0
"""Seconds per file conversion (``execution.file_timeout``)."""
DOWNLOAD_TIMEOUT_S = 30.0
"""Seconds per remote file download (``execution.download_timeout``)."""
MAX_FILE_BYTES = 50 * 1024 * 1024
"""The largest attachment accepted (``execution.max_file_mb``)."""
FILE_WORKER_STARTUP_TIMEOUT_S = 120.0
"""Seconds a file conversion worker may take to start and import markitdown."""
FILE_WORKER_MEMORY_BYTES = 4 * 1024**3
"""Address space a worker may use (``RLIMIT_AS``; ~0.6 GB once markitdown is imported): a
file that would need more fails as a file error (``MemoryError``) instead of swapping the
machine. ``HOLODECK_FILE_WORKER_MEMORY_MB`` overrides it."""
FILE_WORKER_MAX_JOBS = 200
"""Conversions one worker process runs before it is replaced by a fresh one."""
CALL_ENDPOINT = "default"
"""The call scheduler's endpoint of a call that names none."""
ANTHROPIC_MAX_TOKENS = 1024
"""``max_tokens`` of an Anthropic Messages call when the agent's model sets none (the API
requires one)."""
TOOL_TIMEOUT_S = 30.0
"""Seconds per tool call when ``execution.tool_timeout`` is unset."""
MCP_CONNECT_TIMEOUT_S = 60.0
"""Seconds an MCP server's start (connect, handshake, tool list) may take when its ``timeout``
is unset: room for ``npx -y`` to fetch a server package on its first run."""
MCP_SSE_READ_TIMEOUT_S = 300.0
"""Seconds an MCP server's SSE stream may stay silent when ``sse_read_timeout`` is unset."""
RETRIEVAL_CHUNK_SIZE = 512
"""Tokens per chunk of a vectorstore tool's documents when ``chunk_size`` is unset."""

# --------------------------------------------------------------------- metrics (agent.yaml)

JUDGED_METRIC_THRESHOLD = 0.5
"""The threshold of a ``geval``, ``rag``, ``code`` or legacy judge metric that sets none
(:data:`holodeck_core.models.evaluation.METRIC_THRESHOLDS`)."""
LEGACY_METRIC_SCALE = 5
"""The top of a legacy judge metric's scale (groundedness, relevance, …) when it sets none."""
ROUGE_VARIANT = "rougeL"
"""The ROUGE score of a ``rouge`` metric that names no variant."""

MAX_BUDGET_USD = 1_000_000.0
"""The largest budget in US dollars (``execution.budget.usd``, ``holodeck.yaml`` ``budget.*``):
above it a budget is a typo, not a limit."""
MAX_BUDGET_TOKENS = 10**12
"""The largest budget in tokens, wherever a budget is given."""
MAX_CHARS_PER_TOKEN = 16
"""A generous ceiling on the characters one token carries: a call whose reported usage is
below its request's or reply's characters over this is charged at an estimate from the text
(docs/cost.md)."""

# ------------------------------------------ model candidates (holodeck.yaml, docs/agent-yaml.md)

OWN_MODEL_CANDIDATE = "default"
"""The candidate name of the agent's own model when no empty ``models:`` entry names it."""
MAX_CANDIDATE_NAME_LENGTH = 32
"""The longest candidate name: it becomes a Dagster partition key and a journal's identity."""

# --------------------------------------------------------------------- trials (docs/cli.md)

TRIALS = 1
"""Runs of every case (``execution.trials``, ``--trials``, the ``holodeck/trials`` tag)."""
TRIALS_MIN = 1
TRIALS_MAX = 100
"""The bounds of a trial count, wherever it is given."""
REDUCER = "all"
"""How a case's trials make its status (``execution.reducer``): PASS only if every trial did."""

# --------------------------------------------------------------------- verdicts (docs/cli.md)

CONFIDENCE = 0.95
"""Of every interval the reports, the views and the checks show."""
ALPHA = 0.05
"""Significance level of paired comparisons (``evaluations.alpha``, ``--alpha``)."""
ASSUMED_PASS_RATE = 0.5
"""``holodeck plan --detect`` on a run with no variance at all (every case always passes, or
always fails): a pass/fail outcome's variance p(1 - p) is assumed at the observed pass rate,
or at this rate (its largest, 0.25) when the run passed or failed everything, never 0."""
ADJUSTMENT = "bh"
"""How the p-values of one family of verdicts are adjusted (``--adjust``): Benjamini-Hochberg."""
MATRIX_CELL_SEPARATOR = ":"
"""Between a ``holodeck matrix`` cell's prompt version and candidate (``--baseline v1:mini``)."""
MATRIX_TABLE_WIDTH = 240
"""Columns of ``holodeck matrix``'s table when stdout is no terminal (a CI log, a pipe)."""
LATENCY_QUANTILES = (0.5, 0.95)
"""The case-latency quantiles a ``holodeck matrix`` cell shows (p50, p95)."""
MAX_ERROR_SHARE = 0.5
"""A run with more than this share of its cases ERROR is an infrastructure failure
(``evaluations.max_error_share``, docs/cli.md)."""
T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157,
    2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922,
    2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831,
    2.048407, 2.045230, 2.042272,
)  # fmt: skip
"""Student's t(0.975, df) for df = 1..30: the statistics (:func:`holodeck_core.stats.t975`)
and the history's SQL macros (``holodeck_t975``, and ``holodeck_t95`` to three places) are
built from this one table."""
HISTORY_FLAKY_WINDOW = 10
"""``v_flaky_cases`` looks at the last this-many runs of each configuration (agent, prompt
version, model candidate); the table macro
``flaky_cases(n)`` takes another window (docs/history.md)."""

# ------------------------------------------------ untrusted input (docs/agent-yaml.md, limits)

MAX_TOOL_RESULT_BYTES = 1_000_000
"""A tool result (or error) longer than this, as UTF-8 JSON, is cut and marked."""
MAX_TOOL_NAME_CHARS = 200
"""A tool name the model sent is shown (and recorded) at most this long."""
MAX_TEMPLATE_CHARS = 32_768
"""The longest prompt tool template accepted: pybars compiles about 5,000 characters a second
on a busy 2-core machine (a 1 MB template took 66-220 s; docs/benchmarks.md), so at most some
7 s of compiling before the first model call."""
TEMPLATE_RENDER_S = 10.0
"""Seconds a prompt tool's template may take to render; past them the call is a tool error."""
MAX_JSON_DEPTH = 256
"""The deepest nesting of a JSON file we read (an EvalRun, retrieval records); deeper is a
clear error naming the file, never a RecursionError."""
MAX_TOOL_RESULT_DEPTH = 200
"""The deepest tool result recorded (below :data:`MAX_JSON_DEPTH`, so an EvalRun holding it
reads back); deeper is a tool error."""
MAX_TOOL_PAGES = 100
"""Pages of an MCP server's tool list read before its cursor is called endless (exit 3)."""
MAX_SERVER_TOOLS = 50_000
"""Tools one MCP server may offer."""
MAX_SCHEMA_DEPTH = 64
"""The deepest tool input schema accepted from a server."""
MAX_SOURCE_FILES = 20_000
"""Files one retrieval tool's ``source`` may name: an index holds every chunk in memory (100,000
small files peaked at 3.3 GB; docs/benchmarks.md)."""
MAX_SOURCE_FILE_BYTES = 50 * 1024 * 1024
"""The largest file of a retrieval source (a 500 MB one ran numpy out of memory)."""
MAX_SOURCE_BYTES = 256 * 1024 * 1024
"""All the files of one retrieval source together."""
MAX_SHOWN_TEXT_CHARS = 20_000
"""The dashboard shows this much of a long text (a response, an input, a tool result) and
links to the rest: a 100 MB response crashed the browser tab."""
FAILED_RUNS_SHOWN = 20
"""Orchestrated runs that failed before writing an EvalRun the dashboard's Summary lists, the
newest (``holodeck history runs`` lists as many as its ``--limit``)."""
SHOWN_LINE_CHARS = 500
"""One line of outside text (a name, an input, a reply, an error) in the console and the
Markdown reports: longer is cut with ``…``."""
REPORT_LINE_CHARS = 2_000
"""One line of ours that carries outside text (a statistics line naming flaky cases, a cost
line naming its headings) in the Markdown reports."""

MAX_TARGET_REPLY_BYTES = 16 * 1024 * 1024
"""The largest reply body read from a target speaking HTTP (``http``, ``openai_chat``,
``holodeck_serve``): a larger Content-Length is refused before the body is read, a longer
(chunked, endless) body is cut there; either is the case's ERROR (a 1.5 GB body ran the run out
of memory). Sixteen full-size tool results fit in it."""
MAX_TARGET_REDIRECTS = 5
"""Redirects a target's call follows within its own origin (scheme, host and port); one to
another origin is never followed: the target's headers and body go to its own origin only."""

REMOTE_TIMEOUT_S = 10.0
"""Seconds a remote endpoint of the history or the results (a PostgreSQL catalog, S3 or an
S3-compatible store) may take to accept a connection or answer one request
(``HOLODECK_REMOTE_TIMEOUT``): libpq's ``connect_timeout``, DuckDB's ``http_timeout``,
botocore's connect and read timeouts. An endpoint that accepts and never answers ends the
command with exit 3 (docs/agent-yaml.md)."""
REMOTE_ATTEMPTS = 2
"""Requests to a remote endpoint before it is called unreachable (DuckDB's ``http_retries``
is one less; s3fs's retries)."""

RUN_HISTORY_LOCK_TIMEOUT_S = 5.0
"""Seconds ``holodeck test`` waits for another writer's lock on the DuckDB history before it
reports the history as not updated (exit 3; the EvalRun is safe and ``holodeck history sync``
ingests it later)."""

PYTHON_TARGET_START_TIMEOUT_S = 120.0
"""Seconds a python target's host process may take to start and import the callable's module
(not counted in any call's timeout)."""

# --------------------------------------------------------------------- the loopback model server

MODEL_SERVER_PORT = 18080
"""The port of ``holodeck model-server`` in the README, of the example ``agent.yaml``'s default
endpoint and of ``holodeck demo`` (``--port`` moves it; the agents then read
``HOLODECK_MODEL_ENDPOINT``)."""
MODEL_SERVER_CUT_AFTER_EVENTS = 3
"""Events a ``cut`` fault of the loopback model server lets through before it closes a stream,
unless the rules say (``faults.cut_after_events``, a fault's ``after_events``; docs/cli.md)."""
MODEL_SERVER_STREAM_PIECE_CHARS = 16
"""The most non-blank characters of one streamed delta of the loopback model server: a reply
is cut at its words, and a longer word (or a tool call's arguments) every this many."""
MODEL_SERVER_EMBEDDING_DIMENSIONS = 1536
"""The length of the loopback model server's embeddings for a model it does not know (and no
``dimensions`` asked)."""
MODEL_SERVER_BATCH_COMPLETE_AFTER_S = 0.0
"""Seconds from a batch's submission until the loopback model server has answered all of its
requests (``batches.complete_after`` in its rules; the requests finish evenly over it)."""
MODEL_SERVER_BATCH_WINDOW_S = 24 * 3600
"""A batch's completion window, as both providers give it (its ``expires_at``): 24 hours."""
MODEL_SERVER_BATCH_MAX_REQUESTS = 50_000
"""The most requests of one batch (OpenAI's limit; Anthropic allows more)."""
MODEL_SERVER_BATCH_LIST_LIMIT = 20
"""Batches per page of ``GET /v1/batches`` and ``/v1/messages/batches`` without ``limit``."""
MODEL_SERVER_OPENAI_BATCH_LIST_MOST = 100
"""The largest ``limit`` of ``GET /v1/batches`` (OpenAI's)."""
MODEL_SERVER_ANTHROPIC_BATCH_LIST_MOST = 1000
"""The largest ``limit`` of ``GET /v1/messages/batches`` (Anthropic's)."""
MODEL_SERVER_BATCH_FAIL_STATUS = 500
"""The HTTP status of a request the rules' ``batches.fail`` makes fail, unless it says."""

# --------------------------------------------------------------------- the history (DuckLake)

HISTORY_INGEST_BATCH = 200
"""Runs per writer connection: bulk inserts pay, and the file lock is held well under 1 s."""
HISTORY_LOCK_TIMEOUT_S = 30.0
"""Seconds a writer waits for the history file's lock (``HOLODECK_HISTORY_LOCK_TIMEOUT``)."""
HISTORY_PREBUILD_EXIT_WAIT_S = 5.0
"""Seconds the exit waits for a new history's schema still being built ahead of a run (a
fraction of a second) before removing it (``history/store.py`` ``prebuild``)."""
HISTORY_SQL_MAX_ROWS = 10_000
"""Rows ``holodeck history sql`` fetches at most (``--max-rows``)."""
HISTORY_SQL_TIMEOUT_S = 60.0
"""Seconds ``holodeck history sql`` lets a query run (``--timeout``)."""
HISTORY_SQL_INTERRUPT_EVERY_S = 0.05
"""Once Ctrl-C or the timeout stopped a ``holodeck history sql`` query, DuckDB is asked to
interrupt it this often until it returns: a request made just before the statement started
would otherwise be lost."""

MAINTAIN_GRACE_S = 3600.0
"""``history maintain --grace``: a lake's snapshots and unreferenced files younger than this
are kept (a writer's commit or a read lasts seconds; an hour is the margin for a slow object
store)."""

# --------------------------------------------------------------------- numbers from outside

MAX_CALL_TOKENS = 100_000_000
"""The most tokens one model or target call may report in any usage field: a hundred times
the longest context window offered. A reply reporting more is no real count (a hostile or
broken server): the call is an error naming the field, never a number the costs, the
budgets or the history then carry (docs/history.md)."""
MAX_TOKEN_COUNT = 10**15
"""The largest token count an EvalRun may record (a case's or a run's sum of calls, each at
most :data:`MAX_CALL_TOKENS`): far inside the history's BIGINT, so a file past it is refused
by name instead of stopping ``history sync``."""

# --------------------------------------------------------------------- human labels

MAX_LABELS_FIELD_CHARS = 16 * 1024 * 1024
"""The longest field of a labels file ``holodeck labels import`` reads (the csv module's own
limit, 131,072, is below a long response in the dashboard's labelling sheet); longer is exit 2
naming the file, line and field. The sheet cuts a longer text to this, marked, so it always
reads back (docs/history.md)."""

# --------------------------------------------------------------------- the project and its pages

PROJECT_HOME_DIR = ".holodeck"
"""The project's state folder beside ``holodeck.yaml`` (prompts, journals, caches, the history)
when ``HOLODECK_HOME`` is unset."""
DASHBOARD_PORT = 8501
"""The port of ``holodeck dashboard`` (``--port``)."""

# --------------------------------------------------------------------- Dagster pages

MAX_VERSIONS_TAGGED = 5
"""Prompt versions a Dagster run's ``holodeck/prompt_version`` tag names; a larger backfill's
tag is the first and last with the count (docs/dagster.md)."""

# --------------------------------------------------------------------- batch APIs

BATCH_MODES = ("off", "auto", "on")
"""``execution.batch`` and ``holodeck test --batch``: ``off`` (every call on its own), ``auto``
(agent turns and judges through the providers' batch APIs where the path can, the rest as
always), ``on`` (``auto``, and an agent whose path cannot batch is a config error)
(docs/cost.md)."""
BATCH_MODE = "off"
"""``holodeck test``'s batch mode when neither ``--batch`` nor ``execution.batch`` says."""
BATCH_MODE_SCHEDULED = "auto"
"""The batch mode of a scheduled (nightly) or backfill run when neither its ``holodeck/batch``
run tag, ``execution.batch`` nor the agent's ``batch:`` in holodeck.yaml says (docs/dagster.md):
nobody waits on those answers, so they go at the batch price."""
BATCH_MAX_WAIT_S = 24 * 3600.0
"""The longest a run waits on its batches in all (``execution.batch_max_wait``), the
providers' own completion window; what is still pending then is cancelled and sent as
ordinary calls."""
BATCH_GATHER_S = 0.2
"""A round is sent once no new request joined it for this long (cases reach the same step of
the tool loop within a few milliseconds of each other)."""
BATCH_GATHER_MAX_S = 2.0
"""A round is sent at the latest this long after its first request, however many still join."""
BATCH_MAX_REQUESTS = 10_000
"""Requests in one batch at most (both providers take more; a round larger is split)."""
BATCH_POLL_FIRST_S = 0.1
"""The first pause before a submitted batch is polled; each next pause is 1.5 times longer."""
BATCH_POLL_MAX_S = 30.0
"""The longest pause between two polls of one batch."""
BATCH_RESUBMITS = 2
"""How many more batches a request a batch failed or expired is sent in before it is sent as
an ordinary call."""
BATCH_PROGRESS_EVERY_S = 30.0
"""While batches are pending, a progress line at most this often (besides one per batch
submitted and done)."""
BATCH_CANCEL_S = 10.0
"""How long a stopping run (Ctrl-C) waits for the provider to take each batch's cancel."""
# --------------------------------------------------------------------- dashboard configurations

DASHBOARD_AGE_STEP_S = 60
"""A page that says how old a run is ("2 h ago") is rendered again at least this often, even
while the history is unchanged (docs/dashboard.md)."""
# --------------------------------------------------------------------- the run's own overhead

RUN_GC_YOUNG_THRESHOLD = 10_000
"""The cyclic collector's first-generation threshold while a suite's cases run (Python's
default is 700): a run at C = 100 allocates millions of short-lived objects, and each young
collection also walks the objects of the 100 calls in flight. Restored when the run ends
(docs/benchmarks.md)."""
REDACTION_KEYS_KEPT = 100_000
"""Scrubbed map keys (case ids key the fingerprints) a set of secrets' scrubber remembers at
most (``holodeck_core/redaction.py``): a long-lived process (a Dagster worker) runs many
suites' ids through it."""
