-- The history's tables (docs/history.md): one run's rows (eval_runs ... run_costs, filled from
-- its EvalRun files), and what only the history holds (failed_runs, human_labels,
-- budget_ledger: `holodeck history rebuild` carries them over). A DuckLake gets the same
-- columns without keys or CHECK constraints (holodeck_core/history/ducklake.py).

CREATE TABLE schema_version (
    version     INTEGER PRIMARY KEY,
    description VARCHAR NOT NULL,
    applied_at  TIMESTAMP NOT NULL DEFAULT (now()::TIMESTAMP)
);

CREATE TABLE eval_runs (
    run_id             VARCHAR PRIMARY KEY,
    agent_name         VARCHAR NOT NULL,
    agent_slug         VARCHAR NOT NULL,
    prompt_version     VARCHAR NOT NULL,
    prompt_label       VARCHAR NOT NULL,
    prompt_body_hash   VARCHAR,
    prompt_source      VARCHAR,
    model_provider     VARCHAR,
    model_name         VARCHAR,
    model_candidate    VARCHAR NOT NULL,
    model_fingerprint  VARCHAR,
    judge_model        VARCHAR,
    trigger            VARCHAR,
    dagster_run_id     VARCHAR,
    partition_key      VARCHAR,
    started_at         TIMESTAMP,
    finished_at        TIMESTAMP NOT NULL,
    wall_time_ms       BIGINT,
    total_duration_ms  BIGINT,
    total_tests        INTEGER NOT NULL,
    passed             INTEGER NOT NULL,
    failed             INTEGER NOT NULL,
    errored            INTEGER NOT NULL,
    pass_rate          DOUBLE NOT NULL,
    weighted_pass_rate DOUBLE,
    prompt_tokens      BIGINT,
    completion_tokens  BIGINT,
    total_tokens       BIGINT,
    cost_usd           DOUBLE,
    git_commit         VARCHAR,
    holodeck_version   VARCHAR,
    provenance         JSON,
    cli_args           VARCHAR[],
    config_hash        VARCHAR,
    dataset_hash       VARCHAR,
    source_path        VARCHAR,
    file_sha256        VARCHAR,
    ingested_at        TIMESTAMP NOT NULL,
    max_error_share    DOUBLE,
    CHECK (passed + failed + errored = total_tests),
    CHECK (pass_rate BETWEEN 0 AND 1)
);

CREATE TABLE test_results (
    run_id            VARCHAR NOT NULL,
    case_id           VARCHAR NOT NULL,
    case_index        INTEGER NOT NULL,
    test_name         VARCHAR,
    status            VARCHAR NOT NULL CHECK (status IN ('PASS', 'FAIL', 'ERROR')),
    passed            BOOLEAN NOT NULL,
    test_input        VARCHAR,
    agent_response    VARCHAR,
    ground_truth      VARCHAR,
    execution_time_ms BIGINT,
    errors            VARCHAR[],
    tool_calls        VARCHAR[],
    tools_matched     BOOLEAN,
    turn_count        INTEGER,
    prompt_tokens     BIGINT,
    completion_tokens BIGINT,
    total_tokens      BIGINT,
    cost_usd          DOUBLE,
    weight            DOUBLE,
    tags              VARCHAR[],
    metadata          JSON,
    executed_at       TIMESTAMP,
    PRIMARY KEY (run_id, case_id)
);

CREATE TABLE metric_results (
    run_id             VARCHAR NOT NULL,
    case_id            VARCHAR NOT NULL,
    turn_index         INTEGER,
    metric_index       INTEGER NOT NULL,
    metric_name        VARCHAR NOT NULL,
    kind               VARCHAR NOT NULL,
    score              DOUBLE,
    raw_score          DOUBLE,
    threshold          DOUBLE,
    direction          VARCHAR NOT NULL,
    unit               VARCHAR,
    passed             BOOLEAN,
    error              VARCHAR,
    judge_model        VARCHAR,
    retry_count        INTEGER,
    evaluation_time_ms BIGINT,
    scale              VARCHAR,
    fail_on_error      BOOLEAN,
    reasoning          VARCHAR,
    details            JSON
);

CREATE TABLE tool_invocations (
    run_id      VARCHAR NOT NULL,
    case_id     VARCHAR NOT NULL,
    turn_index  INTEGER,
    call_index  INTEGER NOT NULL,
    name        VARCHAR NOT NULL,
    args        JSON,
    result      JSON,
    bytes       BIGINT,
    duration_ms BIGINT,
    error       VARCHAR,
    call_id     VARCHAR
);

CREATE TABLE prompt_versions (
    agent_slug     VARCHAR NOT NULL,
    prompt_version VARCHAR NOT NULL,
    label          VARCHAR NOT NULL,
    body_hash      VARCHAR NOT NULL,
    source         VARCHAR,
    file_path      VARCHAR,
    author         VARCHAR,
    description    VARCHAR,
    tags           VARCHAR[],
    extra          JSON,
    body           VARCHAR,
    snapshot_path  VARCHAR,
    registered_at  TIMESTAMP,
    first_run_id   VARCHAR NOT NULL,
    first_seen_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (agent_slug, prompt_version, body_hash)
);

CREATE TABLE case_trials (
    run_id            VARCHAR NOT NULL,
    case_id           VARCHAR NOT NULL,
    trial             INTEGER NOT NULL,
    case_fingerprint  VARCHAR,
    status            VARCHAR NOT NULL CHECK (status IN ('PASS', 'FAIL', 'ERROR')),
    passed            BOOLEAN NOT NULL,
    agent_response    VARCHAR,
    errors            VARCHAR[],
    execution_time_ms BIGINT,
    total_tokens      BIGINT,
    scores            JSON,
    PRIMARY KEY (run_id, case_id, trial)
);

CREATE TABLE judge_control_scores (
    run_id      VARCHAR NOT NULL,
    agent_slug  VARCHAR NOT NULL,
    control_id  VARCHAR NOT NULL,
    metric_name VARCHAR NOT NULL,
    judge_model VARCHAR,
    score       DOUBLE,
    error       VARCHAR,
    recorded_at TIMESTAMP NOT NULL,
    passed      BOOLEAN,
    human_passed BOOLEAN,
    human_score DOUBLE,
    PRIMARY KEY (run_id, control_id, metric_name)
);

CREATE TABLE call_costs (
    run_id            VARCHAR NOT NULL,
    case_id           VARCHAR NOT NULL,
    heading           VARCHAR NOT NULL
        CHECK (heading IN ('agent', 'judge', 'prompt_tool', 'embedding', 'reranker')),
    calls             INTEGER NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    cost_usd          DOUBLE,
    unpriced_calls    INTEGER NOT NULL,
    batch_calls       INTEGER,
    batch_usd         DOUBLE,
    PRIMARY KEY (run_id, case_id, heading)
);

CREATE TABLE run_costs (
    run_id             VARCHAR PRIMARY KEY,
    price_table        VARCHAR NOT NULL,
    prices_taken       VARCHAR,
    total_usd          DOUBLE,
    budget_usd         DOUBLE,
    budget_tokens      BIGINT,
    spent_usd          DOUBLE,
    spent_tokens       BIGINT,
    budget_stopped_by  VARCHAR,
    refused_calls      INTEGER,
    estimate_usd       DOUBLE,
    estimate_source    VARCHAR,
    estimate_calls     BIGINT,
    estimate_tokens    BIGINT,
    batch_calls        BIGINT,
    batch_usd          DOUBLE
);

-- one row per cell (configuration) of a failed run: a backfill's run of three cells is three
-- rows with the same dagster_run_id (docs/history.md)
CREATE TABLE failed_runs (
    dagster_run_id  VARCHAR NOT NULL,
    job_name        VARCHAR NOT NULL,
    agent_slug      VARCHAR,
    prompt_version  VARCHAR,
    model_candidate VARCHAR,
    partition_key   VARCHAR,
    trigger         VARCHAR,
    failed_at       TIMESTAMP NOT NULL,
    error           VARCHAR
);

CREATE TABLE human_labels (
    run_id       VARCHAR NOT NULL,
    case_id      VARCHAR NOT NULL,
    metric_name  VARCHAR NOT NULL,
    labeler      VARCHAR NOT NULL,
    human_passed BOOLEAN,
    human_score  DOUBLE,
    note         VARCHAR,
    source_file  VARCHAR,
    imported_at  TIMESTAMP NOT NULL,
    CHECK (human_passed IS NOT NULL OR human_score IS NOT NULL),
    CHECK (human_score IS NULL OR human_score BETWEEN 0 AND 1),
    PRIMARY KEY (run_id, case_id, metric_name, labeler)
);

CREATE TABLE budget_ledger (
    scope          VARCHAR NOT NULL,
    scope_key      VARCHAR NOT NULL,
    holder         VARCHAR NOT NULL,
    label          VARCHAR,
    claimed_usd    DOUBLE NOT NULL,
    claimed_tokens BIGINT NOT NULL,
    spent_usd      DOUBLE NOT NULL,
    spent_tokens   BIGINT NOT NULL,
    expires_at     TIMESTAMP NOT NULL,
    updated_at     TIMESTAMP NOT NULL
);
