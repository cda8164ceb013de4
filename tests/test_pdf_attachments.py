"""A test case's PDF attachment reaches the model as HoloDeck 0.7.1 sends it
(docs/holodeck-fidelity.md): the PDF through HoloDeck's heading extractor
(``holodeck_core/files/pdf_headings.py``), ``File: <path>`` before each file's text, the input last.
``bench/holodeck_record.py`` records HoloDeck's message for test cases attaching corpus PDFs (its
``FileProcessor`` and ``_compose_agent_input``, what ``holodeck test`` sends: checked against a
recorded run) into ``tests/fixtures/holodeck/pdf_attachments.json``; here ``holodeck test`` runs the
same cases against the loopback model server and every request's user message must have that length
and sha256 (a change of our converter or of the message fails here)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from holodeck_core.cli.main import main
from holodeck_core.testing import run_model_server
from holodeck_core.testing.request_log import normalise
from tests.conftest import corpus_path

FIXTURE = Path(__file__).parent / "fixtures" / "holodeck" / "pdf_attachments.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text())["cases"]


def test_pdf_attachments_reach_the_model_as_holodeck_sends_them(tmp_path: Path) -> None:
    documents = corpus_path("documents")
    (tmp_path / "docs").symlink_to(documents)  # read in place, as the recording did
    cases = [
        {
            "name": f"case-{n}",
            "input": case["input"],
            "files": [{**f, "type": "pdf"} for f in case["files"]],
        }
        for n, case in enumerate(CASES)
    ]
    with run_model_server({"default": {"reply": "ok"}}) as server:
        agent = {
            "name": "pdf-attachments",
            "model": {
                "provider": "openai",
                "name": "gpt-4o",
                "endpoint": server.openai_base_url,
                "api_key": "sk-loopback-test",
            },
            "instructions": {"inline": "You read files."},
            "test_cases": cases,
        }
        (tmp_path / "agent.yaml").write_text(yaml.safe_dump(agent, sort_keys=False))
        code = main(["test", str(tmp_path / "agent.yaml"), "-q"])
        requests = [normalise(r) for r in server.requests()]
    assert code == 0
    sent = {
        text.rsplit("\n\n", 1)[-1]: text for text in (r["messages"][0]["text"] for r in requests)
    }
    assert len(sent) == len(CASES)
    for case in CASES:
        text = sent[case["input"]]
        assert text.startswith(f"File: {case['files'][0]['path']}\n")
        assert (len(text), hashlib.sha256(text.encode()).hexdigest()) == (
            case["chars"],
            case["sha256"],
        ), case["files"]
