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

To change the job (a model head, a data format, a metric), copy this file and run the copy with `python
my_multiple_choice.py <options>`: the task's own code is in it, above `main`, and it calls only the library functions
listed in docs/api.md, with absolute imports; it gives the same one-line errors and exit statuses as `albert-hf
multiple-choice`.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
from datasets import Dataset
from sklearn.metrics import accuracy_score
from transformers import DataCollatorForMultipleChoice, EvalPrediction, Trainer, TrainingArguments, set_seed

from albert_hf.arguments import FineTuningArguments, ModelArguments, MultipleChoiceArguments
from albert_hf.data.multiple_choice import (
    examples_from_rows,
    from_hub_layout,
    load_multiple_choice,
    tokenize_multiple_choice,
)
from albert_hf.data.sources import load_rows, row_places
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
    preset_key,
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.hub import CardInfo
from albert_hf.job_setup import build_model, load_tokenizer, start_job
from albert_hf.modeling import AlbertForMultipleChoice
from albert_hf.output_files import write_file
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# The task's data, metric and predictions
# --------------------------------------------------------------------------------------------------------------------


def accuracy_compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Trainer `compute_metrics`: choice scores [N, num_choices] and gold indices [N] -> accuracy."""
    logits = first_output(eval_prediction.predictions)
    return {"accuracy": float(accuracy_score(eval_prediction.label_ids, np.argmax(logits, axis=-1)))}


def load_splits(
    data_args: FineTuningArguments, mc_args: MultipleChoiceArguments, splits: list[str]
) -> dict[str, Dataset]:
    """Each split from its file (--train_file, --validation_file, --test_file), else from the Hub; read as a table
    (any format, by column) with --context_column."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    datasets = {}
    for split in splits:
        if mc_args.context_column:
            datasets[split] = load_table(files[split], mc_args, split)
        elif files[split]:
            datasets[split] = load_multiple_choice(files[split])
        elif mc_args.dataset_name:
            from datasets import load_dataset

            hub_split = load_dataset(mc_args.dataset_name, mc_args.dataset_config_name, split=split)
            datasets[split] = from_hub_layout(hub_split, mc_args.dataset_name)
        else:
            raise UserError(f"No {split} data: pass --{split}_file or --dataset_name.")
    return datasets


def load_table(file: str | None, mc_args: MultipleChoiceArguments, split: str) -> Dataset:
    """The questions of one split's table: the file, else that split of --dataset_name."""
    places = None
    if file:
        rows, source = load_rows(data_files=file, split=split), file
        places = row_places(file, source)
    elif mc_args.dataset_name:
        rows = load_rows(
            dataset_name=mc_args.dataset_name, dataset_config_name=mc_args.dataset_config_name, split=split
        )
        source = f"{mc_args.dataset_name}[{split}]"
    else:
        raise UserError(f"No {split} data: pass --{split}_file or --dataset_name.")
    examples = examples_from_rows(
        rows,
        source,
        mc_args.context_column,
        mc_args.choice_columns,
        mc_args.label_column,
        mc_args.question_column,
        places=places,
    )
    return Dataset.from_list(examples)


def write_predictions(path: str, logits: np.ndarray) -> Path:
    """One json line per question: the chosen index and the score of every choice. Returns the path written
    (through `albert_hf.output_files`: beside a user's file of that name, never over it)."""
    lines = [json.dumps({"prediction": int(np.argmax(s)), "scores": [float(x) for x in s]}) + "\n" for s in logits]
    return write_file(path, "".join(lines))


def card_info(model_args: ModelArguments, data_args: FineTuningArguments, mc_args: MultipleChoiceArguments) -> CardInfo:
    """The model card's base model and dataset: the Hub dataset if one was used, else the layout's usual source
    (RACE under `--preset race`, else SWAG)."""
    is_race = data_args.preset is not None and preset_key(data_args.preset) == "race"
    return CardInfo(
        base_model=model_args.model_name_or_path,
        dataset_id=mc_args.dataset_name or ("ehovy/race" if is_race else "allenai/swag"),
        dataset_config=mc_args.dataset_config_name,
    )


def write_test_predictions(trainer: Trainer, test_features: Dataset, training_args: TrainingArguments) -> None:
    """--do_predict: the test split's scores (`predict_results.json`) and `predictions_test.jsonl`
    (`write_predictions`)."""
    output = trainer.predict(test_features, metric_key_prefix="predict")
    if trainer.is_world_process_zero():
        trainer.log_metrics("predict", output.metrics)
        trainer.save_metrics("predict", output.metrics)
        logits = first_output(output.predictions)
        path = write_predictions(output_path(training_args, "predictions_test.jsonl"), logits)
        logger.info("Wrote %d predictions to %s", len(logits), path)


# --------------------------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------------------------

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
