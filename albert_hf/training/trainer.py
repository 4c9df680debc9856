"""`AlbertTrainer`, the Trainer of albert_hf's jobs, and albert_hf's model card for any Trainer.

[`AlbertTrainer`]`(Trainer)` changes two things of `transformers.Trainer`: the model card it writes and pushes is
albert_hf's ([`write_trainer_model_card`]), and evaluation and prediction follow the dataset's order. Where a task
changes the loss or the evaluation, one class above it: `AlbertPretrainingTrainer(AlbertTrainer)` (MLM + SOP, LAMB;
albert_hf/pretraining/trainer.py) and `SquadTrainer(AlbertTrainer)` (answer extraction and the official metrics;
albert_hf/training/squad_trainer.py).

What a long run needs to survive crashes (complete checkpoints, checked and exact resumption, the loss checks, the
SIGTERM checkpoint, the folder's lease) is no Trainer class: it is the reliability plugin of training/callbacks.py,
attached to any Trainer, this one included, in one line (`attach_reliability(trainer, ...)`), with
`resume_training(trainer, ...)` to resume it and `save_final_model(trainer)` for the atomic final save.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase, Trainer

from ..formats import pair_with_tokenizer
from ..hub import CardInfo, latest_eval_metrics, training_recipe, write_model_card
from ..modeling import AlbertPreTrainedModel
from ..options import OptionValues, check_warmup
from ..output_files import destination, write_file, write_json
from .callbacks import saved_tokenizer
from .model_selection import kept_checkpoint
from .reliability import TRAINER_STATE_NAME

logger = logging.getLogger(__name__)


class AlbertTrainer(Trainer):
    """`transformers.Trainer` with albert_hf's model card and evaluation in dataset order. Same arguments (plus
    `card_info`), same checkpoints, same resumption.

    The README.md that Trainer writes and pushes is albert_hf's model card ([`write_trainer_model_card`]), with the
    metadata of `card_info=CardInfo(...)` (dataset and base model). Evaluation and prediction follow the dataset's
    order: transformers applies `--train_sampling_strategy group_by_length` to evaluation as well, in a random
    length-grouped order; metrics do not mind (labels move with predictions), but per-example outputs do
    (leaderboard files, word-level NER predictions, SQuAD post-processing line predictions up with their examples).
    """

    def __init__(self, *args: Any, card_info: CardInfo | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.card_info = card_info
        # What format every save writes follows from the model and its tokenizer together: a tokenizer that
        # transformers' format cannot express makes the model's folder an albert_hf one as well.
        model = self.accelerator.unwrap_model(self.model)
        if isinstance(model, AlbertPreTrainedModel):  # not a PEFT model, which saves its adapter
            pair_with_tokenizer(model, saved_tokenizer(self))

    def create_model_card(self, **kwargs: Any) -> None:
        write_trainer_model_card(self, self.card_info, **kwargs)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        """Trainer's schedule, once the warm-up is known to fit the run (`check_warmup_fits`)."""
        if self.lr_scheduler is None:
            check_warmup_fits(self.args, num_training_steps)
        return super().create_scheduler(num_training_steps, optimizer)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """Trainer's `save_metrics` (`<split>_results.json`, and `all_results.json` updated), through albert_hf's
        writer (`albert_hf.output_files`): atomic, and beside a user's file of the same name, never over it."""
        if not self.is_world_process_zero():
            return
        write_json(Path(self.args.output_dir, f"{split}_results.json"), metrics, indent=4, sort_keys=True)
        if combined:
            path = destination(Path(self.args.output_dir, "all_results.json"))
            combined_metrics = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            write_json(path, {**combined_metrics, **metrics}, indent=4, sort_keys=True)

    def save_state(self) -> None:
        """Trainer's `save_state` (`trainer_state.json` of the output folder) through albert_hf's writer."""
        if self.is_world_process_zero():
            state = json.dumps(dataclasses.asdict(self.state), indent=2, sort_keys=True) + "\n"
            write_file(Path(self.args.output_dir, TRAINER_STATE_NAME), state)

    def get_eval_dataloader(self, eval_dataset=None):
        with self._sampling_in_dataset_order():
            return super().get_eval_dataloader(eval_dataset)

    def get_test_dataloader(self, test_dataset):
        with self._sampling_in_dataset_order():
            return super().get_test_dataloader(test_dataset)

    @contextlib.contextmanager
    def _sampling_in_dataset_order(self) -> Iterator[None]:
        """`train_sampling_strategy` "sequential" while an evaluation or test loader is built.

        Trainer picks the evaluation sampler from the training strategy, and no argument sets the evaluation order
        alone; "sequential" is the one strategy that keeps the dataset's order. Then one process reads in order,
        several get sequential shards from accelerate, whose gather restores the order. The training loader is built
        apart from these two, so it keeps the strategy asked for.
        """
        strategy = self.args.train_sampling_strategy
        self.args.train_sampling_strategy = "sequential"
        try:
            yield
        finally:
            self.args.train_sampling_strategy = strategy


def check_warmup_fits(args, num_training_steps: int) -> None:
    """Refuse a warm-up longer than the run, as an `OptionError` naming both options and where each value came from
    (`albert_hf.options.check_warmup`). The job's options checked it against --max_steps before any work; a run
    counted in epochs knows its steps only once the data is loaded, when Trainer makes its schedule."""
    options = OptionValues.of(args)
    counted_by = (
        options.named("max_steps") if args.max_steps > 0 else f"{options.named('num_train_epochs')} of the data"
    )
    steps = f"{num_training_steps} optimizer step{'s' if num_training_steps != 1 else ''}"
    check_warmup(options, num_training_steps, f"the {steps} of the run ({counted_by})")


# --------------------------------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------------------------------


def write_trainer_model_card(
    trainer: Trainer,
    card_info: CardInfo | None = None,
    language: str | None = None,
    license: str | None = None,
    tags: str | list[str] | None = None,
    model_name: str | None = None,
    finetuned_from: str | None = None,
    tasks: str | list[str] | None = None,
    dataset_tags: str | list[str] | None = None,
    dataset: str | list[str] | None = None,
    dataset_args: str | list[str] | None = None,
) -> None:
    """Write albert_hf's model card as the README.md of `trainer.args.output_dir` (on the main process only):
    architecture, recipe from `trainer.args`, results from the eval logs. albert_hf's Trainers call it from their
    `create_model_card` (and so from `push_to_hub` and `--push_to_hub`); a plain Trainer's job calls it itself.

    Trainer's `create_model_card` arguments keep their meaning: `dataset_tags` -> dataset id, `dataset_args` -> dataset
    config, `dataset` -> display name, `finetuned_from` -> base model, `license`, `language`, `tags`. Defaults for all
    of them come from `card_info` (e.g. set once by a task script). `tasks` is not needed: the pipeline tag follows from
    the model's head.
    """
    if not trainer.is_world_process_zero():
        return
    info = _merge_card_info(
        card_info or CardInfo(),
        language=language,
        license=license,
        tags=tags,
        finetuned_from=finetuned_from,
        dataset_tags=dataset_tags,
        dataset=dataset,
        dataset_args=dataset_args,
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    # The run as trained: the optimizer and schedule objects that ran (pretraining builds LAMB itself, so
    # `--optim` need not name it), the steps taken, and which evaluated step's model was kept; before training,
    # what the arguments say.
    recipe = training_recipe(
        trainer.args,
        optimizer=trainer.optimizer,
        lr_scheduler=trainer.lr_scheduler,
        steps_trained=trainer.state.global_step or None,
    )
    kept = kept_checkpoint(trainer.state, trainer.args)
    if kept is not None:
        recipe["model_kept"] = kept.describe()
    write_model_card(
        trainer.args.output_dir,
        model,
        # The full repository id, when pushing, so the card's loading snippet works as written.
        model_name=trainer.hub_model_id or model_name or Path(trainer.args.output_dir).resolve().name,
        info=info,
        # Every evaluation the run logged (eval_results.json holds the last); the card's model-index reports them
        # only against a Hub dataset, its text always.
        eval_metrics=latest_eval_metrics(trainer.state.log_history),
        recipe=recipe,
        tokenizer=trainer.processing_class if isinstance(trainer.processing_class, PreTrainedTokenizerBase) else None,
    )


def _first(value: str | list[str] | None) -> str | None:
    return value[0] if isinstance(value, list) else value


def _merge_card_info(info: CardInfo, **trainer_kwargs: Any) -> CardInfo:
    """Trainer's `create_model_card` arguments layered over `info` (given arguments win)."""
    updates: dict[str, Any] = {}
    mapping = {
        "finetuned_from": "base_model",
        "dataset_tags": "dataset_id",
        "dataset_args": "dataset_config",
        "dataset": "dataset_name",
        "license": "license",
    }
    for trainer_name, field_name in mapping.items():
        value = _first(trainer_kwargs.get(trainer_name))
        if value is not None:
            updates[field_name] = value
    if trainer_kwargs.get("language") is not None:
        language = trainer_kwargs["language"]
        updates["language"] = [language] if isinstance(language, str) else list(language)
    if trainer_kwargs.get("tags") is not None:
        tags = trainer_kwargs["tags"]
        updates["tags"] = [*info.tags, *([tags] if isinstance(tags, str) else tags)]
    return CardInfo(**{**info.__dict__, **updates})
