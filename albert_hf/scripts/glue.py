"""Fine-tune ALBERT on a GLUE task with Trainer: what `albert-hf glue` runs.

    albert-hf glue --task_name mrpc --data_dir glue_data/MRPC --model_name_or_path <albert checkpoint> \\
        --preset mrpc --do_train --do_eval --do_predict --output_dir out/mrpc

Reads the task's splits from --data_dir (the original tsv layout), from --train_file/--validation_file/--test_file
(tsv in the GLUE layout, or csv/json with the Hub's column names) or else from the Hub (--dataset_name, nyu-mll/glue),
and with --ax_file MNLI's diagnostic set. Writes to --output_dir the model, tokenizer and model card, the checkpoints,
`train_results.json`, `eval_results.json` (MNLI: also `eval_mismatched_results.json`) and, with --do_predict, the
leaderboard files (e.g. MRPC.tsv; MNLI-m.tsv and MNLI-mm.tsv, and AX.tsv with --ax_file).

To change the job (another model head, a data format, a metric), copy this file and run the copy with
`python my_glue.py <options>`: it imports only albert_hf's public functions, and gives the same one-line errors and
exit statuses as `albert-hf glue`.
"""

from __future__ import annotations

import sys

from transformers import DataCollatorWithPadding, TrainingArguments, set_seed

from albert_hf.argument_parsing import build_model, load_tokenizer, start_job
from albert_hf.arguments import FineTuningArguments, GlueArguments, ModelArguments
from albert_hf.data.glue_files import get_glue_task
from albert_hf.error_boundary import run_command
from albert_hf.errors import UserError
from albert_hf.finetuning import (
    checked_config,
    hub_dataset_name,
    limit_samples,
    pad_to_multiple_of,
    parse_finetuning_args,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.metrics.glue import glue_compute_metrics
from albert_hf.modeling import AlbertForSequenceClassification
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.tasks.glue import (
    encode_texts,
    glue_card_info,
    glue_eval_sets,
    glue_label_space,
    load_glue_data,
    predict_test_sets,
)
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

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
