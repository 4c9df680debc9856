"""Entity-level NER metrics with seqeval, in its default (conlleval-equivalent) mode, overall and per entity type."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from seqeval.metrics import accuracy_score, classification_report
from transformers import EvalPrediction

from ..data.ner import IGNORE_INDEX, word_predictions
from . import load as load_metric_module


def ner_metrics(references: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    """Micro-averaged entity precision/recall/F1 and token accuracy, plus `<TYPE>_precision/recall/f1/number`.

    An entity counts as found only when its type and its exact span match, as in conlleval.
    """
    if len(references) != len(predictions):
        raise ValueError(f"{len(predictions)} predicted sentences for {len(references)} reference sentences.")
    for i, (gold, predicted) in enumerate(zip(references, predictions)):
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {i}: {len(predicted)} predicted tags for {len(gold)} words.")
    report = classification_report(references, predictions, output_dict=True, zero_division=0)
    overall = report["micro avg"]
    metrics = {
        "precision": float(overall["precision"]),
        "recall": float(overall["recall"]),
        "f1": float(overall["f1-score"]),
        "accuracy": float(accuracy_score(references, predictions)),
    }
    for entity_type, scores in report.items():
        if entity_type.endswith(" avg"):
            continue
        metrics[f"{entity_type}_precision"] = float(scores["precision"])
        metrics[f"{entity_type}_recall"] = float(scores["recall"])
        metrics[f"{entity_type}_f1"] = float(scores["f1-score"])
        metrics[f"{entity_type}_number"] = int(scores["support"])
    return metrics


def tags_from_token_ids(
    predicted_ids: np.ndarray, label_ids: np.ndarray, label_list: Sequence[str]
) -> tuple[list[list[str]], list[list[str]]]:
    """Gold and predicted tags at the labelled positions (label != -100) of each row of [batch, seq_len] arrays."""
    references, predictions = [], []
    for predicted_row, label_row in zip(predicted_ids, label_ids):
        keep = label_row != IGNORE_INDEX
        references.append([label_list[i] for i in label_row[keep]])
        predictions.append([label_list[i] for i in predicted_row[keep]])
    return references, predictions


def ner_compute_metrics(
    label_list: Sequence[str],
    word_positions: Sequence[Sequence[int | None]] | None = None,
    word_tags: Sequence[Sequence[str]] | None = None,
) -> Callable[[EvalPrediction], dict[str, float]]:
    """A Trainer `compute_metrics`: token logits [batch, seq_len, num_labels] and aligned labels -> `ner_metrics`.

    With first-sub-token labels (how evaluation sets are built) the labelled positions are exactly the words. Running
    text has words without a piece of their own, which no label marks: there `word_positions` (each evaluation row's
    token predicting each word, in the evaluation set's order) and `word_tags` (its gold tags) score every word, as
    `--do_predict` does. Scored through the package's `evaluate` module "seqeval" (same numbers as `ner_metrics`).
    """

    metric = None

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        nonlocal metric
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        predicted_ids = np.argmax(logits, axis=-1)
        if word_positions is None:
            references, predictions = tags_from_token_ids(predicted_ids, eval_prediction.label_ids, label_list)
        else:
            references = [list(tags) for tags in word_tags]
            predictions = [
                word_predictions(row, (), len(positions), label_list, positions)[0]
                for row, positions in zip(predicted_ids, word_positions)
            ]
        if metric is None:  # loaded at the first evaluation, then reused
            metric = load_metric_module("seqeval")
        return metric.compute(predictions=predictions, references=references)

    return compute_metrics
