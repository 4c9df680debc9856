"""Preemption: a scheduler's stop signal writes a complete checkpoint at that step and stops the job, non-zero.

Schedulers announce a preemption or the end of a time limit with a signal and kill the job a grace period later
(SLURM's `KillWait`, Kubernetes' `terminationGracePeriodSeconds`, torchrun's `--shutdown_timeout`: 30 s by default).
Python's default action for SIGTERM ends the process at once, losing everything since the last periodic checkpoint
(up to `--save_steps` of work). transformers' `--enable_jit_checkpoint` writes a checkpoint, but the job then goes on
to save its final model and exits 0, which a scheduler reads as a finished job and never requeues.

[`CheckpointOnSignal`] is a `TrainerCallback` for `transformers.Trainer` and any subclass:

  * during `train()` only (installed in `on_train_begin`, the previous handlers put back in `on_train_end`), SIGTERM
    and SIGUSR1 set a flag and nothing else: a handler runs between two bytecodes of the main thread, where writing
    files or joining a collective could deadlock;
  * at the end of the optimizer step under way, the flag asks Trainer for a save and a stop (`control.should_save`,
    `control.should_training_stop`), so Trainer's own `_save_checkpoint` writes `checkpoint-N` as at any periodic
    save (albert_hf's Trainers write it atomically). The step's evaluation is skipped: the grace period is for the
    checkpoint;
  * with several processes (torchrun/accelerate DDP, DeepSpeed, FSDP) the flag is all-reduced at every step end (one
    integer, the largest signal number received), so every rank stops and saves at the same step, whichever rank got
    the signal first;
  * afterwards the job asks [`CheckpointOnSignal.raise_if_stopped`] (or `stopped_by_signal`), which raises
    [`StoppedBySignal`] before a final model, results, card or upload is written. `albert-hf` turns it into one line
    and exit status 128 + the signal number (143 for SIGTERM, 138 for SIGUSR1), which schedulers read as killed by
    that signal, and `--resume_from_checkpoint latest` continues the run exactly.

SIGUSR1 as well as SIGTERM: `sbatch --signal=USR1@120` is how SLURM jobs ask for a warning before their time limit
(the default action of SIGUSR1 also kills the process, so nothing is lost by handling it). Under torchrun, SIGTERM is
forwarded to every worker; SIGUSR1 only with `torchrun --signals_to_handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1`.
SIGINT (Ctrl-C) is left alone: a person at the keyboard wants the process to stop now.

A signal that arrives before `train()` or after it keeps its previous behaviour (Python's default: the process ends).
One that arrives inside `train()` after its last step end, when no checkpoint can follow, is raised again once the
previous handlers are back, as if it had arrived just after.
"""

from __future__ import annotations

import logging
import os
import signal
from typing import Any

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import StoppedBySignal, UserError

logger = logging.getLogger(__name__)

# SIGUSR1 does not exist on Windows.
STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGUSR1") if hasattr(signal, name)
)


class CheckpointOnSignal(TrainerCallback):
    """On SIGTERM or SIGUSR1 during `train()`: a complete checkpoint at the end of the step under way, then a stop.

    ```python
    stop_on_signal = CheckpointOnSignal()
    trainer = Trainer(model, args, train_dataset=data, callbacks=[stop_on_signal])
    trainer.train(resume_from_checkpoint=...)
    stop_on_signal.raise_if_stopped()  # StoppedBySignal: no final model for a run that did not finish
    trainer.save_model()
    ```

    After `train()`: `stopped_by_signal` (the signal number or None), `stopped_at_step` and `checkpoint` (the folder
    written at that step, None if no save followed). If `train()` raises, Trainer calls no `on_train_end`: call
    `restore_handlers()` (`train_or_checkpoint_on_signal` does both).
    """

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS):
        self.signals = tuple(signals)
        self.received: int | None = None  # the last stop signal this process received during train()
        self.stopped_by_signal: int | None = None  # the signal every rank stopped on
        self.stopped_at_step: int | None = None
        self.checkpoint: str | None = None
        self._previous: dict[int, Any] = {}

    # ---- the handlers ---------------------------------------------------------------------------------------------

    def _note(self, signal_number: int, frame) -> None:
        self.received = signal_number

    def install_handlers(self) -> None:
        """Handle the stop signals by noting them (Trainer's `on_train_begin` calls it)."""
        self.received = self.stopped_by_signal = self.stopped_at_step = self.checkpoint = None
        try:
            for number in self.signals:
                self._previous[number] = signal.signal(number, self._note)
        except ValueError:  # signal.signal works in the main thread only
            self.restore_handlers()
            logger.warning("Trainer runs outside the main thread: a SIGTERM will not write a checkpoint.")

    def restore_handlers(self) -> None:
        """Put the previous handlers back; a stop signal noted but never acted on is raised again under them."""
        previous, self._previous = self._previous, {}
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        if previous and self.received is not None and self.stopped_by_signal is None:
            signal.raise_signal(self.received)

    # ---- Trainer's events -----------------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        if getattr(args, "enable_jit_checkpoint", False):
            raise UserError(
                "--enable_jit_checkpoint handles SIGTERM too, then saves the final model and exits 0: drop it, "
                "CheckpointOnSignal writes the checkpoint and stops the job with exit status 143."
            )
        self.install_handlers()

    def on_step_end(self, args, state, control, **kwargs):
        received = agreed_signal(self.received or 0, args.device)
        if received:
            self.stopped_by_signal, self.stopped_at_step = received, state.global_step
            control.should_save = True
            control.should_evaluate = False
            control.should_training_stop = True
            if state.is_world_process_zero:
                logger.warning(
                    "%s received: writing %s-%d and stopping.",
                    signal.Signals(received).name,
                    PREFIX_CHECKPOINT_DIR,
                    state.global_step,
                )
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.stopped_at_step is not None and state.global_step == self.stopped_at_step:
            self.checkpoint = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.stopped_at_step is not None:  # the checkpoint of this step is written: no second save or evaluation
            control.should_save = False
            control.should_evaluate = False
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.restore_handlers()

    # ---- after train() --------------------------------------------------------------------------------------------

    def raise_if_stopped(self) -> None:
        """Raise [`StoppedBySignal`] if training stopped on a signal (call it between `train()` and the final save)."""
        if self.stopped_by_signal is not None:
            raise StoppedBySignal(self.stopped_by_signal, self.stopped_at_step, self.checkpoint)


def agreed_signal(received: int, device: torch.device | str) -> int:
    """The largest signal number any process received (0: none), the same on every rank; `received` itself when
    there is one process."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return received
    if torch.distributed.get_world_size() == 1:
        return received
    flag = torch.tensor([received], dtype=torch.int32, device=device)
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    return int(flag.item())


def train_or_checkpoint_on_signal(trainer: Trainer, **train_arguments):
    """`trainer.train(**train_arguments)` with a [`CheckpointOnSignal`]: its `TrainOutput`, or [`StoppedBySignal`]
    after the checkpoint of the step a SIGTERM/SIGUSR1 stopped (call it where the job would otherwise go on to save
    its final model)."""
    stop_on_signal = CheckpointOnSignal()
    trainer.add_callback(stop_on_signal)
    try:
        result = trainer.train(**train_arguments)
    finally:
        stop_on_signal.restore_handlers()  # also when train() raised, which skips on_train_end
        trainer.remove_callback(stop_on_signal)
    stop_on_signal.raise_if_stopped()
    return result
