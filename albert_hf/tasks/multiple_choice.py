"""Fine-tune ALBERT on multiple choice (SWAG, RACE) with Trainer: `albert-hf multiple-choice`,
`examples/multiple_choice/run_swag.py`.

    python examples/multiple_choice/run_swag.py --train_file race/train --validation_file race/dev \\
        --model_name_or_path <albert checkpoint> --preset race --do_train --do_eval --output_dir out/race

Files are SWAG or RACE json (see `albert_hf.data.multiple_choice`); a RACE folder of per-article files works too.
Tables of any format (csv, tsv, json, jsonl, parquet, or `--dataset_name`) are read by column with `--context_column`,
`--choice_columns` (one per choice, or one list column), `--label_column` and, for RACE-like tables,
`--question_column`. `--early_exit` (and the other options of `EarlyExitArguments`) trains exits as for sequence
classification (docs/performance.md). The metric is accuracy; `--do_predict` writes `predictions_test.jsonl` (the
chosen index and the scores of each question).
"""

from __future__ import annotations

import json
import logging

import numpy as np
from datasets import Dataset
from sklearn.metrics import accuracy_score
from transformers import DataCollatorForMultipleChoice, EvalPrediction, Trainer

from ..data.multiple_choice import examples_from_rows, from_hub_layout, load_multiple_choice, tokenize_multiple_choice
from ..data.sources import load_rows
from ..errors import UserError
from ..hub import CardInfo
from ..modeling import AlbertForMultipleChoice
from .arguments import MultipleChoiceArguments
from .finetuning import FineTuningArguments, FineTuningJob, first_output, log_truncation, output_path, preset_key

logger = logging.getLogger(__name__)


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
    if file:
        rows, source = load_rows(data_files=file, split=split), file
    elif mc_args.dataset_name:
        rows = load_rows(
            dataset_name=mc_args.dataset_name, dataset_config_name=mc_args.dataset_config_name, split=split
        )
        source = f"{mc_args.dataset_name}[{split}]"
    else:
        raise UserError(f"No {split} data: pass --{split}_file or --dataset_name.")
    examples = examples_from_rows(
        rows, source, mc_args.context_column, mc_args.choice_columns, mc_args.label_column, mc_args.question_column
    )
    return Dataset.from_list(examples)


def write_predictions(path: str, logits: np.ndarray) -> None:
    """One json line per question: the chosen index and the score of every choice."""
    with open(path, "w", encoding="utf-8") as handle:
        for scores in logits:
            handle.write(
                json.dumps({"prediction": int(np.argmax(scores)), "scores": [float(s) for s in scores]}) + "\n"
            )


class MultipleChoiceJob(FineTuningJob):
    """Multiple choice on the fine-tuning skeleton: one score per choice, accuracy, and the scores as predictions."""

    argument_types = (FineTuningArguments, MultipleChoiceArguments)
    model_class = AlbertForMultipleChoice
    task_name = "multiple_choice"

    def load_splits(self, splits: list[str]) -> dict[str, Dataset]:
        return load_splits(self.data_args, self.task_args, splits)

    def config_fields(self) -> dict:
        return self.task_args.early_exit_config()

    def encode(self, split: str, examples: Dataset) -> Dataset:
        max_seq_length = self.data_args.max_seq_length
        encoded, num_truncated = tokenize_multiple_choice(
            examples, self.tokenizer, max_seq_length, self.data_args.pad_to_max_length
        )
        log_truncation(split, num_truncated, len(examples), max_seq_length)
        return encoded

    def data_collator(self, pad_to_multiple_of: int | None):
        return DataCollatorForMultipleChoice(self.tokenizer, pad_to_multiple_of=pad_to_multiple_of)

    def compute_metrics(self):
        return accuracy_compute_metrics

    def card_info(self) -> CardInfo:
        # the Hub dataset if one was used, else the layout's usual source (RACE preset: RACE, else SWAG)
        is_race = self.data_args.preset is not None and preset_key(self.data_args.preset) == "race"
        return CardInfo(
            base_model=self.model_args.model_name_or_path,
            dataset_id=self.task_args.dataset_name or ("ehovy/race" if is_race else "allenai/swag"),
            dataset_config=self.task_args.dataset_config_name,
        )

    def predict(self, trainer: Trainer) -> None:
        output = trainer.predict(self.features["test"], metric_key_prefix="predict")
        if trainer.is_world_process_zero():
            trainer.log_metrics("predict", output.metrics)
            trainer.save_metrics("predict", output.metrics)
            path = output_path(self.training_args, "predictions_test.jsonl")
            logits = first_output(output.predictions)
            write_predictions(path, logits)
            logger.info("Wrote %d predictions to %s", len(logits), path)


def main(argv: list[str] | None = None) -> int:
    return MultipleChoiceJob.main(argv)
