"""Prompt versions (frontmatter ``version``, else ``auto-<sha8>``) and the immutable snapshot
store (docs/architecture.md, "Loading the agent")."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.config.prompts import PromptStore, file_prompt, inline_prompt
from holodeck_core.errors import ConfigError
from tests.conftest import corpus_path


def test_version_and_body_hash_match_holodeck() -> None:
    prompt = corpus_path(
        "holodeck", "generated", "bleu_20_cases", "instructions", "system-prompt.md"
    )
    version = file_prompt(prompt, "instructions/system-prompt.md").version
    # the values HoloDeck 0.7.1 wrote into its own EvalRun for this file
    assert version.version == "v1.0.0"
    assert version.body_hash == "ac9d626b791bebd0ba50cfa9716675c8e54c8a8ac6f227dd1736a5102b4aaa39"
    assert version.tags == ["bench", "offline"] and version.extra == {"owner": "research"}
    assert (version.author, version.source) == ("bench", "file")


def test_inline_prompt_version_matches_holodeck() -> None:
    version = inline_prompt("Use get_weather when asked about weather.").version
    assert version.version == "auto-43202fcc"  # generated/tool_calls/evalrun_example.json
    assert version.source == "inline" and version.file_path is None


def test_auto_version_without_frontmatter(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("Just a body.\n")
    version = file_prompt(path, "p.md").version
    digest = hashlib.sha256(b"Just a body.").hexdigest()
    assert version.version == f"auto-{digest[:8]}" and version.body_hash == digest


def test_the_model_is_sent_the_file_as_holodeck_sends_it(tmp_path: Path) -> None:
    """HoloDeck 0.7.1 reads the instructions file raw (frontmatter and final newline kept);
    the version and its body hash still come from the frontmatter and the body."""
    path = tmp_path / "p.md"
    raw = "---\nversion: v1\nauthor: ann\n---\nBe brief, {{name}}.\n"
    path.write_text(raw)
    prompt = file_prompt(path, "p.md")
    assert prompt.text == raw  # no template is rendered either: `{{name}}` reaches the model
    assert prompt.body == "Be brief, {{name}}."
    assert prompt.version.body_hash == hashlib.sha256(b"Be brief, {{name}}.").hexdigest()
    inline = inline_prompt("Be brief.\n")
    assert inline.text == inline.body == "Be brief.\n"  # inline: as written


def test_a_snapshot_keeps_the_text_sent(tmp_path: Path) -> None:
    """A snapshot stores the text sent; a frontmatter edit with the same label and body is
    another prompt (the model reads it) and gets its own key; a snapshot stored before the
    text was kept (its body was sent) is not taken for the raw file."""
    store = PromptStore(tmp_path / "prompts", "a")
    first = file_prompt(prompt_file(tmp_path, "v1", "Body."), "p.md")
    assert store.register(first).key == "v1"
    assert store.require("v1").prompt() == first
    (tmp_path / "prompt.md").write_text("---\nversion: v1\nauthor: bob\n---\nBody.\n")
    edited = file_prompt(tmp_path / "prompt.md", "p.md")
    assert edited.version.body_hash == first.version.body_hash
    again = store.register(edited)
    assert again.key == f"v1+{first.version.body_hash[:8]}" and again.warning
    assert store.require(again.key).prompt().text == edited.text
    older = PromptStore(tmp_path / "older", "a")
    snapshot = store.require("v1").model_copy(update={"text": None})
    older.folder.mkdir(parents=True)
    (older.folder / "v1.json").write_text(snapshot.model_dump_json())
    assert older.require("v1").prompt().text == "Body."
    assert older.key_for(first) is None and older.find(first.version) == "v1"


def test_malformed_frontmatter_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "p.md"
    path.write_text("---\nversion: v1\nauthor: [unclosed\n---\nbody\n")
    with pytest.raises(ConfigError, match="malformed frontmatter"):
        file_prompt(path, "p.md")


def prompt_file(tmp_path: Path, version: str, body: str) -> Path:
    path = tmp_path / "prompt.md"
    path.write_text(f"---\nversion: {version}\n---\n{body}\n")
    return path


def test_reused_label_with_new_body_gets_its_own_key(tmp_path: Path) -> None:
    store = PromptStore(tmp_path / "prompts", "My Agent")
    first = store.register(file_prompt(prompt_file(tmp_path, "v1", "Body one."), "p.md"))
    again = store.register(file_prompt(prompt_file(tmp_path, "v1", "Body one."), "p.md"))
    changed = file_prompt(prompt_file(tmp_path, "v1", "Body two."), "p.md")
    reused = store.register(changed)
    assert (first.key, first.created) == ("v1", True)
    assert (again.key, again.created) == ("v1", False)
    assert reused.key == f"v1+{changed.version.body_hash[:8]}" and reused.created
    assert reused.warning and "different text" in reused.warning
    assert store.require("v1").body == "Body one."  # the old snapshot stays
    assert store.require(reused.key).body == "Body two."
    assert (tmp_path / "prompts" / "my-agent" / "v1.json").is_file()
    assert [s.key for s in store.list()] == ["v1", reused.key]


def test_unknown_key_names_the_registered_ones(tmp_path: Path) -> None:
    store = PromptStore(tmp_path, "a")
    store.register(inline_prompt("x"))
    with pytest.raises(ConfigError, match="registered: auto-"):
        store.require("v9")


def test_prompts_register_and_list_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.md").write_text("---\nversion: v1\nauthor: ann\n---\nA\n")
    (tmp_path / "b.md").write_text("---\nversion: v2\n---\nB\n")
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        "name: ab\nmodel: {provider: openai, name: m}\n"
        "instructions: {file: a.md, variants: [b.md]}\n"
    )
    assert main(["prompts", "register", str(agent)]) == 0
    assert "v1: registered" in capsys.readouterr().out
    assert main(["prompts", "register", str(agent)]) == 0
    assert "v1: already registered" in capsys.readouterr().out
    (tmp_path / "a.md").write_text("---\nversion: v1\nauthor: ann\n---\nA, edited\n")
    assert main(["prompts", "register", str(agent)]) == 0
    out = capsys.readouterr()
    assert "v1+" in out.out and "different text" in out.err
    assert main(["prompts", "list", str(agent)]) == 0
    listing = capsys.readouterr().out
    assert listing.count("\nv1") == 2 and "v2" in listing and "ann" in listing
