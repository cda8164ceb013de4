"""Every reference in the repository leads to something a person who clones it can open.

Comments, docstrings, messages and pages cite the repository's own documents
(`docs/architecture.md`, `docs/cli.md`, ... or a module), never the design notes kept beside
the checkout nor the tracker's issue numbers, which a clone does not carry. The scan reads every
file `git ls-files` lists, except `uv.lock` (package metadata), binary files, the recorded
third-party outputs under `tests/fixtures/` (HoloDeck's requests and documents, data we compare
against, not text we wrote) and this file, which spells the refused forms out to test the rule.
A line is refused when it holds:

- the design notes: the word DESIGN followed by `.md`, a section sign or a section number, or
  a path into `../shared/` that names them;
- a numbered section sign (a section sign and a digit): our pages have headings and anchors
  to link instead;
- an issue number: the word issue or issues, any case, then a number, with or without `#`;
  prose such as "an issue of its own" has no number and stays;
- a seed of the design notes (the word seed and a three-digit number);
- a pull or merge request of ours: `PR #12`, `pull request 12`, `MR !12`, or a number alone
  in brackets, `(#12)`;
- in the README and the pages under `docs/`, any path into `../shared/`: what lies beside a
  checkout is no reader's reference (tests and benchmarks may still read its corpus).

A third party's own tracker stays citable: `github.com/dagster-io/dagster/issues/123` and
"Langfuse #3259" name the project, so they can be followed.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.conftest import REPO

SKIPPED = ("uv.lock", Path(__file__).relative_to(REPO).as_posix())
"""Package metadata written by uv, and this file's examples of what is refused."""
RECORDED = "tests/fixtures/"
"""Recorded third-party outputs: data compared against, not text we wrote."""
READER_PAGES = re.compile(r"^(README\.md|docs/.+\.md)$")
BESIDE = re.compile(r"\.\./shared\b")
NOTES = "DESIGN"
ISSUE = "issue"
SECTION = "\N{SECTION SIGN}"
OUTSIDE = {
    "the design notes": re.compile(
        rf"\b{NOTES}(?:\.md\b|\s*{SECTION}|\s+\d)|\.\./shared/{NOTES}", flags=re.I
    ),
    "a numbered section sign": re.compile(rf"{SECTION}\s*\d"),
    "an issue number": re.compile(r"\bissues?\s+#?\d+", flags=re.I),
    "a seed of the design notes": re.compile(r"\bseeds?\s+\d{3}\b", flags=re.I),
    "a request number": re.compile(
        r"\b(?:PRs?|MRs?|pull requests?|merge requests?)\s*[#!]?\d+\b|\(#\d+\)", flags=re.I
    ),
}


def tracked_texts() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    names = [name for name in listed.split("\0") if name]
    return [
        REPO / name
        for name in names
        if name not in SKIPPED and not name.startswith(RECORDED) and (REPO / name).is_file()
    ]


def text_of(path: Path) -> str | None:
    """The file's text, or None for a binary file (a NUL byte, or not UTF-8)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def references(name: str, text: str) -> list[str]:
    found = []
    patterns = dict(OUTSIDE)
    if READER_PAGES.match(name):
        patterns["a path beside the checkout"] = BESIDE
    for number, line in enumerate(text.splitlines(), start=1):
        for what, pattern in patterns.items():
            match = pattern.search(line)
            if match:
                found.append(f"{name}:{number}: {what} ({match.group(0)!r}): {line.strip()[:120]}")
    return found


def test_the_scan_sees_the_repository() -> None:
    names = {path.relative_to(REPO).as_posix() for path in tracked_texts()}
    assert {"README.md", "docs/architecture.md", "holodeck_core/defaults.py"} <= names
    assert "uv.lock" not in names


def test_no_file_cites_the_design_notes_or_an_issue_number() -> None:
    found = []
    for path in tracked_texts():
        text = text_of(path)
        if text is not None:
            found += references(path.relative_to(REPO).as_posix(), text)
    assert found == [], "cite a file of the repository instead:\n" + "\n".join(found)


def test_the_rule_refuses_each_form_and_keeps_prose_and_third_parties() -> None:
    refused = [
        f"see {NOTES} {SECTION}6.7",
        f"({SECTION}8.7)",
        f"{NOTES} 8.4",
        f"the notes in ../shared/{NOTES}.md",
        f"{ISSUE} 12",
        f"{ISSUE.title()} #12",
        f"{ISSUE}s 26, 28",
        f"{ISSUE.title()} 28 (9): the README",
        f"{ISSUE} 28's Summary",
        "per seed 003",
        "PR #12",
        "fixed in (#12)",
    ]
    for line in refused:
        assert references("x.py", line), line
    assert references("docs/cli.md", "the corpus in ../shared/corpus")
    assert not references("tests/conftest.py", "a path in ../shared/corpus")
    kept = [
        "an issue of its own",
        "the issue is the lock",
        "https://github.com/dagster-io/dagster/issues/123",
        "Langfuse #3259",
        "dagster-io/dagster#33552",
        "`#12` references",
        "[below](#1-the-two-files-of-a-run)",
        "seed=7",
    ]
    for line in kept:
        assert not references("page.md", line), line
