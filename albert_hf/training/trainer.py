"""The Trainers every albert_hf job shares, one module: they share one set of bases, so a change to checkpoints, model
cards or evaluation order is made once.

  * [`ReliableTrainer`]: transformers' `Trainer` with [`ReliableTrainerMixin`] (training/reliability.py): atomic
    checkpoints, a non-finite loss guard, checked resumption. Every Trainer below has the mixin too, as a crash must
    cost minutes, not the run.
  * [`AlbertModelCardMixin`] and [`AlbertTrainer`]: the README.md that Trainer writes and pushes is albert_hf's model
    card (hub.py renders it), and checkpoints carry tokenization.py as remote code.
  * [`FineTuningTrainer`]: evaluation and prediction in dataset order, for the fine-tuning jobs (SQuAD's
    `SquadTrainer`, in albert_hf/tasks/squad.py, adds its answer extraction and official metrics to evaluation).
  * The pretraining Trainer has the same bases and lives with the rest of pretraining (albert_hf/pretraining/trainer.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase, Trainer

from ..hub import CardInfo, latest_eval_metrics, training_recipe, write_model_card
from .reliability import ReliableTrainerMixin

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------------------------


class ReliableTrainer(ReliableTrainerMixin, Trainer):
    """`transformers.Trainer` with [`ReliableTrainerMixin`]: atomic checkpoints, a non-finite loss guard, checked
    resumption."""


# --------------------------------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------------------------------


class AlbertModelCardMixin:
    """Mix into a `Trainer` so that the README.md it writes (`create_model_card`, and so `push_to_hub` and
    `--push_to_hub`) is albert_hf's card: architecture, recipe from `self.args`, results from the eval logs.

    Trainer's own keyword arguments keep their meaning: `dataset_tags` -> dataset id, `dataset_args` -> dataset
    config, `dataset` -> display name, `finetuned_from` -> base model, `license`, `language`, `tags`. Defaults for all
    of them come from `card_info` (e.g. set once by a task script).
    """

    card_info: CardInfo | None = None

    def create_model_card(
        self,
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
        if not self.is_world_process_zero():
            return
        # `tasks` is not needed: the pipeline tag follows from the model's head.
        info = _merge_card_info(
            self.card_info or CardInfo(),
            language=language,
            license=license,
            tags=tags,
            finetuned_from=finetuned_from,
            dataset_tags=dataset_tags,
            dataset=dataset,
            dataset_args=dataset_args,
        )
        model = self.accelerator.unwrap_model(self.model)
        write_model_card(
            self.args.output_dir,
            model,
            # The full repository id, when pushing, so the card's loading snippet works as written.
            model_name=self.hub_model_id or model_name or Path(self.args.output_dir).resolve().name,
            info=info,
            # Every evaluation the run logged (eval_results.json holds the last); the card's model-index reports them
            # only against a Hub dataset, its text always.
            eval_metrics=latest_eval_metrics(self.state.log_history),
            # The run as trained: the optimizer and schedule objects that ran (pretraining builds LAMB itself, so
            # `--optim` need not name it), and the steps taken; before training, what the arguments say.
            recipe=training_recipe(
                self.args,
                optimizer=self.optimizer,
                lr_scheduler=self.lr_scheduler,
                steps_trained=self.state.global_step or None,
            ),
            tokenizer=self.processing_class if isinstance(self.processing_class, PreTrainedTokenizerBase) else None,
        )


class AlbertTrainer(AlbertModelCardMixin, ReliableTrainerMixin, Trainer):  # atomic checkpoints, NaN guard
    """`transformers.Trainer` whose model cards are albert_hf's. Pass `card_info=CardInfo(...)` for the metadata."""

    def __init__(self, *args: Any, card_info: CardInfo | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.card_info = card_info


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


# --------------------------------------------------------------------------------------------------------------------
# Fine-tuning
# --------------------------------------------------------------------------------------------------------------------


class FineTuningTrainer(AlbertTrainer):
    """Trainer whose evaluation and prediction follow the dataset's order, and whose model card is albert_hf's
    (`card_info`: dataset and base model for the card that --push_to_hub uploads).

    transformers applies `--train_sampling_strategy group_by_length` to evaluation as well, in a random length-grouped
    order. Metrics do not mind (labels move with predictions), but per-example outputs do: leaderboard files, word-level
    NER predictions and SQuAD post-processing must line predictions up with their examples.
    """

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
