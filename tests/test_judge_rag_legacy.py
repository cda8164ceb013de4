"""The RAG judge metrics (faithfulness, answer relevancy, contextual relevancy, precision, recall)
scored from scripted verdicts, with their edge cases, and the legacy 1-5 judge metrics
normalized before the threshold applies."""

from __future__ import annotations

import pytest

from holodeck_core.metrics.rag import faithfulness_reasoning, ranked_precision
from holodeck_core.models.evaluation import StandardMetric
from holodeck_core.testing import run_model_server
from tests.judge_helpers import (
    CONTEXT,
    RAG_RULES,
    by_rule,
    case,
    judge_run,
    one,
    rag,
    rule,
    verdicts,
)

# --- RAG ---------------------------------------------------------------------------------------


def test_each_rag_metric_produces_the_scripted_score() -> None:
    inputs = case(
        expected_output="Paris is the capital.",
        retrieval_context=(*CONTEXT, "France is in Europe."),
    )
    metrics = [
        rag("faithfulness"),
        rag("answer_relevancy"),
        rag("contextual_precision"),
        rag("contextual_recall"),
    ]
    with run_model_server(RAG_RULES) as server:
        (results,), _ = judge_run(server, metrics, [inputs])
        relevancy = one(server, rag("contextual_relevancy"), case(retrieval_context=CONTEXT))
        counts = by_rule(server)
    faith, answer, precision, recall = results
    assert faith.score == pytest.approx(2 / 3) and faith.passed is True  # idk is not a "no"
    assert faith.reasoning is not None  # what was contradicted, not "2 of 3 are not ..."
    assert faith.reasoning.startswith("1 of 3 claims is contradicted by the retrieval context: ")
    assert [v["verdict"] for v in faith.details["verdicts"]] == ["yes", "no", "idk"]
    assert answer.score == 0.75
    assert precision.score == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert recall.score == 0.75
    assert relevancy.score == pytest.approx(1 / 3) and relevancy.passed is False
    assert {r.kind for r in [*results, relevancy]} == {"rag"}
    assert all(r.retry_count == 0 and r.model_used == "judge" for r in [*results, relevancy])
    assert counts == {
        "claims": 1,
        "faith": 1,
        "stmts": 1,
        "relevant": 1,
        "precision": 1,
        "recall": 1,
        "node_paris": 1,
        "node_banana": 1,
    }


def test_rag_definitions_edge_cases() -> None:
    assert ranked_precision([False, True]) == 0.5
    assert ranked_precision([False, False]) == 0.0
    rules = {
        "rules": [
            rule("claims", "Task: extract the claims", json={"claims": []}),
            rule("miscount", "Task: judge ranked context nodes", json=verdicts("yes")),
            rule(
                "recount",
                "Task: repair your reply[\\s\\S]*expected 2 verdicts",
                json=verdicts("no", "yes"),
            ),
        ]
    }
    with run_model_server(rules) as server:
        no_claims = one(
            server, rag("faithfulness", include_reason=False), case(retrieval_context=CONTEXT)
        )
        repaired = one(
            server,
            rag("contextual_precision"),
            case(expected_output="Paris", retrieval_context=CONTEXT),
        )
        assert by_rule(server) == {"claims": 1, "miscount": 1, "recount": 1}
        missing = one(server, rag("faithfulness"), case())
        empty = one(
            server, rag("contextual_recall"), case(expected_output="x", retrieval_context=("  ",))
        )
        blank = one(server, rag("answer_relevancy"), case("   "))
        assert server.stats()["total_calls"] == 3  # none for the last three
    assert no_claims.score == 1.0 and no_claims.reasoning is None  # include_reason: false
    assert repaired.score == 0.5
    assert missing.passed is None and missing.error is not None
    assert "needs a retrieval_context" in missing.error
    assert empty.error is not None and "needs a retrieval_context" in empty.error
    assert (blank.score, blank.passed) == (0.0, False)


# --- legacy 1-5 metrics -------------------------------------------------------------------------


def test_legacy_metrics_normalize_1_to_5_before_the_threshold() -> None:
    rules = {
        "rules": [
            rule("fluency", "Task: rate fluency", json={"score": 4, "reason": "fine"}),
            rule("relevance", "Task: rate relevance", json={"score": 3, "reason": "partly"}),
            rule(
                "grounded",
                "Task: rate groundedness[\\s\\S]*Paris is the capital",
                json={"score": 5},
            ),
        ]
    }
    with run_model_server(rules) as server:
        fluency = one(server, StandardMetric(metric="fluency"), case())
        relevance = one(server, StandardMetric(metric="relevance", threshold=0.7), case())
        grounded = one(
            server, StandardMetric(metric="groundedness"), case(retrieval_context=CONTEXT)
        )
        ungrounded = one(server, StandardMetric(metric="groundedness"), case())
        assert server.stats()["total_calls"] == 3
    assert (fluency.score, fluency.raw_score, fluency.passed) == (0.75, 4, True)
    # HoloDeck compared 3 >= 0.7 and passed; (3 - 1) / 4 = 0.5 < 0.7 fails.
    assert (relevance.score, relevance.raw_score, relevance.passed) == (0.5, 3, False)
    assert relevance.kind == "standard" and relevance.threshold == 0.7
    assert (grounded.score, grounded.raw_score) == (1.0, 5)
    assert ungrounded.error is not None and "retrieval_context or a context" in ungrounded.error


@pytest.mark.parametrize(
    ("claims", "contradicted", "reads"),
    [
        (1, [("Paris is in Spain", "")], "the claim is contradicted by the retrieval context: "),
        (1, [], "the claim is not contradicted by the retrieval context"),
        (3, [], "none of the 3 claims is contradicted by the retrieval context"),
        (3, [("a", ""), ("b", "")], "2 of 3 claims are contradicted by the retrieval context: "),
    ],
)
def test_faithfulness_reasoning_reads_as_a_sentence(
    claims: int, contradicted: list[tuple[str, str]], reads: str
) -> None:
    """Not "0 of 1 claims are not contradicted ...; contradicted: ..." (docs/dashboard.md)."""
    assert faithfulness_reasoning(claims, contradicted).startswith(reads)
