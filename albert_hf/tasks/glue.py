"""Fine-tune ALBERT on a GLUE task with Trainer: `albert-hf glue` and `examples/glue/run_glue.py`.

    python examples/glue/run_glue.py --task_name mrpc --data_dir glue_data/MRPC \\
        --model_name_or_path <albert checkpoint> --preset mrpc --do_train --do_eval --do_predict --output_dir out/mrpc

Data come from `--data_dir` (original tsv layout), from `--train_file/--validation_file/--test_file` (tsv in the GLUE
layout, or csv/json with the Hub's column names), or else from the Hub. `--do_predict` writes the leaderboard file
(e.g. MRPC.tsv; MNLI-m.tsv and MNLI-mm.tsv, plus AX.tsv with `--ax_file`).
"""

from __future__ import annotations

import logging
from functools import cached_property

from datasets import Dataset, DatasetDict
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

from ..data.glue import (
    GLUE_TASKS,
    GlueTask,
    get_glue_task,
    load_glue_files,
    load_glue_from_hub,
    load_glue_tsv,
    read_glue_tsv,
    submission_filename,
    tokenize_glue,
    write_glue_predictions,
)
from ..data.labels import CLASSIFICATION, REGRESSION, LabelSpace
from ..errors import UserError
from ..hub import CardInfo
from ..metrics.glue import glue_compute_metrics, logits_to_predictions
from ..modeling import AlbertForSequenceClassification
from .arguments import GlueArguments
from .finetuning import FineTuningArguments, FineTuningJob, first_output, log_truncation, output_path

logger = logging.getLogger(__name__)


def load_glue_splits(
    task: GlueTask, data_args: FineTuningArguments, glue_args: GlueArguments, splits: list[str]
) -> DatasetDict:
    """The requested splits from --data_dir, from --*_file, or from the Hub, in that order of preference."""
    if not splits:
        return DatasetDict()
    if data_args.data_dir:
        return load_glue_tsv(data_args.data_dir, task, splits, glue_args.skip_malformed_rows)
    given = {
        "train": data_args.train_file,
        task.eval_splits[0]: data_args.validation_file,
        task.test_splits[0]: data_args.test_file,
    }
    if any(given.values()):
        # Files name one evaluation and one test set: MNLI's mismatched sets then come only with --data_dir.
        secondary = set(task.eval_splits[1:] + task.test_splits[1:])
        missing = [split for split in splits if not given.get(split) and split not in secondary]
        if missing:
            raise UserError(
                f"{task.name}: no file for the {missing} split(s); pass --train_file/--validation_file/"
                f"--test_file, or --data_dir with the GLUE folder."
            )
        files = {split: given[split] for split in splits if given.get(split)}
        return load_glue_files(task, files, glue_args.skip_malformed_rows)
    return load_glue_from_hub(task, splits, glue_args.dataset_name)


def predict_test_sets(
    trainer: Trainer, task: GlueTask, test_sets: dict[str, Dataset], training_args: TrainingArguments
) -> dict[str, str]:
    """Predict every test split and write its leaderboard file; returns split -> written path."""
    written = {}
    for split, dataset in test_sets.items():
        logits = trainer.predict(dataset, metric_key_prefix=f"predict_{split}").predictions
        predictions = logits_to_predictions(task.name, first_output(logits))
        if trainer.is_world_process_zero():
            path = output_path(training_args, submission_filename(task, split))
            write_glue_predictions(path, task, dataset["idx"], predictions)
            logger.info("Wrote %d %s predictions to %s", len(dataset), split, path)
            written[split] = path
    return written


class SequenceClassificationJob(FineTuningJob):
    """A text (or text pair) classification or regression on the fine-tuning skeleton: what GLUE and `albert-hf
    classify` share (the model, how texts are encoded and batched, the head's config from the label space)."""

    model_class = AlbertForSequenceClassification

    label_space: LabelSpace  # the task's labels: class names in id order, or a regression (a property of the task)

    def config_fields(self) -> dict:
        return {**self.label_space.config_kwargs(), **self.task_args.early_exit_config()}

    def encode(self, split: str, examples: Dataset) -> Dataset:
        max_seq_length = self.data_args.max_seq_length
        encoded, num_truncated = tokenize_glue(
            examples, self.tokenizer, max_seq_length, self.data_args.pad_to_max_length
        )
        log_truncation(split, num_truncated, len(encoded), max_seq_length)
        return encoded

    def data_collator(self, pad_to_multiple_of: int | None):
        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=pad_to_multiple_of)


class GlueJob(SequenceClassificationJob):
    """GLUE on the fine-tuning skeleton: sentence (pair) classification or regression, leaderboard files."""

    argument_types = (FineTuningArguments, GlueArguments)

    @cached_property
    def task(self) -> GlueTask:
        return get_glue_task(self.task_args.task_name)

    @property
    def task_name(self) -> str:
        return self.task.name

    def check_arguments(self) -> None:
        if self.task.name == "ax":
            raise UserError(
                "AX is predicted with an MNLI model: run --task_name mnli --do_predict --ax_file <diagnostic.tsv>."
            )
        if self.task_args.ax_file and self.task.name != "mnli":
            raise UserError("--ax_file needs --task_name mnli (AX uses the MNLI labels).")

    def splits(self) -> list[str]:
        args = self.training_args
        return [
            *(["train"] if args.do_train else []),
            *(self.task.eval_splits if args.do_eval else []),
            *(self.task.test_splits if args.do_predict else []),
        ]

    def load_splits(self, splits: list[str]) -> dict[str, Dataset]:
        raw = dict(load_glue_splits(self.task, self.data_args, self.task_args, splits))
        if self.training_args.do_predict and self.task_args.ax_file:
            raw["ax"] = Dataset.from_list(read_glue_tsv(self.task_args.ax_file, GLUE_TASKS["ax"], labelled=False))
        return raw

    @cached_property
    def label_space(self) -> LabelSpace:
        if self.task.is_regression:
            return LabelSpace(REGRESSION)
        return LabelSpace(CLASSIFICATION, list(self.task.label_names))

    def eval_sets(self) -> dict[str, Dataset]:
        # The first evaluation split reports as "eval"; MNLI's mismatched one as "eval_mismatched".
        return {
            "eval" if split == self.task.eval_splits[0] else split.removeprefix("validation_"): self.features[split]
            for split in self.task.eval_splits
            if split in self.features
        }

    def compute_metrics(self):
        return glue_compute_metrics(self.task.name)

    def card_info(self) -> CardInfo:
        return CardInfo(
            base_model=self.model_args.model_name_or_path,
            dataset_id="nyu-mll/glue",
            dataset_config=self.task.name,
            dataset_name=f"GLUE {self.task.name.upper()}",
        )

    def predict(self, trainer: Trainer) -> None:
        test_sets = {split: self.features[split] for split in (*self.task.test_splits, "ax") if split in self.features}
        predict_test_sets(trainer, self.task, test_sets, self.training_args)


def main(argv: list[str] | None = None) -> int:
    return GlueJob.main(argv)
