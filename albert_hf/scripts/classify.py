"""Fine-tune ALBERT to classify (or score) the texts of any labelled table: what `albert-hf classify` runs.

    albert-hf classify --train_file train.csv --validation_file dev.csv --test_file test.csv \\
        --text_column review --label_column stars --model_name_or_path <albert checkpoint> \\
        --do_train --do_eval --do_predict --output_dir out/reviews

Reads csv, tsv, json/jsonl or parquet tables (--train_file/--validation_file/--test_file), or the splits of
--dataset_name (a Hub name, a local dataset folder or a save_to_disk folder); --text_column (and --text_pair_column)
hold the texts, --label_column the labels. The training split's labels decide the task: names or class ids give a
classification (accuracy, macro-F1), scores a regression (Pearson, Spearman); without --do_train the labels are those
of the fine-tuned --model_name_or_path. Writes to --output_dir the model (its config names the labels), tokenizer and
model card, the checkpoints, `train_results.json`, `eval_results.json` and, with --do_predict, `predictions_test.tsv`
(each row's index and predicted label name or score; `predict_results.json` when the test table has labels).

To change the job (another model head, a data format, a metric), copy this file and run the copy with
`python my_classify.py <options>`: it imports only albert_hf's public functions, and gives the same one-line errors
and exit statuses as `albert-hf classify`.
"""

from __future__ import annotations

import sys

from transformers import DataCollatorWithPadding, TrainingArguments, set_seed

from albert_hf.argument_parsing import build_model, load_tokenizer, start_job
from albert_hf.arguments import ClassifyArguments, FineTuningArguments, ModelArguments
from albert_hf.error_boundary import run_command
from albert_hf.errors import UserError
from albert_hf.finetuning import (
    checked_config,
    hub_dataset_name,
    limit_samples,
    pad_to_multiple_of,
    parse_finetuning_args,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.modeling import AlbertForSequenceClassification
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.tasks.classify import (
    FILE_OPTIONS,
    classify_card_info,
    label_metrics,
    load_table_split,
    predict_table,
    prepare_table,
    table_label_space,
)
from albert_hf.tasks.glue import encode_texts
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

ARGUMENTS = (ModelArguments, FineTuningArguments, ClassifyArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: --preset or --config give the defaults, the command line wins; then the checks of this job.
    model_args, data_args, task_args, training_args = parse_finetuning_args(ARGUMENTS, argv)
    if any(getattr(data_args, option) for option in FILE_OPTIONS.values()) and task_args.dataset_name:
        raise UserError("Pass either --train_file/--validation_file/--test_file or --dataset_name, not both.")
    if data_args.data_dir and not task_args.dataset_name:
        raise UserError("--data_dir is the folder inside --dataset_name to read; pass the tables as --*_file.")
    if not training_args.do_train and not model_args.model_name_or_path:
        raise UserError(
            "Without --do_train the labels come from a fine-tuned model: pass --model_name_or_path (or train)."
        )

    # --seeds 0,1,2,3,4: this job once per seed, each in <output_dir>/seed-<N>, then the spread of their results.
    if seed_runs_asked(data_args):
        return run_seeds(main, argv, model_args, data_args, task_args, training_args)

    # 2. Start: process group, logs, the locked output folder; then the seed.
    start_job(training_args, model_args=model_args, dataset_name=hub_dataset_name(data_args, task_args))
    set_seed(training_args.seed)

    # 3. Data: the tokenizer; each split's table, its first --max_*_samples kept; the labels of the training split
    # (or of the checkpoint); every split's texts and labels, encoded against those.
    tokenizer = load_tokenizer(model_args)
    splits = requested_splits(training_args)
    tables = limit_samples({split: load_table_split(split, data_args, task_args) for split in splits}, data_args)
    label_space = table_label_space(tables, model_args, data_args, task_args)
    raw = {split: prepare_table(split, rows, label_space, data_args, task_args) for split, rows in tables.items()}

    # 4. Model: a sequence classifier (or regressor) over those labels, with the early-exit options given.
    config = checked_config(
        model_args,
        data_args.max_seq_length,
        tokenizer,
        finetuning_task="classify",
        **label_space.config_kwargs(),
        **task_args.early_exit_config(),
    )
    model = build_model(AlbertForSequenceClassification, model_args, config)

    # 5. Features: `[CLS] text [SEP] (pair [SEP])`, padded per batch by the collator.
    features = {split: encode_texts(split, examples, tokenizer, data_args) for split, examples in raw.items()}
    eval_sets = {"eval": features["validation"]} if "validation" in features else {}

    # 6. Trainer: accuracy and macro-F1 for classes, Pearson and Spearman for scores.
    trainer = AlbertTrainer(
        model=model,
        args=training_args,
        train_dataset=features.get("train"),
        eval_dataset=eval_sets.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(
            tokenizer, pad_to_multiple_of=pad_to_multiple_of(data_args, training_args)
        ),
        compute_metrics=label_metrics(label_space),
        card_info=classify_card_info(model_args, data_args, task_args),
    )
    # Complete checkpoints, checked and exact resumption, the loss checks, the SIGTERM checkpoint; and what a
    # resume must not change.
    attach_reliability(trainer, fingerprint_extra=training_fingerprint("classify", model_args, data_args, task_args))

    # 7. Train (a checkpoint on SIGTERM), save, evaluate, write the card (or push).
    train_and_evaluate(trainer, training_args, eval_sets)

    # 8. predictions_test.tsv: each test row's predicted label name (or score).
    if training_args.do_predict:
        predict_table(trainer, features["test"], label_space, training_args)
    return 0


if __name__ == "__main__":
    sys.exit(run_command("classify", main))
