"""The steps every fine-tuning script takes (albert_hf/scripts/: glue, classify, ner, multiple_choice, squad), as plain
functions: parse the arguments with `--preset` (a row of the paper's Table 14, a YAML file of options under
albert_hf/recipes/) as the parser's defaults, limit the samples, build the config checked against the data and the
tokenizer, fingerprint the training run, then train, save, evaluate and write the card (`train_and_evaluate`).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from datasets import Dataset
from transformers import Trainer, TrainingArguments

from ..training.callbacks import resume_training, save_final_model
from ..training.reliability import data_files_fingerprint
from ..training.sanity import check_sequence_length, check_tokenizer_fits_vocabulary
from .arguments import TRAINER_DEFAULTS, FineTuningArguments
from .common import (
    ModelArguments,
    build_config,
    config_source,
    parse_args,
    read_options_file,
    recipe_file,
)

logger = logging.getLogger(__name__)


def preset_key(name: str) -> str:
    """The one spelling of a preset name: "SST-2" -> "sst2", "SQuAD-v1.1" / "squad_v1.1" -> "squad1.1"."""
    return re.sub(r"[-_\s]|v(?=\d)", "", name.lower())


def paper_preset(kind: str):
    """The recipe reader of `common.parse_args` for `--preset`: a row of the paper's Table 14 as a YAML file of
    options (albert_hf/recipes/<kind>/<name>.yaml: "finetune" for GLUE and RACE, "squad" for SQuAD), in any spelling
    of its name (`preset_key`), or the path of the user's own file."""

    def read(options) -> tuple[str, dict[str, Any]]:
        if not options.preset:
            return "", {}
        source = f"--preset {options.preset}"
        path = recipe_file(kind, options.preset, "--preset", spelling=preset_key)
        return source, read_options_file(path, {f"--{name}" for name in vars(options)}, source)

    return read


def requested_splits(training_args: TrainingArguments) -> list[str]:
    """The dataset splits the run needs: train for --do_train, validation for --do_eval, test for --do_predict."""
    wanted = {"train": training_args.do_train, "validation": training_args.do_eval, "test": training_args.do_predict}
    return [split for split, needed in wanted.items() if needed]


def pad_to_multiple_of(data_args: FineTuningArguments, training_args: TrainingArguments) -> int | None:
    """What the collator pads each batch's length up to: a multiple of 8 under fp16/bf16, where tensor cores want it;
    nothing to add when every input is already padded to --max_seq_length (--pad_to_max_length)."""
    return 8 if (training_args.fp16 or training_args.bf16) and not data_args.pad_to_max_length else None


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
    """Train (if --do_train), save the model, then evaluate on each named eval set (if --do_eval). A SIGTERM or
    SIGUSR1 during training writes a checkpoint of that step and raises `StoppedBySignal` instead: nothing final.

    Returns the metrics by split name ("train", "eval", or "eval_<name>" for extra sets such as MNLI mismatched); each
    is also logged and saved as `<split>_results.json` in the output folder.
    """
    results: dict[str, dict[str, float]] = {}
    if training_args.do_train:
        # --resume_from_checkpoint latest: the newest complete checkpoint of --output_dir, so one command restarts.
        # SIGTERM/SIGUSR1 (a preemption): checkpoint of the step reached, then StoppedBySignal, before any final save.
        train_result = resume_training(trainer, training_args.resume_from_checkpoint)
        save_final_model(trainer)  # atomic, not uploaded: the push below comes after the evaluation
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


# --------------------------------------------------------------------------------------------------------------------
# The steps every fine-tuning script takes (albert_hf/scripts/), as plain functions
# --------------------------------------------------------------------------------------------------------------------


def parse_finetuning_args(dataclass_types: tuple, argv: list[str] | None = None, presets: str = "finetune") -> tuple:
    """The dataclasses of a fine-tuning command line (`common.parse_args`: ModelArguments first, the data arguments
    second, TrainingArguments last), `--preset` (a row of Table 14 from albert_hf/recipes/<presets>/) read as the
    parser's defaults; --global_batch_size (a preset gives the paper's) sets the per-device batch or the accumulation
    steps (`common.split_global_batch`)."""
    return parse_args(dataclass_types, argv, recipe=paper_preset(presets), trainer_defaults=TRAINER_DEFAULTS)


def sample_limit(split: str, data_args: FineTuningArguments) -> int | None:
    """--max_train_samples, --max_eval_samples ("validation*" splits) or --max_predict_samples (the others)."""
    if split == "train":
        return data_args.max_train_samples
    if split.startswith("validation"):
        return data_args.max_eval_samples
    return data_args.max_predict_samples


def limit_samples(splits: dict[str, Dataset], data_args: FineTuningArguments) -> dict[str, Dataset]:
    """Each split's first `sample_limit` examples."""
    return {split: take_first(dataset, sample_limit(split, data_args)) for split, dataset in splits.items()}


def hub_dataset_name(*arguments) -> str | None:
    """The `--dataset_name` a job will read, or None when it reads local files (`--data_dir`, `--*_file`): a default
    name (GLUE's nyu-mll/glue) is only read when no file is given."""
    local = ("data_dir", "train_file", "validation_file", "test_file")
    if any(getattr(each, name, None) for each in arguments for name in local):
        return None
    return next((name for each in arguments if (name := getattr(each, "dataset_name", None))), None)


def checked_config(model_args: ModelArguments, max_seq_length: int, tokenizer, **task_fields: Any):
    """The job's AlbertConfig (`common.build_config`), refused before anything is encoded or trained when inputs of
    `max_seq_length` would index positions it has no embedding for, or when the tokenizer does not fit its
    vocabulary (ids past the embedding fail in the lookup, and a trained model's rows beyond the tokenizer's were
    learned for other pieces; a fresh model's spare rows are only unused)."""
    config = build_config(model_args, **task_fields)
    check_sequence_length(max_seq_length, config, config_source(model_args))
    if model_args.model_name_or_path or len(tokenizer) > config.vocab_size:
        check_tokenizer_fits_vocabulary(tokenizer, config.vocab_size, config_source(model_args))
    return config


def training_fingerprint(task_name: str, model_args: ModelArguments, *arguments) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint, besides the model config, optimizer
    and batch the Trainer adds itself: the task, the training data (each local file also by its content,
    `data_files_fingerprint`) and its length limits, the tokenizer. `arguments`: the data arguments first."""
    names = ("train_file", "data_dir", "dataset_name", "dataset_config_name")
    train_data = {
        name: value for each in arguments for name in names if (value := getattr(each, name, None)) is not None
    }
    return {
        "task": task_name,
        "train_data": train_data,
        "max_seq_length": arguments[0].max_seq_length,
        "max_train_samples": arguments[0].max_train_samples,
        "tokenizer": model_args.tokenizer_name_or_path or model_args.model_name_or_path,
        **data_files_fingerprint(train_data.values()),
    }


def first_output(predictions):
    """The logits of a prediction output: the first element when the model returned several."""
    return predictions[0] if isinstance(predictions, tuple) else predictions
