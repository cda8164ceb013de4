#!/usr/bin/env bash
# The pull-request gate for any CI (examples/ci/README.md): the history comes in as an
# artifact, the agent's tests run against a baseline, and the history goes out again.
#
#   AGENT             the agent.yaml to test (required)
#   PROMPT_VERSION    a registered prompt version to run (default: the agent's prompt file)
#   BASELINE          a prompt version or run id to compare with (default: the newest run in
#                     the restored history, i.e. what the main branch last evaluated)
#   HISTORY_ARTIFACT  the folder the CI restores before and uploads after (default: ci-history);
#                     it is HOLODECK_HOME: the DuckDB history, prompt snapshots, judge cache
#   REPORTS           where summary.md (the PR comment) and junit.xml go (default: ci-reports)
#   HOLODECK          the holodeck command (default: holodeck)
#   MODEL_SERVER_RULES  rules for the loopback model server, started on MODEL_SERVER_PORT
#                     (default 18080) for the run and stopped after it: what the example's
#                     agent answers from; leave it unset for an agent that reaches its provider.
#                     HOLODECK_MODEL_ENDPOINT (what the example's agent.yaml reads) is set to
#                     that server unless it is set already
#
# Exit code: holodeck test's (0 pass; 1 a test failed or a significant regression against the
# baseline; 2 config; 3 execution; 4 evaluation). Under GitHub Actions the job summary and one
# ::error annotation per failing case are written by holodeck itself.
set -uo pipefail

agent="${AGENT:?set AGENT to the agent.yaml to test}"
artifact="${HISTORY_ARTIFACT:-ci-history}"
reports="${REPORTS:-ci-reports}"
holodeck="${HOLODECK:-holodeck}"
mkdir -p "$artifact" "$reports"
HOLODECK_HOME="$(cd "$artifact" && pwd)"
export HOLODECK_HOME
unset HOLODECK_HISTORY_DB HOLODECK_HISTORY_URL

if [ -n "${MODEL_SERVER_RULES:-}" ]; then
    port="${MODEL_SERVER_PORT:-18080}"
    export HOLODECK_MODEL_ENDPOINT="${HOLODECK_MODEL_ENDPOINT:-http://127.0.0.1:$port/v1}"
    "$holodeck" model-server --port "$port" --script "$MODEL_SERVER_RULES" \
        >"$reports/model-server.log" 2>&1 &
    server=$!
    trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
    for _ in $(seq 150); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        kill -0 "$server" 2>/dev/null || { cat "$reports/model-server.log" >&2; exit 3; }
        sleep 0.2
    done
fi

"$holodeck" prompts register "$agent" >/dev/null || exit $?   # snapshot this branch's prompts

baseline="${BASELINE:-}"
if [ -z "$baseline" ] && [ -f "$HOLODECK_HOME/history.duckdb" ]; then
    baseline="$("$holodeck" history sql "SELECT run_id FROM eval_runs WHERE trigger <> 'rescore' ORDER BY finished_at DESC LIMIT 1" --format csv | tail -n +2)"
fi

args=(test "$agent" -o "$reports/junit.xml" --summary "$reports/summary.md")
[ -n "${PROMPT_VERSION:-}" ] && args+=(--prompt-version "$PROMPT_VERSION")
if [ -n "$baseline" ]; then
    args+=(--baseline "$baseline")
else
    echo "eval-gate: no history restored, so no baseline: this run becomes the first one"
fi
"$holodeck" "${args[@]}"
code=$?
echo "eval-gate: holodeck test exited $code; upload $artifact for the next run"
exit "$code"
