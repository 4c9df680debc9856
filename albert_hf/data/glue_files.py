"""GLUE's files: the tasks (where each keeps its texts and labels), the original tsv layout (`glue_data/<TASK>/`),
csv/json with named columns, or the Hub's `nyu-mll/glue`, and the leaderboard's prediction files.

Whatever the source, every split becomes a `datasets.Dataset` with the same columns:

    sentence1: str          first text (the only one for CoLA and SST-2)
    sentence2: str          second text (pair tasks only)
    label:     int | float  class id into `GlueTask.label_names`, or the STS-B score (absent in test splits)
    idx:       int          the row's index, as the leaderboard wants it in prediction files

Split names follow the Hub: train, validation (MNLI: validation_matched / validation_mismatched), test (MNLI:
test_matched / test_mismatched), plus ax for the diagnostic set, which is predicted with the MNLI model.
"""

from __future__ import annotations

import io
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datasets import Dataset, DatasetDict

from ..errors import DataError, MissingFileError, UserError
from ..output_files import write_file
from .text_checks import RowPlaces, check_text, text_problem
from .textfiles import read_utf8

logger = logging.getLogger(__name__)


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

# Every GLUE task by its lower-case name ("mrpc", "sts-b" is "stsb"): the GLUE script's table of tasks.
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


# Split name -> file stem in glue_data/<TASK>/ ("dev" where the Hub says "validation").
_TSV_STEMS = {
    "train": "train",
    "validation": "dev",
    "validation_matched": "dev_matched",
    "validation_mismatched": "dev_mismatched",
    "test": "test",
    "test_matched": "test_matched",
    "test_mismatched": "test_mismatched",
    "ax": "diagnostic",
}

# Leaderboard prediction file for each test split.
SUBMISSION_FILES = {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv", "ax": "AX.tsv"}


def get_glue_task(task_name: str) -> GlueTask:
    """The task `--task_name` names, in any case and with or without its hyphen ("SST-2", "sst2"); an unknown name
    is a `UserError` listing the tasks."""
    key = task_name.lower().replace("-", "")
    if key not in GLUE_TASKS:
        raise UserError(f"Unknown GLUE task {task_name!r}; choose one of {sorted(GLUE_TASKS)}.")
    return GLUE_TASKS[key]


def is_labelled(split: str) -> bool:
    return not (split.startswith("test") or split == "ax")


def glue_tsv_path(data_dir: str, split: str) -> str:
    """glue_data/<TASK>/<stem>.tsv for a split name, e.g. dev_matched.tsv for MNLI's validation_matched."""
    return os.path.join(data_dir, f"{_TSV_STEMS[split]}.tsv")


# ----------------------------------------------------------------------------------------------------------------------
# tsv files in the original layout


def read_glue_tsv(path: str, task: GlueTask, labelled: bool, skip_malformed_rows: bool = False) -> list[dict]:
    """Rows of one GLUE tsv file as examples (see the module docstring).

    Texts are split on tabs only (no quote handling: GLUE texts contain bare quotes). A row whose column count differs
    from the header's, or whose label is unknown, raises an error naming the file and line; with
    `skip_malformed_rows` such rows are skipped, counted and logged instead.
    """
    # utf-8-sig: MRPC's header starts with a byte-order mark; read_utf8 names the file and line of bad bytes
    # of a byte that is not UTF-8 (open() would raise a UnicodeDecodeError naming neither).
    with io.StringIO(read_utf8(path, encoding="utf-8-sig"), newline=None) as handle:
        lines = [(number, line.rstrip("\r\n")) for number, line in enumerate(handle, start=1)]
    lines = [(number, line) for number, line in lines if line.strip()]
    if not lines:
        raise DataError(f"{path}: empty file.")

    headerless = task.headerless_train_dev and labelled
    if headerless:
        # CoLA train/dev: source, label, original label (blank), sentence.
        num_columns, text_positions, label_position = 4, (3,), 1
        rows = lines
    else:
        header = lines[0][1].split("\t")
        num_columns = len(header)
        text_positions = tuple(_column(header, name, path) for name in task.tsv_text_columns)
        label_position = _column(header, task.tsv_label_column, path) if labelled else None
        index_position = None if labelled else _column(header, task.tsv_index_column, path)
        rows = lines[1:]

    examples, malformed = [], []
    for row_number, (line_number, line) in enumerate(rows):
        fields = line.split("\t")
        try:
            if len(fields) != num_columns:
                raise DataError(f"expected {num_columns} tab-separated columns, found {len(fields)}")
            example = {}
            for i, p in enumerate(text_positions):  # the reader contract: a text, no NUL byte, not empty
                problem = text_problem(fields[p])
                if problem is not None:
                    raise DataError(f"column {p + 1} (sentence{i + 1}): {problem}")
                example[f"sentence{i + 1}"] = fields[p]
            if labelled:
                example["label"] = parse_glue_label(task, fields[label_position])
                example["idx"] = row_number
            else:
                example["idx"] = int(fields[index_position])
        except ValueError as error:
            if not skip_malformed_rows:
                raise DataError(f"{path}:{line_number}: {error}") from None
            malformed.append(line_number)
            continue
        examples.append(example)
    if malformed:
        logger.warning(
            "%s: skipped %d malformed rows (lines %s%s).",
            path,
            len(malformed),
            ", ".join(map(str, malformed[:10])),
            ", ..." if len(malformed) > 10 else "",
        )
    return examples


def _column(header: list[str], name: str, path: str) -> int:
    if name not in header:
        raise DataError(f"{path}:1: the header has no column {name!r} (columns: {header}).")
    return header.index(name)


def parse_glue_label(task: GlueTask, value: str) -> int | float:
    """A tsv label as the model's target: the class id, or the STS-B score as a float."""
    if task.is_regression:
        try:
            score = float(value)
        except ValueError:
            raise DataError(f"label {value!r} is not a number") from None
        return checked_score(task, score, value)
    if value not in task.label_names:
        raise DataError(f"label {value!r} is not one of {list(task.label_names)}")
    return task.label_names.index(value)


def checked_score(task: GlueTask, score: float, written: object = None) -> float:
    """A regression label that is a finite number on the task's scale, else a `DataError` (without the place, which
    the caller adds). `float()` reads "nan" and "inf" as numbers, and a score off the scale (-42 for STS-B's 0 to 5)
    would train the model towards it."""
    shown = repr(written if written is not None else score)
    if not math.isfinite(score):
        raise DataError(f"label {shown} is not a finite number")
    if task.score_range is not None and not task.score_range[0] <= score <= task.score_range[1]:
        low, high = task.score_range
        raise DataError(f"label {shown} is outside the {task.name} score range {low:g} to {high:g}")
    return score


def load_glue_tsv(
    data_dir: str, task: GlueTask, splits: Sequence[str], skip_malformed_rows: bool = False
) -> DatasetDict:
    """The given splits of `data_dir` (a glue_data/<TASK> folder) as a DatasetDict."""
    datasets = {}
    for split in splits:
        path = glue_tsv_path(data_dir, split)
        if not os.path.isfile(path):
            raise MissingFileError(f"{task.folder}: split {split!r} needs {path}, which does not exist.")
        rows = read_glue_tsv(path, task, labelled=is_labelled(split), skip_malformed_rows=skip_malformed_rows)
        datasets[split] = Dataset.from_list(rows)
    return DatasetDict(datasets)


# ----------------------------------------------------------------------------------------------------------------------
# csv/json files and the Hub, both with the Hub's column names


def load_glue_files(task: GlueTask, files: dict[str, str], skip_malformed_rows: bool = False) -> DatasetDict:
    """Files by split name: .tsv in the task's original GLUE layout, or .csv/.json/.jsonl with the Hub's column
    names (e.g. premise, hypothesis, label), where labels may be class ids or label names (e.g. "entailment")."""
    from datasets import load_dataset

    datasets = {}
    for split, path in files.items():
        if not os.path.isfile(path):
            raise MissingFileError(f"{task.name}: the {split} file {path} does not exist.")
        extension = os.path.splitext(path)[1].lstrip(".").lower()
        if extension == "tsv":
            rows = read_glue_tsv(path, task, labelled=is_labelled(split), skip_malformed_rows=skip_malformed_rows)
            datasets[split] = Dataset.from_list(rows)
            continue
        builder = {"csv": "csv", "json": "json", "jsonl": "json"}.get(extension)
        if builder is None:
            raise DataError(f"{path}: expected a .tsv (GLUE layout), .csv, .json or .jsonl file for the {split} split.")
        dataset = load_dataset(builder, data_files={split: path}, split=split)
        datasets[split] = _normalize_columns(dataset, task, split, source=path, places=RowPlaces([path], path))
    return DatasetDict(datasets)


def load_glue_from_hub(task: GlueTask, splits: Sequence[str], dataset_name: str = "nyu-mll/glue") -> DatasetDict:
    """The task from the Hub (needs a network), with columns renamed to sentence1/sentence2."""
    from datasets import load_dataset

    raw = load_dataset(dataset_name, task.name)
    return from_hub_layout(raw, task, splits, source=dataset_name)


def from_hub_layout(raw: DatasetDict, task: GlueTask, splits: Sequence[str], source: str) -> DatasetDict:
    """The Hub layout (task-specific text columns, int labels, -1 in test splits) -> our columns."""
    missing = [split for split in splits if split not in raw]
    if missing:
        raise DataError(f"{source} ({task.name}) has no split {missing}; it has {list(raw)}.")
    return DatasetDict({split: _normalize_columns(raw[split], task, split, source) for split in splits})


def _normalize_columns(
    dataset: Dataset, task: GlueTask, split: str, source: str, places: RowPlaces | None = None
) -> Dataset:
    """The task's columns as sentence1/sentence2 (each text checked by the reader contract) and the labels as
    targets; errors name a row by its file and line (`places`), else by its index in the split."""
    places = places or RowPlaces(None, f"{source}[{split}]")
    labelled = is_labelled(split)
    required = list(task.hub_text_columns) + (["label"] if labelled else [])
    missing = [name for name in required if name not in dataset.column_names]
    if missing:
        raise DataError(f"{source}: the {split} split lacks columns {missing} (has {dataset.column_names}).")
    for column in task.hub_text_columns:
        for row, value in enumerate(dataset[column]):
            if text_problem(value) is not None:
                check_text(value, places.where(row), f"column {column!r}")
    if "idx" not in dataset.column_names:
        dataset = dataset.add_column("idx", list(range(len(dataset))))
    renames = {old: f"sentence{i + 1}" for i, old in enumerate(task.hub_text_columns) if old != f"sentence{i + 1}"}
    dataset = dataset.rename_columns(renames)
    keep = [f"sentence{i + 1}" for i in range(len(task.hub_text_columns))] + ["idx"] + (["label"] if labelled else [])
    dataset = dataset.remove_columns([name for name in dataset.column_names if name not in keep])
    if labelled:
        labels = [_label_id(task, label, places.where(row)) for row, label in enumerate(dataset["label"])]
        dataset = dataset.remove_columns("label").add_column("label", labels)
    return dataset


def _label_id(task: GlueTask, label: int | float | str | None, place: str) -> int | float:
    """A csv/json/Hub label as the model's target: a label name as in the tsv files, or a class id (int or digits).
    `place` is where the row is (its file and line), which errors name."""
    where = f"{place}: column 'label'"
    if label is None:
        raise DataError(f"{where}: the label is missing (empty, or a non-number such as nan that csv reads as empty).")
    if isinstance(label, str):
        if task.is_regression or label in task.label_names:
            try:
                return parse_glue_label(task, label)
            except ValueError as error:
                raise DataError(f"{where}: {error}") from None
        if not label.strip().isdigit():
            raise DataError(f"{where}: label {label!r} is neither one of {list(task.label_names)} nor a class id.")
        label = int(label)
    if task.is_regression:
        try:
            return checked_score(task, float(label), label)
        except DataError as error:
            raise DataError(f"{where}: {error}") from None
    if not 0 <= label < task.num_labels:
        raise DataError(f"{where}: label {label} is not a class id of {task.name} (0..{task.num_labels - 1}).")
    return int(label)


# ----------------------------------------------------------------------------------------------------------------------
# leaderboard files


def submission_filename(task: GlueTask, split: str) -> str:
    """The file name the GLUE leaderboard expects for a test split, e.g. CoLA.tsv, MNLI-m.tsv, AX.tsv."""
    return SUBMISSION_FILES.get(split, f"{task.folder}.tsv")


def write_glue_predictions(path: str, task: GlueTask, indices: Sequence[int], predictions: Sequence) -> Path:
    """A leaderboard prediction file: header `index<TAB>prediction`, one row per test example; returns the path
    written (through `albert_hf.output_files`: beside a user's file of that name, never over it).

    Labels are written as in the task's tsv files (e.g. "entailment", "1"); STS-B scores with three decimals.
    """
    if len(indices) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions for {len(indices)} test examples.")
    rows = ["index\tprediction\n"]
    for index, prediction in zip(indices, predictions):
        value = f"{float(prediction):.3f}" if task.is_regression else task.label_names[int(prediction)]
        rows.append(f"{int(index)}\t{value}\n")
    return write_file(path, "".join(rows))
