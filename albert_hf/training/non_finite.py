"""A non-finite loss stops the run before its optimizer step, and no checkpoint ever holds NaN/inf weights: the
loss checks of the reliability plugin (`attach_reliability`, training/callbacks.py) that every job attaches.

[`TrainingLosses`] reads each training micro-batch's loss from the model's output (a forward hook, so on any Trainer);
[`StopOnNonFiniteLoss`] judges the step's loss once its last backward is done and stops with
[`NonFiniteLossError`]; [`RefuseNonFiniteCheckpoints`] checks the weights before every save. A long pretraining run
may roll a bad step back instead of stopping (the divergence guard of training/divergence.py, which reads its losses
through [`TrainingLosses`] too).
"""

from __future__ import annotations

import logging

import torch
from transformers import TrainerCallback

from ..errors import UserError
from .preemption import agree_on_step
from .reliability import NonFiniteLossError, non_finite_message, non_finite_parameters

logger = logging.getLogger(__name__)


class TrainingLosses:
    """Each training micro-batch's loss as Trainer's `training_step` returns it, read from the model's output by a
    forward hook (torch's public `register_forward_hook`), so that a callback sees it on any Trainer, with no
    `training_step` override. `on_loss(loss, model_loss)` gets that loss and the model's own (before scaling).

    Trainer's loss is the model's `loss` output, times the number of processes when it was normalized by the global
    `num_items_in_batch` (`average_tokens_across_devices`), divided by the step's micro-batches unless it was
    normalized over the accumulated batch already: Trainer's `compute_loss` and `training_step`, applied in the same
    order, so the value is the same float. Forward passes in evaluation (`model.eval()` or no gradient) are not
    training micro-batches and are left out. A Trainer whose loss is not the model's (`compute_loss_func`, label
    smoothing) is refused: the hook would judge another number than the one trained on.
    """

    def __init__(self, trainer, on_loss, finite_for_trainer: bool = False):
        self.trainer, self.on_loss = trainer, on_loss
        # Whether a non-finite loss reaches Trainer as 0 (see `_read`).
        self.finite_for_trainer = finite_for_trainer
        self.handle = None

    def attach(self) -> None:
        if self.trainer_computes_the_loss():
            raise UserError(
                "--divergence_guard reads the loss of the model's output; this Trainer computes its own "
                "(compute_loss_func or --label_smoothing_factor): remove it, or turn the guard off."
            )
        self.detach()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.handle = model.register_forward_hook(self._read, with_kwargs=True)

    def trainer_computes_the_loss(self) -> bool:
        """Whether the Trainer trains on a loss of its own, not the model's (`compute_loss_func`, label smoothing)."""
        return self.trainer.compute_loss_func is not None or self.trainer.label_smoother is not None

    def detach(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None

    def _read(self, module, args, kwargs, output):
        if not (module.training and torch.is_grad_enabled()):
            return None
        loss = output.get("loss") if isinstance(output, dict) else output[0] if isinstance(output, tuple) else None
        if not torch.is_tensor(loss):
            return None
        self.on_loss(self.as_trainer_returns(loss.detach(), kwargs.get("num_items_in_batch")), loss.detach())
        if not self.finite_for_trainer:
            return None
        # With a rollback to come, the loss Trainer sums for its log is 0 where it is not finite, on the device: a
        # NaN would stay in Trainer's running sum for good, which `logging_nan_inf_filter` prevents only with two host
        # syncs per micro-batch. The step is undone whatever its gradients, and its log corrected (`LossBook`).
        finite = torch.where(torch.isfinite(loss), loss, torch.zeros_like(loss))
        if isinstance(output, dict):
            output["loss"] = finite
            return output
        return (finite, *output[1:])

    def as_trainer_returns(self, loss: torch.Tensor, num_items_in_batch) -> torch.Tensor:
        """The model's loss scaled as Trainer's `training_step` scales it. A copy of Trainer's arithmetic, kept because
        Trainer hands that value to no public hook (it sums it into its private running loss; no callback event
        carries it), and the guard must judge, and correct in the logs, the numbers Trainer logs.
        tests/test_trainer_public_ways.py compares it with what `training_step` returns, with and without the model's
        own normalization."""
        trainer = self.trainer
        counted = num_items_in_batch is not None
        if counted and trainer.args.average_tokens_across_devices and trainer.model_accepts_loss_kwargs:
            loss = loss * trainer.accelerator.num_processes
        # Trainer's own setting where it has one (transformers after 5.18); before it, and when unset, Trainer decides
        # from whether the model normalized the loss by the batch's item count, as below.
        scaled_for_accumulation = getattr(trainer, "loss_is_scaled_for_ga", None)
        if scaled_for_accumulation is None:
            scaled_for_accumulation = trainer.model_accepts_loss_kwargs and counted
        if not scaled_for_accumulation:
            loss = loss / trainer.current_gradient_accumulation_steps
        return loss


class StopOnNonFiniteLoss(TrainerCallback):
    """Stop training ([`NonFiniteLossError`], naming the global step, the fp16 loss scale and the last complete
    checkpoint) when a training step's loss is NaN or inf, before its optimizer step (`on_pre_optimizer_step`) would
    spread it to the weights. The micro-batches' losses are read by [`TrainingLosses`] and judged once the step's last
    backward is done: never inside the forward pass, which under DDP must run to its end. With several processes the
    verdict is summed over all of them, so that every process stops together (one waiting in the next all-reduce
    would hang until a timeout): one reduction and one device sync per step, shared with the stop signals
    (`agree_on_step`)."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.step_loss: torch.Tensor | None = None  # the model's losses of the step's micro-batches, summed
        self.losses = TrainingLosses(trainer, self._add)

    def _add(self, loss: torch.Tensor, model_loss: torch.Tensor) -> None:
        model_loss = model_loss.float().sum()
        self.step_loss = model_loss if self.step_loss is None else self.step_loss + model_loss

    def on_train_begin(self, args, state, control, **kwargs):
        self.step_loss = None
        if self.losses.trainer_computes_the_loss():
            logger.warning(
                "This Trainer computes its own loss (compute_loss_func or --label_smoothing_factor): a non-finite "
                "loss is not checked at each step, only the weights before each save."
            )
            return
        self.losses.attach()

    def on_train_end(self, args, state, control, **kwargs):
        self.losses.detach()

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        loss, self.step_loss = self.step_loss, None
        # The step's one reduction and transfer to the host, with the stop signals (also when there is no loss).
        non_finite = agree_on_step(self.trainer, None if loss is None else (~torch.isfinite(loss)).float())
        if non_finite and non_finite[0] > 0:
            self.losses.detach()
            shown = f"{loss.item()}" if not torch.isfinite(loss) else "finite here, non-finite on another process"
            raise NonFiniteLossError(non_finite_message(self.trainer, f"training loss is {shown}"))


class RefuseNonFiniteCheckpoints(TrainerCallback):
    """No checkpoint ever holds NaN/inf weights: before a step is saved, its parameters are checked (one device sync
    per save), and [`NonFiniteLossError`] names them, the global step and the last complete checkpoint. Weights can
    turn non-finite without a non-finite loss (overflowing gradients without a loss scaler), and the next save would
    write them over the last good checkpoint's slot. Put it after every callback that decides to save a step (the
    reliability plugin adds it last)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_save:
            self.check()

    def on_epoch_end(self, args, state, control, **kwargs):
        if control.should_save:
            self.check()

    def check(self) -> None:
        bad = non_finite_parameters(self.trainer.model)
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise NonFiniteLossError(non_finite_message(self.trainer, f"parameters {shown} hold NaN/inf", saving=True))
