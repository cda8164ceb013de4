"""The differential test against HoloDeck 0.7.1 (docs/holodeck-fidelity.md): every corpus sample and
``examples/acme-support`` run by HoloDeck's ``holodeck test`` and by ours against ONE loopback
model server that records every request; the normalised request sets
(``holodeck_core.testing.request_log``) and the retrieval comparison
(``bench/retrieval_compat.py``) are written as fixtures under
``tests/fixtures/holodeck_requests/``, which ``tests/test_holodeck_requests.py`` compares in CI
without HoloDeck. Offline; never in CI.

    bash bench/peer_setup.sh
    .venv/bin/python bench/holodeck_fidelity.py --peer bench/.peer-venv
    .venv/bin/python bench/holodeck_fidelity.py --ours-only   # re-record our side only

The ``anthropic`` and ``ollama`` samples run through the Claude Agent SDK's bundled CLI on both
sides (Debian's ``bubblewrap`` installed; ~15-60 s a sample). It prints the per-sample table of
``docs/holodeck-fidelity.md``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from retrieval_compat import OFFLINE, compare, tiktoken_cache  # noqa: E402

from holodeck_core.testing import ModelServer, run_model_server  # noqa: E402
from holodeck_core.testing.request_log import KINDS, differing_fields  # noqa: E402
from tests.holodeck_requests_samples import (  # noqa: E402
    FIXTURES,
    LIMIT,
    fixture_path,
    our_command,
    prepare,
    recorded_set,
    rules,
    sample_env,
    samples,
)

REPO = HERE.parent
RETRIEVAL = FIXTURES / "retrieval.json"


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    started = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    return proc.returncode, time.perf_counter() - started, proc.stderr[-2000:]


def _side(
    server: ModelServer,
    agent_file: Path,
    dest: Path,
    command: Callable[[Path], list[str]],
    env: dict[str, str],
) -> dict[str, Any]:
    """One side's run of the sample in a fresh copy at ``dest``: exit code, request set."""
    shutil.rmtree(dest, ignore_errors=True)
    server.reset()
    agent = prepare(agent_file, dest, server.url)
    code, seconds, err = _run(command(agent), dest, {**env, **sample_env(agent, server.url)})
    requests = recorded_set(server.requests(), dest)
    print(f"  {command(agent)[0]}: exit {code}, {seconds:.1f} s", file=sys.stderr)
    if not any(requests.values()):
        print(f"  no request; stderr: {err[-600:]}", file=sys.stderr)
    return {"exit_code": code, "requests": requests}


def _theirs(peer: Path) -> Callable[[Path], list[str]]:
    return lambda agent: [str(peer / "bin" / "holodeck"), "test", str(agent), "--limit", str(LIMIT)]


def _ours(agent: Path) -> list[str]:
    return [str(REPO / ".venv" / "bin" / "holodeck"), *our_command(agent)]


def record(peer: Path | None, only: list[str]) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HOLODECK_")}
    base.update(OFFLINE, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with run_model_server() as server, tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for key, agent_file in samples().items():
            if only and key not in only:
                continue
            print(key, file=sys.stderr)
            server.set_rules(rules(key, agent_file))
            old = json.loads(fixture_path(key).read_text()) if fixture_path(key).is_file() else {}
            if peer is None:
                empty = {"exit_code": None, "requests": {k: [] for k in KINDS}}
                theirs = old.get("holodeck", empty)  # never run: nothing to compare yet
            else:
                env = {
                    **base,
                    "HOME": str(root / "home"),
                    "OPENAI_BASE_URL": server.openai_base_url,  # its openai ignores `endpoint`
                    # its Claude backend forwards `endpoint` only with auth_provider: custom;
                    # the CLI reads the variable from the environment it inherits
                    "ANTHROPIC_BASE_URL": server.url,
                    "OPENAI_AGENTS_DISABLE_TRACING": "1",
                    # the hierarchical_document tool counts tokens with tiktoken, which would
                    # download cl100k_base; LiteLLM ships it under tiktoken's cache name
                    "TIKTOKEN_CACHE_DIR": str(tiktoken_cache(peer)),
                }
                theirs = _side(server, agent_file, root / "sample", _theirs(peer), env)
            ours_env = {**base, "HOLODECK_HOME": str(root / "home-ours")}
            ours = _side(server, agent_file, root / "sample", _ours, ours_env)
            document = {
                "sample": key,
                "holodeck_version": "0.7.1",
                "limit": LIMIT,
                "differences": sorted(differing_fields(ours["requests"], theirs["requests"])),
                "holodeck": theirs,
                "ours": ours,
            }
            text = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
            fixture_path(key).write_text(text)


def table() -> None:
    """The per-sample table of docs/holodeck-fidelity.md, from the fixtures."""
    print("| sample | agent requests (HoloDeck / ours) | embeddings | exit | fields that differ |")
    print("|---|---|---|---|---|")
    for key in samples():
        if not fixture_path(key).is_file():
            continue
        doc = json.loads(fixture_path(key).read_text())
        h, o = doc["holodeck"]["requests"], doc["ours"]["requests"]
        diff = ", ".join(f"`{f}`" for f in doc["differences"]) or "none: equal"
        print(
            f"| {key} | {len(h['agent'])} / {len(o['agent'])} | {len(h['embeddings'])} / "
            f"{len(o['embeddings'])} | {doc['holodeck']['exit_code']} / "
            f"{doc['ours']['exit_code']} | {diff} |"
        )
    if RETRIEVAL.is_file():
        print("\n| tool (samples) | k | queries | overlap@k |\n|---|---|---|---|")
        for row in json.loads(RETRIEVAL.read_text())["tools"]:
            mean = "n/a" if row["overlap"] is None else f"{row['overlap']:.2f}"
            samples_ = ", ".join(row["samples"])
            print(f"| {row['tool']} ({samples_}) | {row['k']} | {len(row['queries'])} | {mean} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("PEER_VENV", str(HERE / ".peer-venv"))
    parser.add_argument("--peer", type=Path, default=Path(default), help="HoloDeck's venv")
    parser.add_argument("--ours-only", action="store_true", help="keep HoloDeck's recorded side")
    parser.add_argument("--only", action="append", default=[], help="a sample key (repeatable)")
    parser.add_argument("--table", action="store_true", help="only print the table")
    parser.add_argument("--retrieval-only", action="store_true", help="only the retrieval")
    args = parser.parse_args()
    peer = None if args.ours_only or args.table else args.peer.absolute()
    if peer is not None and not (peer / "bin" / "holodeck").is_file():
        sys.exit(f"no HoloDeck at {peer} (bash bench/peer_setup.sh, or --peer / PEER_VENV)")
    if not args.table and not args.retrieval_only:
        record(peer, args.only)
    if peer is not None and (args.retrieval_only or not args.only):
        document = {"holodeck_version": "0.7.1", "tools": compare(peer)}
        RETRIEVAL.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    table()


if __name__ == "__main__":
    main()
