"""Multiple choice (SWAG, RACE and the like), as plain functions: the steps `albert_hf/scripts/multiple_choice.py`
(`albert-hf multiple-choice`) takes, for a copy of that script to call as they are.

Files are SWAG or RACE json (see `albert_hf.data.multiple_choice`); a RACE folder of per-article files works too.
Tables of any format (csv, tsv, json, jsonl, parquet, or `--dataset_name`) are read by column with `--context_column`,
`--choice_columns` (one per choice, or one list column), `--label_column` and, for RACE-like tables,
`--question_column`. The metric is accuracy; the predictions are the chosen index and the scores of each question.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
from datasets import Dataset
from sklearn.metrics import accuracy_score
from transformers import EvalPrediction, Trainer, TrainingArguments

from ..argument_parsing import ModelArguments
from ..arguments import MultipleChoiceArguments
from ..data.multiple_choice import examples_from_rows, from_hub_layout, load_multiple_choice
from ..data.sources import load_rows, row_places
from ..errors import UserError
from ..finetuning import FineTuningArguments, first_output, output_path, preset_key
from ..hub import CardInfo
from ..output_files import write_file

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
