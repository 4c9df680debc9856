"""What every fine-tuning job shares: data arguments, the paper's Table 14 hyperparameters, and one skeleton.

[`FineTuningJob`] is the skeleton of every fine-tuning command (GLUE, NER, multiple choice, SQuAD, classify): parse the
arguments (`common.parse_args`), apply `--preset` to the fields the user did not give, check the arguments, start the
job (`common.start_job`), load and limit the data, build the config and refuse a `--max_seq_length` the model has no
positions for, build the model, encode the data, build the Trainer, train and evaluate (`train_and_evaluate`: results,
model and card), and predict. A task subclasses it and says only what differs: its arguments, how it loads and encodes
its data, its model class and config fields, its collator, metrics and prediction files.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from datasets import Dataset
from transformers import Trainer, TrainingArguments, set_seed

from ..distributed import launched_world_size
from ..errors import UserError
from ..hub import CardInfo
from ..training.preemption import train_or_checkpoint_on_signal
from ..training.reliability import data_files_fingerprint, resolve_resume_checkpoint
from ..training.sanity import check_sequence_length, check_tokenizer_fits_vocabulary
from ..training.trainer import FineTuningTrainer
from .arguments import FineTuningArguments
from .common import (
    ModelArguments,
    build_config,
    build_model,
    config_source,
    fill_unset,
    is_given,
    load_tokenizer,
    merge_config_overrides,
    parse_args,
    parse_config_overrides,
    start_job,
)

logger = logging.getLogger(__name__)


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


def preset_key(name: str) -> str:
    """The one spelling of a preset name: "SST-2" -> "sst2", "SQuAD-v1.1" / "squad_v1.1" -> "squad1.1"."""
    return re.sub(r"[-_\s]|v(?=\d)", "", name.lower())


def find_preset(name: str, table: dict[str, PaperHyperparameters]) -> PaperHyperparameters:
    """The row of `table` that `--preset name` means, in any of its spellings (`preset_key`)."""
    row = table.get(preset_key(name))
    if row is None:
        raise UserError(f"--preset {name!r} is not a row of Table 14 for this job; choose one of {sorted(table)}.")
    return row


def apply_paper_preset(
    model_args: ModelArguments,
    data_args: FineTuningArguments,
    training_args: TrainingArguments,
    table: dict[str, PaperHyperparameters] = PAPER_HYPERPARAMETERS,
) -> dict[str, float]:
    """Apply `data_args.preset` (a row of `table`, Table 14) to the arguments, in place; return the config's dropout
    fields.

    Only fields the user did not give are filled (`common.fill_unset`), so `--preset rte --max_steps 10` trains for 10
    steps. The global batch size of the paper is split over devices and gradient accumulation steps; it must divide
    evenly.
    """
    if data_args.preset is None:
        return {}
    row = find_preset(data_args.preset, table)
    return apply_table_row(row, model_args, data_args, training_args, source=f"--preset {data_args.preset}")


def apply_table_row(
    row: PaperHyperparameters,
    model_args: ModelArguments,
    length_args,
    training_args: TrainingArguments,
    source: str | None = None,
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
    fill_unset((training_args, length_args), values, source=source)

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
        checkpoint = resolve_resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)
        # SIGTERM/SIGUSR1 (a preemption): checkpoint of the step reached, then StoppedBySignal, before any final save.
        train_result = train_or_checkpoint_on_signal(trainer, resume_from_checkpoint=checkpoint)
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


# --------------------------------------------------------------------------------------------------------------------
# The steps every fine-tuning script takes (albert_hf/scripts/), as plain functions
# --------------------------------------------------------------------------------------------------------------------


def parse_finetuning_args(
    dataclass_types: tuple, argv: list[str] | None = None, presets: dict[str, PaperHyperparameters] | None = None
) -> tuple:
    """The dataclasses of a fine-tuning command line (`common.parse_args`: ModelArguments first, the data arguments
    second, TrainingArguments last), with `--preset` (a row of `presets`, Table 14 by default) filling the fields the
    user did not give; the row's dropout goes into `model_args.config_overrides`, under what the user gave there."""
    parsed = parse_args(dataclass_types, argv)
    model_args, data_args, training_args = parsed[0], parsed[1], parsed[-1]
    dropout = apply_paper_preset(model_args, data_args, training_args, presets or PAPER_HYPERPARAMETERS)
    if dropout:
        preset_overrides = ",".join(f"{key}={value}" for key, value in dropout.items())
        model_args.config_overrides, _ = merge_config_overrides(preset_overrides, model_args.config_overrides)
    return parsed


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


# --------------------------------------------------------------------------------------------------------------------
# The skeleton
# --------------------------------------------------------------------------------------------------------------------


class FineTuningJob:
    """One fine-tuning run, from the command line to the results; `run` is the same for every task.

    A task sets the class attributes and overrides the methods below `run` where it differs. Each step reads what the
    earlier ones left on the job: the arguments, `tokenizer`, `raw` (split -> examples, limited and prepared) and
    `features` (split -> what the model reads).
    """

    # The dataclasses parsed besides ModelArguments and TrainingArguments: the data arguments first (a
    # FineTuningArguments or a subclass), then the task's own (if any).
    argument_types: ClassVar[tuple[type, ...]] = (FineTuningArguments,)
    task_name: str  # the config's `finetuning_task`
    model_class: ClassVar[type]
    trainer_class: ClassVar[type[Trainer]] = FineTuningTrainer
    presets: ClassVar[dict[str, PaperHyperparameters]] = PAPER_HYPERPARAMETERS

    def __init__(self, model_args: ModelArguments, training_args: TrainingArguments, data_args, task_args=None):
        self.model_args = model_args
        self.training_args = training_args
        self.data_args = data_args
        self.task_args = data_args if task_args is None else task_args
        self.tokenizer = None
        self.raw: dict[str, Dataset] = {}
        self.features: dict[str, Dataset] = {}

    @classmethod
    def from_argv(cls, argv: list[str] | None = None) -> FineTuningJob:
        """The job of a command line (or of one .json file of arguments)."""
        model_args, *task_arguments, training_args = parse_args(
            (ModelArguments, *cls.argument_types, TrainingArguments), argv
        )
        return cls(model_args, training_args, *task_arguments)

    @classmethod
    def main(cls, argv: list[str] | None = None) -> int:
        """The command: parse `argv`, run, return the exit code."""
        cls.from_argv(argv).run()
        return 0

    def run(self) -> dict[str, dict[str, float]]:
        """Every step of the job, in order; returns the metrics by split (as `train_and_evaluate`)."""
        preset_config = self.apply_preset()
        self.check_arguments()
        start_job(self.training_args, model_args=self.model_args, dataset_name=self.hub_dataset_name())
        set_seed(self.training_args.seed)

        self.tokenizer = load_tokenizer(self.model_args)
        self.load_data()
        config = build_config(self.model_args, finetuning_task=self.task_name, **self.config_fields(), **preset_config)
        # Before anything is encoded or trained: longer inputs would index positions the model has no embedding for.
        check_sequence_length(self.data_args.max_seq_length, config, config_source(self.model_args))
        # The one rule between a tokenizer and a model's embeddings, as pretraining asks it: ids past the embedding
        # fail in the lookup, and a trained model's rows beyond the tokenizer's were learned for other pieces (a
        # fresh model's spare rows are only unused).
        if self.model_args.model_name_or_path or len(self.tokenizer) > config.vocab_size:
            check_tokenizer_fits_vocabulary(self.tokenizer, config.vocab_size, config_source(self.model_args))
        model = build_model(self.model_class, self.model_args, config)
        self.features = {split: self.encode(split, dataset) for split, dataset in self.raw.items()}

        eval_sets = self.eval_sets()
        trainer = self.build_trainer(model, eval_sets.get("eval"))
        results = train_and_evaluate(trainer, self.training_args, eval_sets)
        if self.training_args.do_predict:
            self.predict(trainer)
        return results

    def build_trainer(self, model, eval_dataset: Dataset | None) -> Trainer:
        """`trainer_class` on the model, the training split and the first evaluation set, with the task's collator,
        metrics and model card."""
        trainer = self.trainer_class(
            model=model,
            args=self.training_args,
            train_dataset=self.model_inputs("train"),
            eval_dataset=eval_dataset,
            processing_class=self.tokenizer,
            data_collator=self.data_collator(pad_to_multiple_of(self.data_args, self.training_args)),
            compute_metrics=self.compute_metrics(),
            card_info=self.card_info(),
            **self.trainer_arguments(),
        )
        trainer.run_fingerprint_extra = self.run_fingerprint()
        return trainer

    def hub_dataset_name(self) -> str | None:
        """The `--dataset_name` the job will read, or None when it reads local files (`--data_dir`, `--*_file`): a
        default name (GLUE's nyu-mll/glue) is only read when no file is given."""
        arguments = (self.data_args, self.task_args)
        local = ("data_dir", "train_file", "validation_file", "test_file")
        if any(getattr(each, name, None) for each in arguments for name in local):
            return None
        return next((name for each in arguments if (name := getattr(each, "dataset_name", None))), None)

    def run_fingerprint(self) -> dict[str, Any]:
        """What a resumed run must share with the run that wrote the checkpoint, besides the model config, optimizer
        and batch the Trainer adds itself: the task, the training data (each local file also by its content,
        `data_files_fingerprint`) and its length limits, the tokenizer."""
        names = ("train_file", "data_dir", "dataset_name", "dataset_config_name")
        train_data = {
            name: value
            for arguments in (self.data_args, self.task_args)
            for name in names
            if (value := getattr(arguments, name, None)) is not None
        }
        return {
            "task": self.task_name,
            "train_data": train_data,
            "max_seq_length": self.data_args.max_seq_length,
            "max_train_samples": self.data_args.max_train_samples,
            "tokenizer": self.model_args.tokenizer_name_or_path or self.model_args.model_name_or_path,
            **data_files_fingerprint(train_data.values()),
        }

    def load_data(self) -> None:
        """`raw`: each split loaded, its first --max_*_samples kept, then prepared.

        While the splits are prepared `raw` holds them limited but not yet prepared, so that preparing one split can
        read another (classify encodes every split's labels against the training split's).
        """
        self.raw = {
            split: take_first(dataset, self.sample_limit(split))
            for split, dataset in self.load_splits(self.splits()).items()
        }
        self.raw = {split: self.prepare(split, examples) for split, examples in self.raw.items()}

    # ---- what a task may change -----------------------------------------------------------------------------------

    def apply_preset(self) -> dict[str, float]:
        """Fill the fields the user did not give from `--preset` (a row of `presets`); the config's dropout fields."""
        return apply_paper_preset(self.model_args, self.data_args, self.training_args, self.presets)

    def check_arguments(self) -> None:
        """Refuse arguments that do not fit together (their final values, presets applied), before the job starts."""

    def splits(self) -> list[str]:
        """The splits to load: "train", those starting with "validation" (evaluated), the others (predicted)."""
        return requested_splits(self.training_args)

    def sample_limit(self, split: str) -> int | None:
        """--max_train_samples, --max_eval_samples or --max_predict_samples, by the split's role."""
        if split == "train":
            return self.data_args.max_train_samples
        if split.startswith("validation"):
            return self.data_args.max_eval_samples
        return self.data_args.max_predict_samples

    def load_splits(self, splits: list[str]) -> dict[str, Dataset]:
        """Each requested split's examples, whole (the skeleton keeps the first --max_*_samples)."""
        raise NotImplementedError

    def prepare(self, split: str, examples: Dataset) -> Dataset:
        """Check or clean one split's limited examples before the model is built; they stay in `raw`."""
        return examples

    def config_fields(self) -> dict[str, Any]:
        """Task fields of the model config (labels, problem type), from the arguments and `raw`."""
        return {}

    def encode(self, split: str, examples: Dataset) -> Dataset:
        """The features of one split, as the model and the collator read them."""
        raise NotImplementedError

    def model_inputs(self, split: str) -> Dataset | None:
        """What Trainer feeds the model for `split` (None when the split was not loaded)."""
        return self.features.get(split)

    def eval_sets(self) -> dict[str, Dataset]:
        """Evaluation sets by name: "eval" is Trainer's own (`eval_results.json`), others report as "eval_<name>"."""
        validation = self.model_inputs("validation")
        return {} if validation is None else {"eval": validation}

    def data_collator(self, pad_to_multiple_of: int | None):
        """The collator, padding each batch's length up to `pad_to_multiple_of` when given."""
        raise NotImplementedError

    def compute_metrics(self):
        """Trainer's `compute_metrics` (None when the trainer scores evaluation itself)."""
        return None

    def card_info(self) -> CardInfo:
        """The model card's base model and dataset."""
        return CardInfo(base_model=self.model_args.model_name_or_path)

    def trainer_arguments(self) -> dict[str, Any]:
        """Further keyword arguments of `trainer_class`."""
        return {}

    def predict(self, trainer: Trainer) -> None:
        """--do_predict: predict the test split(s) and write the prediction files (a job that has no test split
        refuses --do_predict in `check_arguments`)."""
        raise NotImplementedError


def first_output(predictions):
    """The logits of a prediction output: the first element when the model returned several."""
    return predictions[0] if isinstance(predictions, tuple) else predictions
