"""Every `Trainer` of albert_hf, one module: they share one set of bases, so a change to checkpoints, model cards or
evaluation order is made once.

  * [`ReliableTrainer`]: transformers' `Trainer` with [`ReliableTrainerMixin`] (training/reliability.py): atomic
    checkpoints, a non-finite loss guard, checked resumption. Every Trainer below has the mixin too, as a crash must
    cost minutes, not the run.
  * [`AlbertModelCardMixin`] and [`AlbertTrainer`]: the README.md that Trainer writes and pushes is albert_hf's model
    card (hub.py renders it), and checkpoints carry tokenization.py as remote code.
  * [`FineTuningTrainer`]: evaluation and prediction in dataset order, for the fine-tuning jobs; [`SquadTrainer`]
    adds SQuAD's answer extraction and official metrics to its evaluation.
  * The pretraining Trainer has the same bases and lives with the rest of pretraining (albert_hf/pretraining/trainer.py).
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasets import Dataset
from torch.utils.data import SequentialSampler
from transformers import PreTrainedTokenizerBase, Trainer
from transformers.trainer_utils import speed_metrics

from ..data.squad import postprocess_predictions, write_prediction_files
from ..hub import CardInfo, latest_eval_metrics, register_tokenizer_for_remote_code, write_model_card
from ..metrics.squad import squad_metrics
from .reliability import ReliableTrainerMixin

if TYPE_CHECKING:
    from ..tasks.squad import SquadArguments

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
            # A model-index names the dataset of its results: without one (a user's own corpus), they stay in
            # eval_results.json.
            eval_metrics=latest_eval_metrics(self.state.log_history) if info.dataset_id else None,
            training_args=self.args,
            tokenizer=self.processing_class if isinstance(self.processing_class, PreTrainedTokenizerBase) else None,
        )


class AlbertTrainer(AlbertModelCardMixin, ReliableTrainerMixin, Trainer):  # atomic checkpoints, NaN guard
    """`transformers.Trainer` whose model cards are albert_hf's. Pass `card_info=CardInfo(...)` for the metadata."""

    def __init__(self, *args: Any, card_info: CardInfo | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.card_info = card_info
        # Checkpoints and pushes then carry tokenization.py, like modeling.py.
        register_tokenizer_for_remote_code()


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

    def _get_eval_sampler(self, eval_dataset):
        if eval_dataset is None or not hasattr(eval_dataset, "__len__"):
            return None
        # One process: in order. Several: accelerate shards sequentially and the gather restores the order.
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None


class SquadTrainer(FineTuningTrainer):
    """A Trainer whose evaluation answers every question and scores the answers with the official SQuAD metric.

    It evaluates in dataset order (FineTuningTrainer): post-processing matches windows to questions by position, and
    transformers 5 would otherwise reorder evaluation by length under `--train_sampling_strategy group_by_length`.

    The model's start/end logits over all evaluation windows are merged per question by `postprocess_predictions`;
    the prediction files are written to `output_dir` by the main process.
    """

    def __init__(self, *args, eval_examples: Dataset, squad_args: SquadArguments, **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_examples = eval_examples
        self.squad_args = squad_args

    def evaluate(
        self, eval_dataset: Dataset | None = None, ignore_keys: list[str] | None = None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        features = self.eval_dataset if eval_dataset is None else eval_dataset
        start_time = time.time()
        # Windows carry no labels: the loop returns the logits only, and the metrics come from the answers below.
        output = self.evaluation_loop(
            self.get_eval_dataloader(features),
            description="Evaluation",
            prediction_loss_only=False,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        start_logits, end_logits = output.predictions[:2]
        args = self.squad_args
        predictions = postprocess_predictions(
            self.eval_examples,
            features,
            start_logits,
            end_logits,
            n_best_size=args.n_best_size,
            max_answer_length=args.max_answer_length,
            version_2_with_negative=args.version_2_with_negative,
            null_score_diff_threshold=args.null_score_diff_threshold,
        )
        if self.is_world_process_zero():
            paths = write_prediction_files(self.args.output_dir, predictions)
            logger.info("Wrote %s", ", ".join(paths))

        scores = squad_metrics(
            predictions, self.eval_examples, args.version_2_with_negative, args.null_score_diff_threshold
        )
        scores["questions_without_valid_span"] = len(predictions.no_valid_span)
        metrics = {f"{metric_key_prefix}_{key}": value for key, value in scores.items()}
        metrics.update(output.metrics)
        total_batch_size = self.args.eval_batch_size * self.args.world_size
        metrics.update(
            speed_metrics(metric_key_prefix, start_time, len(features), math.ceil(len(features) / total_batch_size))
        )
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics
