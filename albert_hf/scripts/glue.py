"""Fine-tune ALBERT on a GLUE task with Trainer: what `albert-hf glue` runs.

    albert-hf glue --task_name mrpc --data_dir glue_data/MRPC --model_name_or_path <albert checkpoint> \\
        --preset mrpc --do_train --do_eval --do_predict --output_dir out/mrpc

Reads the task's splits from --data_dir (the original tsv layout), from --train_file/--validation_file/--test_file
(tsv in the GLUE layout, or csv/json with the Hub's column names) or else from the Hub (--dataset_name, nyu-mll/glue),
and with --ax_file MNLI's diagnostic set. Writes to --output_dir the model, tokenizer and model card, the checkpoints,
`train_results.json`, `eval_results.json` (MNLI: also `eval_mismatched_results.json`) and, with --do_predict, the
leaderboard files (e.g. MRPC.tsv; MNLI-m.tsv and MNLI-mm.tsv, and AX.tsv with --ax_file).

To change the job (another model head, a data format, a metric), copy this file and run the copy with `python my_glue.py
<options>`: the task's own code is in it, above `main`, and it calls only the library functions listed in docs/api.md,
with absolute imports; it gives the same one-line errors and exit statuses as `albert-hf glue`.
"""

from __future__ import annotations

import logging
import sys

from datasets import Dataset, DatasetDict
from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, set_seed

from albert_hf.arguments import FineTuningArguments, GlueArguments, ModelArguments
from albert_hf.data.glue_files import (
    GLUE_TASKS,
    GlueTask,
    get_glue_task,
    load_glue_files,
    load_glue_from_hub,
    load_glue_tsv,
    read_glue_tsv,
    submission_filename,
    write_glue_predictions,
)
from albert_hf.data.labels import CLASSIFICATION, REGRESSION, LabelSpace
from albert_hf.data.text_pairs import tokenize_text_pairs
from albert_hf.error_boundary import run_command
from albert_hf.errors import UserError
from albert_hf.finetuning import (
    checked_config,
    first_output,
    hub_dataset_name,
    limit_samples,
    log_truncation,
    output_path,
    pad_to_multiple_of,
    parse_finetuning_args,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.hub import CardInfo
from albert_hf.job_setup import build_model, load_tokenizer, start_job
from albert_hf.metrics.glue import glue_compute_metrics, logits_to_predictions
from albert_hf.modeling import AlbertForSequenceClassification
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# The task's data and predictions: which splits a run reads and from where, its labels, its evaluation sets, the model
# card's dataset, the leaderboard files
# --------------------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------------------------

ARGUMENTS = (ModelArguments, FineTuningArguments, GlueArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: --preset or --config give the defaults, the command line wins; then the checks of this job.
    model_args, data_args, task_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    task = get_glue_task(task_args.task_name)
    if task.name == "ax":
        raise UserError(
            "AX is predicted with an MNLI model: run --task_name mnli --do_predict --ax_file <diagnostic.tsv>."
        )
    if task_args.ax_file and task.name != "mnli":
        raise UserError("--ax_file needs --task_name mnli (AX uses the MNLI labels).")

    # --seeds 0,1,2,3,4: this job once per seed, each in <output_dir>/seed-<N>, then the spread of their results.
    if seed_runs_asked(data_args):
        return run_seeds(main, argv, model_args, data_args, task_args, training_args)

    # 2. Start: process group, logs, the locked output folder; then the seed.
    start_job(training_args, model_args=model_args, dataset_name=hub_dataset_name(data_args, task_args))
    set_seed(training_args.seed)

    # 3. Data: the tokenizer, and each split the run needs, its first --max_*_samples kept.
    tokenizer = load_tokenizer(model_args)
    raw = limit_samples(load_glue_data(task, data_args, task_args, training_args), data_args)

    # 4. Model: a sequence classifier (or regressor) over the task's labels, with the early-exit options given.
    label_space = glue_label_space(task)
    config = checked_config(
        model_args,
        data_args.max_seq_length,
        tokenizer,
        finetuning_task=task.name,
        **label_space.config_kwargs(),
        **task_args.early_exit_config(),
    )
    model = build_model(AlbertForSequenceClassification, model_args, config)

    # 5. Features: `[CLS] sentence1 [SEP] (sentence2 [SEP])`, padded per batch by the collator.
    features = {split: encode_texts(split, examples, tokenizer, data_args) for split, examples in raw.items()}
    eval_sets = glue_eval_sets(task, features)

    # 6. Trainer: the first evaluation set is Trainer's own (evaluation during training); the task's GLUE metrics.
    trainer = AlbertTrainer(
        model=model,
        args=training_args,
        train_dataset=features.get("train"),
        eval_dataset=eval_sets.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(
            tokenizer, pad_to_multiple_of=pad_to_multiple_of(data_args, training_args)
        ),
        compute_metrics=glue_compute_metrics(task.name),
        card_info=glue_card_info(task, model_args),
    )
    # Complete checkpoints, checked and exact resumption, the loss checks, the SIGTERM checkpoint; and what a
    # resume must not change.
    attach_reliability(trainer, fingerprint_extra=training_fingerprint(task.name, model_args, data_args, task_args))

    # 7. Train (a checkpoint on SIGTERM), save, evaluate every evaluation set, write the card (or push).
    train_and_evaluate(trainer, training_args, eval_sets)

    # 8. The leaderboard file of each test split (and AX.tsv).
    if training_args.do_predict:
        test_sets = {split: features[split] for split in (*task.test_splits, "ax") if split in features}
        predict_test_sets(trainer, task, test_sets, training_args)
    return 0


if __name__ == "__main__":
    sys.exit(run_command("glue", main))
