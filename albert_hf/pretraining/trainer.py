"""The Trainer of ALBERT pretraining: [`AlbertPretrainingTrainer`] with [`PretrainingArguments`].

* The SOP loss is normalized like the MLM loss: Trainer counts the MLM targets of the whole accumulated batch (all
  gradient-accumulation micro-batches, all processes) and passes `num_items_in_batch`; this class counts the
  sequences the same way and passes `num_sequences_in_batch`, so both terms are "sum over the big batch / its size"
  and accumulation or data parallelism give exactly the gradient of one large batch.
* MLM loss and accuracy and SOP loss and accuracy are logged separately, in training logs (averaged over the logging
  window, weighted by targets) and in evaluation (over the whole evaluation set). The losses are the model's own
  terms (`mlm_loss`, `sop_loss` of its output), turned back into sums by the counts they were divided by: one
  computation of each loss.
* `optimizer="lamb"` in [`PretrainingArguments`] selects [`Lamb`] with ALBERT's parameter groups, and
  `lr_schedule="albert"` the original polynomial decay with warmup. AdamW (`--optim`) stays available. Under
  DeepSpeed ZeRO the layout of the flat partitions ZeRO gives LAMB is registered when training starts, so that each
  trust ratio is that of a whole tensor (training/lamb_deepspeed.py).
* The model card it writes (`create_model_card`, `--push_to_hub`) is albert_hf's, as for every albert_hf Trainer
  (`write_trainer_model_card`); `card_info=CardInfo(...)` holds its metadata.
* It is an `AlbertTrainer` (training/trainer.py). The reliability plugin (`attach_reliability`, training/callbacks.py)
  attaches complete checkpoints and checked resumption; with [`pretraining_callbacks`] also the exact resume of a
  stream and the divergence guard of `PretrainingArguments` (`divergence_guard_config`), or, with the guard off, the
  plugin's stop at the first non-finite loss stays.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import TrainerCallback, TrainingArguments

from ..errors import UserError
from ..training.divergence import DivergenceGuardConfig, RollbackDivergedSteps
from ..training.lamb import Lamb, lamb_parameter_groups
from ..training.schedules import get_albert_polynomial_decay_schedule
from ..training.stream_resume import ResumableStream
from ..training.trainer import AlbertTrainer, check_warmup_fits
from .recipes import TRAINER_DEFAULTS, PretrainingOptions

logger = logging.getLogger(__name__)


# Per-batch sums behind the logged metrics; sums (not means) so that micro-batches, logging windows and processes
# add up exactly.
METRIC_SUMS = ("mlm_loss_sum", "mlm_correct", "mlm_count", "sop_loss_sum", "sop_correct", "sop_count")


@dataclass
class PretrainingArguments(PretrainingOptions, TrainingArguments):
    """`TrainingArguments` with ALBERT's optimizer defaults (LAMB, eps 1e-6, weight decay 0.01) and schedule, and
    the options of pretraining's own optimizer, schedule, checks and divergence guard ([`PretrainingOptions`])."""

    remove_unused_columns: bool = field(
        default=TRAINER_DEFAULTS["remove_unused_columns"],
        metadata={
            "help": "Keep every column of the instances for the collator (default): the word starts of text without "
            'spaces ("word_starts") are read by the collator, never by the model\'s forward.'
        },
    )
    weight_decay: float = field(
        default=TRAINER_DEFAULTS["weight_decay"], metadata={"help": "Decoupled weight decay (ALBERT: 0.01)."}
    )
    adam_epsilon: float = field(
        default=TRAINER_DEFAULTS["adam_epsilon"], metadata={"help": "Epsilon of LAMB/AdamW (ALBERT: 1e-6)."}
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


class AlbertPretrainingTrainer(AlbertTrainer):
    """`Trainer` for [`AlbertForPreTraining`]-style models (MLM + sentence-order heads).

    The model's forward must take `num_items_in_batch` and `num_sequences_in_batch` and return `loss`,
    `prediction_logits` and `sop_logits` (albert_hf's `AlbertForPreTraining` does). Use it like `Trainer`, with
    [`PretrainingArguments`] (or plain `TrainingArguments`: then AdamW and `--lr_scheduler_type`), and
    [`DataCollatorForSOP`] as `data_collator`. From Python, LAMB can also be passed directly:
    `optimizers=(Lamb(lamb_parameter_groups(model), lr=...), get_albert_polynomial_decay_schedule(...))`.
    `card_info` holds the model card's metadata (e.g. its language).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._check_columns_reach_the_collator()
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

    def _check_columns_reach_the_collator(self) -> None:
        """Refuse to drop "word_starts" (the word boundaries of text without spaces): Trainer keeps only the columns
        the model's forward takes unless `remove_unused_columns` is off, and without them the collator would mask by
        the "▁" rule while the log reports words."""
        if not self.args.remove_unused_columns:
            return
        for name, dataset in (("train_dataset", self.train_dataset), ("eval_dataset", self.eval_dataset)):
            if "word_starts" in (getattr(dataset, "column_names", None) or []):
                raise UserError(
                    f'AlbertPretrainingTrainer: the {name} has word starts ("word_starts") that Trainer would drop '
                    "before the collator: use PretrainingArguments, or remove_unused_columns=False."
                )

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
            check_warmup_fits(self.args, num_training_steps)
            self.lr_scheduler = get_albert_polynomial_decay_schedule(
                self.optimizer if optimizer is None else optimizer,
                num_warmup_steps=self.args.get_warmup_steps(num_training_steps),
                num_training_steps=num_training_steps,
                power=self.args.lr_decay_power,
            )
            self._built_albert_schedule = True
            return self.lr_scheduler
        return super().create_scheduler(num_training_steps, optimizer)

    # Whether `lr_scheduler` is the ALBERT schedule `create_scheduler` built (not one passed in `optimizers`).
    _built_albert_schedule = False

    def train(self, *args: Any, **kwargs: Any):
        """Trainer's `train`, with the ALBERT schedule built anew for each call, as Trainer rebuilds its own
        schedules: a second call may train for another number of steps, and must not continue a finished decay."""
        if self._built_albert_schedule:
            self.lr_scheduler = None
            self._built_albert_schedule = False
        return super().train(*args, **kwargs)

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
        self._record_metric_sums("train" if model.training else "eval", outputs, inputs, num_items_in_batch)
        return (loss, outputs) if return_outputs else loss

    # ---- metrics ----------------------------------------------------------------------------------------------------

    def discard_training_log_sums(self) -> None:
        self._metric_sums["train"] = None

    def _record_metric_sums(self, mode: str, outputs, inputs: dict[str, Any], num_items_in_batch) -> None:
        sums = pretraining_metric_sums(
            outputs,
            inputs.get("labels"),
            inputs.get("sentence_order_label"),
            num_items_in_batch=num_items_in_batch,
            num_sequences_in_batch=inputs.get("num_sequences_in_batch"),
        )
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
        from ..training.lamb_deepspeed import register_zero_partitions

        count = register_zero_partitions(optimizer)
        if count:
            logger.info("LAMB under DeepSpeed ZeRO: %d flat partitions registered, trust ratios per tensor.", count)


def _wants_lamb(args: TrainingArguments) -> bool:
    return getattr(args, "optimizer", "adamw") == "lamb"


@torch.no_grad()
def pretraining_metric_sums(
    outputs,
    labels: torch.Tensor | None,
    sentence_order_label: torch.Tensor | None,
    num_items_in_batch: torch.Tensor | int | None = None,
    num_sequences_in_batch: torch.Tensor | int | None = None,
) -> torch.Tensor:
    """[MLM loss sum, MLM correct, MLM targets, SOP loss sum, SOP correct, SOP targets] of one batch (fp32).

    The loss sums are the model's `mlm_loss` and `sop_loss` times what the model divided them by: the global counts
    when given (the sums are then this batch's share of the accumulated batch), else this batch's own targets.
    """
    sums = torch.zeros(len(METRIC_SUMS), device=outputs["sop_logits"].device)
    if labels is not None:
        targets = labels != -100  # (B, T)
        logits = outputs["prediction_logits"]
        # (B, T, V) for every position, or already (N, V) for the N predicted ones (masked_positions_only).
        predicted = (logits[targets] if logits.dim() == 3 else logits).argmax(-1)
        gold = labels[targets]
        sums[0:3] = _term_sums(outputs["mlm_loss"], predicted, gold, num_items_in_batch)
    if sentence_order_label is not None:
        valid = sentence_order_label != -100
        predicted, gold = outputs["sop_logits"][valid].argmax(-1), sentence_order_label[valid]
        sums[3:6] = _term_sums(outputs["sop_loss"], predicted, gold, num_sequences_in_batch)
    return sums


def _term_sums(loss: torch.Tensor, predicted: torch.Tensor, gold: torch.Tensor, divisor) -> torch.Tensor:
    """[loss sum, correct, targets] of one loss term that the model normalized by `divisor` (None: the mean over
    `gold`)."""
    count = gold.numel()
    if count == 0:  # the mean of no target is NaN; such a batch adds nothing
        return torch.zeros(3, device=loss.device)
    divisor = count if divisor is None else torch.as_tensor(divisor, device=loss.device).float()
    return torch.stack(
        [loss.float() * divisor, (predicted == gold).sum().float(), torch.tensor(float(count), device=loss.device)]
    )


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


def pretraining_callbacks(trainer) -> list:
    """The pieces of the reliability plugin a pretraining run attaches besides those every job has
    (`attach_reliability(trainer, callbacks=pretraining_callbacks(trainer))`): the exact resume of a training stream
    (`ResumableStream`, for `--streaming`), and the divergence guard of `trainer.args` (`RollbackDivergedSteps` with
    `PretrainingArguments.divergence_guard_config()`; none with `--no_divergence_guard` or plain `TrainingArguments`,
    where a non-finite loss stops the run)."""
    pieces = [ResumableStream(trainer)]
    guard = getattr(trainer.args, "divergence_guard_config", None)
    config = guard() if guard is not None else None
    if config is not None:
        pieces.append(RollbackDivergedSteps(trainer, config))
    return pieces
