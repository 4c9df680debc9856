"""Reference definitions of the GLUE and NER metrics, written from the textbook formulas and conlleval's chunk rule:
what tests/test_metrics.py and tests/test_glue.py check albert_hf's metrics against."""

from __future__ import annotations

import math

import numpy as np


def reference_confusion(y_true, y_pred):
    tp = sum(t == 1 and p == 1 for t, p in zip(y_true, y_pred))
    tn = sum(t == 0 and p == 0 for t, p in zip(y_true, y_pred))
    fp = sum(t == 0 and p == 1 for t, p in zip(y_true, y_pred))
    fn = sum(t == 1 and p == 0 for t, p in zip(y_true, y_pred))
    return tp, tn, fp, fn


def reference_matthews(y_true, y_pred):
    tp, tn, fp, fn = reference_confusion(y_true, y_pred)
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return 0.0 if denominator == 0 else (tp * tn - fp * fn) / denominator


def reference_f1(y_true, y_pred):
    tp, _, fp, fn = reference_confusion(y_true, y_pred)
    return 2 * tp / (2 * tp + fp + fn)


def reference_pearson(x, y):
    x, y = np.asarray(x, float), np.asarray(y, float)  # float64 first: a float32 mean is off in the 8th digit
    x, y = x - np.mean(x), y - np.mean(y)
    return float(np.sum(x * y) / math.sqrt(np.sum(x * x) * np.sum(y * y)))


def reference_spearman(x, y):
    # Values without ties: Spearman is Pearson of the ranks.
    return reference_pearson(np.argsort(np.argsort(x)), np.argsort(np.argsort(y)))


def reference_chunks(tags):
    """conlleval's chunks for IOB tags: an entity starts at B-X, or at I-X not continuing an X entity."""
    chunks, start, kind = set(), None, None
    for position, tag in enumerate(list(tags) + ["O"]):
        tag_kind = None if tag == "O" else tag[2:]
        starts = tag != "O" and (tag.startswith("B-") or tag_kind != kind)
        if kind is not None and (tag == "O" or starts):
            chunks.add((start, position, kind))
            kind = None
        if starts:
            start, kind = position, tag_kind
    return chunks


def reference_ner_scores(references, predictions):
    gold = {(i, *chunk) for i, tags in enumerate(references) for chunk in reference_chunks(tags)}
    found = {(i, *chunk) for i, tags in enumerate(predictions) for chunk in reference_chunks(tags)}
    correct = len(gold & found)
    precision = correct / len(found) if found else 0.0
    recall = correct / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
