"""Metrics that compare the response with the ground truth, no LLM judge: BLEU, ROUGE and METEOR
score exactly as their reference libraries (sacrebleu, rouge-score, nltk), thresholds that
cannot apply are refused when the metric is built, and the matching metrics (equality,
exact_match, numeric, contains, regex, json_valid, json_schema) with their options and
``response_path``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from holodeck_core.metrics import text as text_metrics
from tests.metrics_helpers import TICKET_SCHEMA, run, std

# --- library parity: BLEU, ROUGE, METEOR ---------------------------------------------------

# Held back from the implementation: (response, ground truth), ASCII only, so rouge-score's
# default tokenizer and ours must agree token for token.
ASCII_PAIRS = [
    ("The cat sat on the mat.", "The cat is sitting on the mat."),
    ("It is raining in Paris today", "Today it rains in Paris"),
    (
        "Revenue grew 12% to $4.5 billion in 2023.",
        "In 2023 revenue rose 12 percent to 4.5 billion.",
    ),
    ("completely unrelated words here", "The quarterly report is attached"),
    ("a b c d e f g", "a b c d e f g"),
    ("The quick brown fox jumps over the lazy dog", "A quick brown dog jumps over the lazy fox"),
    (
        "Please reset your password from the settings page.",
        "You can reset the password in Settings.",
    ),
    ("Yes", "Yes, the order has shipped and will arrive Monday."),
    ("The order has shipped and will arrive Monday, yes.", "Yes"),
    ("running runners ran quickly", "the runner runs quick"),
    (
        "First line of the summary.\nSecond line follows here.",
        "First line of a summary.\nA second line.",
    ),
    ("Numbers 1 2 3 and 4 5 6", "numbers 1 2 3 or 4 5 7"),
]
# Non-Latin pairs: compared with rouge-score given our tokenizer (its default scores them 0).
UNICODE_PAIRS = [
    ("我喜欢吃苹果", "我喜欢吃香蕉"),
    ("東京は日本の首都です", "日本の首都は東京です"),
    ("Москва столица России", "Столица России Москва"),
    ("Le café est très chaud", "Le café était très chaud"),
]


def test_bleu_equals_sacrebleu_sentence_bleu_with_exp_smoothing() -> None:
    import sacrebleu

    for response, reference in ASCII_PAIRS + UNICODE_PAIRS:
        result = run(std("bleu"), actual_output=response, expected_output=reference)
        direct = sacrebleu.sentence_bleu(response, [reference], smooth_method="exp")
        assert result.error is None
        assert result.score == pytest.approx(direct.score / 100, abs=1e-9)
        assert result.raw_score == pytest.approx(direct.score, abs=1e-9)
        assert result.details["signature"].startswith("nrefs:1|case:mixed|eff:yes|tok:13a")
        assert "smooth:exp" in result.details["signature"]
        assert f"version:{sacrebleu.__version__}" in result.details["signature"]


@pytest.mark.parametrize("variant", ["rouge1", "rouge2", "rougeL", "rougeLsum"])
def test_rouge_equals_rouge_score_for_every_variant(variant: str) -> None:
    from rouge_score import rouge_scorer

    default = rouge_scorer.RougeScorer([variant])
    unicode = rouge_scorer.RougeScorer([variant], tokenizer=text_metrics.UnicodeTokenizer())
    for pairs, scorer in ((ASCII_PAIRS, default), (UNICODE_PAIRS, unicode)):
        for response, reference in pairs:
            result = run(
                std("rouge", variant=variant), actual_output=response, expected_output=reference
            )
            direct = scorer.score(reference, response)[variant]
            assert result.score == pytest.approx(direct.fmeasure, abs=1e-9)
            assert result.details["variant"] == variant
            assert result.details["recall"] == pytest.approx(direct.recall, abs=1e-9)


def test_rouge_default_variant_is_rouge_l() -> None:
    result = run(std("rouge"), actual_output="a b c", expected_output="a c b")
    assert result.details["variant"] == "rougeL"


@pytest.mark.parametrize("variant", ["rouge1", "rouge2", "rougeL", "rougeLsum"])
def test_rouge_of_identical_texts_is_one(variant: str) -> None:
    # HoloDeck 0.7.1 scores ROUGE 0.0 always (a result-key mismatch).
    answer = "The refund was issued on 3 May.\nIt should arrive within five days."
    result = run(std("rouge", variant=variant), actual_output=answer, expected_output=answer)
    assert result.score == 1.0
    assert result.passed is True


def test_rouge_scores_cjk_and_cyrillic_where_the_default_tokenizer_gives_zero() -> None:
    from rouge_score import rouge_scorer

    for response, reference in UNICODE_PAIRS[:3]:
        assert (
            rouge_scorer.RougeScorer(["rougeL"]).score(reference, response)["rougeL"].fmeasure == 0
        )
        assert run(std("rouge"), actual_output=response, expected_output=reference).score > 0


def test_unicode_tokenizer_matches_rouge_default_on_ascii() -> None:
    from rouge_score import tokenizers

    default = tokenizers.DefaultTokenizer()
    for response, reference in ASCII_PAIRS:
        for value in (response, reference):
            assert text_metrics.UnicodeTokenizer().tokenize(value) == default.tokenize(value)
    assert text_metrics.unicode_tokens("我喜欢Python 3") == ["我", "喜", "欢", "python", "3"]


class _NoSynonyms:
    def synsets(self, word: str) -> list[Any]:
        return []


def _meteor_tokens(value: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+|[^\w\s]", value)


def test_meteor_equals_nltk_with_the_same_wordnet_choice() -> None:
    from nltk.translate.meteor_score import meteor_score

    variant = text_metrics.meteor_variant()
    if variant == text_metrics.METEOR_WORDNET:
        from nltk.corpus import wordnet as reader
    else:
        reader = _NoSynonyms()
    for response, reference in ASCII_PAIRS:
        result = run(std("meteor"), actual_output=response, expected_output=reference)
        direct = meteor_score([_meteor_tokens(reference)], _meteor_tokens(response), wordnet=reader)
        assert result.score == pytest.approx(direct, abs=1e-9)
        assert result.details["variant"] == variant


def test_meteor_variant_is_recorded_and_exact_stem_still_stems(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOLODECK_METEOR", "exact-stem")
    result = run(std("meteor"), actual_output="runners running", expected_output="runner runs")
    assert result.details["variant"] == "meteor-exact-stem"
    assert result.score is not None and result.score > 0  # matched through Porter stems only
    if not text_metrics.wordnet_available():
        monkeypatch.delenv("HOLODECK_METEOR")
        assert text_metrics.meteor_variant() == "meteor-exact-stem"


def test_text_metrics_without_threshold_record_and_pass_above_zero() -> None:
    similar = run(std("bleu"), actual_output="the cat sat", expected_output="the cat sat down")
    assert similar.passed is True and similar.threshold is None
    assert "no threshold" in similar.details["note"]
    unrelated = run(std("rouge"), actual_output="zebra", expected_output="the cat sat down")
    assert unrelated.score == 0.0 and unrelated.passed is False


def test_text_metric_threshold_is_a_minimum() -> None:
    kwargs = {"actual_output": "the cat sat on a mat", "expected_output": "the cat sat on the mat"}
    score = run(std("rouge"), **kwargs).score
    assert score is not None
    assert run(std("rouge", threshold=score), **kwargs).passed is True
    assert run(std("rouge", threshold=min(1.0, score + 0.01)), **kwargs).passed is False


@pytest.mark.parametrize(
    ("metric", "options"),
    [
        ("bleu", {"threshold": 50}),
        ("exact_match", {"threshold": 1.5}),
        ("rouge", {"threshold": -0.1}),
        ("latency", {}),
        ("cost", {"threshold": float("inf")}),
    ],
)
def test_a_threshold_that_cannot_apply_is_refused_when_the_metric_is_built(
    metric: str, options: dict[str, Any]
) -> None:
    """Checked once, when the config is loaded; never an error per case."""
    with pytest.raises(ValidationError, match="threshold"):
        std(metric, **options)


# --- equality, exact_match, numeric, response_path -----------------------------------------


@pytest.mark.parametrize(
    ("response", "truth", "options", "passed"),
    [
        ("Paris", "Paris", {}, True),
        ("paris", "Paris", {}, False),
        ("paris", "Paris", {"case_insensitive": True}, True),
        ("Paris ", "Paris", {}, False),
        ("  Paris\n", "Paris", {"strip_whitespace": True}, True),
        ("New   York", "New York", {"strip_whitespace": True}, True),
        ("Paris.", "Paris", {}, False),
        ("Paris!", "Paris", {"strip_punctuation": True}, True),
        (
            "PARIS!! ",
            "paris",
            {"case_insensitive": True, "strip_punctuation": True, "strip_whitespace": True},
            True,
        ),
        ("Lyon", "Paris", {"case_insensitive": True, "strip_whitespace": True}, False),
    ],
)
def test_equality_options(
    response: str, truth: str, options: dict[str, bool], passed: bool
) -> None:
    result = run(std("equality", **options), actual_output=response, expected_output=truth)
    assert result.error is None
    assert result.passed is passed
    assert result.score == (1.0 if passed else 0.0)


@pytest.mark.parametrize(
    ("response", "path", "truth", "passed"),
    [
        ('{"answer": "Paris"}', "answer", "Paris", True),
        ('{"result": {"value": "Paris"}}', "result.value", "Paris", True),
        ('{"items": [{"score": "high"}, {"score": "low"}]}', "items[0].score", "high", True),
        ('{"items": [{"score": "high"}, {"score": "low"}]}', "items[1].score", "high", False),
        ('{"answer": true}', "answer", "true", True),
    ],
)
def test_equality_with_response_path(response: str, path: str, truth: str, passed: bool) -> None:
    result = run(std("equality", response_path=path), actual_output=response, expected_output=truth)
    assert result.error is None and result.passed is passed


@pytest.mark.parametrize(
    ("response", "path", "reason"),
    [
        ("The answer is Paris", "answer", "not JSON"),
        ('{"answer": "Paris"}', "result.value", "key 'result' not found"),
        ('{"items": []}', "items[0].score", "out of range"),
        ('{"answer": {"city": "Paris"}}', "answer", "leaf is an object"),
    ],
)
def test_response_path_problems_fail_with_the_reason(response: str, path: str, reason: str) -> None:
    # The agent's response cannot be graded as configured: that is a FAIL of the agent (as in
    # HoloDeck), never a silently excluded metric.
    result = run(
        std("equality", response_path=path), actual_output=response, expected_output="Paris"
    )
    assert result.error is None
    assert result.passed is False and result.score == 0.0
    assert reason in (result.reasoning or "")
    assert reason in result.details["response_error"]


def test_invalid_response_path_is_a_configuration_error() -> None:
    result = run(std("numeric", response_path="items[x]"), actual_output="{}", expected_output="1")
    assert result.passed is None and "not a valid path" in (result.error or "")


def test_exact_match_trims_and_normalizes_unicode() -> None:
    assert run(std("exact_match"), actual_output="Café\n", expected_output="Cafe\u0301").passed
    assert not run(std("exact_match"), actual_output="cafe", expected_output="Café").passed
    assert run(
        std("exact_match", case_insensitive=True), actual_output=" CAFÉ ", expected_output="café"
    ).passed
    assert not run(std("equality"), actual_output="Café\n", expected_output="Café").passed


@pytest.mark.parametrize(
    ("response", "truth", "options", "passed"),
    [
        ("42", "42", {}, True),
        ("42.0000005", "42", {}, True),  # within the default absolute tolerance 1e-6
        ("42.00001", "42", {}, False),
        ("42.5", "42", {"absolute_tolerance": 0.5}, True),  # inclusive
        ("42.51", "42", {"absolute_tolerance": 0.5}, False),
        ("101", "100", {"relative_tolerance": 0.01}, True),
        ("101.5", "100", {"relative_tolerance": 0.01}, False),
        ("33.2%", "0.332", {"accept_percent": True}, True),
        ("1,234.5", "1234.5", {"accept_thousands_separators": True}, True),
        ("1_234", "1234", {"accept_thousands_separators": True}, True),
        ("1\u00a0234", "1234", {"accept_thousands_separators": True}, True),
        ("-3e2", "-300", {}, True),
    ],
)
def test_numeric_options(response: str, truth: str, options: dict[str, Any], passed: bool) -> None:
    result = run(std("numeric", **options), actual_output=response, expected_output=truth)
    assert result.error is None
    assert result.passed is passed


@pytest.mark.parametrize(
    ("response", "options", "reason"),
    [
        ("33.2%", {}, "accept_percent is off"),
        ("1,234", {}, "accept_thousands_separators is off"),
        ("1_234", {}, "accept_thousands_separators is off"),  # float() would accept it
        ("about 42", {}, "not a number"),
    ],
)
def test_numeric_response_that_is_not_a_number_fails(
    response: str, options: dict[str, Any], reason: str
) -> None:
    result = run(std("numeric", **options), actual_output=response, expected_output="1234")
    assert result.error is None and result.passed is False
    assert reason in (result.reasoning or "")


def test_numeric_ground_truth_that_is_not_a_number_is_an_evaluation_error() -> None:
    result = run(std("numeric"), actual_output="12", expected_output="twelve")
    assert result.passed is None and result.details == {"error_source": "evaluation"}
    assert "metric 'numeric' needs a number as ground_truth, got 'twelve'" in (result.error or "")


@pytest.mark.parametrize(
    ("response", "path"),
    [
        ('{"answer": 0.332}', "answer"),
        ('{"answer": "33.2%"}', "answer"),
        ('{"result": {"value": 0.3321}}', "result.value"),
        ('{"items": [{"score": "0.332"}]}', "items[0].score"),
    ],
)
def test_numeric_with_response_path(response: str, path: str) -> None:
    metric = std("numeric", response_path=path, accept_percent=True, relative_tolerance=0.01)
    result = run(metric, actual_output=response, expected_output="33.2%")
    assert result.error is None and result.passed is True


# --- contains, regex, json_valid, json_schema ----------------------------------------------


def test_contains() -> None:
    assert run(std("contains", pattern="refund"), actual_output="Your refund is on its way").passed
    assert not run(
        std("contains", pattern="Refund"), actual_output="Your refund is on its way"
    ).passed
    assert run(
        std("contains", pattern="Refund", case_insensitive=True), actual_output="Your refund"
    ).passed


def test_regex_searches() -> None:
    metric = std("regex", pattern=r"order #\d{5}")
    assert run(metric, actual_output="Your order #12345 shipped").passed
    failed = run(metric, actual_output="Your order shipped")
    assert failed.passed is False and "no match" in (failed.reasoning or "")
    assert not run(std("regex", pattern=r"^\d+$"), actual_output="12 apples").passed
    assert run(std("regex", pattern="PARIS", case_insensitive=True), actual_output="paris").passed


def test_json_valid() -> None:
    assert run(std("json_valid"), actual_output='{"a": [1, 2]}').passed
    fenced = run(std("json_valid"), actual_output='```json\n{"a": 1}\n```')
    assert fenced.passed is False and "code fence" in (fenced.reasoning or "")
    assert run(std("json_valid"), actual_output="{'a': 1}").passed is False


def test_json_schema_passes_and_lists_the_first_violations() -> None:
    metric = std("json_schema", json_schema=TICKET_SCHEMA)
    assert run(metric, actual_output='{"category": "billing", "urgency": "high"}').passed
    failed = run(metric, actual_output='{"category": "sales", "extra": 1}')
    assert failed.passed is False and failed.error is None
    violations = failed.details["violations"]
    assert failed.details["violation_count"] == 3
    assert any("'urgency' is a required property" in v for v in violations)
    assert any(v.startswith("$.category:") and "'sales'" in v for v in violations)
    assert "3 schema violation(s)" in (failed.reasoning or "")
    assert run(metric, actual_output="not json").passed is False


def test_json_schema_invalid_schema_is_an_error() -> None:
    result = run(std("json_schema", json_schema={"type": "nonsense"}), actual_output="{}")
    assert result.passed is None and "not a valid JSON Schema" in (result.error or "")


def test_response_path_on_a_metric_without_it_is_an_error() -> None:
    result = run(std("json_valid", response_path="answer"), actual_output='{"answer": 1}')
    assert result.passed is None and "does not support response_path" in (result.error or "")
