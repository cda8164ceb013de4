#!/usr/bin/env bash
# Set up the benchmarks' peers (docs/benchmarks.md), each in an environment of its own, ignored by
# git and never used in CI. Needs PyPI (HoloDeck, Inspect AI) or the npm registry (promptfoo).
#
#   bash bench/peer_setup.sh            # HoloDeck 0.7.1 -> bench/.peer-venv
#   bash bench/peer_setup.sh inspect    # Inspect AI 0.3.285 -> bench/.inspect-venv
#   bash bench/peer_setup.sh promptfoo  # promptfoo 0.121 -> bench/.promptfoo
#   PEER_VENV=/tmp/peer bash bench/peer_setup.sh
#   PEER_PYTHON=python3.12 bash bench/peer_setup.sh
#
# Then: .venv/bin/python bench/throughput.py --peer bench/.peer-venv (Inspect AI and promptfoo
# are found in their default folders).
set -euo pipefail

if [[ "${CI:-}" == "true" ]]; then
    echo "peer_setup.sh: refusing to run in CI (the peers are never installed in CI)" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PEER_PYTHON:-python3}"

case "${1:-holodeck}" in
inspect)
    venv="$here/.inspect-venv"
    [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
    echo '*' > "$venv/.gitignore"   # keeps git and ruff out of it
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    timeout 1800 "$venv/bin/python" -m pip install --quiet "inspect-ai==0.3.285" "openai==3.57.0"
    "$venv/bin/inspect" --version
    echo "peer ready: $venv"
    exit 0
    ;;
promptfoo)
    folder="$here/.promptfoo"
    mkdir -p "$folder"
    echo '*' > "$folder/.gitignore"
    [[ -f "$folder/package.json" ]] || echo '{"private": true}' > "$folder/package.json"
    (cd "$folder" && timeout 1800 npm install --no-audit --no-fund "promptfoo@0.121.20")
    "$folder/node_modules/.bin/promptfoo" --version
    echo "peer ready: $folder"
    exit 0
    ;;
holodeck) ;;
*)
    echo "usage: bash bench/peer_setup.sh [holodeck|inspect|promptfoo]" >&2
    exit 2
    ;;
esac
venv="${PEER_VENV:-$here/.peer-venv}"

# The pins HoloDeck needs: holodeck-ai 0.7.1 runs its agents through openai-agents, which
# must be this version with this openai SDK; exceptiongroup is imported but not declared.
pins=(
    "holodeck-ai==0.7.1"
    "openai-agents==0.17.4"
    "openai==2.41.0"
    "exceptiongroup"
)

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
fi
# The repository's .gitignore covers `.venv/` but not this folder: a `*` .gitignore inside the
# venv keeps git from ever listing it (as `python -m venv` does itself from Python 3.13 on).
echo '*' > "$venv/.gitignore"
"$venv/bin/python" -m pip install --quiet --upgrade pip
timeout 1800 "$venv/bin/python" -m pip install --quiet "${pins[@]}"

echo "installed:"
"$venv/bin/python" -m pip list 2>/dev/null | grep -Ei '^(holodeck-ai|openai-agents|openai|exceptiongroup) '
TIMEFORMAT="holodeck --version took %R s (HoloDeck imports most of its stack at start-up)"
time "$venv/bin/holodeck" --version
echo "peer ready: $venv"
echo "next: .venv/bin/python bench/throughput.py --peer $venv"
