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

To change the job (another model head, a data format, a metric), copy this file and run the copy with `python
my_classify.py <options>`: the task's own code is in it, above `main`, and it calls only the library functions listed in
docs/api.md, with absolute imports; it gives the same one-line errors and exit statuses as `albert-hf classify`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import numpy as np
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score
from transformers import DataCollatorWithPadding, EvalPrediction, Trainer, TrainingArguments, set_seed

from albert_hf.arguments import ClassifyArguments, FineTuningArguments, ModelArguments
from albert_hf.configuration import AlbertConfig
from albert_hf.data.labels import CLASSIFICATION, REGRESSION, LabelSpace, encode_labels, infer_label_space
from albert_hf.data.sources import load_rows, require_columns, row_places, source_name
from albert_hf.data.text_checks import RowPlaces, check_text, text_problem
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
    requested_splits,
    train_and_evaluate,
    training_fingerprint,
)
from albert_hf.hub import CardInfo
from albert_hf.job_setup import build_model, load_tokenizer, start_job
from albert_hf.modeling import AlbertForSequenceClassification
from albert_hf.output_files import write_file
from albert_hf.seed_runs import run_seeds, seed_runs_asked
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.trainer import AlbertTrainer

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# The table's data, labels, metrics and predictions
# --------------------------------------------------------------------------------------------------------------------

# The option of each split's file.
FILE_OPTIONS = {"train": "train_file", "validation": "validation_file", "test": "test_file"}


def classification_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy and macro-F1 (every class weighs the same, however rare) of the argmax of the logits."""
    predictions = np.argmax(first_output(eval_prediction.predictions), axis=-1)
    labels = eval_prediction.label_ids
    return {
        "accuracy": float(accuracy_score(labels, predictions)),
        "macro_f1": float(f1_score(labels, predictions, average="macro")),
    }


def regression_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Pearson and Spearman correlations of the predicted scores with the gold ones (in float64)."""
    scores = np.squeeze(first_output(eval_prediction.predictions), axis=-1).astype(np.float64)
    labels = np.asarray(eval_prediction.label_ids, dtype=np.float64)
    return {"pearson": float(pearsonr(labels, scores)[0]), "spearmanr": float(spearmanr(labels, scores)[0])}


def checkpoint_label_space(model_name_or_path: str) -> LabelSpace:
    """The label space a fine-tuned checkpoint was trained on (to evaluate or predict without a training split)."""
    config = AlbertConfig.from_pretrained(model_name_or_path)
    if config.problem_type == REGRESSION:
        return LabelSpace(REGRESSION)
    return LabelSpace(CLASSIFICATION, [config.id2label[i] for i in range(config.num_labels)])


def table_source(split: str, data_args: FineTuningArguments, classify_args: ClassifyArguments) -> str:
    """How messages name the table of `split`: its file, or `dataset[split]`."""
    file = getattr(data_args, FILE_OPTIONS[split])
    if file:
        return source_name(data_files=file)
    name = source_name(dataset_name=classify_args.dataset_name, dataset_config_name=classify_args.dataset_config_name)
    return f"{name}[{split}]"


def table_places(split: str, data_args: FineTuningArguments, classify_args: ClassifyArguments) -> RowPlaces:
    """Where the rows of `split` are, for messages: the line of its file (`text_checks.RowPlaces`), else the row's
    index in the dataset's split."""
    return row_places(getattr(data_args, FILE_OPTIONS[split]) or None, table_source(split, data_args, classify_args))


def load_table_split(split: str, data_args: FineTuningArguments, classify_args: ClassifyArguments) -> Dataset:
    """The rows of one split ("train", "validation" or "test"), whole, with its columns checked: the label column may
    be absent from the test split."""
    file = getattr(data_args, FILE_OPTIONS[split])
    if file:
        rows = load_rows(data_files=file, split=split)
    elif classify_args.dataset_name:
        rows = load_rows(
            dataset_name=classify_args.dataset_name,
            dataset_config_name=classify_args.dataset_config_name,
            data_dir=data_args.data_dir,
            split=split,
        )
    else:
        raise UserError(f"No {split} data: pass --{FILE_OPTIONS[split]} or --dataset_name.")
    columns = {"--text_column": classify_args.text_column}
    if classify_args.text_pair_column:
        columns["--text_pair_column"] = classify_args.text_pair_column
    if split != "test" or classify_args.label_column in rows.column_names:
        columns["--label_column"] = classify_args.label_column
    require_columns(rows, columns, table_source(split, data_args, classify_args))
    return rows


def table_label_space(
    tables: dict[str, Dataset],
    model_args: ModelArguments,
    data_args: FineTuningArguments,
    classify_args: ClassifyArguments,
) -> LabelSpace:
    """The labels of the training split, as loaded and limited (or those of the fine-tuned checkpoint, when there is
    no training): every other split's labels are encoded against them."""
    if "train" not in tables:
        return checkpoint_label_space(model_args.model_name_or_path)
    column = classify_args.label_column
    train = tables["train"]
    source = table_source("train", data_args, classify_args)
    places = table_places("train", data_args, classify_args)
    space = infer_label_space(
        train[column], column, source, train.features[column], classify_args.label_kind, places=places
    )
    logger.info("Labels of %s: %s", source, space.names or "scores (regression)")
    return space


def prepare_table(
    split: str,
    rows: Dataset,
    label_space: LabelSpace,
    data_args: FineTuningArguments,
    classify_args: ClassifyArguments,
) -> Dataset:
    """The texts (checked to be strings) as `sentence1` (and `sentence2`), the labels encoded against `label_space`
    as `label` (when the split has them), and each row's index as `idx`: the columns `encode_texts` reads."""
    source = table_source(split, data_args, classify_args)
    places = table_places(split, data_args, classify_args)
    texts = {"sentence1": column_texts(rows, classify_args.text_column, places)}
    if classify_args.text_pair_column:
        texts["sentence2"] = column_texts(rows, classify_args.text_pair_column, places)
    column = classify_args.label_column
    if column in rows.column_names:
        feature = rows.features[column]
        texts["label"] = encode_labels(rows[column], label_space, split, source, column, feature, places=places)
    return Dataset.from_dict({**texts, "idx": list(range(len(rows)))})


def column_texts(rows: Dataset, column: str, places: RowPlaces) -> list[str]:
    """The texts of `column`, each checked by the reader contract (`albert_hf.data.text_checks`: a string, no NUL
    byte, not empty: a row's text is what it is classified by); the error names the row's file and line."""
    values = rows[column]
    for row, value in enumerate(values):
        if text_problem(value) is not None:
            check_text(value, places.where(row), f"column {column!r}")
    return values


def encode_texts(split: str, examples: Dataset, tokenizer, data_args: FineTuningArguments) -> Dataset:
    """One split's `sentence1` (and `sentence2`) as the model reads them (`tokenize_text_pairs`: `[CLS] a [SEP] (b [SEP])`,
    cut at --max_seq_length, padded only with --pad_to_max_length); says how many inputs lost tokens."""
    encoded, num_truncated = tokenize_text_pairs(
        examples, tokenizer, data_args.max_seq_length, data_args.pad_to_max_length
    )
    log_truncation(split, num_truncated, len(encoded), data_args.max_seq_length)
    return encoded


def label_metrics(label_space: LabelSpace):
    """Trainer's `compute_metrics` for the labels: `regression_metrics` or `classification_metrics`."""
    return regression_metrics if label_space.kind == REGRESSION else classification_metrics


def classify_card_info(
    model_args: ModelArguments, data_args: FineTuningArguments, classify_args: ClassifyArguments
) -> CardInfo:
    """The Hub dataset, or the names of the user's own tables: their file names alone, as the paths of this
    machine mean nothing to a reader of the card (and no Hub dataset id, which local files do not have)."""
    tables = [getattr(data_args, option) for option in FILE_OPTIONS.values()]
    names = list(dict.fromkeys(Path(table).name for table in tables if table))
    return CardInfo(
        base_model=model_args.model_name_or_path,
        dataset_id=classify_args.dataset_name,  # the card keeps it only when it is a Hub id (hub.render_model_card)
        dataset_config=classify_args.dataset_config_name,
        dataset_name=", ".join(names) or None,
    )


def predict_table(
    trainer: Trainer, test: Dataset, label_space: LabelSpace, training_args: TrainingArguments
) -> str | None:
    """`predictions_test.tsv`: each test row's index and its predicted label name (or score); the metrics too when
    the test table has labels. Returns the path written (None on the processes that do not write)."""
    output = trainer.predict(test, metric_key_prefix="predict")
    logits = first_output(output.predictions)
    if label_space.kind == REGRESSION:
        predicted = [f"{score:.6g}" for score in np.squeeze(logits, axis=-1)]
    else:
        predicted = [label_space.names[i] for i in np.argmax(logits, axis=-1)]
    if not trainer.is_world_process_zero():
        return None
    trainer.log_metrics("predict", output.metrics)
    trainer.save_metrics("predict", output.metrics)
    rows = "".join(f"{index}\t{label}\n" for index, label in zip(test["idx"], predicted))
    path = write_file(output_path(training_args, "predictions_test.tsv"), "index\tprediction\n" + rows)
    logger.info("Wrote %d predictions to %s", len(predicted), path)
    return path


# --------------------------------------------------------------------------------------------------------------------
# The job
# --------------------------------------------------------------------------------------------------------------------

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
