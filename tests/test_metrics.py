"""Metric registry and the metrics that need no LLM judge (holodeck_core.metrics)."""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from holodeck_core.config.graders import check_grader_reference
from holodeck_core.metrics import (
    REGISTRY,
    EvalContext,
    GraderContext,
    GraderResult,
    MetricError,
    MetricInput,
    MetricRegistry,
    Score,
    ThresholdPolicy,
    aevaluate_metrics,
    evaluate_metric,
    evaluate_metrics,
    match_expected_tools,
    select_metrics,
)
from holodeck_core.metrics import text as text_metrics
from holodeck_core.metrics.operational import PRICES_ENV, packaged_price_table
from holodeck_core.models.evaluation import (
    LEGACY_JUDGE_METRICS,
    CodeMetric,
    Direction,
    GEvalMetric,
    StandardMetric,
    StandardMetricName,
)
from holodeck_core.models.results import MetricResult, TokenUsage, ToolInvocation
from holodeck_core.models.test_case import ExpectedTool

SHARED = Path(__file__).resolve().parents[2] / "shared"
TOOL_CORPUS = SHARED / "corpus" / "holodeck" / "generated" / "tool_calls"
FINANCE_SAMPLE = SHARED / "corpus" / "holodeck" / "samples" / "financial-assistant" / "claude"


def run(metric: Any, **inputs: Any) -> MetricResult:
    result = evaluate_metric(metric, MetricInput(**inputs))
    assert result is not None
    return result


def std(metric: str, **options: Any) -> StandardMetric:
    return StandardMetric.model_validate({"metric": metric, **options})


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


def test_numeric_ground_truth_that_is_not_a_number_is_an_error() -> None:
    result = run(std("numeric"), actual_output="12", expected_output="twelve")
    assert result.passed is None and "ground_truth is not a number" in (result.error or "")


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


TICKET_SCHEMA = {
    "type": "object",
    "required": ["category", "urgency"],
    "additionalProperties": False,
    "properties": {
        "category": {"enum": ["billing", "technical"]},
        "urgency": {"enum": ["low", "high"]},
    },
}


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


# --- tool matching and tool_correctness ----------------------------------------------------


def call(name: str, **args: Any) -> ToolInvocation:
    return ToolInvocation(name=name, args=args)


def _corpus_cases() -> list[tuple[str, list[Any], list[ToolInvocation], dict[str, Any]]]:
    agent = yaml.safe_load((TOOL_CORPUS / "agent.yaml").read_text())
    report = json.loads((TOOL_CORPUS / "report.json").read_text())
    by_name = {result["test_name"]: result for result in report["results"]}
    cases = []
    for case in agent["test_cases"]:
        expected = [e if isinstance(e, str) else ExpectedTool(**e) for e in case["expected_tools"]]
        outcome = by_name[case["name"]]
        calls = [ToolInvocation.model_validate(i) for i in outcome["tool_invocations"]]
        cases.append((case["name"], expected, calls, outcome))
    return cases


@pytest.mark.skipif(not TOOL_CORPUS.is_dir(), reason="shared corpus is not present")
def test_tool_matcher_reproduces_holodeck_verdicts_on_the_corpus() -> None:
    cases = _corpus_cases()
    assert [name for name, *_ in cases] == [
        "weather_ok",
        "weather_wrong_arg",
        "weather_legacy_name_only",
    ]
    for _name, expected, calls, outcome in cases:
        report = match_expected_tools(expected, calls)
        assert report.matched is outcome["tools_matched"]
        assert report.missing == outcome["errors"]
    wrong = match_expected_tools(cases[1][1], cases[1][2])
    assert wrong.missing == [
        "expected get_weather(city~^Rome$): arg 'city' mismatch: expected regex '^Rome$', "
        "got 'Paris'"
    ]


def test_tool_names_match_by_case_sensitive_substring() -> None:
    calls = [call("mcp__tools__get_weather", city="Paris")]
    assert match_expected_tools(["weather"], calls).matched
    assert match_expected_tools([ExpectedTool(name="get_weather")], calls).matched
    missing = match_expected_tools(["Weather"], calls)
    assert not missing.matched and missing.missing == [
        "expected Weather: no call to 'Weather' found"
    ]


@pytest.mark.parametrize(
    ("matcher", "value", "matched"),
    [
        (1, 1.0, True),
        (True, 1, False),
        ("Paris", "paris", False),
        ([1, 2], [1.0, 2], True),
        ({"unit": "C"}, {"unit": "C"}, True),
        (None, None, True),
        ({"fuzzy": "paris"}, "Paris", True),
        ({"fuzzy": "paris"}, "Paris, France", True),
        ({"fuzzy": "paris"}, "Pariss", True),
        ({"fuzzy": "paris"}, "Rome", False),
        ({"fuzzy": "1,234"}, 1234, True),
        ({"fuzzy": "5%"}, "0.05", True),
        ({"fuzzy": "12345"}, "12346", False),  # numbers compare numerically, not by similarity
        ({"regex": "^Rome$"}, "Rome", True),
        ({"regex": "Rome"}, "Rome, Italy", False),  # fullmatch, as HoloDeck 0.7.1
        ({"regex": "Rome.*"}, "Rome, Italy", True),
        ({"regex": r"\d+"}, 42, True),
    ],
)
def test_argument_matchers(matcher: Any, value: Any, matched: bool) -> None:
    expected = ExpectedTool(name="lookup", args={"x": matcher})
    assert match_expected_tools([expected], [call("lookup", x=value)]).matched is matched


def test_count_is_a_minimum_and_missing_args_are_named() -> None:
    twice = ExpectedTool(name="divide", args={"b": 2}, count=2)
    calls = [call("divide", a=4, b=2), call("divide", a=9, b=3), call("divide", a=8, b=2)]
    assert match_expected_tools([twice], calls).matched
    three = ExpectedTool(name="divide", args={"b": 2}, count=3)
    report = match_expected_tools([three], calls)
    assert report.missing == ["expected divide(b=2) x3: expected 3 matching call(s), got 2"]
    no_arg = match_expected_tools([ExpectedTool(name="divide", args={"c": 1})], calls)
    assert no_arg.missing == ["expected divide(c=1): arg 'c' missing"]


def test_extra_calls_are_reported_and_do_not_fail() -> None:
    calls = [call("search", q="x"), call("get_weather", city="Paris"), call("log")]
    report = match_expected_tools([ExpectedTool(name="get_weather", args={"city": "Paris"})], calls)
    assert report.matched and report.extra_calls == (0, 2)
    rows = report.arg_match_details()
    assert rows == [
        {
            "expected_tool": "get_weather",
            "args_asserted": {"city": "Paris"},
            "matched_call_index": 1,
            "unmatched_reason": None,
        }
    ]


def test_tool_correctness_scores_the_share_of_expectations_met() -> None:
    expected = (
        ExpectedTool(name="get_weather", args={"city": {"fuzzy": "paris"}}),
        "convert",
        "book",
    )
    calls = (call("get_weather", city="Paris"), call("convert_units", v=1), call("search"))
    result = run(std("tool_correctness"), expected_tools=expected, tool_invocations=calls)
    assert result.score == pytest.approx(2 / 3)
    assert result.passed is False  # binary without a threshold
    assert result.details["missing"] == ["expected book: no call to 'book' found"]
    assert result.details["extra_calls"] == [{"index": 2, "name": "search", "args": {}}]
    partial = run(
        std("tool_correctness", threshold=0.6), expected_tools=expected, tool_invocations=calls
    )
    assert partial.passed is True
    extra_only = run(std("tool_correctness"), expected_tools=expected[:1], tool_invocations=calls)
    assert extra_only.passed is True and extra_only.score == 1.0


def test_tool_correctness_without_expected_tools_is_an_error() -> None:
    result = run(std("tool_correctness"), tool_invocations=(call("x"),))
    assert result.passed is None and "expected_tools" in (result.error or "")


# --- latency and cost ----------------------------------------------------------------------


def test_latency_threshold_is_a_maximum_in_ms() -> None:
    fast = run(std("latency", threshold=500), latency_ms=300)
    slow = run(std("latency", threshold=500), latency_ms=800)
    assert fast.passed is True and slow.passed is False
    for result in (fast, slow):
        assert result.score is None and result.unit == "ms" and result.scale is None
        assert result.direction is Direction.LOWER_IS_BETTER
    assert (fast.raw_score, slow.raw_score, fast.threshold) == (300.0, 800.0, 500.0)
    missing = run(std("latency", threshold=500))
    assert missing.passed is None and "latency" in (missing.error or "")


def test_cost_with_a_known_price() -> None:
    usage = TokenUsage(prompt_tokens=1000, completion_tokens=500, total_tokens=1500)
    result = run(std("cost", threshold=0.001), token_usage=usage, model="gpt-4o-mini")
    assert result.raw_score == pytest.approx((1000 * 0.15 + 500 * 0.60) / 1e6)
    assert result.unit == "USD" and result.score is None and result.passed is True
    assert result.details["price_table_version"] == packaged_price_table().version
    assert not run(std("cost", threshold=0.0001), token_usage=usage, model="gpt-4o-mini").passed
    dated = run(std("cost", threshold=1), token_usage=usage, model="gpt-4o-mini-2024-07-18")
    assert dated.details["price_key"] == "gpt-4o-mini"


def test_cost_counts_anthropic_cache_tokens() -> None:
    usage = TokenUsage(
        prompt_tokens=100, completion_tokens=10, cache_read_tokens=1000, cache_creation_tokens=200
    )
    result = run(std("cost", threshold=1), token_usage=usage, model="claude-sonnet-4-5-20250929")
    assert result.raw_score == pytest.approx((100 * 3 + 10 * 15 + 1000 * 0.30 + 200 * 3.75) / 1e6)


def test_cost_unknown_model_is_an_error_naming_it() -> None:
    result = run(std("cost", threshold=1), token_usage=TokenUsage(), model="my-finetune")
    assert result.passed is None
    assert "'my-finetune'" in (result.error or "") and PRICES_ENV in (result.error or "")
    not_a_snapshot = run(std("cost", threshold=1), token_usage=TokenUsage(), model="gpt-4o-mini-v2")
    assert "'gpt-4o-mini-v2'" in (not_a_snapshot.error or "")


def test_cost_price_table_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: team-7\nmodels:\n  my-finetune: {input: 10, output: 20}\n")
    monkeypatch.setenv(PRICES_ENV, str(prices))
    usage = TokenUsage(prompt_tokens=100_000, completion_tokens=50_000)
    result = run(std("cost", threshold=5), token_usage=usage, model="my-finetune")
    assert result.raw_score == pytest.approx(2.0)
    assert result.details["price_table_version"] == "team-7"
    assert run(std("cost", threshold=5), token_usage=usage, model="gpt-4o").error is None


# --- registry rules ------------------------------------------------------------------------


def test_every_non_judge_standard_metric_is_registered_with_consistent_direction() -> None:
    names = set(StandardMetricName.__args__) - set(LEGACY_JUDGE_METRICS)
    for name in names:
        spec = REGISTRY.get("standard", name)
        assert spec is not None, name
        threshold = 1.0 if name in ("latency", "cost") else None
        direction = std(name, threshold=threshold, pattern="x", json_schema={}).direction
        assert (spec.policy is ThresholdPolicy.MAXIMUM) == (direction is Direction.LOWER_IS_BETTER)
    assert REGISTRY.get("code", "code") is not None
    for name in LEGACY_JUDGE_METRICS:
        spec = REGISTRY.get("standard", name)  # judged on 1-5 by the judge metrics
        assert spec is not None and spec.kind == "standard"


def test_disabled_metrics_are_not_run() -> None:
    calls: list[str] = []
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def spy(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        calls.append(metric.display_name)
        return Score(score=1.0)

    metrics = [std("equality", enabled=False), std("equality", name="on")]
    results = evaluate_metrics(metrics, MetricInput(), registry=registry)
    assert [r.metric_name for r in results] == ["on"] and calls == ["on"]
    assert evaluate_metric(std("bleu", enabled=False), MetricInput()) is None
    assert asyncio.run(aevaluate_metrics([std("bleu", enabled=False)], MetricInput())) == []


def test_synchronous_metrics_run_off_the_event_loop() -> None:
    """A CPU-bound metric (METEOR's corpus load, a user's grader) must not stall the model
    calls in flight on the loop: sync metrics run on the metric thread."""
    threads: list[str] = []
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def where(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        threads.append(threading.current_thread().name)
        return Score(score=1.0)

    async def score() -> list[Any]:
        return await aevaluate_metrics([std("equality")], MetricInput(), registry=registry)

    [result] = asyncio.run(score())
    assert result.passed is True
    assert threads and threads[0].startswith("holodeck-metric")


def test_missing_ground_truth_is_an_error_result() -> None:
    result = run(std("bleu"), actual_output="Paris")
    assert result.passed is None and result.fail_on_error is False
    assert result.error == "metric 'bleu' needs a ground_truth; this case has none"
    strict = run(std("equality", fail_on_error=True), actual_output="Paris")
    assert strict.passed is False and strict.fail_on_error is True and strict.error


def test_no_response_at_all_is_an_error_and_an_empty_response_fails() -> None:
    assert run(std("equality"), expected_output="Paris").passed is None
    checks = [
        std("bleu"),
        std("rouge"),
        std("meteor"),
        std("equality"),
        std("exact_match"),
        std("numeric"),
        std("contains", pattern="Paris"),
        std("regex", pattern=r"\w"),
        std("json_valid"),
        std("json_schema", json_schema=TICKET_SCHEMA),
        std("numeric", name="numeric_path", response_path="answer"),
    ]
    results = evaluate_metrics(checks, MetricInput(actual_output="", expected_output="42"))
    assert len(results) == len(checks)
    for result in results:
        assert result.error is None, result
        assert result.passed is False, result.metric_name
        assert result.details.get("empty_response") is True or "response_error" in result.details


def test_a_raising_metric_never_aborts_the_others() -> None:
    registry = MetricRegistry()

    @registry.metric("equality", kind="standard", requires=())
    def boom(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        raise ZeroDivisionError("division by zero")

    @registry.metric("contains", kind="standard", requires=())
    def fine(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        return Score(score=1.0)

    results = evaluate_metrics(
        [std("equality"), std("contains", pattern="x")], MetricInput(), registry=registry
    )
    assert results[0].error == "ZeroDivisionError: division by zero" and results[0].passed is None
    assert results[1].passed is True
    assert all(isinstance(r.evaluation_time_ms, int) and r.evaluation_time_ms >= 0 for r in results)


def test_unregistered_and_async_metrics_in_the_sync_entry_point_are_errors() -> None:
    registry = MetricRegistry()

    @registry.metric(
        "geval",
        kind="geval",
        requires=("actual_output",),
        policy=ThresholdPolicy.DEFAULT,
        default_threshold=0.5,
    )
    async def judged(metric: GEvalMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        return Score(score=0.7, raw_score=7, model_used="judge-1", retry_count=2)

    geval = GEvalMetric(name="Helpfulness", criteria="helpful")
    sync = evaluate_metrics([geval, std("bleu")], MetricInput(actual_output="x"), registry=registry)
    assert "aevaluate_metrics" in (sync[0].error or "")
    assert "no evaluator is registered for standard metric 'bleu'" in (sync[1].error or "")
    results = asyncio.run(
        aevaluate_metrics(
            [geval, std("equality")], MetricInput(actual_output="x", expected_output="x")
        )
    )
    assert "judge" in (results[0].error or "")  # registered, but no judge services given
    judged_results = asyncio.run(
        aevaluate_metrics([geval], MetricInput(actual_output="x"), registry=registry)
    )
    assert judged_results[0].kind == "geval" and judged_results[0].score == 0.7
    assert judged_results[0].raw_score == 7 and judged_results[0].retry_count == 2
    assert judged_results[0].model_used == "judge-1" and judged_results[0].passed is True
    assert judged_results[0].threshold == 0.5


def test_aevaluate_runs_sync_metrics_in_order() -> None:
    metrics = [std("equality"), std("contains", pattern="Par"), std("bleu")]
    inputs = MetricInput(actual_output="Paris", expected_output="Paris")
    results = asyncio.run(aevaluate_metrics(metrics, inputs))
    assert [r.metric_name for r in results] == ["equality", "contains", "bleu"]
    timing = {"evaluation_time_ms"}
    assert [r.model_dump(exclude=timing) for r in results] == [
        r.model_dump(exclude=timing) for r in evaluate_metrics(metrics, inputs)
    ]


def test_metric_error_carries_retries_and_model() -> None:
    registry = MetricRegistry()

    @registry.metric("relevance", kind="standard", requires=())
    def judge(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
        raise MetricError("judge failed after 3 attempts", retry_count=3, model_used="gpt-4o")

    result = evaluate_metrics([std("relevance")], MetricInput(), registry=registry)[0]
    assert (result.error, result.retry_count, result.model_used) == (
        "judge failed after 3 attempts",
        3,
        "gpt-4o",
    )


def test_duplicate_registration_is_refused() -> None:
    registry = MetricRegistry()
    registry.metric("bleu", kind="standard", requires=())(text_metrics.bleu)
    with pytest.raises(ValueError, match="already registered"):
        registry.metric("bleu", kind="standard", requires=())(text_metrics.bleu)


def test_precedence_turn_over_case_over_agent() -> None:
    agent, case, turn = [std("bleu")], [std("rouge")], [std("equality")]
    assert select_metrics(agent, case, turn) == turn
    assert select_metrics(agent, case, None) == case
    assert select_metrics(agent, None, None) == agent
    assert select_metrics(agent, [], None) == []  # an empty narrower list still replaces
    assert select_metrics(None, None, None) == []


# --- code graders --------------------------------------------------------------------------

GRADERS = """
from holodeck_core.metrics import GraderResult

def yes(ctx):
    return True

def no(ctx):
    return False

def seven_tenths(ctx):
    return 0.7

def structured(ctx):
    return GraderResult(score=0.2, passed=True, reason="lenient", details={"k": 1})

def as_dict(ctx):
    return {"score": 0.9, "reason": "dict"}

class Verdict:
    score = 0.1
    reason = "object"

def as_object(ctx):
    return Verdict()

def boom(ctx):
    raise ValueError("grader exploded")

def out_of_range(ctx):
    return 1.7

def wrong_type(ctx):
    return "yes"

def echo(ctx):
    return GraderResult(score=1.0, details={
        "input": ctx.turn_input, "response": ctx.agent_response, "truth": ctx.ground_truth,
        "tools": [t.name for t in ctx.tool_invocations], "retrieval": list(ctx.retrieval_context),
        "turn": ctx.turn_index, "case": ctx.test_case_name, "config": ctx.turn_config,
    })
"""


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "__init__.py").write_text("")
    (tmp_path / "graders" / "checks.py").write_text(GRADERS)
    return tmp_path


def grade(agent_dir: Path, function: str, **options: Any) -> MetricResult:
    metric = CodeMetric(grader=f"graders.checks:{function}", **options)
    inputs = MetricInput(input="q", actual_output="a", expected_output="a")
    return evaluate_metrics([metric], inputs, context=EvalContext(base_dir=agent_dir))[0]


@pytest.mark.parametrize(
    ("function", "options", "score", "passed", "threshold"),
    [
        ("yes", {}, 1.0, True, 0.5),
        ("no", {}, 0.0, False, 0.5),
        ("seven_tenths", {}, 0.7, True, 0.5),  # HoloDeck: a bare float passes at >= 0.5
        ("seven_tenths", {"threshold": 0.8}, 0.7, False, 0.8),
        ("structured", {"threshold": 0.8}, 0.2, True, 0.8),  # the grader's passed wins
        ("as_dict", {}, 0.9, True, 0.5),
        ("as_object", {}, 0.1, False, 0.5),
    ],
)
def test_grader_return_shapes(
    agent_dir: Path,
    function: str,
    options: dict[str, Any],
    score: float,
    passed: bool,
    threshold: float,
) -> None:
    result = grade(agent_dir, function, **options)
    assert result.error is None and result.kind == "code"
    assert (result.score, result.passed, result.threshold) == (score, passed, threshold)
    assert result.metric_name == function


def test_grader_reason_and_details_are_kept(agent_dir: Path) -> None:
    result = grade(agent_dir, "structured")
    assert result.reasoning == "lenient"
    assert result.details == {"grader": "graders.checks:structured", "grader_details": {"k": 1}}


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("boom", "grader 'graders.checks:boom' raised ValueError: grader exploded"),
        ("out_of_range", "grader score 1.7 is not a number in 0-1"),
        ("wrong_type", "grader returned str"),
        ("absent", "has no callable 'absent'"),
    ],
)
def test_grader_problems_are_error_results(agent_dir: Path, function: str, message: str) -> None:
    result = grade(agent_dir, function)
    assert result.passed is None and message in (result.error or "")


def test_a_raising_grader_does_not_stop_the_other_metrics(agent_dir: Path) -> None:
    metrics = [
        CodeMetric(grader="graders.checks:boom"),
        std("equality"),
        CodeMetric(grader="graders.checks:yes"),
    ]
    inputs = MetricInput(input="q", actual_output="a", expected_output="a")
    results = evaluate_metrics(metrics, inputs, context=EvalContext(base_dir=agent_dir))
    assert [r.passed for r in results] == [None, True, True]
    strict = CodeMetric(grader="graders.checks:boom", fail_on_error=True)
    assert (
        evaluate_metrics([strict], inputs, context=EvalContext(base_dir=agent_dir))[0].passed
        is False
    )


def test_a_grader_that_cannot_be_imported_names_module_and_callable(tmp_path: Path) -> None:
    result = grade(tmp_path, "anything")
    assert result.passed is None
    assert "'graders.checks'" in (result.error or "") and "not found" in (result.error or "")
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    broken = evaluate_metrics(
        [CodeMetric(grader="broken:fn")],
        MetricInput(actual_output="a"),
        context=EvalContext(base_dir=tmp_path),
    )[0]
    assert "cannot import grader module 'broken' for 'broken:fn'" in (broken.error or "")
    assert "not_a_module_anywhere" in (broken.error or "")


def test_grader_sees_the_holodeck_context(agent_dir: Path) -> None:
    inputs = MetricInput(
        input="Weather?",
        actual_output="Sunny",
        expected_output="Sunny",
        tool_invocations=(call("get_weather", city="Paris"),),
        retrieval_context=("doc",),
        turn_index=2,
        test_case_name="weather",
        turn_config={"turn_program": "add(1, 2)"},
    )
    metric = CodeMetric(grader="graders.checks:echo")
    result = evaluate_metrics([metric], inputs, context=EvalContext(base_dir=agent_dir))[0]
    assert result.details["grader_details"] == {
        "input": "Weather?",
        "response": "Sunny",
        "truth": "Sunny",
        "tools": ["get_weather"],
        "retrieval": ["doc"],
        "turn": 2,
        "case": "weather",
        "config": {"turn_program": "add(1, 2)"},
    }
    with pytest.raises(AttributeError):
        GraderContext("q", "a", None, (), None, 0, None).turn_index = 1  # type: ignore[misc]


def test_two_agents_with_the_same_grader_module_stay_apart(tmp_path: Path) -> None:
    for name, value in (("a", "True"), ("b", "False")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "grading.py").write_text(f"def check(ctx):\n    return {value}\n")
    verdicts = [
        evaluate_metrics(
            [CodeMetric(grader="grading:check")],
            MetricInput(actual_output="x"),
            context=EvalContext(base_dir=tmp_path / name),
        )[0].passed
        for name in ("a", "b")
    ]
    assert verdicts == [True, False]


@pytest.mark.skipif(not FINANCE_SAMPLE.is_dir(), reason="shared corpus is not present")
def test_a_holodeck_grader_runs_unchanged() -> None:
    # The sample imports holodeck.lib.test_runner.code_grader; we provide its two classes.
    program = "subtract(206588, 181001), divide(#0, 181001)"
    calls = (
        ToolInvocation(name="subtract", args={"a": "206588", "b": "181001"}, result="25587"),
        ToolInvocation(name="divide", args={"a": "25587", "b": "181001"}, result="0.14136"),
    )
    metric = CodeMetric(grader="graders.turn_program_equivalence:turn_program_equivalence")
    context = EvalContext(base_dir=FINANCE_SAMPLE)

    def verdict(invocations: tuple[ToolInvocation, ...]) -> MetricResult:
        inputs = MetricInput(
            input="q",
            actual_output="0.14136",
            tool_invocations=invocations,
            turn_config={"turn_program": program},
        )
        return evaluate_metrics([metric], inputs, context=context)[0]

    good = verdict(calls)
    assert good.error is None and good.passed is True and good.score == 1.0
    bad = verdict(calls[:1])
    assert bad.passed is False and "expected 2 arithmetic call(s)" in (bad.reasoning or "")
    assert "holodeck" not in __import__("sys").modules  # the shim is gone after import


def test_check_grader_reference_without_running_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "checks.py").write_text(
        textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("executed")
        raise SystemExit("must not run")

        def exact(ctx):
            return True

        try:
            from fast import quick
        except ImportError:
            quick = None
        alias = exact
    """)
    )
    (tmp_path / "bad.py").write_text("def broken(:\n")
    assert check_grader_reference("graders.checks:exact", tmp_path) is None
    assert check_grader_reference("graders.checks:quick", tmp_path) is None
    assert check_grader_reference("graders.checks:alias", tmp_path) is None
    assert not marker.exists()
    missing_name = check_grader_reference("graders.checks:fuzzy", tmp_path)
    assert missing_name is not None and "no top-level 'fuzzy'" in missing_name
    missing_module = check_grader_reference("graders.nope:exact", tmp_path)
    assert missing_module is not None and "module 'graders.nope' not found" in missing_module
    syntax = check_grader_reference("bad:broken", tmp_path)
    assert syntax is not None and "syntax error at line 1" in syntax
    assert check_grader_reference("no-colon", tmp_path) is not None
    assert check_grader_reference("json:dumps", tmp_path) is None  # found on sys.path
    assert check_grader_reference("json:not_there", tmp_path) is not None


def test_grader_result_is_exported_for_user_code() -> None:
    assert GraderResult(score=0.5).passed is None
