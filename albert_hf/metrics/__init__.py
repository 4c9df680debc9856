"""Offline task metrics, equal to the reference definitions (GLUE, SQuAD v1.1/v2.0, CoNLL NER).

Two ways to use them, giving the same numbers:

  * the functions: `albert_hf.metrics.glue.glue_metric`, `squad.squad_v1_scores` / `squad_v2_scores`,
    `ner.ner_metrics`;
  * `evaluate` modules shipped inside the package, loaded by path with no network (the Hub's "glue", "squad",
    "squad_v2" and "seqeval" modules need it): `evaluate.load(albert_hf.metrics.path("glue"), "mrpc")`, or
    `albert_hf.metrics.load("glue", "mrpc")`. They take the Hub modules' inputs (`add_batch`, `compute`,
    `evaluate.combine` work as usual) and compute with the functions above.
"""

from __future__ import annotations

import os
from pathlib import Path

MODULES_DIR = Path(__file__).resolve().parent / "modules"
METRIC_MODULES = ("glue", "squad", "squad_v2", "seqeval")


def path(name: str) -> str:
    """The folder of the `evaluate` module `name` ("glue", "squad", "squad_v2" or "seqeval"), for `evaluate.load`."""
    if name not in METRIC_MODULES:
        raise ValueError(f"No albert_hf metric module {name!r}; choose one of {METRIC_MODULES}.")
    return os.fspath(MODULES_DIR / name)


def load(name: str, config_name: str | None = None, **kwargs):
    """`evaluate.load` of the shipped module `name` (offline). Keeps its data in memory unless told otherwise: no
    cache files, so several processes (each scoring gathered predictions) never share one."""
    import evaluate

    kwargs.setdefault("keep_in_memory", True)
    return evaluate.load(path(name), config_name, **kwargs)


# The metric a task's dev figure is reported in (the paper's Table 9 and 10 columns), by the `finetuning_task` each
# job writes into its model's config: what best-dev selection compares checkpoints by and seeds are ranked by.
GLUE_TASK_METRICS = {"cola": "matthews_correlation", "stsb": "pearson"}  # every other GLUE task: accuracy
JOB_METRICS = {"squad": "f1", "ner": "f1", "multiple_choice": "accuracy"}


def task_metric(finetuning_task: str | None, problem_type: str | None = None) -> str | None:
    """The name (without "eval_") of the metric task `finetuning_task` is judged by: GLUE's own per task (CoLA's
    Matthews correlation, STS-B's Pearson correlation, accuracy for the others, MRPC and QQP included as in the
    paper's dev tables), SQuAD's F1, seqeval's entity F1 for NER, accuracy for multiple choice and for tables of
    classes, Pearson correlation for tables of scores (`problem_type` "regression"). None for a task it does not
    know."""
    from .glue import GLUE_METRIC_TASKS

    if finetuning_task in GLUE_METRIC_TASKS:
        return GLUE_TASK_METRICS.get(finetuning_task, "accuracy")
    if finetuning_task == "classify":
        return "pearson" if problem_type == "regression" else "accuracy"
    return JOB_METRICS.get(finetuning_task or "")
