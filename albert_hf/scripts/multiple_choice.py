"""Fine-tune ALBERT on multiple choice (SWAG, RACE, JCommonsenseQA...) with Trainer: `albert-hf multiple-choice`.

    albert-hf multiple-choice --train_file race/train --validation_file race/dev \\
        --model_name_or_path <albert checkpoint> --preset race --do_train --do_eval --output_dir out/race

Reads SWAG or RACE json (a RACE folder of per-article files too; see `albert_hf.data.multiple_choice`), a Hub dataset
(`--dataset_name`), or tables of any format (csv, tsv, json, jsonl, parquet) by column with `--context_column`,
`--choice_columns` (one per choice, or one list column), `--label_column` and, for RACE-like tables,
`--question_column`. `--preset race` takes the paper's RACE hyperparameters (Table 14); `--early_exit` (and the other
options of `EarlyExitArguments`) trains exits as for sequence classification (docs/performance.md).

Writes to --output_dir the model, its card and `train_results.json`/`eval_results.json` (accuracy); `--do_predict`
adds `predictions_test.jsonl` (the chosen index and the scores of each question) and `predict_results.json`.

To change the job (a model head, a data format, a metric), copy this file and run the copy with
`python my_multiple_choice.py <options>`: it imports only public functions of albert_hf
(`albert_hf.tasks.multiple_choice` holds the steps).
"""

from __future__ import annotations

import sys

from transformers import DataCollatorForMultipleChoice, TrainingArguments, set_seed

from albert_hf.argument_parsing import ModelArguments, build_model, load_tokenizer, start_job
from albert_hf.arguments import MultipleChoiceArguments
from albert_hf.data.multiple_choice import tokenize_multiple_choice
from albert_hf.error_boundary import run_command
from albert_hf.finetuning import (
    FineTuningArguments,
    checked_config,
    hub_dataset_name,
    limit_samples,
    log_truncation,
    pad_to_multiple_of,
    parse_finetuning_args,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.modeling import AlbertForMultipleChoice
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.tasks.multiple_choice import accuracy_compute_metrics, card_info, load_splits, write_test_predictions
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

ARGUMENTS = (ModelArguments, FineTuningArguments, MultipleChoiceArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> int:
    # 1. Arguments: --preset race or --config give the defaults, the command line wins.
    model_args, data_args, mc_args, training_args = parse_finetuning_args(ARGUMENTS, argv)

    # --seeds 0,1,2,3,4: this job once per seed, each in <output_dir>/seed-<N>, then the spread of their results.
    if seed_runs_asked(data_args):
        return run_seeds(main, argv, model_args, data_args, mc_args, training_args)

    # 2. Start: process group, logs, the lock on --output_dir; then the seed.
    start_job(training_args, model_args=model_args, dataset_name=hub_dataset_name(data_args, mc_args))
    set_seed(training_args.seed)

    # 3. Data: the requested splits (context, choices, label) and their first --max_*_samples.
    tokenizer = load_tokenizer(model_args)
    raw = limit_samples(load_splits(data_args, mc_args, requested_splits(training_args)), data_args)

    # 4. Model: one score per choice; the early-exit options go into the config.
    config = checked_config(
        model_args,
        data_args.max_seq_length,
        tokenizer,
        finetuning_task="multiple_choice",
        **mc_args.early_exit_config(),
    )
    model = build_model(AlbertForMultipleChoice, model_args, config)

    # 5. Features: each choice paired with its context, truncated to --max_seq_length.
    features = {}
    for split, examples in raw.items():
        features[split], num_truncated = tokenize_multiple_choice(
            examples, tokenizer, data_args.max_seq_length, data_args.pad_to_max_length
        )
        log_truncation(split, num_truncated, len(examples), data_args.max_seq_length)
    eval_sets = {"eval": features["validation"]} if "validation" in features else {}

    # 6. Trainer: accuracy over the choices' scores.
    trainer = AlbertTrainer(
        model=model,
        args=training_args,
        train_dataset=features.get("train"),
        eval_dataset=eval_sets.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorForMultipleChoice(
            tokenizer, pad_to_multiple_of=pad_to_multiple_of(data_args, training_args)
        ),
        compute_metrics=accuracy_compute_metrics,
        card_info=card_info(model_args, data_args, mc_args),
    )
    # Complete checkpoints, checked and exact resumption, the loss checks, the SIGTERM checkpoint; and what a
    # resume must not change.
    attach_reliability(
        trainer, fingerprint_extra=training_fingerprint("multiple_choice", model_args, data_args, mc_args)
    )

    # 7. Train, save, evaluate, write the card (or push).
    train_and_evaluate(trainer, training_args, eval_sets)

    # 8. Predict: the scores of every choice of the test split, and the chosen one.
    if training_args.do_predict:
        write_test_predictions(trainer, features["test"], training_args)
    return 0


if __name__ == "__main__":
    sys.exit(run_command("multiple-choice", main))
