"""GLUE metrics, offline: each task's official measure, with the key names of the `evaluate` "glue" module.

CoLA: Matthews correlation. STS-B: Pearson and Spearman correlation. MRPC and QQP: accuracy and F1 of the positive
class. Every other task (SST-2, MNLI, QNLI, RTE, WNLI): accuracy. Computed with scikit-learn and scipy, the same
calls the reference `evaluate` module makes, so no code is fetched from the Hub.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import EvalPrediction

from . import load as load_metric_module

GLUE_METRIC_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")


def glue_metric(task_name: str, predictions: Sequence, references: Sequence) -> dict[str, float]:
    """The official GLUE metric of `task_name` for class ids (or STS-B scores) `predictions` against `references`."""
    if task_name not in GLUE_METRIC_TASKS:
        raise ValueError(f"Unknown GLUE task {task_name!r}; choose one of {GLUE_METRIC_TASKS}.")
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape:
        raise ValueError(f"{task_name}: {predictions.shape[0]} predictions for {references.shape[0]} references.")
    if task_name == "cola":
        return {"matthews_correlation": float(matthews_corrcoef(references, predictions))}
    if task_name == "stsb":
        # In float64: scipy computes in the inputs' dtype, and float32 logits would cost 7 digits of the correlation.
        predictions, references = predictions.astype(np.float64), references.astype(np.float64)
        return {
            "pearson": float(pearsonr(references, predictions)[0]),
            "spearmanr": float(spearmanr(references, predictions)[0]),
        }
    accuracy = float(accuracy_score(references, predictions))
    if task_name in ("mrpc", "qqp"):
        return {"accuracy": accuracy, "f1": float(f1_score(references, predictions))}
    return {"accuracy": accuracy}


def logits_to_predictions(task_name: str, logits: np.ndarray) -> np.ndarray:
    """Class ids from logits [N, num_labels], or the scores [N] of the STS-B regression head [N, 1]."""
    if task_name == "stsb":
        return np.squeeze(logits, axis=-1)
    return np.argmax(logits, axis=-1)


def glue_compute_metrics(task_name: str) -> Callable[[EvalPrediction], dict[str, float]]:
    """A Trainer `compute_metrics` for `task_name`: model logits and gold labels -> the official metric, through the
    package's `evaluate` module "glue" (same numbers as `glue_metric`)."""
    if task_name not in GLUE_METRIC_TASKS:
        raise ValueError(f"Unknown GLUE task {task_name!r}; choose one of {GLUE_METRIC_TASKS}.")

    metric = None

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        nonlocal metric
        logits = eval_prediction.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        if metric is None:  # loaded at the first evaluation, then reused
            metric = load_metric_module("glue", task_name)
        predictions = logits_to_predictions(task_name, logits)
        return metric.compute(predictions=predictions, references=eval_prediction.label_ids)

    return compute_metrics
