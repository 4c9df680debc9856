"""Complete checkpoints and checked resumption for any `transformers.Trainer`, from its public hooks only.

Works on `Trainer` itself and on any subclass, whatever its bases: pass the callback and resolve the resume point
with the function.

    trainer = Trainer(model=..., args=..., train_dataset=..., callbacks=[CompleteCheckpoints()])
    trainer.train(resume_from_checkpoint=resume_checkpoint(trainer, "latest"))

Trainer writes `checkpoint-N` in place, file by file, so a process killed mid-save leaves a folder that
`get_last_checkpoint` takes as the latest. What the pieces here guarantee instead:

  * **A checkpoint counts once it is marked.** Trainer calls `on_save` on every process after the whole checkpoint
    (weights, optimizer, scheduler, scaler, RNG states, `trainer_state.json`) is written. [`CompleteCheckpoints`]
    then waits for every process (each writes its own RNG state, and its shards under DeepSpeed/FSDP), checks the
    folder with `checkpoint_problem`, fsyncs it, and the main process writes the marker last, atomically (a temporary
    file renamed): `run_fingerprint.json`, the run's options. A folder without it is a killed save: never resumed
    from, skipped with a logged line.
  * **Rotation never deletes the last complete checkpoint.** Trainer rotates inside its save, before `on_save`, so
    with `save_total_limit` it would delete the last marked checkpoint while the new one is still unmarked. The
    callback takes the limit over when training begins (`args.save_total_limit` is None while it runs, restored at
    its end) and rotates after marking, counting only marked checkpoints.
  * **A resume only starts from a marked checkpoint that fits the run.** [`resume_checkpoint`] turns "latest" (or
    True) into the newest marked checkpoint of `output_dir` (None, a fresh start, when there is none), and a path
    into itself once it is marked and complete; then it checks the checkpoint against the model (type, shapes) and
    the fingerprint against the run's (model config, optimizer and schedule, global batch, the job's own options such
    as data files): each difference is named with both values ([`CheckpointError`]). As a safety net for a path given
    straight to `train()`, the callback checks the fingerprint of the checkpoint at the resumed step again in
    `on_train_begin`, before any step is trained.
  * **A resume from an older checkpoint unmarks the newer ones** (in `on_train_begin`): Trainer writes them again in
    place, and a kill during that rewrite must not leave an old marker beside new, partly written files.

Limits: checkpoints written without `on_save` (transformers' `--enable_jit_checkpoint`) are not marked; call
[`mark_checkpoint`] after such a save. Under a hyperparameter search (`run-<trial>` folders) nothing is marked.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import torch
from accelerate import PartialState
from transformers import TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .reliability import (
    FINGERPRINT_NAME,
    RESUME_LATEST_VALUES,
    TRAINER_STATE_NAME,
    CheckpointError,
    check_checkpoint_matches_model,
    check_fingerprint,
    checkpoint_problem,
    checkpoint_step,
    fingerprint_of,
    fsync_path,
    fsync_tree,
    latest_checkpoint,
    rotate_checkpoints,
)

logger = logging.getLogger(__name__)

__all__ = ["CompleteCheckpoints", "mark_checkpoint", "resume_checkpoint"]


def mark_checkpoint(folder: str, fingerprint: dict[str, Any], world_size: int | None = None) -> bool:
    """Mark a fully written checkpoint complete: fsync it, then write `run_fingerprint.json` atomically (a temporary
    file, fsynced, renamed, the folder fsynced). A folder that `checkpoint_problem` finds incomplete is not marked
    (logged as an error, False): a resume must never take it."""
    problem = checkpoint_problem(folder, world_size=world_size)
    if problem is not None:
        logger.error("Not marking %s complete: %s.", folder, problem)
        return False
    fsync_tree(folder)
    temporary = os.path.join(folder, f".{FINGERPRINT_NAME}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(fingerprint, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, os.path.join(folder, FINGERPRINT_NAME))
    fsync_path(folder)
    return True


def unmark_checkpoints_after(run_dir: str, step: int) -> None:
    """Remove the marker of every checkpoint of `run_dir` past `step`: the run continues from `step` and writes them
    again in place, and until then they belong to a future it abandoned."""
    if not os.path.isdir(run_dir):
        return
    for name in sorted(os.listdir(run_dir)):
        later = checkpoint_step(name)
        marker = os.path.join(run_dir, name, FINGERPRINT_NAME)
        if later is not None and later > step and os.path.isfile(marker):
            logger.info("Training continues from step %d: %s is no longer a complete checkpoint.", step, marker)
            os.remove(marker)
    fsync_path(run_dir)


def _unwrapped(model: torch.nn.Module | None) -> torch.nn.Module | None:
    """The model inside a DDP/DeepSpeed wrapper (`.module`), as the fingerprint reads its config."""
    while model is not None and not hasattr(model, "config") and hasattr(model, "module"):
        model = model.module
    return model


class CompleteCheckpoints(TrainerCallback):
    """Mark each checkpoint complete once written, rotate old ones only after, and check a resume's fingerprint.

    `fingerprint_extra`: the job's own options a resume must keep (JSON-serializable values), e.g.
    `{"tokenizer": "spiece.model", **data_files_fingerprint([train_file])}`. See the module docstring.
    """

    def __init__(self, fingerprint_extra: dict[str, Any] | None = None):
        self.fingerprint_extra = dict(fingerprint_extra or {})
        self.save_total_limit: int | None = None
        self._limit_taken = False

    def fingerprint(self, args, model: torch.nn.Module | None) -> dict[str, Any]:
        return fingerprint_of(args, _unwrapped(model), self.fingerprint_extra)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not self._limit_taken:
            self.save_total_limit, args.save_total_limit = args.save_total_limit, None
            self._limit_taken = True
        if state.global_step > 0:  # a resume: Trainer has loaded the checkpoint's state, no step is trained yet
            checkpoint = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            if os.path.isfile(os.path.join(checkpoint, FINGERPRINT_NAME)):
                check_fingerprint(checkpoint, self.fingerprint(args, model))
        if args.should_save:
            unmark_checkpoints_after(args.output_dir, state.global_step)
        PartialState().wait_for_everyone()  # no process saves before the stale markers are gone

    def on_save(self, args, state, control, model=None, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        PartialState().wait_for_everyone()  # every process has written its part (RNG state, shards)
        if args.should_save and os.path.isdir(folder):
            if mark_checkpoint(folder, self.fingerprint(args, model), world_size=args.world_size):
                rotate_checkpoints(args.output_dir, self.save_total_limit, state.best_model_checkpoint, marked=True)
        PartialState().wait_for_everyone()  # no process reads the checkpoint before it is marked

    def on_train_end(self, args, state, control, **kwargs):
        if self._limit_taken:
            args.save_total_limit = self.save_total_limit
            self._limit_taken = False


def resume_checkpoint(trainer, resume_from_checkpoint: str | bool | os.PathLike | None) -> str | None:
    """What to pass to `trainer.train(resume_from_checkpoint=...)`: only a marked, complete checkpoint that fits.

    None/False: None (a fresh start). True or "latest" (also "last", "true", "auto"): the newest marked checkpoint of
    `trainer.args.output_dir` (unmarked folders skipped with a warning naming the missing file), or None when there is
    none yet, so that one command starts a job and restarts it. A path: that checkpoint, which must be marked and
    complete. Either way the checkpoint must fit the model (type, tensor shapes) and the run's fingerprint (with the
    `fingerprint_extra` of the trainer's [`CompleteCheckpoints`]); each failure is a [`CheckpointError`] naming the
    file and, for the fingerprint, every changed option with both values.
    """
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    output_dir = trainer.args.output_dir
    if resume_from_checkpoint is True or str(resume_from_checkpoint).lower() in RESUME_LATEST_VALUES:
        checkpoint = latest_checkpoint(output_dir, marked=True)
        if checkpoint is None:
            logger.info("No complete checkpoint in %s yet: training starts from the beginning.", output_dir)
            return None
    else:
        checkpoint = os.fspath(resume_from_checkpoint)
        if not os.path.isdir(checkpoint):
            raise CheckpointError(f"resume_from_checkpoint: no checkpoint folder at {checkpoint}.")
    problem = checkpoint_problem(checkpoint, world_size=trainer.args.world_size, marked=True)
    if problem is not None:
        raise CheckpointError(f"Cannot resume from {checkpoint}: {problem}.")
    model = trainer.accelerator.unwrap_model(trainer.model)
    if not (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):  # those load (and check) their own shards
        check_checkpoint_matches_model(checkpoint, model)
    callback = next((c for c in trainer.callback_handler.callbacks if isinstance(c, CompleteCheckpoints)), None)
    extra = callback.fingerprint_extra if callback is not None else {}
    check_fingerprint(checkpoint, fingerprint_of(trainer.args, model, extra))
    step = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step
    logger.info("Resuming from %s (step %d).", checkpoint, step)
    return checkpoint
