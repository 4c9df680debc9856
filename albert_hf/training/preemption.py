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
  * with several processes (torchrun/accelerate DDP, DeepSpeed, FSDP) every rank must stop at the same step,
    whichever rank got the signal first: the signals received are summed over the processes once per optimizer step,
    in the one reduction of that step ([`agree_on_step`]: the loss check's, before the optimizer step, where one is
    attached; else the callback's own at the step's end);
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

import inspect
import logging
import os
import signal
from typing import Any

import torch
import transformers.trainer
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import StoppedBySignal, UserError

logger = logging.getLogger(__name__)

TRAINER_SOURCE = inspect.getsourcefile(transformers.trainer)

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
    `restore_handlers()` (`resume_training` of training/callbacks.py does both).
    """

    def __init__(self, signals: tuple[int, ...] = STOP_SIGNALS):
        self.signals = tuple(signals)
        self.received: int | None = None  # the last stop signal this process received during train()
        self.stopped_by_signal: int | None = None  # the signal every rank stopped on
        self.stopped_at_step: int | None = None
        self.checkpoint: str | None = None
        # The signal every process agreed on in this step's reduction ([`agree_on_step`]), until the step's end.
        self.agreed: int | None = None
        self._previous: dict[int, Any] = {}
        # The frame of Trainer's `train()` the handlers were installed in: a signal arriving while it is no longer on
        # the stack arrived after a `train()` that raised (Trainer then calls no `on_train_end`).
        self._training_frame = None

    # ---- the handlers ---------------------------------------------------------------------------------------------

    def _note(self, signal_number: int, frame) -> None:
        if self._training(frame):
            self.received = signal_number
            return
        # `train()` raised, so the handlers were never put back: put them back now, and let them have the signal.
        self.received = None
        self.restore_handlers()
        signal.raise_signal(signal_number)

    def _training(self, frame) -> bool:
        """Whether `frame` (the one a signal interrupted) runs inside the `train()` the handlers were installed for."""
        if self._training_frame is None:  # installed by hand, outside Trainer's `train()`
            return True
        while frame is not None and frame is not self._training_frame:
            frame = frame.f_back
        return frame is not None

    def install_handlers(self) -> None:
        """Handle the stop signals by noting them (Trainer's `on_train_begin` calls it)."""
        self.received = self.stopped_by_signal = self.stopped_at_step = self.checkpoint = None
        self._training_frame = _outermost_trainer_frame(inspect.currentframe())
        try:
            for number in self.signals:
                previous = signal.signal(number, self._note)
                # The handler of a `train()` that raised and never put its own back: the one before it.
                owner = getattr(previous, "__self__", None)
                while isinstance(owner, CheckpointOnSignal) and not owner._training(inspect.currentframe()):
                    previous = owner._previous.pop(number, signal.SIG_DFL)
                    owner = getattr(previous, "__self__", None)
                self._previous[number] = previous
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

    @staticmethod
    def of(trainer) -> CheckpointOnSignal | None:
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, CheckpointOnSignal)), None)

    def on_step_end(self, args, state, control, **kwargs):
        received, self.agreed = self.agreed, None
        if received is None:  # no loss check agreed on it before the optimizer step: a reduction of its own
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


def _outermost_trainer_frame(frame):
    """The outermost frame of the stack that runs code of transformers' trainer module (`Trainer.train`), or None."""
    found = None
    while frame is not None:
        if frame.f_code.co_filename == TRAINER_SOURCE:
            found = frame
        frame = frame.f_back
    return found


def agree_on_step(trainer, values: torch.Tensor | None, reduction: str = "sum") -> list[float]:
    """The one reduction of an optimizer step: `values` (a loss check's, on the device) summed (or averaged, `reduction`
    "mean") over the processes, together with the stop signals they received, which the trainer's
    [`CheckpointOnSignal`] then acts on at the step's end. Returns the reduced values as floats: one transfer to the
    host (`tolist`), none for the signal alone in one process, and one collective with several.

    With one process the signal is this process's; with several, each handled signal is counted over the processes
    and the largest number received by any is agreed on, as [`agreed_signal`] does alone."""
    stop = CheckpointOnSignal.of(trainer)
    received = (stop.received or 0) if stop is not None else 0
    if trainer.accelerator.num_processes <= 1:
        if stop is not None:
            stop.agreed = received
        return [] if values is None else values.reshape(-1).tolist()
    signals = stop.signals if stop is not None else ()
    flags = torch.tensor([float(received == number) for number in signals], device=trainer.args.device)
    values = flags.new_zeros(0) if values is None else values.reshape(-1).float()
    total = trainer.accelerator.reduce(torch.cat([values, flags]), reduction="sum")
    if reduction == "mean":  # on the device, in the values' precision, as accelerate's own mean
        total = torch.cat([total[: values.numel()] / trainer.accelerator.num_processes, total[values.numel() :]])
    reduced = total.tolist()
    counts = reduced[values.numel() :]
    if stop is not None:
        stop.agreed = max((number for number, count in zip(signals, counts) if count > 0), default=0)
    return reduced[: values.numel()]


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
