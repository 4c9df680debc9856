"""The GLUE tasks: where each keeps its texts and labels, in the tsv files and on the Hub.

Plain data, apart from the loaders of `albert_hf.data.glue`: the jobs' arguments read the task names from here
without loading `datasets` (`albert-hf glue --help`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GlueTask:
    """Where a GLUE task keeps its texts and labels, in the tsv files and on the Hub."""

    name: str
    folder: str  # folder name in glue_data/, also the stem of the leaderboard's prediction file
    tsv_text_columns: tuple[str, ...]  # header names of the text columns in the tsv files
    tsv_label_column: str | None  # header name of the gold label in train/dev tsv files
    hub_text_columns: tuple[str, ...]  # column names on the Hub and in csv/json files
    label_names: tuple[str, ...] | None  # labels as written in the tsv files, by class id; None for regression
    eval_splits: tuple[str, ...] = ("validation",)
    test_splits: tuple[str, ...] = ("test",)
    tsv_index_column: str = "index"  # header name of the row index in test tsv files
    headerless_train_dev: bool = False  # CoLA's train/dev files have no header: source, label, orig. label, sentence
    score_range: tuple[float, float] | None = None  # regression only: the scale of the gold scores (STS-B: 0 to 5)

    @property
    def is_regression(self) -> bool:
        return self.label_names is None

    @property
    def num_labels(self) -> int:
        return 1 if self.label_names is None else len(self.label_names)


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
# The Hub's class order for MNLI (its integer labels index this tuple), so tsv and Hub labels share ids.
_MNLI = ("entailment", "neutral", "contradiction")
_PAIR = ("sentence1", "sentence2")

GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in (
        GlueTask("cola", "CoLA", ("sentence",), None, ("sentence",), _BINARY, headerless_train_dev=True),
        GlueTask("sst2", "SST-2", ("sentence",), "label", ("sentence",), _BINARY),
        GlueTask("mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", _PAIR, _BINARY),
        GlueTask("stsb", "STS-B", _PAIR, "score", _PAIR, None, score_range=(0.0, 5.0)),
        GlueTask(
            "qqp",
            "QQP",
            ("question1", "question2"),
            "is_duplicate",
            ("question1", "question2"),
            _BINARY,
            tsv_index_column="id",
        ),
        GlueTask(
            "mnli",
            "MNLI",
            _PAIR,
            "gold_label",
            ("premise", "hypothesis"),
            _MNLI,
            eval_splits=("validation_matched", "validation_mismatched"),
            test_splits=("test_matched", "test_mismatched"),
        ),
        GlueTask("qnli", "QNLI", ("question", "sentence"), "label", ("question", "sentence"), _ENTAILMENT),
        GlueTask("rte", "RTE", _PAIR, "label", _PAIR, _ENTAILMENT),
        GlueTask("wnli", "WNLI", _PAIR, "label", _PAIR, _BINARY),
        # The diagnostic set: unlabelled pairs, predicted with the MNLI model and its labels.
        GlueTask("ax", "AX", _PAIR, None, ("premise", "hypothesis"), _MNLI, eval_splits=(), test_splits=("ax",)),
    )
}
