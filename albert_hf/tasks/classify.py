"""Fine-tune ALBERT to classify (or score) the texts of any labelled table: `albert-hf classify`.

    albert-hf classify --train_file train.csv --validation_file dev.csv --test_file test.csv \\
        --text_column review --label_column stars --model_name_or_path <albert checkpoint> \\
        --do_train --do_eval --do_predict --output_dir out/reviews

Tables are csv, tsv, json/jsonl or parquet files (`--train_file/--validation_file/--test_file`), or the splits of a
dataset (`--dataset_name [--dataset_config_name]`: a Hub name, a local dataset folder or a `save_to_disk` folder), all
read by `albert_hf.data.sources`. `--text_pair_column` makes each input a pair. The labels of the training split decide
the task (`albert_hf.data.labels`): names or class ids give a classification over the sorted names (accuracy and
macro-F1), scores a regression (Pearson and Spearman). The names are saved as the config's `id2label`/`label2id`;
`--do_predict` writes `predictions_test.tsv` (row index and predicted label name, or score).
"""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path

import numpy as np
from datasets import Dataset
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score
from transformers import EvalPrediction, Trainer

from ..configuration import AlbertConfig
from ..data.labels import CLASSIFICATION, REGRESSION, LabelSpace, encode_labels, infer_label_space
from ..data.sources import load_rows, require_columns, source_name
from ..errors import UserError
from ..hub import CardInfo
from .arguments import ClassifyArguments
from .finetuning import FineTuningArguments, first_output, output_path
from .glue import SequenceClassificationJob

logger = logging.getLogger(__name__)

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


class ClassifyJob(SequenceClassificationJob):
    """Classification or regression of any table's texts on the fine-tuning skeleton."""

    argument_types = (FineTuningArguments, ClassifyArguments)
    task_name = "classify"

    def check_arguments(self) -> None:
        files = {split: getattr(self.data_args, option) for split, option in FILE_OPTIONS.items()}
        if any(files.values()) and self.task_args.dataset_name:
            raise UserError("Pass either --train_file/--validation_file/--test_file or --dataset_name, not both.")
        if self.data_args.data_dir and not self.task_args.dataset_name:
            raise UserError("--data_dir is the folder inside --dataset_name to read; pass the tables as --*_file.")
        if not self.training_args.do_train and not self.model_args.model_name_or_path:
            raise UserError(
                "Without --do_train the labels come from a fine-tuned model: pass --model_name_or_path (or train)."
            )

    def source(self, split: str) -> str:
        """How messages name the table of `split`."""
        file = getattr(self.data_args, FILE_OPTIONS[split])
        if file:
            return source_name(data_files=file)
        name = source_name(
            dataset_name=self.task_args.dataset_name, dataset_config_name=self.task_args.dataset_config_name
        )
        return f"{name}[{split}]"

    def load_splits(self, splits: list[str]) -> dict[str, Dataset]:
        return {split: self.load_split(split) for split in splits}

    def load_split(self, split: str) -> Dataset:
        """The rows of one split, with its columns checked: the label column may be absent from the test split."""
        file = getattr(self.data_args, FILE_OPTIONS[split])
        if file:
            rows = load_rows(data_files=file, split=split)
        elif self.task_args.dataset_name:
            rows = load_rows(
                dataset_name=self.task_args.dataset_name,
                dataset_config_name=self.task_args.dataset_config_name,
                data_dir=self.data_args.data_dir,
                split=split,
            )
        else:
            raise UserError(f"No {split} data: pass --{FILE_OPTIONS[split]} or --dataset_name.")
        columns = {"--text_column": self.task_args.text_column}
        if self.task_args.text_pair_column:
            columns["--text_pair_column"] = self.task_args.text_pair_column
        if split != "test" or self.task_args.label_column in rows.column_names:
            columns["--label_column"] = self.task_args.label_column
        require_columns(rows, columns, self.source(split))
        return rows

    @cached_property
    def label_space(self) -> LabelSpace:
        """The labels of the training split (or those of the fine-tuned checkpoint, when there is no training)."""
        if "train" not in self.raw:
            return checkpoint_label_space(self.model_args.model_name_or_path)
        column = self.task_args.label_column
        train = self.raw["train"]
        space = infer_label_space(
            train[column], column, self.source("train"), train.features[column], self.task_args.label_kind
        )
        logger.info("Labels of %s: %s", self.source("train"), space.names or "scores (regression)")
        return space

    def prepare(self, split: str, rows: Dataset) -> Dataset:
        """The texts (checked to be strings), the labels encoded against the training split's, and each row's index."""
        texts = {"sentence1": self.texts(rows, self.task_args.text_column, split)}
        if self.task_args.text_pair_column:
            texts["sentence2"] = self.texts(rows, self.task_args.text_pair_column, split)
        column = self.task_args.label_column
        if column in rows.column_names:
            texts["label"] = encode_labels(
                rows[column], self.label_space, split, self.source(split), column, rows.features[column]
            )
        return Dataset.from_dict({**texts, "idx": list(range(len(rows)))})

    def texts(self, rows: Dataset, column: str, split: str) -> list[str]:
        """The strings of `column`; a missing or non-string value is an error naming its row."""
        values = rows[column]
        for row, value in enumerate(values):
            if not isinstance(value, str):
                raise UserError(
                    f"{self.source(split)}: row {row}: column {column!r} holds {value!r}, not a text. Fix or drop "
                    "that row."
                )
        return values

    def compute_metrics(self):
        return regression_metrics if self.label_space.kind == REGRESSION else classification_metrics

    def card_info(self) -> CardInfo:
        """The Hub dataset, or the names of the user's own tables: their file names alone, as the paths of this
        machine mean nothing to a reader of the card (and no Hub dataset id, which local files do not have)."""
        args = self.task_args
        tables = [getattr(self.data_args, option) for option in ("train_file", "validation_file", "test_file")]
        names = list(dict.fromkeys(Path(table).name for table in tables if table))
        return CardInfo(
            base_model=self.model_args.model_name_or_path,
            dataset_id=args.dataset_name,  # the card keeps it only when it is a Hub id (hub.render_model_card)
            dataset_config=args.dataset_config_name,
            dataset_name=", ".join(names) or None,
        )

    def predict(self, trainer: Trainer) -> None:
        """`predictions_test.tsv`: each test row's index and its predicted label name (or score); the metrics too when
        the test table has labels."""
        test = self.features["test"]
        output = trainer.predict(test, metric_key_prefix="predict")
        logits = first_output(output.predictions)
        if self.label_space.kind == REGRESSION:
            predicted = [f"{score:.6g}" for score in np.squeeze(logits, axis=-1)]
        else:
            predicted = [self.label_space.names[i] for i in np.argmax(logits, axis=-1)]
        if trainer.is_world_process_zero():
            trainer.log_metrics("predict", output.metrics)
            trainer.save_metrics("predict", output.metrics)
            path = output_path(self.training_args, "predictions_test.tsv")
            with open(path, "w", encoding="utf-8") as handle:
                handle.write("index\tprediction\n")
                handle.writelines(f"{index}\t{label}\n" for index, label in zip(test["idx"], predicted))
            logger.info("Wrote %d predictions to %s", len(predicted), path)


def main(argv: list[str] | None = None) -> int:
    return ClassifyJob.main(argv)
