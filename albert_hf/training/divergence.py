"""A divergence guard for long runs: roll back to the last good state on a non-finite loss or a loss spike.

A long pretraining run that diverges (a NaN, or a loss that jumps far above where it was) is usually lost: stopping
(what [`ReliableTrainerMixin`] does alone) costs the steps since the last checkpoint and a person to restart it. PaLM
(Chowdhery et al., 2022, section 5.1) restarts from a point before the spike and skips the batches seen since; this
guard does that inside the run:

  * Every optimizer step's loss (summed over gradient-accumulation micro-batches, averaged over processes) is checked
    once all its micro-batches are done, before anything reads the weights it produces. It is bad when it is not
    finite, or when it exceeds `spike_factor` times the median of the last `window` good steps.
  * A good state is kept in memory (on the CPU): model, optimizer and scheduler state dicts, the RNG states and the
    step, refreshed every `snapshot_steps` steps. A snapshot is committed only once the next step's loss has been
    checked, because an update is first judged by the loss it leads to: a learning-rate jump shows one step late.
    In-memory (not the last checkpoint on disk) so that it works with `save_strategy="no"`, costs no I/O, and never
    depends on a save that may itself be behind by thousands of steps.
  * On a bad step the optimizer step the loop then takes is undone with everything since the snapshot: the snapshot
    is restored, the step counter goes back to it, the batches read since are skipped (the data iterator goes on),
    the learning rate is optionally multiplied by `lr_factor`, and a warning and a log entry say what happened.
  * After `max_rollbacks` rollbacks, [`TrainingDivergedError`] stops the run with the steps and losses involved.

Under DeepSpeed or FSDP the optimizer and weights are sharded and owned by the engine: the guard is then off and a
non-finite loss stops the run as before.
"""

from __future__ import annotations

import copy
import logging
import math
import random
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from .transformers_internals import forget_unlogged_loss

logger = logging.getLogger(__name__)


class TrainingDivergedError(RuntimeError):
    """The run kept diverging: more rollbacks than allowed."""


@dataclass
class DivergenceGuardConfig:
    """How the guard judges a step and what it does; see the module docstring."""

    spike_factor: float = 3.0
    window: int = 100
    min_history: int = 10
    snapshot_steps: int = 50
    max_rollbacks: int = 5
    lr_factor: float = 1.0

    def __post_init__(self):
        if self.spike_factor <= 1.0:
            raise ValueError(
                f"divergence spike factor must be > 1 (a multiple of the median), got {self.spike_factor}."
            )
        if self.window < 1 or self.snapshot_steps < 1 or self.min_history < 1:
            raise ValueError("divergence window, min_history and snapshot_steps must be at least 1.")
        if self.max_rollbacks < 0:
            raise ValueError(f"divergence max_rollbacks must be >= 0, got {self.max_rollbacks}.")
        if not 0.0 < self.lr_factor <= 1.0:
            raise ValueError(f"divergence lr factor must be in (0, 1], got {self.lr_factor}.")


@dataclass
class Snapshot:
    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    rng: dict[str, Any]
    rollbacks: int  # rollbacks applied (each with its lr factor) when it was taken


@dataclass
class DivergenceGuard:
    """Per-run state of the guard; the Trainer calls [`check_step`] after each step's micro-batches, and
    [`RollbackDivergedSteps`] calls [`maybe_rollback`] once the loop has taken the optimizer step."""

    config: DivergenceGuardConfig = field(default_factory=DivergenceGuardConfig)
    history: deque = field(default_factory=deque)
    rollbacks: int = 0
    events: list[dict[str, float]] = field(default_factory=list)
    _snapshot: Snapshot | None = None
    _pending_rng: dict[str, Any] | None = None
    _step_loss: torch.Tensor | None = None
    _bad: str | None = None
    _bad_step: int = 0

    def __post_init__(self):
        self.history = deque(self.history, maxlen=self.config.window)

    # ---- during the step --------------------------------------------------------------------------------------------

    def before_micro_batch(self, global_step: int) -> None:
        """At the first micro-batch of a step that may become a snapshot: keep the RNG states it starts from."""
        if self._step_loss is None and global_step % self.config.snapshot_steps == 0:
            self._pending_rng = rng_state()

    def add_micro_batch(self, loss: torch.Tensor) -> None:
        loss = loss.detach().float().sum()
        self._step_loss = loss if self._step_loss is None else self._step_loss + loss

    def check_step(self, trainer) -> None:
        """Judge the finished step's loss (all processes agree); commit a pending snapshot if it is good."""
        loss, self._step_loss = self._step_loss, None
        if trainer.accelerator.num_processes > 1:
            loss = trainer.accelerator.reduce(loss, reduction="mean")
        value = loss.item()
        median = statistics.median(self.history) if len(self.history) >= self.config.min_history else None
        if not math.isfinite(value):
            self._bad = f"non-finite loss {value}"
        elif median is not None and value > self.config.spike_factor * median:
            self._bad = (
                f"loss spike {value:.4g} > {self.config.spike_factor:g} x the median {median:.4g} of the "
                f"last {len(self.history)} steps"
            )
        if self._bad is not None:
            self._bad_step = trainer.state.global_step + 1
            self._pending_rng = None
            return
        self.history.append(value)
        # The weights now in the model were judged good by this loss: they (and the RNG states this step started
        # from) are the snapshot of `global_step`.
        if self._pending_rng is not None:
            self._snapshot = take_snapshot(trainer, self._pending_rng, self.rollbacks)
            self._pending_rng = None

    # ---- after the optimizer step -----------------------------------------------------------------------------------

    def maybe_rollback(self, trainer) -> bool:
        """If the step just taken was judged bad: restore the snapshot, or stop after too many rollbacks."""
        if self._bad is None:
            return False
        reason, self._bad = self._bad, None
        snapshot = self._snapshot
        if snapshot is None:  # only if the very first step is bad: nothing good to go back to
            raise TrainingDivergedError(f"Stopping: {reason} at global step {self._bad_step}, before any good step.")
        self.rollbacks += 1
        if self.rollbacks > self.config.max_rollbacks:
            raise TrainingDivergedError(
                f"Stopping: {reason} at global step {self._bad_step}, and the run has already been rolled back "
                f"{self.config.max_rollbacks} times (--divergence_max_rollbacks): it keeps diverging. Earlier "
                f"rollbacks: {self.events}. Lower the learning rate, raise warmup, or check the data."
            )
        skipped = self._bad_step - snapshot.step
        restore_snapshot(trainer, snapshot)
        scale = self.config.lr_factor ** (self.rollbacks - snapshot.rollbacks)
        if scale != 1.0:
            scale_learning_rate(trainer, scale)
        event = {
            "divergence_rollback_from_step": self._bad_step,
            "divergence_rollback_to_step": snapshot.step,
            "divergence_skipped_batches": skipped * trainer.args.gradient_accumulation_steps,
            "divergence_rollbacks": self.rollbacks,
            "learning_rate": trainer.optimizer.param_groups[0]["lr"],
        }
        self.events.append(event)
        logger.warning(
            "Divergence guard: %s at global step %d. Rolled back to step %d (rollback %d of at most %d), skipping the "
            "%d batches read since; learning rate now %.4g.",
            reason,
            self._bad_step,
            snapshot.step,
            self.rollbacks,
            self.config.max_rollbacks,
            event["divergence_skipped_batches"],
            event["learning_rate"],
        )
        return True


# --------------------------------------------------------------------------------------------------------------------
# State capture and restore
# --------------------------------------------------------------------------------------------------------------------


def _to_cpu(value: Any) -> Any:
    """A deep copy of a (nested) state dict with every tensor copied to the CPU."""
    if torch.is_tensor(value):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(item) for item in value)
    return copy.deepcopy(value)


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["cpu"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


def take_snapshot(trainer, rng: dict[str, Any], rollbacks: int) -> Snapshot:
    model = trainer.accelerator.unwrap_model(trainer.model)
    scheduler = trainer.lr_scheduler
    return Snapshot(
        step=trainer.state.global_step,
        model=_to_cpu(model.state_dict()),
        optimizer=_to_cpu(trainer.optimizer.state_dict()),
        scheduler=None if scheduler is None else _to_cpu(scheduler.state_dict()),
        rng=rng,
        rollbacks=rollbacks,
    )


def restore_snapshot(trainer, snapshot: Snapshot) -> None:
    """Model, optimizer, scheduler, RNG and step as they were at the snapshot; gradients and logging sums reset."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    model.load_state_dict(snapshot.model)  # copies into the existing tensors: tied weights stay tied
    trainer.optimizer.load_state_dict(copy.deepcopy(snapshot.optimizer))
    if snapshot.scheduler is not None:
        trainer.lr_scheduler.load_state_dict(copy.deepcopy(snapshot.scheduler))
    set_rng_state(snapshot.rng)
    model.zero_grad(set_to_none=True)
    trainer.state.global_step = snapshot.step
    # The loss and metric sums of the steps undone must not reach the next log.
    forget_unlogged_loss(trainer, snapshot.step)
    trainer.discard_training_log_sums()


def scale_learning_rate(trainer, scale: float) -> None:
    """Multiply the learning rate from now on: the optimizer's groups and the scheduler's base rates."""
    for group in trainer.optimizer.param_groups:
        group["lr"] *= scale
        if "initial_lr" in group:
            group["initial_lr"] *= scale
    scheduler = trainer.lr_scheduler
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [lr * scale for lr in scheduler.base_lrs]
        if hasattr(scheduler, "_last_lr"):  # torch's, read by `get_last_lr()`: the logged rate is the new one
            scheduler._last_lr = [group["lr"] for group in trainer.optimizer.param_groups]


class RollbackDivergedSteps(TrainerCallback):
    """Rolls back a step the trainer's guard judged bad, at the end of that step: after Trainer's own flow callback
    has decided what to do at this step, before anything logs, evaluates or saves the weights it produced."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        guard = self.trainer.divergence_guard
        if guard is not None and guard.maybe_rollback(self.trainer):
            control.should_log = control.should_save = control.should_evaluate = False
            self.trainer.log(dict(guard.events[-1]))
        return control
