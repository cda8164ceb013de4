"""Text-similarity metrics: ``bleu`` (sacrebleu), ``rouge`` (rouge-score), ``meteor`` (nltk).

All three compare the response with the ground truth, are bounded 0-1 and, without a
threshold, record the score and pass when it is above 0 (:class:`ThresholdPolicy.RECORD`).
The libraries are imported on first use: they cost about a second of start-up together.

**Tokenization.** rouge-score's default tokenizer keeps only ``[a-z0-9]``, so CJK, Cyrillic
or accented text scores 0. :class:`UnicodeTokenizer` lowercases and splits on Unicode word
characters (letters and digits, not ``_``), with each CJK ideograph, kana or Hangul syllable
a token of its own; on ASCII text it gives exactly the default tokenizer's tokens. METEOR uses
the same rule and also keeps punctuation marks as tokens, like nltk's ``word_tokenize`` (which
is never called: it fetches the punkt data at run time).

**METEOR and WordNet.** nltk's METEOR matches exact words, Porter stems and WordNet synonyms.
WordNet is data, not code, and is never downloaded here. When it is installed (found by
``nltk.data.find("corpora/wordnet")``) the variant is ``meteor-wordnet``; otherwise synonyms
are skipped and the variant is ``meteor-exact-stem``. The variant is recorded in
``details.variant`` so histories never mix the two. To enable WordNet, run
``python -m nltk.downloader wordnet`` on a machine with network access, or copy an
``nltk_data/corpora/wordnet.zip`` to a folder on ``NLTK_DATA``. Set
``HOLODECK_METEOR=exact-stem`` to force the exact+stem variant where WordNet is installed
(to compare with machines without it).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from holodeck_core.defaults import ROUGE_VARIANT
from holodeck_core.metrics.base import EvalContext, MetricError, MetricInput, Score
from holodeck_core.metrics.registry import REGISTRY, ThresholdPolicy
from holodeck_core.models.evaluation import StandardMetric

METEOR_WORDNET = "meteor-wordnet"
METEOR_EXACT_STEM = "meteor-exact-stem"
TOKENIZER_NAME = "holodeck-unicode-v1"

_Metric = TypeVar("_Metric", bound=Callable[..., Any])


def against_ground_truth(name: str) -> Callable[[_Metric], _Metric]:
    """Registers ``name`` as these metrics are: the response scored against the ground
    truth, the score recorded (:class:`ThresholdPolicy.RECORD`)."""
    return REGISTRY.metric(
        name,
        kind="standard",
        requires=("actual_output", "expected_output"),
        policy=ThresholdPolicy.RECORD,
        response_path=True,
    )


_CJK = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
_WORDS = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")
_WORDS_AND_PUNCT = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+|[^\w\s]")


def unicode_tokens(text: str, *, punctuation: bool = False) -> list[str]:
    """Lowercased word tokens; each CJK character is a token; punctuation kept on request."""
    pattern = _WORDS_AND_PUNCT if punctuation else _WORDS
    return pattern.findall(text.lower())


class UnicodeTokenizer:
    """A rouge-score tokenizer (it only needs ``tokenize``) that scores non-Latin text."""

    name = TOKENIZER_NAME

    def tokenize(self, text: str) -> list[str]:
        return unicode_tokens(text)


def _reference(inputs: MetricInput) -> tuple[str, str]:
    response = inputs.actual_output or ""
    reference = inputs.expected_output or ""
    if not reference.strip():
        raise MetricError("ground_truth is empty: there is nothing to compare the response with")
    return response, reference


# --- BLEU ------------------------------------------------------------------------------


@functools.cache
def _bleu() -> Any:
    from sacrebleu.metrics.bleu import BLEU

    return BLEU(smooth_method="exp", effective_order=True)


@against_ground_truth("bleu")
def bleu(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """Sentence BLEU (sacrebleu, exp smoothing, effective order) / 100."""
    response, reference = _reference(inputs)
    scorer = _bleu()
    result = scorer.sentence_score(response, [reference])
    return Score(
        score=result.score / 100.0,
        raw_score=result.score,
        details={"signature": scorer.get_signature().format(), "scale_of_raw": "0-100"},
    )


# --- ROUGE -----------------------------------------------------------------------------


@functools.cache
def _rouge_scorer(variant: str) -> Any:
    from rouge_score import rouge_scorer

    pin_absl_stream()

    return rouge_scorer.RougeScorer([variant], tokenizer=UnicodeTokenizer())


@against_ground_truth("rouge")
def rouge(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """ROUGE F1 (rouge-score) of a ``variant`` (default rougeL), Unicode-aware tokens.

    ``rougeLsum`` treats newlines as sentence boundaries (rouge-score's behaviour without
    ``split_summaries``, which would need nltk's punkt data)."""
    response, reference = _reference(inputs)
    variant = metric.variant or ROUGE_VARIANT
    scored = _rouge_scorer(variant).score(reference, response)[variant]
    return Score(
        score=float(scored.fmeasure),
        details={
            "variant": variant,
            "precision": float(scored.precision),
            "recall": float(scored.recall),
            "tokenizer": TOKENIZER_NAME,
        },
    )


# --- METEOR ----------------------------------------------------------------------------


class NoSynonyms:
    """Stands in for nltk's WordNet reader: no synsets, so only exact and stem matches."""

    def synsets(self, word: str, *args: Any, **kwargs: Any) -> list[Any]:
        return []


@functools.cache
def wordnet_available() -> bool:
    """Whether WordNet data is installed and loads (never downloads anything)."""
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
        from nltk.corpus import wordnet

        wordnet.synsets("test")
    except Exception:
        return False
    return True


def meteor_variant() -> str:
    """``meteor-wordnet`` when WordNet is installed (and not switched off), else
    ``meteor-exact-stem``."""
    if os.environ.get("HOLODECK_METEOR", "").strip().lower() == "exact-stem":
        return METEOR_EXACT_STEM
    return METEOR_WORDNET if wordnet_available() else METEOR_EXACT_STEM


def meteor_wordnet(variant: str) -> Any:
    """The ``wordnet`` argument for nltk's ``meteor_score`` in ``variant``."""
    if variant == METEOR_WORDNET:
        from nltk.corpus import wordnet

        return wordnet
    return NoSynonyms()


@against_ground_truth("meteor")
def meteor(metric: StandardMetric, inputs: MetricInput, ctx: EvalContext) -> Score:
    """METEOR (nltk), offline: WordNet synonyms when installed, else exact + stem."""
    from nltk.translate.meteor_score import meteor_score

    response, reference = _reference(inputs)
    variant = meteor_variant()
    value = meteor_score(
        [unicode_tokens(reference, punctuation=True)],
        unicode_tokens(response, punctuation=True),
        wordnet=meteor_wordnet(variant),
    )
    return Score(score=float(value), details={"variant": variant, "tokenizer": TOKENIZER_NAME})


def pin_absl_stream() -> None:
    """rouge-score imports absl.logging, whose handler keeps the ``sys.stderr`` object of the
    moment and *closes* it when handlers are shut down, unless it is the process's own stderr.
    Imported while stderr is redirected (a test's capture, a step's log capture), that closes
    someone else's stream later. Point it at the process's stderr, which it never closes."""
    import absl.logging

    absl.logging.get_absl_handler().python_handler.setStream(sys.__stderr__)
