"""The steps every fine-tuning script takes (albert_hf/scripts/: glue, classify, ner, multiple_choice, squad), as plain
functions: parse the arguments with `--preset` (a row of the paper's Table 14, a YAML file of options under
albert_hf/recipes/) as the parser's defaults, limit the samples, build the config checked against the data and the
tokenizer, fingerprint the training run, then train, save, evaluate and write the card (`train_and_evaluate`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any

from datasets import Dataset
from transformers import Trainer, TrainingArguments

from .argument_parsing import check_model_arguments, config_source, is_given, parse_args, read_options_file, recipe_file
from .arguments import TRAINER_DEFAULTS, FineTuningArguments, ModelArguments
from .errors import OptionError, UserError
from .job_setup import TASK_MODEL_ATTRIBUTE, build_config
from .metrics import task_metric
from .tokenizer_fit import check_sequence_length, check_tokenizer_fits_vocabulary
from .training.callbacks import resume_training, save_final_model
from .training.model_selection import kept_checkpoint
from .training.reliability import data_files_fingerprint

logger = logging.getLogger(__name__)


def preset_key(name: str) -> str:
    """The one spelling of a preset name: "SST-2" -> "sst2", "SQuAD-v1.1" / "squad_v1.1" -> "squad1.1"."""
    return re.sub(r"[-_\s]|v(?=\d)", "", name.lower())


def paper_preset(kind: str):
    """The recipe reader of `argument_parsing.parse_args` for `--preset`: a row of the paper's Table 14 as a YAML file of
    options (albert_hf/recipes/<kind>/<name>.yaml: "finetune" for GLUE and RACE, "squad" for SQuAD), in any spelling
    of its name (`preset_key`), or the path of the user's own file; its best-dev selection left out where the run
    does not select (`without_turned_off_selection`)."""

    def read(options, given: frozenset[str]) -> tuple[str, dict[str, Any]]:
        if not options.preset:
            return "", {}
        source = f"--preset {options.preset}"
        path = recipe_file(kind, options.preset, "--preset", spelling=preset_key)
        values = without_turned_off_selection(
            read_options_file(path, {f"--{name}" for name in vars(options)}, source), options, given
        )
        if values.get("save_strategy") == "steps" and "save_steps" not in given:
            # A checkpoint at each evaluation, where an --eval_steps given moves them (Trainer keeps the best one
            # only among the steps it evaluated).
            values["save_steps"] = options.eval_steps if "eval_steps" in given else values.get("eval_steps")
        return source, values

    return read


# The options of a preset's best-dev selection that give way in a run that does not evaluate, or when the user turns
# evaluation, saving or the selection itself off: Trainer refuses `load_best_model_at_end` without them.
SELECTION_SWITCHES = ("eval_strategy", "save_strategy", "load_best_model_at_end")


def without_turned_off_selection(values: dict[str, Any], options, given: set[str] | frozenset[str]) -> dict[str, Any]:
    """A preset's `values` without its best-dev selection (`SELECTION_SWITCHES`) when the run does not evaluate
    (neither --do_eval nor an --eval_strategy given) or the user gave `--eval_strategy no`, `--save_strategy no` or
    `--load_best_model_at_end false`: such a run keeps its last step's model, as before the presets selected the best
    one, and needs no dev set."""
    off = {"eval_strategy": "no", "save_strategy": "no", "load_best_model_at_end": "false"}
    turned_off = [
        name
        for name, value in off.items()
        if name in given and str(getattr(getattr(options, name), "value", getattr(options, name))).lower() == value
    ]
    evaluates = bool(options.do_eval) or "eval_strategy" in given
    if evaluates and not turned_off:
        return values
    return {name: value for name, value in values.items() if name not in SELECTION_SWITCHES}


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
        select_by_task_metric(trainer)
        # --resume_from_checkpoint latest: the newest complete checkpoint of --output_dir, so one command restarts.
        # SIGTERM/SIGUSR1 (a preemption): checkpoint of the step reached, then StoppedBySignal, before any final save.
        train_result = resume_training(trainer, training_args.resume_from_checkpoint)
        save_final_model(trainer)  # atomic, not uploaded: the push below comes after the evaluation
        metrics = dict(train_result.metrics, train_samples=len(trainer.train_dataset))
        metrics.update(selected_checkpoint_results(trainer))  # best-dev selection: which step's model was kept
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


def select_by_task_metric(trainer: Trainer) -> None:
    """With --load_best_model_at_end and no --metric_for_best_model (nor a preset's), choose the best checkpoint by
    the task's own metric (`albert_hf.metrics.task_metric`: GLUE's per task, SQuAD's F1, seqeval's F1, ...), higher
    being better, rather than by Trainer's default, the evaluation loss, which is not what a dev figure reports."""
    args = trainer.args
    if (
        not args.load_best_model_at_end
        or args.metric_for_best_model != "loss"
        or is_given(args, "metric_for_best_model")
    ):
        return
    config = getattr(trainer.accelerator.unwrap_model(trainer.model), "config", None)
    metric = task_metric(getattr(config, "finetuning_task", None), getattr(config, "problem_type", None))
    if metric is None:
        return
    args.metric_for_best_model = metric
    if not is_given(args, "greater_is_better"):
        args.greater_is_better = True
    logger.info("The best checkpoint is the one of the best eval_%s (the task's metric).", metric)


def selected_checkpoint_results(trainer: Trainer) -> dict[str, Any]:
    """`best_step`, `best_<metric>` and `best_of_evaluations` when the run kept its best checkpoint
    (`albert_hf.training.model_selection`); nothing when it kept its last step's model, with a warning when the
    selection was asked but no checkpoint was evaluated."""
    kept = kept_checkpoint(trainer.state, trainer.args)
    if kept is not None:
        logger.info("Kept the model of %s.", kept.describe())
        return kept.results()
    if trainer.args.load_best_model_at_end:
        logger.warning(
            "--load_best_model_at_end: no checkpoint was evaluated during training (--eval_steps %s, %d steps), so "
            "the model is the last step's.",
            trainer.args.eval_steps,
            trainer.state.global_step,
        )
    return {}


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
    """The dataclasses of a fine-tuning command line (`argument_parsing.parse_args`: ModelArguments first, the data arguments
    second, TrainingArguments last), `--preset` (a row of Table 14 from albert_hf/recipes/<presets>/) read as the
    parser's defaults; --global_batch_size (a preset gives the paper's) sets the per-device batch or the accumulation
    steps (`argument_parsing.split_global_batch`); --init_from_task_model makes the model to start from
    (`start_from_task_model`)."""
    parsed = parse_args(dataclass_types, argv, recipe=paper_preset(presets), trainer_defaults=TRAINER_DEFAULTS)
    start_from_task_model(parsed[0], parsed[1])
    return parsed


def start_from_task_model(model_args: ModelArguments, data_args: FineTuningArguments) -> None:
    """--init_from_task_model PATH: the job starts from that fine-tuned model's encoder with a fresh head
    (`job_setup.encoder_with_fresh_head`). PATH becomes the job's `--model_name_or_path`, so its config (with this
    task's labels), its tokenizer (unless --tokenizer_name_or_path), the checks of the output folder and the model
    card's base model follow from it as they do for any checkpoint. Refused, in one line, before any work: with
    --model_name_or_path too, a PATH that is no model (a file, a folder without weights or config, no such folder),
    a model of another architecture."""
    path = data_args.init_from_task_model
    if not path:
        return
    if model_args.model_name_or_path:
        raise OptionError(
            f"--init_from_task_model {path} and --model_name_or_path {model_args.model_name_or_path}: the job starts "
            "from one model; give --init_from_task_model alone to start from its encoder with a fresh head."
        )
    check_task_model(path)
    model_args.model_name_or_path = path
    setattr(model_args, TASK_MODEL_ATTRIBUTE, path)
    # --config_preset, --config_overrides and --max_seq_length, against that model's config now
    check_model_arguments(model_args, data_args.max_seq_length)


def check_task_model(path: str) -> None:
    """Raise a `UserError` naming --init_from_task_model when `path` holds no ALBERT model to take an encoder from."""
    from .training.checkpoints import check_pretrained_source

    option = "--init_from_task_model"
    expanded = os.path.expanduser(path)
    if os.path.isfile(expanded):
        raise UserError(f"{option} {path}: a file, not a model folder; pass the output_dir of a fine-tuning run.")
    summary = os.path.join(expanded, "seeds_summary.json")
    if os.path.isfile(summary):  # a set of seeds (`albert_hf.seed_runs`): one model per seed, none at its top
        with open(summary, encoding="utf-8") as handle:
            median = json.load(handle).get("median_folder", "seed-<N>")
        raise UserError(
            f"{option} {path}: a set of seeds, one model per seed; pass one of them, e.g. the median seed's "
            f"{os.path.join(path, median)}."
        )
    check_pretrained_source(path, option=option)  # no such folder, no weights, unreadable weights, a bad Hub id
    if not os.path.isdir(expanded):
        return  # a Hub id: its config is read when the model is built
    config_file = os.path.join(expanded, "config.json")
    try:
        with open(config_file, encoding="utf-8") as handle:
            model_type = json.load(handle).get("model_type")
    except FileNotFoundError:
        raise UserError(f"{option} {path}: no config.json; pass the output_dir of a fine-tuning run.") from None
    except (OSError, ValueError, AttributeError) as error:
        raise UserError(f"{option} {path}: config.json is not a readable model config ({error}).") from error
    if model_type not in ("albert", "albert_hf"):
        raise UserError(f"{option} {path}: a {model_type!r} model, not an ALBERT; its encoder cannot start this job.")


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
    """The job's AlbertConfig (`job_setup.build_config`), refused before anything is encoded or trained when inputs of
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
