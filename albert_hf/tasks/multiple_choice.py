"""Fine-tune ALBERT on multiple choice (SWAG, RACE) with Trainer: `albert-hf multiple-choice`,
`examples/multiple_choice/run_swag.py`.

    python examples/multiple_choice/run_swag.py --train_file race/train --validation_file race/dev \\
        --model_name_or_path <albert checkpoint> --preset race --do_train --do_eval --output_dir out/race

Files are SWAG or RACE json (see `albert_hf.data.multiple_choice`); a RACE folder of per-article files works too. The
metric is accuracy; `--do_predict` writes `predictions_test.jsonl` (the chosen index and the scores of each question).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import numpy as np
from datasets import Dataset
from sklearn.metrics import accuracy_score
from transformers import DataCollatorForMultipleChoice, EvalPrediction, TrainingArguments, set_seed

from ..data.multiple_choice import from_hub_layout, load_multiple_choice, tokenize_multiple_choice
from ..errors import UserError
from ..hub import CardInfo
from ..modeling import AlbertForMultipleChoice
from ..training.trainer import FineTuningTrainer
from .common import ModelArguments, build_config, build_model, load_tokenizer, parse_args, start_job
from .finetuning import (
    FineTuningArguments,
    apply_paper_preset,
    log_truncation,
    output_path,
    requested_splits,
    take_first,
    train_and_evaluate,
)

logger = logging.getLogger(__name__)


@dataclass
class MultipleChoiceArguments:
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset (e.g. allenai/swag) used for splits without a local file."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration (e.g. regular, all)."})


def accuracy_compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """Trainer `compute_metrics`: choice scores [N, num_choices] and gold indices [N] -> accuracy."""
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": float(accuracy_score(eval_prediction.label_ids, np.argmax(logits, axis=-1)))}


def load_splits(
    data_args: FineTuningArguments, mc_args: MultipleChoiceArguments, splits: list[str]
) -> dict[str, Dataset]:
    """Each split from its file (--train_file, --validation_file, --test_file), else from the Hub."""
    files = {"train": data_args.train_file, "validation": data_args.validation_file, "test": data_args.test_file}
    datasets = {}
    for split in splits:
        if files[split]:
            datasets[split] = load_multiple_choice(files[split])
        elif mc_args.dataset_name:
            from datasets import load_dataset

            hub_split = load_dataset(mc_args.dataset_name, mc_args.dataset_config_name, split=split)
            datasets[split] = from_hub_layout(hub_split, mc_args.dataset_name)
        else:
            raise UserError(f"No {split} data: pass --{split}_file or --dataset_name.")
    return datasets


def write_predictions(path: str, logits: np.ndarray) -> None:
    """One json line per question: the chosen index and the score of every choice."""
    with open(path, "w", encoding="utf-8") as handle:
        for scores in logits:
            handle.write(
                json.dumps({"prediction": int(np.argmax(scores)), "scores": [float(s) for s in scores]}) + "\n"
            )


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, mc_args, training_args = parse_args(
        (ModelArguments, FineTuningArguments, MultipleChoiceArguments, TrainingArguments), argv
    )
    preset_config = apply_paper_preset(model_args, data_args, training_args)
    start_job(training_args, model_args=model_args)
    set_seed(training_args.seed)

    splits = requested_splits(training_args)
    limits = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_predict_samples,
    }
    raw = {
        split: take_first(dataset, limits[split]) for split, dataset in load_splits(data_args, mc_args, splits).items()
    }

    tokenizer = load_tokenizer(model_args)
    config = build_config(model_args, finetuning_task="multiple_choice", **preset_config)
    model = build_model(AlbertForMultipleChoice, model_args, config)

    encoded = {}
    for split, dataset in raw.items():
        encoded[split], num_truncated = tokenize_multiple_choice(
            dataset, tokenizer, data_args.max_seq_length, data_args.pad_to_max_length
        )
        log_truncation(split, num_truncated, len(dataset), data_args.max_seq_length)

    pad_to_multiple_of = 8 if (training_args.fp16 or training_args.bf16) and not data_args.pad_to_max_length else None
    trainer = FineTuningTrainer(
        model=model,
        card_info=CardInfo(
            base_model=model_args.model_name_or_path,
            # the Hub dataset if one was used, else the layout's usual source (RACE preset: RACE, else SWAG)
            dataset_id=mc_args.dataset_name
            or ("ehovy/race" if (data_args.preset or "").lower() == "race" else "allenai/swag"),
            dataset_config=mc_args.dataset_config_name,
        ),
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("validation"),
        processing_class=tokenizer,
        data_collator=DataCollatorForMultipleChoice(tokenizer, pad_to_multiple_of=pad_to_multiple_of),
        compute_metrics=accuracy_compute_metrics,
    )
    eval_sets = {"eval": encoded["validation"]} if "validation" in encoded else {}
    train_and_evaluate(trainer, training_args, eval_sets)

    if training_args.do_predict:
        output = trainer.predict(encoded["test"], metric_key_prefix="predict")
        if trainer.is_world_process_zero():
            trainer.log_metrics("predict", output.metrics)
            trainer.save_metrics("predict", output.metrics)
            path = output_path(training_args, "predictions_test.jsonl")
            logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
            write_predictions(path, logits)
            logger.info("Wrote %d predictions to %s", len(logits), path)
    return 0
