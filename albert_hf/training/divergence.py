"""A divergence guard for long runs: roll back to the last good state on a non-finite loss or a loss spike.

A long pretraining run that diverges (a NaN, or a loss that jumps far above where it was) is usually lost: stopping
(what [`StopOnNonFiniteLoss`] does alone) costs the steps since the last checkpoint and a person to restart it. PaLM
(Chowdhery et al., 2022, section 5.1) restarts from a point before the spike and skips the batches seen since; this
guard does that inside the run:

  * Every optimizer step's loss (summed over gradient-accumulation micro-batches, averaged over processes) is checked
    once all its micro-batches are done, before anything reads the weights it produces. It is bad when it is not
    finite, or when it exceeds `spike_factor` times the median of the last `window` good steps.
  * A good state is kept in memory (on the CPU): model, optimizer and scheduler state, the RNG states and the step,
    copied at the start of every `snapshot_steps`-th step and committed only once that step's loss has been checked,
    because an update is first judged by the loss it leads to: a learning-rate jump shows one step late. Copied at
    the start of the step (not once its loss is known) because DeepSpeed takes the optimizer step inside the
    backward pass: by the time the loss is judged the weights have already moved. The previous snapshot is kept
    until the new one is committed, so for one step in `snapshot_steps` two copies are held.
    In-memory (not the last checkpoint on disk) so that it works with `save_strategy="no"`, costs no I/O, and never
    depends on a save that may itself be behind by thousands of steps.
  * On a bad step the optimizer step the loop then takes is undone with everything since the snapshot: the snapshot
    is restored, the step counter goes back to it, the batches read since are skipped (the data iterator goes on),
    the learning rate is optionally multiplied by `lr_factor`, and a warning and a log entry say what happened.
  * After `max_rollbacks` rollbacks, [`TrainingDivergedError`] stops the run with the steps and losses involved.

On any `transformers.Trainer` (or subclass), from public callbacks only: a piece of the reliability plugin,
`attach_reliability(trainer, callbacks=[RollbackDivergedSteps(trainer, DivergenceGuardConfig(...))])`, or alone
`guard_divergence(trainer, DivergenceGuardConfig(...))` (the pretraining jobs attach it for `--divergence_guard`:
`albert_hf.pretraining.trainer.pretraining_callbacks`). The loss is read from the model's output by a forward hook ([`TrainingLosses`]), so the model
must return the loss Trainer trains on (no `compute_loss_func`, no label smoothing: refused with a one-line error).

Every engine keeps the guard, each process snapshotting and restoring its own part of the state; the loss is
averaged over the processes before it is judged, so all of them roll back together, to the same step:
  * DDP: the whole model and optimizer state, on every process.
  * DeepSpeed ZeRO-1/2/3: the ZeRO optimizer's own state dict of this process (its fp32 master partition and the
    optimizer moments of that partition), restored through the engine's own loading (`load_state_dict` between
    `checkpoint_event_prologue`/`epilogue`, as `DeepSpeedEngine.load_checkpoint` does); under ZeRO-1/2 also the
    model's weights, which every process holds whole. Under ZeRO-3 the weights are restored from the fp32 partition,
    as a DeepSpeed checkpoint load does. DeepSpeed without ZeRO is refused ([`unsupported_engine`]).
  * FSDP2: the local shards of the model's and the optimizer's DTensors; FSDP1 is refused.
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
from transformers import DefaultFlowCallback, TrainerCallback

from ..errors import UserError
from .non_finite import StopOnNonFiniteLoss, TrainingLosses
from .preemption import agree_on_step

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
    model: dict[str, Any] | None  # None under ZeRO-3: the weights are in the optimizer's partitions
    optimizer: dict[str, Any]
    scheduler: dict[str, Any] | None
    rng: dict[str, Any]
    rollbacks: int  # rollbacks applied (each with its lr factor) when it was taken


@dataclass
class LossBook:
    """The loss of each kept step, to correct what Trainer logs after a rollback.

    Trainer sums the training loss of every step since its last log, the steps a rollback undid included, and divides
    by the steps counted since (its counter is not moved back). After a rollback, the guard's callback replaces the
    next training log's `loss` with the mean of the kept steps since the last log, and the final `train_loss` with the
    mean over all kept steps (in the log and in `state.log_history`); logs without a rollback are Trainer's own. A
    redone step at or before the step of the last log is not logged again: the next log covers it.
    """

    unlogged: list[tuple[int, float]] = field(default_factory=list)  # (step, loss) since the last training log
    recent: list[tuple[int, float]] = field(default_factory=list)  # since the committed snapshot: what may be undone
    total: float = 0.0
    steps: int = 0
    window_rolled_back: bool = False
    run_rolled_back: bool = False

    def add(self, step: int, loss: float) -> None:
        self.unlogged.append((step, loss))
        self.recent.append((step, loss))
        self.total += loss
        self.steps += 1

    def forget_before(self, step: int) -> None:
        """A snapshot of `step` was committed: the steps up to it can no longer be undone."""
        self.recent = [(kept, loss) for kept, loss in self.recent if kept > step]

    def undo_after(self, step: int) -> None:
        """A rollback to `step`: the losses of the steps after it are no longer part of the run."""
        self.total -= sum(loss for kept, loss in self.recent if kept > step)
        self.steps -= sum(1 for kept, _ in self.recent if kept > step)
        self.recent = [(kept, loss) for kept, loss in self.recent if kept <= step]
        self.unlogged = [(kept, loss) for kept, loss in self.unlogged if kept <= step]
        self.window_rolled_back = self.run_rolled_back = True

    def correct(self, logs: dict[str, float], logged: dict[str, Any] | None) -> None:
        """Correct a log (`logs`, and `logged`, its copy in `state.log_history`) made after a rollback."""
        fixes = {}
        if "loss" in logs:  # a training log: its window ends here
            if self.window_rolled_back and self.unlogged:
                fixes["loss"] = sum(loss for _, loss in self.unlogged) / len(self.unlogged)
            self.unlogged, self.window_rolled_back = [], False
        if "train_loss" in logs and self.run_rolled_back and self.steps:
            fixes["train_loss"] = self.total / self.steps
        logs.update(fixes)
        if logged is not None:
            logged.update(fixes)


@dataclass
class DivergenceGuard:
    """Per-run state of the guard: [`RollbackDivergedSteps`] calls [`begin_step`] before a step's first micro-batch,
    [`add_micro_batch`] with each micro-batch's loss (read by [`TrainingLosses`]), [`check_step`] after the step's
    last one, before its optimizer step, and [`maybe_rollback`] once the loop has taken the optimizer step."""

    config: DivergenceGuardConfig = field(default_factory=DivergenceGuardConfig)
    history: deque = field(default_factory=deque)
    rollbacks: int = 0
    events: list[dict[str, float]] = field(default_factory=list)
    _snapshot: Snapshot | None = None
    _pending: Snapshot | None = None
    _step_loss: torch.Tensor | None = None
    _bad: str | None = None
    _bad_step: int = 0
    losses: LossBook = field(default_factory=lambda: LossBook())  # what the next logs must say

    def __post_init__(self):
        self.history = deque(self.history, maxlen=self.config.window)

    # ---- during the step --------------------------------------------------------------------------------------------

    def begin_step(self, trainer) -> None:
        """Before the first micro-batch of a step that may become a snapshot: copy the state it starts from."""
        if trainer.state.global_step % self.config.snapshot_steps == 0:
            self._pending = take_snapshot(trainer, rng_state(), self.rollbacks)

    def add_micro_batch(self, loss: torch.Tensor) -> None:
        loss = loss.detach().float().sum()
        self._step_loss = loss if self._step_loss is None else self._step_loss + loss

    def check_step(self, trainer) -> None:
        """Judge the finished step's loss (averaged over the processes, so all of them decide the same); commit the
        snapshot taken at the start of the step if it is good."""
        loss, self._step_loss = self._step_loss, None
        if loss is None:
            raise UserError(
                "--divergence_guard: the model returned no loss in this training step (the guard reads the `loss` "
                "of the model's output): train a model that computes its loss, or turn the guard off."
            )
        # One reduction and one transfer to the host for the step, the stop signals agreed on in it too.
        (value,) = agree_on_step(trainer, loss, reduction="mean")
        median = statistics.median(self.history) if len(self.history) >= self.config.min_history else None
        if not math.isfinite(value):
            self._bad = f"non-finite loss {value}"
        elif median is not None and value > self.config.spike_factor * median:
            self._bad = (
                f"loss spike {value:.4g} > {self.config.spike_factor:g} x the median {median:.4g} of the "
                f"last {len(self.history)} steps"
            )
        pending, self._pending = self._pending, None
        if self._bad is not None:
            self._bad_step = trainer.state.global_step + 1
            return
        self.history.append(value)
        self.losses.add(trainer.state.global_step + 1, value)
        if pending is not None:  # the state this step started from was judged good by its loss
            self._snapshot = pending
            self.losses.forget_before(pending.step)

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
        self.losses.undo_after(snapshot.step)
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


@dataclass
class _ShardCopy:
    """A DTensor's local shard, copied to the CPU, with what it takes to rebuild the DTensor on its mesh."""

    local: torch.Tensor
    device: torch.device
    mesh: Any
    placements: tuple
    shape: torch.Size
    stride: tuple


def _dtensor_type() -> type | None:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # a torch built without distributed support
        return None
    return DTensor


def _to_cpu(value: Any, dtensor: type | None = None) -> Any:
    """A deep copy of a (nested) state dict with every tensor copied to the CPU; of a DTensor (FSDP2) only this
    process's shard."""
    if dtensor is not None and isinstance(value, dtensor):
        local = value.to_local()
        return _ShardCopy(
            local.detach().to("cpu", copy=True),
            local.device,
            value.device_mesh,
            tuple(value.placements),
            value.shape,
            value.stride(),
        )
    if torch.is_tensor(value):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {key: _to_cpu(item, dtensor) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(item, dtensor) for item in value)
    return copy.deepcopy(value)


def _from_cpu(value: Any) -> Any:
    """A fresh copy of what [`_to_cpu`] kept, to load: tensors cloned (loading may keep them), DTensors rebuilt."""
    if isinstance(value, _ShardCopy):
        from torch.distributed.tensor import DTensor

        local = value.local.to(value.device, copy=True)
        return DTensor.from_local(
            local, value.mesh, value.placements, run_check=False, shape=value.shape, stride=value.stride
        )
    if torch.is_tensor(value):
        return value.clone()
    if isinstance(value, dict):
        return {key: _from_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_from_cpu(item) for item in value)
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


def unsupported_engine(trainer) -> str | None:
    """Why the guard cannot snapshot this trainer's engine, or None: DeepSpeed without ZeRO (its fp16/bf16 wrappers
    load their state each their own way) and FSDP1 (flat parameters) are not covered."""
    if trainer.is_deepspeed_enabled:
        stage = trainer.accelerator.state.deepspeed_plugin.zero_stage
        if stage not in (1, 2, 3):
            return f"DeepSpeed without ZeRO (zero_optimization.stage {stage}) is not supported: use ZeRO-1, 2 or 3"
    if trainer.is_fsdp_enabled and trainer.accelerator.state.fsdp_plugin.fsdp_version != 2:
        return "FSDP1 is not supported: use FSDP2 (fsdp_version: 2)"
    return None


def _zero_optimizer(trainer):
    """DeepSpeed's ZeRO optimizer (the engine's), or None when the run is not under DeepSpeed."""
    return trainer.model_wrapped.optimizer if trainer.is_deepspeed_enabled else None


def take_snapshot(trainer, rng: dict[str, Any], rollbacks: int) -> Snapshot:
    """This process's part of the training state, copied to the CPU (see the module docstring per engine)."""
    dtensor = _dtensor_type() if trainer.is_fsdp_enabled else None
    model = trainer.accelerator.unwrap_model(trainer.model)
    zero = _zero_optimizer(trainer)
    # Under ZeRO-3 the module holds empty placeholders: its weights live in the optimizer's partitions.
    weights_partitioned = zero is not None and trainer.model_wrapped.zero_optimization_partition_weights()
    scheduler = trainer.lr_scheduler
    return Snapshot(
        step=trainer.state.global_step,
        model=None if weights_partitioned else _to_cpu(model.state_dict(), dtensor),
        optimizer=_to_cpu((zero or trainer.optimizer).state_dict(), dtensor),
        scheduler=None if scheduler is None else _to_cpu(scheduler.state_dict()),
        rng=rng,
        rollbacks=rollbacks,
    )


def restore_snapshot(trainer, snapshot: Snapshot) -> None:
    """Model, optimizer, scheduler, RNG and step as they were at the snapshot; gradients and logging sums reset.
    Every process calls it at the same step (ZeRO's loading communicates)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    zero = _zero_optimizer(trainer)
    if zero is not None and hasattr(zero, "checkpoint_event_prologue"):  # ZeRO-3: every parameter partitioned
        zero.checkpoint_event_prologue()
    if snapshot.model is not None:
        model.load_state_dict(_from_cpu(snapshot.model))  # copies into the existing tensors: tied weights stay tied
    if zero is None:
        trainer.optimizer.load_state_dict(_from_cpu(snapshot.optimizer))
    else:
        _load_zero_state(zero, _from_cpu(snapshot.optimizer))
    if snapshot.scheduler is not None:
        trainer.lr_scheduler.load_state_dict(_from_cpu(snapshot.scheduler))
    set_rng_state(snapshot.rng)
    model.zero_grad(set_to_none=True)
    trainer.state.global_step = snapshot.step
    # A Trainer that sums its own training metrics between logs (pretraining's MLM/SOP sums) forgets those of the
    # steps undone, so that they do not reach the next log.
    discard = getattr(trainer, "discard_training_log_sums", None)
    if discard is not None:
        discard()


def _load_zero_state(zero, state: dict[str, Any]) -> None:
    """This process's ZeRO state dict loaded back as `DeepSpeedEngine.load_checkpoint` loads it: the fp32 master
    partition from the state itself (not re-derived from the 16-bit weights), then the 16-bit weights from it."""
    group = zero.dp_process_group
    states = [None] * torch.distributed.get_world_size(group=group)
    states[torch.distributed.get_rank(group=group)] = state  # any other entry read would fail loudly
    zero.load_state_dict(states, load_optimizer_states=True, load_from_fp32_weights=True)
    if hasattr(zero, "checkpoint_event_epilogue"):  # ZeRO-3: gathers the persistent parameters again
        zero.checkpoint_event_epilogue()


def scale_learning_rate(trainer, scale: float) -> None:
    """Multiply the learning rate from now on: the optimizer's groups and the scheduler's base rates.

    The scheduler takes them through its public `state_dict`/`load_state_dict`, the last rate it computed included
    (its `_last_lr` key, registered in training/transformers_internals.py: what `get_last_lr()` returns, and so what
    Trainer logs as the step's `learning_rate`): the logged rate is the new one."""
    for group in trainer.optimizer.param_groups:
        group["lr"] *= scale
        if "initial_lr" in group:
            group["initial_lr"] *= scale
    scheduler = trainer.lr_scheduler
    if scheduler is None or not hasattr(scheduler, "base_lrs"):
        return
    state = scheduler.state_dict()
    state["base_lrs"] = [lr * scale for lr in state["base_lrs"]]
    if "_last_lr" in state:
        state["_last_lr"] = [group["lr"] for group in trainer.optimizer.param_groups]
    scheduler.load_state_dict(state)


class RollbackDivergedSteps(TrainerCallback):
    """The divergence guard as a callback of any Trainer (pass it to `attach_reliability`, or [`guard_divergence`]):
    takes the guard's snapshots at the start of a step, judges the step's loss (read by [`TrainingLosses`]) before
    its optimizer step, and rolls a bad step back at the end of that step: after Trainer's own flow callback has
    decided what to do at this step, before anything logs, evaluates or saves the weights it produced. `guard` is the [`DivergenceGuard`]
    of the current (or last) `train()` call, made anew for each."""

    def __init__(self, trainer, config: DivergenceGuardConfig):
        self.trainer, self.config = trainer, config
        self.guard = DivergenceGuard(config)
        self.losses = TrainingLosses(
            trainer, lambda loss, model_loss: self.guard.add_micro_batch(loss), finite_for_trainer=True
        )

    @staticmethod
    def of(trainer) -> RollbackDivergedSteps | None:
        """The trainer's `RollbackDivergedSteps` callback, if it has one."""
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, RollbackDivergedSteps)), None)

    def attach_to(self, trainer) -> RollbackDivergedSteps:
        """Register this guard on `trainer` (what `attach_reliability` asks of each piece it is given), right after
        Trainer's flow callback: after it, so that its `on_step_end` overrides the flow's decision to log, evaluate or
        save a rolled-back step; before the reporting integrations, so that they see the logs it corrects. The
        plugin's [`StopOnNonFiniteLoss`] is removed: the guard rolls a non-finite step back instead of stopping. A
        guard already attached takes this one's settings. Refused (a [`UserError`]) under an engine the guard
        cannot snapshot ([`unsupported_engine`])."""
        problem = unsupported_engine(trainer)
        if problem is not None:  # refused, never silently off: the run would stop at the first NaN
            raise UserError(f"--divergence_guard: {problem}; or turn the guard off with --no_divergence_guard.")
        existing = RollbackDivergedSteps.of(trainer)
        if existing is not None:
            existing.config = self.config
            return existing
        trainer.remove_callback(StopOnNonFiniteLoss)
        callbacks = trainer.callback_handler.callbacks
        flow = [i for i, registered in enumerate(callbacks) if isinstance(registered, DefaultFlowCallback)]
        callbacks.insert(flow[0] + 1 if flow else 0, self)
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        self.guard = DivergenceGuard(self.config)  # a fresh history and snapshot for every run
        self.losses.attach()

    def on_train_end(self, args, state, control, **kwargs):
        self.losses.detach()

    def on_step_begin(self, args, state, control, **kwargs):
        self.guard.begin_step(self.trainer)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.guard.check_step(self.trainer)

    def on_step_end(self, args, state, control, **kwargs):
        if self.guard.maybe_rollback(self.trainer):
            control.should_log = control.should_save = control.should_evaluate = False
            self.trainer.log(dict(self.guard.events[-1]))
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Correct the loss of the log after a rollback (see [`LossBook`]); in place, so that the callbacks after
        this one (reporting integrations) get the corrected value: [`attach_to`] puts it before them."""
        if logs is not None:
            # Trainer appends a copy of `logs` (plus "step") to the history just before calling `on_log`.
            last = state.log_history[-1] if state.log_history else None
            logged = last if last is not None and last.get("step") == state.global_step else None
            self.guard.losses.correct(logs, logged)


def guard_divergence(trainer, config: DivergenceGuardConfig | None = None) -> RollbackDivergedSteps:
    """Guard `trainer` (any `transformers.Trainer`) against divergence: register [`RollbackDivergedSteps`] once
    ([`RollbackDivergedSteps.attach_to`]; a second call only changes its settings). Also what
    `attach_reliability(trainer, callbacks=[RollbackDivergedSteps(trainer, config)])` does."""
    return RollbackDivergedSteps(trainer, config or DivergenceGuardConfig()).attach_to(trainer)


def divergence_guard_of(trainer) -> DivergenceGuard | None:
    """The divergence guard of the current (or last) run, when one is attached, else None."""
    callback = RollbackDivergedSteps.of(trainer)
    return None if callback is None else callback.guard
