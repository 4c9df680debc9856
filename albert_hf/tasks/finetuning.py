"""What every fine-tuning job shares: data arguments, the paper's Table 14 hyperparameters, and the Trainer steps.

Each task script (GLUE, NER, multiple choice, SQuAD) parses `(ModelArguments, FineTuningArguments, <task arguments>,
TrainingArguments)` with `common.parse_args`, applies `--preset` with `apply_paper_preset` (the fields the user did
not give), calls `common.start_job`, and runs `train_and_evaluate` with a `FineTuningTrainer`
(albert_hf/training/trainer.py: a Trainer that predicts in dataset order).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from transformers import Trainer, TrainingArguments

from ..distributed import launched_world_size
from ..errors import UserError
from ..training.reliability import resolve_resume_checkpoint
from .common import ModelArguments, fill_unset, is_given, parse_config_overrides

logger = logging.getLogger(__name__)


@dataclass
class FineTuningArguments:
    """Data files, sequence length and sample limits shared by all fine-tuning tasks."""

    data_dir: str | None = field(
        default=None, metadata={"help": "Folder with the task's files in their original layout (e.g. glue_data/MRPC)."}
    )
    train_file: str | None = field(default=None, metadata={"help": "Training file (task-specific layout)."})
    validation_file: str | None = field(default=None, metadata={"help": "Evaluation file (task-specific layout)."})
    test_file: str | None = field(default=None, metadata={"help": "Test file to predict (task-specific layout)."})
    max_seq_length: int = field(
        default=128,
        metadata={"help": "Longest tokenized input; longer inputs are truncated and the count is logged."},
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every input to max_seq_length. Default: pad each batch to its longest input."},
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep only the first N evaluation examples."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep only the first N test examples."})
    preset: str | None = field(
        default=None,
        metadata={
            "help": "Apply a row of the ALBERT paper's Table 14 (lr, batch size, steps, warmup, dropout, max length): "
            "cola, stsb, sst2, mnli, qnli, qqp, rte, mrpc, wnli, race. Flags given explicitly keep their value."
        },
    )

    def __post_init__(self):
        for name in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UserError(f"--{name} must be positive, got {value}.")
        if self.max_seq_length < 8:
            raise UserError(f"--max_seq_length must be at least 8, got {self.max_seq_length}.")


@dataclass(frozen=True)
class PaperHyperparameters:
    """One row of the ALBERT paper's Table 14 (fine-tuning hyperparameters)."""

    learning_rate: float
    batch_size: int  # global batch: summed over devices and gradient accumulation
    albert_dropout: float  # hidden and attention dropout inside the encoder
    classifier_dropout: float
    train_steps: int
    warmup_steps: int
    max_seq_length: int


# Lan et al. (2020), Table 14. SQuAD rows are kept with the SQuAD task.
PAPER_HYPERPARAMETERS: dict[str, PaperHyperparameters] = {
    "cola": PaperHyperparameters(1e-5, 16, 0.0, 0.1, 5336, 320, 512),
    "stsb": PaperHyperparameters(2e-5, 16, 0.0, 0.1, 3598, 214, 512),
    "sst2": PaperHyperparameters(1e-5, 32, 0.0, 0.1, 20935, 1256, 512),
    "mnli": PaperHyperparameters(3e-5, 128, 0.0, 0.1, 10000, 1000, 512),
    "qnli": PaperHyperparameters(1e-5, 32, 0.0, 0.1, 33112, 1986, 512),
    "qqp": PaperHyperparameters(5e-5, 128, 0.1, 0.1, 14000, 1000, 512),
    "rte": PaperHyperparameters(3e-5, 32, 0.1, 0.1, 800, 200, 512),
    "mrpc": PaperHyperparameters(2e-5, 32, 0.0, 0.1, 800, 200, 512),
    "wnli": PaperHyperparameters(2e-5, 16, 0.1, 0.1, 2000, 250, 512),
    "race": PaperHyperparameters(1e-5, 32, 0.1, 0.1, 12000, 1000, 512),
}


def apply_paper_preset(
    model_args: ModelArguments, data_args: FineTuningArguments, training_args: TrainingArguments
) -> dict[str, float]:
    """Apply `data_args.preset` (a Table 14 row) to the arguments, in place; return the config's dropout fields.

    Only fields the user did not give are filled (`common.fill_unset`), so `--preset rte --max_steps 10` trains for 10
    steps. The global batch size of the paper is split over devices and gradient accumulation steps; it must divide
    evenly.
    """
    if data_args.preset is None:
        return {}
    name = data_args.preset.lower().replace("-", "")
    if name not in PAPER_HYPERPARAMETERS:
        raise UserError(
            f"--preset {data_args.preset!r} is not a row of Table 14; choose one of {sorted(PAPER_HYPERPARAMETERS)}."
        )
    return apply_table_row(PAPER_HYPERPARAMETERS[name], model_args, data_args, training_args)


def apply_table_row(
    row: PaperHyperparameters, model_args: ModelArguments, length_args, training_args: TrainingArguments
) -> dict[str, float]:
    """Apply one Table 14 row to the fields the user did not give, in place; return the config's dropout fields.

    `length_args` is the dataclass holding `max_seq_length` (the task's data arguments)."""
    values = {
        "learning_rate": row.learning_rate,
        "max_steps": row.train_steps,
        "warmup_steps": row.warmup_steps,
        "max_seq_length": row.max_seq_length,
    }
    if not is_given(training_args, "per_device_train_batch_size"):
        values["per_device_train_batch_size"] = _per_device_batch_size(row.batch_size, training_args)
    fill_unset((training_args, length_args), values)

    # Dropout lives in the model config; an explicit --config_overrides value wins over the preset.
    explicit = parse_config_overrides(model_args.config_overrides)
    dropout = {
        "hidden_dropout_prob": row.albert_dropout,
        "attention_probs_dropout_prob": row.albert_dropout,
        "classifier_dropout_prob": row.classifier_dropout,
    }
    return {key: value for key, value in dropout.items() if key not in explicit}


def requested_splits(training_args: TrainingArguments) -> list[str]:
    """The dataset splits the run needs: train for --do_train, validation for --do_eval, test for --do_predict."""
    wanted = {"train": training_args.do_train, "validation": training_args.do_eval, "test": training_args.do_predict}
    return [split for split, needed in wanted.items() if needed]


def _per_device_batch_size(global_batch_size: int, training_args: TrainingArguments) -> int:
    # The launcher's process count, as --global_batch_size of pretraining reads it: presets apply before the job joins
    # the process group (`start_job`), which refuses a launch where it and Trainer's world size differ.
    world_size = launched_world_size()
    shards = world_size * training_args.gradient_accumulation_steps
    if global_batch_size % shards != 0:
        raise UserError(
            f"The paper's batch size {global_batch_size} does not split over {world_size} processes x "
            f"{training_args.gradient_accumulation_steps} accumulation steps; set --per_device_train_batch_size."
        )
    return global_batch_size // shards


def take_first(dataset, max_samples: int | None):
    """The first `max_samples` rows of a `datasets.Dataset` (all of them when None)."""
    if max_samples is None or max_samples >= len(dataset):
        return dataset
    return dataset.select(range(max_samples))


def log_truncation(split: str, num_truncated: int, num_examples: int, max_seq_length: int) -> None:
    """Say how many inputs lost tokens to `max_seq_length` (never silent)."""
    if num_truncated:
        logger.warning(
            "%s: %d of %d examples were longer than max_seq_length=%d and were truncated.",
            split,
            num_truncated,
            num_examples,
            max_seq_length,
        )


def train_and_evaluate(
    trainer: Trainer,
    training_args: TrainingArguments,
    eval_datasets: dict[str, Any],
) -> dict[str, dict[str, float]]:
    """Train (if --do_train), save the model, then evaluate on each named eval set (if --do_eval).

    Returns the metrics by split name ("train", "eval", or "eval_<name>" for extra sets such as MNLI mismatched); each
    is also logged and saved as `<split>_results.json` in the output folder.
    """
    results: dict[str, dict[str, float]] = {}
    if training_args.do_train:
        # --resume_from_checkpoint latest: the newest complete checkpoint of --output_dir, so one command restarts.
        checkpoint = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
        trainer.save_model()
        metrics = dict(train_result.metrics, train_samples=len(trainer.train_dataset))
        _report(trainer, "train", metrics)
        trainer.save_state()
        results["train"] = metrics
    if training_args.do_eval:
        for name, dataset in eval_datasets.items():
            split = "eval" if name == "eval" else f"eval_{name}"
            metrics = trainer.evaluate(eval_dataset=dataset, metric_key_prefix=split)
            metrics[f"{split}_samples"] = len(dataset)
            _report(trainer, split, metrics)
            results[split] = metrics
    if training_args.push_to_hub:
        trainer.push_to_hub()  # final commit: model, tokenizer, code, and the card with the evaluation results
    elif training_args.should_save:
        trainer.create_model_card()  # README.md in output_dir
    return results


def _report(trainer: Trainer, split: str, metrics: dict[str, float]) -> None:
    trainer.log_metrics(split, metrics)
    trainer.save_metrics(split, metrics)


def output_path(training_args: TrainingArguments, filename: str) -> str:
    """`filename` inside the output folder, created if needed."""
    os.makedirs(training_args.output_dir, exist_ok=True)
    return os.path.join(training_args.output_dir, filename)
