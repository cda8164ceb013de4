"""The estimate of a run that batches (docs/cost.md): ``holodeck plan`` and the estimate before
a run's first call price its agent and judge calls at the batch prices when the run will batch
(``--batch``, the agent's batch mode), from the sizes and from a measured run; a measured run
that batched is taken back to list prices first, so its discount is never applied twice.
Through the real CLI against the loopback model server's batch APIs."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodeck_core.cli.main import main
from holodeck_core.testing import run_model_server
from tests.test_batch_runs import RULES, openai_model, runs_of, write_agent

PRINTED = 1e-2
"""The plan prints dollars to three significant digits."""


def planned(capsys: pytest.CaptureFixture[str], agent: Path, *argv: str) -> tuple[str, float]:
    """``holodeck plan``'s first line and its total in dollars."""
    capsys.readouterr()
    assert main(["plan", str(agent), *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    [total] = [line for line in lines if line.strip().startswith("total")]
    return lines[0], float(total.split()[-2].replace(",", ""))


def test_the_plan_and_the_estimate_take_the_batch_prices_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOLODECK_HOME", str(tmp_path / "home"))
    with run_model_server(RULES) as server:
        agent = write_agent(tmp_path / "agent", openai_model(server))
        head, sizes = planned(capsys, agent)
        batch_head, sizes_batched = planned(capsys, agent, "--batch", "auto")
        assert "sizes" in head and "batch prices" not in head
        assert "sizes" in batch_head and "at the batch prices" in batch_head
        assert sizes_batched == pytest.approx(sizes / 2, rel=PRINTED)
        assert main(["test", str(agent), "--batch", "on"]) == 0
        measured_head, measured = planned(capsys, agent)
        _, measured_batched = planned(capsys, agent, "--batch", "on")
        assert main(["test", str(agent), "--batch", "on", "--fresh"]) == 0
    first, second = runs_of(tmp_path / "agent")
    paid = first.report.summary.cost
    before_first = paid.estimate if paid else None
    assert paid is not None and paid.total_usd and before_first is not None
    # the estimate before the run: the plan's at the batch prices
    assert before_first.source == "sizes" and before_first.usd == pytest.approx(
        sizes_batched, rel=PRINTED
    )
    # from the batched run: its spend is what a batched run costs, and twice that at list prices
    assert "measured spend" in measured_head
    assert measured == pytest.approx(2 * paid.total_usd, rel=PRINTED)
    assert measured_batched == pytest.approx(paid.total_usd, rel=PRINTED)
    later = second.report.summary.cost
    assert later is not None and later.estimate is not None
    assert later.estimate.source.startswith("run ")
    assert later.estimate.usd == pytest.approx(paid.total_usd)  # not half of it
