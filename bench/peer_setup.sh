#!/usr/bin/env bash
# Set up the HoloDeck 0.7.1 peer for the benchmarks (DESIGN §6.16): its own venv at
# bench/.peer-venv (ignored by git), never used in CI. Needs PyPI.
#
#   bash bench/peer_setup.sh            # creates/updates bench/.peer-venv
#   PEER_VENV=/tmp/peer bash bench/peer_setup.sh
#   PEER_PYTHON=python3.12 bash bench/peer_setup.sh
#
# Then: .venv/bin/python bench/throughput.py --peer bench/.peer-venv
set -euo pipefail

if [[ "${CI:-}" == "true" ]]; then
    echo "peer_setup.sh: refusing to run in CI (the HoloDeck peer is never installed in CI)" >&2
    exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEER_VENV:-$here/.peer-venv}"
python="${PEER_PYTHON:-python3}"

# The pins the issue asks for: holodeck-ai 0.7.1 runs its agents through openai-agents, which
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
