"""Fine-tune ALBERT on a GLUE task with Trainer: `albert-hf glue` and `examples/glue/run_glue.py`.

    python examples/glue/run_glue.py --task_name mrpc --data_dir glue_data/MRPC \\
        --model_name_or_path <albert checkpoint> --preset mrpc --do_train --do_eval --do_predict --output_dir out/mrpc

Data come from `--data_dir` (original tsv layout), from `--train_file/--validation_file/--test_file` (tsv in the GLUE
layout, or csv/json with the Hub's column names), or else from the Hub. `--do_predict` writes the leaderboard file
(e.g. MRPC.tsv; MNLI-m.tsv and MNLI-mm.tsv, plus AX.tsv with `--ax_file`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from datasets import Dataset, DatasetDict
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

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
from ..errors import UserError
from ..hub import CardInfo
from ..metrics.glue import glue_compute_metrics, logits_to_predictions
from ..modeling import AlbertForSequenceClassification
from ..training.trainer import FineTuningTrainer
from .common import ModelArguments, build_config, build_model, load_tokenizer, parse_args, start_job
from .finetuning import (
    FineTuningArguments,
    apply_paper_preset,
    log_truncation,
    output_path,
    take_first,
    train_and_evaluate,
)

logger = logging.getLogger(__name__)


@dataclass
class GlueArguments:
    task_name: str = field(metadata={"help": f"GLUE task: {', '.join(name for name in GLUE_TASKS if name != 'ax')}."})
    dataset_name: str = field(
        default="nyu-mll/glue", metadata={"help": "Hub dataset used when neither --data_dir nor files are given."}
    )
    ax_file: str | None = field(
        default=None,
        metadata={"help": "MNLI only: glue_data/diagnostic/diagnostic.tsv; --do_predict then also writes AX.tsv."},
    )
    skip_malformed_rows: bool = field(
        default=False,
        metadata={"help": "Skip (and count) tsv rows with a wrong column count or unknown label instead of failing."},
    )


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


def _eval_name(task: GlueTask, split: str) -> str:
    # The first evaluation split reports as "eval"; MNLI's mismatched one as "eval_mismatched".
    return "eval" if split == task.eval_splits[0] else split.removeprefix("validation_")


def _encode(dataset: Dataset, split: str, tokenizer, data_args: FineTuningArguments) -> Dataset:
    encoded, num_truncated = tokenize_glue(dataset, tokenizer, data_args.max_seq_length, data_args.pad_to_max_length)
    log_truncation(split, num_truncated, len(encoded), data_args.max_seq_length)
    return encoded


def predict_test_sets(
    trainer: Trainer, task: GlueTask, test_sets: dict[str, Dataset], training_args: TrainingArguments
) -> dict[str, str]:
    """Predict every test split and write its leaderboard file; returns split -> written path."""
    written = {}
    for split, dataset in test_sets.items():
        logits = trainer.predict(dataset, metric_key_prefix=f"predict_{split}").predictions
        predictions = logits_to_predictions(task.name, logits[0] if isinstance(logits, tuple) else logits)
        if trainer.is_world_process_zero():
            path = output_path(training_args, submission_filename(task, split))
            write_glue_predictions(path, task, dataset["idx"], predictions)
            logger.info("Wrote %d %s predictions to %s", len(dataset), split, path)
            written[split] = path
    return written


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, glue_args, training_args = parse_args(
        (ModelArguments, FineTuningArguments, GlueArguments, TrainingArguments), argv
    )
    task = get_glue_task(glue_args.task_name)
    if task.name == "ax":
        raise UserError(
            "AX is predicted with an MNLI model: run --task_name mnli --do_predict --ax_file <diagnostic.tsv>."
        )
    if glue_args.ax_file and task.name != "mnli":
        raise UserError("--ax_file needs --task_name mnli (AX uses the MNLI labels).")
    preset_config = apply_paper_preset(model_args, data_args, training_args)
    start_job(training_args, model_args=model_args)
    set_seed(training_args.seed)

    splits = (["train"] if training_args.do_train else []) + (list(task.eval_splits) if training_args.do_eval else [])
    splits += list(task.test_splits) if training_args.do_predict else []
    raw = load_glue_splits(task, data_args, glue_args, splits)
    if training_args.do_predict and glue_args.ax_file:
        raw["ax"] = Dataset.from_list(read_glue_tsv(glue_args.ax_file, GLUE_TASKS["ax"], labelled=False))

    tokenizer = load_tokenizer(model_args)
    label_fields = (
        {}
        if task.is_regression
        else {
            "id2label": dict(enumerate(task.label_names)),
            "label2id": {label: i for i, label in enumerate(task.label_names)},
        }
    )
    config = build_config(
        model_args,
        num_labels=task.num_labels,
        problem_type="regression" if task.is_regression else "single_label_classification",
        finetuning_task=task.name,
        **label_fields,
        **preset_config,
    )
    model = build_model(AlbertForSequenceClassification, model_args, config)

    limits = {"train": data_args.max_train_samples}
    limits.update({split: data_args.max_eval_samples for split in task.eval_splits})
    encoded = {
        split: _encode(
            take_first(dataset, limits.get(split, data_args.max_predict_samples)), split, tokenizer, data_args
        )
        for split, dataset in raw.items()
    }
    eval_sets = {_eval_name(task, split): encoded[split] for split in task.eval_splits if split in encoded}
    pad_to_multiple_of = 8 if (training_args.fp16 or training_args.bf16) and not data_args.pad_to_max_length else None
    trainer = FineTuningTrainer(
        model=model,
        card_info=CardInfo(
            base_model=model_args.model_name_or_path,
            dataset_id="nyu-mll/glue",
            dataset_config=task.name,
            dataset_name=f"GLUE {task.name.upper()}",
        ),
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=eval_sets.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=pad_to_multiple_of),
        compute_metrics=glue_compute_metrics(task.name),
    )
    train_and_evaluate(trainer, training_args, eval_sets)
    if training_args.do_predict:
        test_sets = {split: encoded[split] for split in (*task.test_splits, "ax") if split in encoded}
        predict_test_sets(trainer, task, test_sets, training_args)
    return 0
