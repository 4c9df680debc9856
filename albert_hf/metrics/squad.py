"""The official SQuAD evaluation, offline: v1.1 (exact match / F1) and v2.0 (plus HasAns/NoAns and best thresholds).

The scoring rules are those of the official scripts `evaluate-v1.1.py` and `evaluate-v2.0.py` (answer normalization:
lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace; token-bag F1; the maximum over the
reference answers). The two versions differ on empty strings, which only v2.0 can score:

- v1.1: F1 of an empty prediction is 0; every question has at least one reference answer.
- v2.0: references that normalize to "" are dropped; a question left with none is unanswerable and its only correct
  answer is "" (F1 = 1 when both sides are empty, 0 when only one is).

References are given as `{question_id: [answer texts]}` (an empty list: unanswerable), predictions as
`{question_id: text}`. A question without a prediction scores 0 and is counted in `missing`; the official v1.1 script
does the same (the v2.0 script would stop with a KeyError).

`squad_metrics` scores a SQuAD job's post-processed answers (`albert_hf.data.squad_windows.SquadPredictions`) against its
examples, through the `evaluate` modules shipped in albert_hf/metrics/modules.
"""

from __future__ import annotations

import collections
import logging
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..data.squad_windows import gold_answers
from . import load as load_metric_module

if TYPE_CHECKING:
    from datasets import Dataset

    from ..data.squad_windows import SquadPredictions

logger = logging.getLogger(__name__)

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """The official normalization: lowercase, remove punctuation, remove articles, collapse whitespace."""
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, reference: str) -> int:
    """1 when the two answers are equal after normalization, else 0 (same in v1.1 and v2.0)."""
    return int(normalize_answer(prediction) == normalize_answer(reference))


def f1_score_v1(prediction: str, reference: str) -> float:
    """Token-bag F1 of `evaluate-v1.1.py`: 0 when the normalized answers share no token (so also when one is empty)."""
    return _token_f1(normalize_answer(prediction).split(), normalize_answer(reference).split())


def f1_score_v2(prediction: str, reference: str) -> float:
    """Token-bag F1 of `evaluate-v2.0.py`: when either side is empty (no answer), 1 if both are, else 0."""
    prediction_tokens = normalize_answer(prediction).split()
    reference_tokens = normalize_answer(reference).split()
    if not prediction_tokens or not reference_tokens:
        return float(prediction_tokens == reference_tokens)
    return _token_f1(prediction_tokens, reference_tokens)


def _token_f1(prediction_tokens: list[str], reference_tokens: list[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(reference_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(reference_tokens)
    return 2 * precision * recall / (precision + recall)


def _best_over_references(metric: Callable[[str, str], float], prediction: str, references: Sequence[str]) -> float:
    return max(metric(prediction, reference) for reference in references)


def squad_v1_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """`evaluate-v1.1.py`: exact match and F1 in percent over all reference questions.

    Returns `{"exact_match", "f1", "total", "missing"}`; unanswered questions count as 0.
    """
    exact_total = f1_total = 0.0
    missing = 0
    for question_id, answers in references.items():
        if not answers:
            raise ValueError(
                f"SQuAD v1.1 evaluation: question {question_id!r} has no reference answer (an unanswerable "
                "question); evaluate it with squad_v2_scores (--version_2_with_negative)."
            )
        if question_id not in predictions:
            missing += 1
            continue
        exact_total += _best_over_references(exact_match_score, predictions[question_id], answers)
        f1_total += _best_over_references(f1_score_v1, predictions[question_id], answers)
    _warn_missing(missing, len(references))
    total = len(references)
    return {
        "exact_match": 100.0 * exact_total / total,
        "f1": 100.0 * f1_total / total,
        "total": total,
        "missing": missing,
    }


def squad_v2_raw_scores(
    predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]
) -> tuple[dict[str, float], dict[str, float]]:
    """`get_raw_scores` of `evaluate-v2.0.py`: per-question exact match and F1 (0/1 and [0, 1]) before thresholds.

    Questions without a prediction are left out (the caller scores them 0).
    """
    exact_scores: dict[str, float] = {}
    f1_scores: dict[str, float] = {}
    for question_id, answers in references.items():
        if question_id not in predictions:
            continue
        # References that normalize to "" cannot be matched; with none left, "" is the only correct answer.
        gold = [answer for answer in answers if normalize_answer(answer)] or [""]
        exact_scores[question_id] = _best_over_references(exact_match_score, predictions[question_id], gold)
        f1_scores[question_id] = _best_over_references(f1_score_v2, predictions[question_id], gold)
    return exact_scores, f1_scores


def apply_no_answer_threshold(
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
    na_prob_thresh: float,
) -> dict[str, float]:
    """Questions whose no-answer score exceeds the threshold are answered "": right exactly when unanswerable."""
    return {
        question_id: float(not has_answer[question_id]) if na_probs[question_id] > na_prob_thresh else score
        for question_id, score in scores.items()
    }


def find_best_threshold(
    predictions: Mapping[str, str],
    scores: Mapping[str, float],
    na_probs: Mapping[str, float],
    has_answer: Mapping[str, bool],
) -> tuple[float, float]:
    """`find_best_thresh` of `evaluate-v2.0.py`: the no-answer threshold that maximizes the total score.

    Sweeps the questions by increasing no-answer score; at threshold t, questions with score <= t keep their
    prediction and the others answer "". Starts from "answer nothing" (every unanswerable question right). Returns
    (best score in percent of the scored questions, best threshold).
    """
    current = best = sum(1 for answerable in has_answer.values() if not answerable)
    best_threshold = 0.0
    # Like the official script, walk `na_probs` in its own order (ties keep it) and skip unscored questions.
    for question_id in sorted(na_probs, key=lambda key: na_probs[key]):
        if question_id not in scores:
            continue
        if has_answer[question_id]:
            current += scores[question_id]
        elif predictions[question_id]:
            current -= 1  # an unanswerable question, right while skipped, is now answered with text
        if current > best:
            best = current
            best_threshold = na_probs[question_id]
    return 100.0 * best / len(scores), best_threshold


def squad_v2_scores(
    predictions: Mapping[str, str],
    references: Mapping[str, Sequence[str]],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """`evaluate-v2.0.py`: exact and F1 in percent, HasAns/NoAns breakdowns and, given `na_probs`, best thresholds.

    Args:
        predictions: question id -> predicted text ("" for no answer).
        references: question id -> reference answer texts; an empty list marks an unanswerable question.
        na_probs: question id -> no-answer score (a probability, or the null-score difference of `null_odds.json`).
            Questions scoring above `na_prob_thresh` are treated as answered "". Without it, no threshold applies and
            no best threshold is searched (the official script's behaviour without `--na-prob-file`).
        na_prob_thresh: the threshold applied to `na_probs`.

    Returns:
        `exact`, `f1`, `total`, `missing`; `HasAns_exact/f1/total` and `NoAns_exact/f1/total` where such questions
        exist; with `na_probs`: `best_exact`, `best_exact_thresh`, `best_f1`, `best_f1_thresh`.
    """
    has_answer = {question_id: bool(answers) for question_id, answers in references.items()}
    exact_raw, f1_raw = squad_v2_raw_scores(predictions, references)
    missing = len(references) - len(exact_raw)
    _warn_missing(missing, len(references))

    if na_probs is None:
        exact, f1 = exact_raw, f1_raw
    else:
        absent = [question_id for question_id in exact_raw if question_id not in na_probs]
        if absent:
            raise ValueError(f"na_probs has no entry for {len(absent)} predicted questions, e.g. {absent[0]!r}.")
        exact = apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
        f1 = apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)

    results: dict[str, float] = {**_percentages(exact, f1, list(references)), "missing": missing}
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        question_ids = [question_id for question_id, answerable in has_answer.items() if answerable == wanted]
        if question_ids:
            results.update({f"{prefix}_{key}": value for key, value in _percentages(exact, f1, question_ids).items()})

    if na_probs is not None and exact_raw:
        results["best_exact"], results["best_exact_thresh"] = find_best_threshold(
            predictions, exact_raw, na_probs, has_answer
        )
        results["best_f1"], results["best_f1_thresh"] = find_best_threshold(predictions, f1_raw, na_probs, has_answer)
    return results


def _percentages(exact: Mapping[str, float], f1: Mapping[str, float], question_ids: Sequence[str]) -> dict[str, float]:
    """Mean exact and F1 in percent over `question_ids`; a question without a score counts as 0."""
    total = len(question_ids)
    return {
        "exact": 100.0 * sum(exact.get(question_id, 0.0) for question_id in question_ids) / total,
        "f1": 100.0 * sum(f1.get(question_id, 0.0) for question_id in question_ids) / total,
        "total": total,
    }


def _warn_missing(missing: int, total: int) -> None:
    if missing:
        logger.warning("SQuAD evaluation: %d of %d questions have no prediction and score 0.", missing, total)


def squad_metrics(
    predictions: SquadPredictions, examples: Dataset, version_2_with_negative: bool, null_score_diff_threshold: float
) -> dict[str, float]:
    """The official metrics of the answers.

    v1.1: `exact_match`, `f1`. v2.0: `exact`, `f1` and their HasAns/NoAns breakdowns at the fixed threshold, and
    `best_exact`/`best_f1` with their thresholds, searched over the null odds of the evaluation set as the original
    does. Scoring the best non-null spans with the null odds at the fixed threshold is the same as scoring
    `predictions.json`; the threshold search needs the non-null spans. Scored through the package's `evaluate`
    modules "squad" and "squad_v2" (same numbers as `squad_v1_scores` and `squad_v2_scores`).
    """
    references = gold_answers(examples)
    gold = [
        {"id": key, "answers": {"text": list(texts), "answer_start": [0] * len(texts)}}
        for key, texts in references.items()
    ]
    if not version_2_with_negative:
        answers = [{"id": key, "prediction_text": predictions.predictions[key]} for key in references]
        return load_metric_module("squad").compute(predictions=answers, references=gold)
    answers = [
        {"id": key, "prediction_text": predictions.best_spans[key], "no_answer_probability": predictions.null_odds[key]}
        for key in references
    ]
    return load_metric_module("squad_v2").compute(
        predictions=answers, references=gold, no_answer_threshold=null_score_diff_threshold
    )
