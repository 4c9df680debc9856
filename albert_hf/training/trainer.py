"""Every `Trainer` of albert_hf, one module: they share one set of bases, so a change to checkpoints, model cards or
evaluation order is made once.

  * [`ReliableTrainer`]: transformers' `Trainer` with [`ReliableTrainerMixin`] (training/reliability.py): atomic
    checkpoints, a non-finite loss guard, checked resumption. Every Trainer below has the mixin too, as a crash must
    cost minutes, not the run.
  * [`AlbertModelCardMixin`] and [`AlbertTrainer`]: the README.md that Trainer writes and pushes is albert_hf's model
    card (hub.py renders it), and checkpoints carry tokenization.py as remote code.
  * [`FineTuningTrainer`]: evaluation and prediction in dataset order, for the fine-tuning jobs (SQuAD's
    `SquadTrainer`, in albert_hf/tasks/squad.py, adds its answer extraction and official metrics to evaluation).
  * [`AlbertPretrainingTrainer`] with [`PretrainingArguments`], for ALBERT pretraining:
      - The SOP loss is normalized like the MLM loss: Trainer counts the MLM targets of the whole accumulated batch
        (all gradient-accumulation micro-batches, all processes) and passes `num_items_in_batch`; this class counts
        the sequences the same way and passes `num_sequences_in_batch`, so both terms are "sum over the big batch /
        its size" and accumulation or data parallelism give exactly the gradient of one large batch.
      - MLM loss and accuracy and SOP loss and accuracy are logged separately, in training logs (averaged over the
        logging window, weighted by targets) and in evaluation (over the whole evaluation set).
      - `optimizer="lamb"` in [`PretrainingArguments`] selects [`Lamb`] with ALBERT's parameter groups, and
        `lr_schedule="albert"` the original polynomial decay with warmup. AdamW (`--optim`) stays available.
        Under DeepSpeed ZeRO the layout of the flat partitions ZeRO gives LAMB is registered when training starts,
        so that each trust ratio is that of a whole tensor (training/lamb_deepspeed.py).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch.utils.data import SequentialSampler
from transformers import PreTrainedTokenizerBase, Trainer, TrainerCallback, TrainingArguments

from ..hub import CardInfo, latest_eval_metrics, register_tokenizer_for_remote_code, write_model_card
from .divergence import DivergenceGuard, DivergenceGuardConfig
from .lamb import Lamb, lamb_parameter_groups
from .reliability import ReliableTrainerMixin
from .schedules import get_albert_polynomial_decay_schedule

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
            eval_metrics=latest_eval_metrics(self.state.log_history),
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

    def evaluation_sampler(self, eval_dataset):
        if eval_dataset is None or not hasattr(eval_dataset, "__len__"):
            return None
        # One process: in order. Several: accelerate shards sequentially and the gather restores the order.
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None


# --------------------------------------------------------------------------------------------------------------------
# Pretraining
# --------------------------------------------------------------------------------------------------------------------


# Per-batch sums behind the logged metrics; sums (not means) so that micro-batches, logging windows and processes
# add up exactly.
METRIC_SUMS = ("mlm_loss_sum", "mlm_correct", "mlm_count", "sop_loss_sum", "sop_correct", "sop_count")


@dataclass
class PretrainingArguments(TrainingArguments):
    """`TrainingArguments` with ALBERT's optimizer defaults (LAMB, eps 1e-6, weight decay 0.01) and schedule."""

    optimizer: Literal["lamb", "adamw"] = field(
        default="lamb",
        metadata={
            "help": "lamb: ALBERT's LAMB (betas from --adam_beta1/2, eps --adam_epsilon, --weight_decay); "
            "adamw: Trainer's optimizer chosen by --optim."
        },
    )
    lr_schedule: Literal["albert", "trainer"] = field(
        default="albert",
        metadata={
            "help": "albert: linear warmup then (1 - step/max_steps)^power from step 0, as the original; "
            "trainer: --lr_scheduler_type."
        },
    )
    lr_decay_power: float = field(default=1.0, metadata={"help": "Power of the albert schedule's decay."})
    mlm_masked_positions_only: bool = field(
        default=True,
        metadata={
            "help": "Compute MLM logits only at the ~15%% masked positions, as the original ALBERT does: the "
            "same loss and gradients for much less work (the model must support it)."
        },
    )
    weight_decay: float = field(default=0.01, metadata={"help": "Decoupled weight decay (ALBERT: 0.01)."})
    adam_epsilon: float = field(default=1e-6, metadata={"help": "Epsilon of LAMB/AdamW (ALBERT: 1e-6)."})
    sanity_checks: bool = field(
        default=True,
        metadata={
            "help": "Before training, check that tokenizer, model config and a first batch fit together "
            "(vocabulary, special ids, lengths, no padding as a target); --no_sanity_checks skips it."
        },
    )
    divergence_guard: bool = field(
        default=True,
        metadata={
            "help": "Roll back to the last good in-memory state on a non-finite loss or a loss spike, skip the "
            "batches read since and go on (--no_divergence_guard: stop on a non-finite loss instead)."
        },
    )
    divergence_spike_factor: float = field(
        default=3.0, metadata={"help": "A step's loss above this multiple of the running median is a spike."}
    )
    divergence_window: int = field(default=100, metadata={"help": "Steps in the running median of the loss."})
    divergence_min_history: int = field(
        default=10, metadata={"help": "Steps of history needed before a spike can be called (non-finite: always)."}
    )
    divergence_snapshot_steps: int = field(
        default=50, metadata={"help": "Refresh the in-memory good state every this many steps."}
    )
    divergence_max_rollbacks: int = field(
        default=5, metadata={"help": "Stop with an error after this many rollbacks (the run keeps diverging)."}
    )
    divergence_lr_factor: float = field(
        default=1.0, metadata={"help": "Multiply the learning rate by this at each rollback (1: keep it)."}
    )

    def divergence_guard_config(self) -> DivergenceGuardConfig | None:
        """The guard's settings, or None when it is off."""
        if not self.divergence_guard:
            return None
        return DivergenceGuardConfig(
            spike_factor=self.divergence_spike_factor,
            window=self.divergence_window,
            min_history=self.divergence_min_history,
            snapshot_steps=self.divergence_snapshot_steps,
            max_rollbacks=self.divergence_max_rollbacks,
            lr_factor=self.divergence_lr_factor,
        )


class AlbertPretrainingTrainer(ReliableTrainerMixin, Trainer):  # atomic checkpoints and a NaN guard: runs last days
    """`Trainer` for [`AlbertForPreTraining`]-style models (MLM + sentence-order heads).

    The model's forward must take `num_items_in_batch` and `num_sequences_in_batch` and return `loss`,
    `prediction_logits` and `sop_logits` (albert_hf's `AlbertForPreTraining` does). Use it like `Trainer`, with
    [`PretrainingArguments`] (or plain `TrainingArguments`: then AdamW and `--lr_scheduler_type`), and
    [`DataCollatorForSOP`] as `data_collator`. From Python, LAMB can also be passed directly:
    `optimizers=(Lamb(lamb_parameter_groups(model), lr=...), get_albert_polynomial_decay_schedule(...))`.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        model = self.accelerator.unwrap_model(self.model)
        forward = inspect.signature(model.forward).parameters
        missing = [name for name in ("num_items_in_batch", "num_sequences_in_batch") if name not in forward]
        if missing:
            raise ValueError(
                f"AlbertPretrainingTrainer: {type(model).__name__}.forward takes no {missing}; it "
                "needs a model whose losses are normalized by the global counts (albert_hf.AlbertForPreTraining)."
            )
        # Explicit, not inferred from **kwargs: our model normalizes both losses by the counts we pass.
        self.model_accepts_loss_kwargs = True
        self._masked_positions_only = (
            getattr(self.args, "mlm_masked_positions_only", False) and "masked_positions_only" in forward
        )
        self._num_sequences_in_batch: torch.Tensor | None = None
        self._metric_sums = {"train": None, "eval": None}
        if self.is_deepspeed_enabled:
            self.add_callback(RegisterZeroPartitionsWithLamb())
        guard_config = self.args.divergence_guard_config() if hasattr(self.args, "divergence_guard_config") else None
        if guard_config is not None:
            if self.is_deepspeed_enabled or self.is_fsdp_enabled:  # sharded states owned by the engine
                logger.warning("The divergence guard is off under DeepSpeed/FSDP: a non-finite loss stops the run.")
            else:
                self.divergence_guard = DivergenceGuard(guard_config)

    def _set_signature_columns_if_needed(self) -> None:
        """Keep "word_starts" (the word boundaries of text without spaces) for the collator: Trainer keeps only the
        columns the model's forward takes, and the model never sees this one."""
        super()._set_signature_columns_if_needed()
        if "word_starts" not in self._signature_columns:
            self._signature_columns.append("word_starts")

    # ---- optimizer and schedule -------------------------------------------------------------------------------------

    def create_optimizer(self, model: torch.nn.Module | None = None) -> torch.optim.Optimizer:
        """LAMB with ALBERT's parameter groups when `args.optimizer == "lamb"`, else Trainer's choice (`--optim`)."""
        if self.optimizer is None and self.optimizer_cls_and_kwargs is None and _wants_lamb(self.args):
            self.optimizer = Lamb(
                lamb_parameter_groups(self.model if model is None else model, self.args.weight_decay),
                lr=self.args.learning_rate,
                betas=(self.args.adam_beta1, self.args.adam_beta2),
                eps=self.args.adam_epsilon,
            )
            return self.optimizer
        return super().create_optimizer(model)

    def create_scheduler(
        self, num_training_steps: int, optimizer: torch.optim.Optimizer | None = None
    ) -> torch.optim.lr_scheduler.LRScheduler:
        """ALBERT's polynomial decay with warmup when `args.lr_schedule == "albert"`, else `--lr_scheduler_type`."""
        if self.lr_scheduler is None and getattr(self.args, "lr_schedule", "trainer") == "albert":
            self.lr_scheduler = get_albert_polynomial_decay_schedule(
                self.optimizer if optimizer is None else optimizer,
                num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
                num_training_steps=num_training_steps,
                power=self.args.lr_decay_power,
            )
            self._created_lr_scheduler = True  # as Trainer does: rebuilt if train() is called again
            return self.lr_scheduler
        return super().create_scheduler(num_training_steps, optimizer)

    # ---- loss normalization -----------------------------------------------------------------------------------------

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        """Trainer's micro-batches and MLM target count, plus the sequence count of the same accumulated batch."""
        batch_samples, num_items_in_batch = super().get_batch_samples(epoch_iterator, num_batches, device)
        self._num_sequences_in_batch = self._count_sequences(batch_samples, device)
        return batch_samples, num_items_in_batch

    def _count_sequences(self, batch_samples: list[dict], device: torch.device) -> torch.Tensor | None:
        """Sequences with a sentence-order label in these micro-batches, summed over processes as Trainer sums
        `num_items_in_batch` (only when `average_tokens_across_devices`, as Trainer then scales the loss)."""
        if not batch_samples or "sentence_order_label" not in batch_samples[0]:
            return None
        count = sum(batch["sentence_order_label"].ne(-100).sum() for batch in batch_samples).to(device)
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            count = self.accelerator.gather(count).sum()
        return count

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ):
        """Trainer's loss with `num_sequences_in_batch` added; records the MLM/SOP sums for logging."""
        if self._masked_positions_only:
            inputs = {**inputs, "masked_positions_only": True}
        if num_items_in_batch is not None:
            # Only alongside num_items_in_batch: Trainer then treats the loss as already normalized over the
            # accumulated batch, which must hold for the SOP term too. Evaluation counts each batch on its own.
            num_sequences = (
                self._num_sequences_in_batch if model.training else self._count_sequences([inputs], self.args.device)
            )
            if num_sequences is not None:
                inputs = {**inputs, "num_sequences_in_batch": num_sequences}
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        self._record_metric_sums("train" if model.training else "eval", outputs, inputs)
        return (loss, outputs) if return_outputs else loss

    # ---- metrics ----------------------------------------------------------------------------------------------------

    def discard_training_log_sums(self) -> None:
        self._metric_sums["train"] = None

    def _record_metric_sums(self, mode: str, outputs, inputs: dict[str, Any]) -> None:
        sums = pretraining_metric_sums(outputs, inputs.get("labels"), inputs.get("sentence_order_label"))
        self._metric_sums[mode] = sums if self._metric_sums[mode] is None else self._metric_sums[mode] + sums

    def _pop_metrics(self, mode: str, prefix: str = "") -> dict[str, float]:
        """The metrics of everything recorded since the last call, summed over processes; resets the sums."""
        sums, self._metric_sums[mode] = self._metric_sums[mode], None
        if sums is None:
            return {}
        if self.accelerator.num_processes > 1:
            sums = self.accelerator.reduce(sums, reduction="sum")
        return summarize_metric_sums(sums, prefix)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Add MLM/SOP loss and accuracy of the steps since the last log to each training log."""
        if "loss" in logs:  # a training log (evaluation logs are "eval_*", the final summary "train_*")
            logs = {**logs, **self._pop_metrics("train")}
        super().log(logs, start_time)

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix: str = "eval"
    ):
        """Trainer's loop without collecting logits (B x T x V would not fit), plus MLM/SOP metrics."""
        self._metric_sums["eval"] = None
        output = super().evaluation_loop(
            dataloader,
            description,
            prediction_loss_only=True,
            ignore_keys=ignore_keys,
            metric_key_prefix=metric_key_prefix,
        )
        output.metrics.update(self._pop_metrics("eval", prefix=f"{metric_key_prefix}_"))
        return output


class RegisterZeroPartitionsWithLamb(TrainerCallback):
    """At the start of training (DeepSpeed initialized, checkpoint loaded), tell a `Lamb` inside DeepSpeed's ZeRO
    optimizer how ZeRO's flat partitions are made of whole tensors. Without it, `Lamb` refuses ZeRO's partitions
    rather than take each trust ratio over a partition."""

    def on_train_begin(self, args, state, control, optimizer=None, **kwargs):
        from .lamb_deepspeed import register_zero_partitions

        count = register_zero_partitions(optimizer)
        if count:
            logger.info("LAMB under DeepSpeed ZeRO: %d flat partitions registered, trust ratios per tensor.", count)


def _wants_lamb(args: TrainingArguments) -> bool:
    return getattr(args, "optimizer", "adamw") == "lamb"


@torch.no_grad()
def pretraining_metric_sums(
    outputs, labels: torch.Tensor | None, sentence_order_label: torch.Tensor | None
) -> torch.Tensor:
    """[MLM loss sum, MLM correct, MLM targets, SOP loss sum, SOP correct, SOP targets] of one batch (fp32)."""
    sums = torch.zeros(len(METRIC_SUMS), device=outputs["sop_logits"].device)
    if labels is not None:
        targets = labels != -100  # (B, T)
        logits = outputs["prediction_logits"]
        # (B, T, V) for every position, or already (N, V) for the N predicted ones (masked_positions_only).
        logits = (logits[targets] if logits.dim() == 3 else logits).float()
        gold = labels[targets]
        sums[0] = F.cross_entropy(logits, gold, reduction="sum")
        sums[1] = (logits.argmax(-1) == gold).sum()
        sums[2] = gold.numel()
    if sentence_order_label is not None:
        valid = sentence_order_label != -100
        logits, gold = outputs["sop_logits"][valid].float(), sentence_order_label[valid]
        sums[3] = F.cross_entropy(logits, gold, reduction="sum")
        sums[4] = (logits.argmax(-1) == gold).sum()
        sums[5] = gold.numel()
    return sums


def summarize_metric_sums(sums: torch.Tensor, prefix: str = "") -> dict[str, float]:
    """mlm_loss, mlm_accuracy, sop_loss, sop_accuracy (target-weighted means) from summed [`METRIC_SUMS`]."""
    values = dict(zip(METRIC_SUMS, sums.tolist()))
    metrics = {}
    if values["mlm_count"]:
        metrics[f"{prefix}mlm_loss"] = values["mlm_loss_sum"] / values["mlm_count"]
        metrics[f"{prefix}mlm_accuracy"] = values["mlm_correct"] / values["mlm_count"]
    if values["sop_count"]:
        metrics[f"{prefix}sop_loss"] = values["sop_loss_sum"] / values["sop_count"]
        metrics[f"{prefix}sop_accuracy"] = values["sop_correct"] / values["sop_count"]
    return metrics
