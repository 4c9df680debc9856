"""GLUE with Trainer, as plain functions: what `albert_hf/scripts/glue.py` (`albert-hf glue`) calls.

    albert-hf glue --task_name mrpc --data_dir glue_data/MRPC --model_name_or_path <albert checkpoint> \\
        --preset mrpc --do_train --do_eval --do_predict --output_dir out/mrpc

Data come from `--data_dir` (original tsv layout), from `--train_file/--validation_file/--test_file` (tsv in the GLUE
layout, or csv/json with the Hub's column names), or else from the Hub. `--do_predict` writes the leaderboard file
(e.g. MRPC.tsv; MNLI-m.tsv and MNLI-mm.tsv, plus AX.tsv with `--ax_file`). `encode_texts` is shared with
`albert-hf classify` (`albert_hf.tasks.classify`): both feed `[CLS] text [SEP] (pair [SEP])` to
`AlbertForSequenceClassification`.
"""

from __future__ import annotations

import logging

from datasets import Dataset, DatasetDict
from transformers import Trainer, TrainingArguments

from ..argument_parsing import ModelArguments
from ..arguments import GlueArguments
from ..data.glue_files import (
    GLUE_TASKS,
    GlueTask,
    load_glue_files,
    load_glue_from_hub,
    load_glue_tsv,
    read_glue_tsv,
    submission_filename,
    write_glue_predictions,
)
from ..data.labels import CLASSIFICATION, REGRESSION, LabelSpace
from ..data.text_pairs import tokenize_text_pairs
from ..errors import UserError
from ..finetuning import FineTuningArguments, first_output, log_truncation, output_path
from ..hub import CardInfo
from ..metrics.glue import logits_to_predictions

logger = logging.getLogger(__name__)


def glue_splits(task: GlueTask, training_args: TrainingArguments) -> list[str]:
    """The splits a run needs: train for --do_train, the task's evaluation splits for --do_eval (MNLI: matched and
    mismatched), its test splits for --do_predict."""
    return [
        *(["train"] if training_args.do_train else []),
        *(task.eval_splits if training_args.do_eval else []),
        *(task.test_splits if training_args.do_predict else []),
    ]


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


def load_glue_data(
    task: GlueTask, data_args: FineTuningArguments, glue_args: GlueArguments, training_args: TrainingArguments
) -> dict[str, Dataset]:
    """Every split the run needs (`glue_splits`, read by `load_glue_splits`), whole; with --do_predict and --ax_file
    also the diagnostic set as split "ax" (unlabelled, predicted with the MNLI labels)."""
    raw = dict(load_glue_splits(task, data_args, glue_args, glue_splits(task, training_args)))
    if training_args.do_predict and glue_args.ax_file:
        raw["ax"] = Dataset.from_list(read_glue_tsv(glue_args.ax_file, GLUE_TASKS["ax"], labelled=False))
    return raw


def glue_label_space(task: GlueTask) -> LabelSpace:
    """The task's labels: its class names in id order (as its tsv files write them), or a regression (STS-B)."""
    if task.is_regression:
        return LabelSpace(REGRESSION)
    return LabelSpace(CLASSIFICATION, list(task.label_names))


def encode_texts(split: str, examples: Dataset, tokenizer, data_args: FineTuningArguments) -> Dataset:
    """One split's `sentence1` (and `sentence2`) as the model reads them (`tokenize_text_pairs`: `[CLS] a [SEP] (b [SEP])`,
    cut at --max_seq_length, padded only with --pad_to_max_length); says how many inputs lost tokens."""
    encoded, num_truncated = tokenize_text_pairs(
        examples, tokenizer, data_args.max_seq_length, data_args.pad_to_max_length
    )
    log_truncation(split, num_truncated, len(encoded), data_args.max_seq_length)
    return encoded


def glue_eval_sets(task: GlueTask, features: dict[str, Dataset]) -> dict[str, Dataset]:
    """The evaluation sets by the name they report under: the task's first evaluation split as "eval"
    (`eval_results.json`), MNLI's mismatched one as "mismatched" (`eval_mismatched_results.json`)."""
    return {
        "eval" if split == task.eval_splits[0] else split.removeprefix("validation_"): features[split]
        for split in task.eval_splits
        if split in features
    }


def glue_card_info(task: GlueTask, model_args: ModelArguments) -> CardInfo:
    """The model card's base model and dataset: the task's configuration of the Hub's GLUE."""
    return CardInfo(
        base_model=model_args.model_name_or_path,
        dataset_id="nyu-mll/glue",
        dataset_config=task.name,
        dataset_name=f"GLUE {task.name.upper()}",
    )


def predict_test_sets(
    trainer: Trainer, task: GlueTask, test_sets: dict[str, Dataset], training_args: TrainingArguments
) -> dict[str, str]:
    """Predict every test split and write its leaderboard file; returns split -> written path."""
    written = {}
    for split, dataset in test_sets.items():
        logits = trainer.predict(dataset, metric_key_prefix=f"predict_{split}").predictions
        predictions = logits_to_predictions(task.name, first_output(logits))
        if trainer.is_world_process_zero():
            path = write_glue_predictions(
                output_path(training_args, submission_filename(task, split)), task, dataset["idx"], predictions
            )
            logger.info("Wrote %d %s predictions to %s", len(dataset), split, path)
            written[split] = path
    return written
