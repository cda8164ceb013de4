"""The JUnit report validates against both public schemas strict consumers use: Jenkins xUnit's
``junit-10.xsd`` and Windy Road's ``JUnit.xsd`` (tests/fixtures/junit, with their sources and
licences), with ``xmllint --schema`` (Debian ``libxml2-utils``, installed by ``.ci/run``)."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from holodeck_core.testing import run_model_server
from tests.conftest import REPO
from tests.test_reliability import run_suite

SCHEMAS = REPO / "tests" / "fixtures" / "junit"
RULES = {
    "rules": [
        {"match": {"user": "good"}, "reply": "Paris, of course."},
        {"match": {"user": "bad"}, "reply": "Lyon & <Marseille>"},
        {"match": {"user": "broken"}, "fault": {"kind": "400"}},
    ]
}
CASES = (
    "  - {name: good answer, input: good}\n"
    "  - {name: bad answer, input: bad}\n"
    "  - {name: broken request, input: broken}\n"
)


@pytest.fixture(scope="module")
def xmllint() -> str:
    found = shutil.which("xmllint")
    if found is None:
        pytest.skip("xmllint is not installed (Debian libxml2-utils; .ci/run installs it)")
    return found


@pytest.mark.parametrize("schema", ["junit-10.xsd", "JUnit.xsd"])
def test_the_junit_report_is_valid_against_the_public_schema(
    tmp_path: Path, schema: str, xmllint: str
) -> None:
    report = tmp_path / "report.xml"
    with run_model_server(RULES) as server:
        code, _, _ = run_suite(
            tmp_path, server.openai_base_url, CASES, "--trials", "2", "-o", str(report)
        )
    assert code == 3  # PASS, FAIL and ERROR are all in it
    checked = subprocess.run(
        [xmllint, "--noout", "--schema", str(SCHEMAS / schema), str(report)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None and suite.get("timestamp", "").count(":") == 2  # no zone
    statuses = {case.get("name"): [c.tag for c in case] for case in suite.iter("testcase")}
    assert statuses == {"good answer": [], "bad answer": ["failure"], "broken request": ["error"]}
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["case.bad-answer.metric.contains"] == "0"
    assert properties["case.good-answer.trials.passed"] == "2/2"
    assert "--- bad answer\nLyon & <Marseille>" in (suite.findtext("system-out") or "")


def test_an_old_style_report_is_refused_by_the_schemas(tmp_path: Path, xmllint: str) -> None:
    """The schemas are strict where it matters: properties inside a test case (what the
    report used to write) fail both."""
    bad = tmp_path / "old.xml"
    bad.write_text(
        '<testsuites><testsuite name="a" tests="1" failures="0" errors="0" time="1" '
        'timestamp="2026-01-01T00:00:00" hostname="h" id="0" package="a"><properties/>'
        '<testcase name="c" classname="a" time="1"><properties><property name="x" value="1"/>'
        "</properties></testcase><system-out/><system-err/></testsuite></testsuites>"
    )
    for schema in ("junit-10.xsd", "JUnit.xsd"):
        checked = subprocess.run(
            [xmllint, "--noout", "--schema", str(SCHEMAS / schema), str(bad)],
            capture_output=True,
            check=False,
        )
        assert checked.returncode != 0, schema
