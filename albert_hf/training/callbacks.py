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

import concurrent.futures
import json
import logging
import os
import shutil
from typing import Any

import torch
from accelerate import PartialState
from huggingface_hub import HfApi
from transformers import TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy

from ..output_files import staged_folder
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

__all__ = ["CompleteCheckpoints", "UploadCompleteCheckpoints", "mark_checkpoint", "resume_checkpoint"]


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


def hub_api() -> HfApi:
    """The Hub client of the checkpoint uploads (one place, so a test can replace it)."""
    return HfApi()


class CompleteCheckpoints(TrainerCallback):
    """Mark each checkpoint complete once written, rotate old ones only after, and check a resume's fingerprint.

    `fingerprint_extra`: the job's own options a resume must keep (JSON-serializable values), e.g.
    `{"tokenizer": "spiece.model", **data_files_fingerprint([train_file])}`. See the module docstring.
    """

    def __init__(self, fingerprint_extra: dict[str, Any] | None = None):
        self.fingerprint_extra = dict(fingerprint_extra or {})
        self.save_total_limit: int | None = None
        self._limit_taken = False
        # Checkpoint folders another callback still reads (a running upload): rotation keeps them until a later save.
        self.in_use: set[str] = set()

    def fingerprint(self, args, model: torch.nn.Module | None) -> dict[str, Any]:
        return fingerprint_of(args, _unwrapped(model), self.fingerprint_extra)

    @staticmethod
    def of(trainer) -> CompleteCheckpoints | None:
        """The trainer's `CompleteCheckpoints` callback, if it has one."""
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, CompleteCheckpoints)), None)

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
        if args.should_save and not os.path.isdir(folder):
            logger.warning("No %s to mark complete (a hyperparameter-search trial's run folder?).", folder)
        elif args.should_save:
            if mark_checkpoint(folder, self.fingerprint(args, model), world_size=args.world_size):
                rotate_checkpoints(
                    args.output_dir, self.save_total_limit, state.best_model_checkpoint, marked=True, keep=self.in_use
                )
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
    callback = CompleteCheckpoints.of(trainer)
    extra = callback.fingerprint_extra if callback is not None else {}
    check_fingerprint(checkpoint, fingerprint_of(trainer.args, model, extra))
    step = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step
    logger.info("Resuming from %s (step %d).", checkpoint, step)
    return checkpoint


# Files of a checkpoint that Trainer's own uploads copy into the run folder, whose root is the Hub model.
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".index.json")
MODEL_FILE_NAMES = ("config.json", "generation_config.json", "adapter_config.json")


class UploadCompleteCheckpoints(TrainerCallback):
    """`--push_to_hub` uploads of marked checkpoints only, in the background; a failed upload never stops training.

    Trainer starts its upload inside the save, before `on_save`, i.e. before [`CompleteCheckpoints`] marks the
    checkpoint. So while training runs this callback takes `hub_strategy` over (`args.hub_strategy` is "end" then,
    which turns Trainer's in-save upload off; restored when training ends) and does what Trainer would, from `on_save`
    once the checkpoint is marked: the model files are copied into the run folder and the run folder uploaded
    (`every_save`), and with `checkpoint` / `all_checkpoints` the checkpoint itself as `last-checkpoint` / under its
    name. Uploads run one at a time in huggingface_hub's background thread (`run_as_future`); a failure to start or
    to finish one is logged with the folder and counted in `failed` (the next save uploads the latest files again,
    `trainer.push_to_hub()` retries at the end), and rotation keeps a folder until its upload is done.

    Put it after `CompleteCheckpoints` (Trainer calls callbacks in their order): a checkpoint found unmarked is not
    uploaded.
    """

    def __init__(self, trainer):
        self.trainer = trainer
        self.strategy: HubStrategy | None = None
        self.jobs: list[tuple[str, Any]] = []  # (checkpoint folder, future) of every upload started
        self.failed: list[tuple[str, str]] = []  # (checkpoint folder, error) of every failed upload

    def on_train_begin(self, args, state, control, **kwargs):
        if args.push_to_hub and self.strategy is None and args.hub_strategy != HubStrategy.END:
            self.strategy, args.hub_strategy = HubStrategy(args.hub_strategy), HubStrategy.END

    def on_train_end(self, args, state, control, **kwargs):
        for _, job in self.jobs:  # as Trainer waits for its own uploads at the end of training
            if not job.done():
                concurrent.futures.wait([job])
        if self.strategy is not None:
            args.hub_strategy, self.strategy = self.strategy, None

    def on_save(self, args, state, control, processing_class=None, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if self.strategy is None or not state.is_world_process_zero or not os.path.isdir(folder):
            return
        problem = checkpoint_problem(folder, world_size=args.world_size, marked=True)
        if problem is not None:
            logger.warning("Not uploading %s: %s.", folder, problem)
            return
        try:
            self._upload(args, state, folder, processing_class)
        except Exception as error:  # noqa: BLE001 - network, auth, quota: whatever it is, training goes on
            self._report(folder, error)

    def _upload(self, args, state, folder: str, processing_class) -> None:
        # The checkpoint's model into the output folder, as the upload sends it: through albert_hf's writer, which
        # replaces only files a job wrote there.
        with staged_folder(args.output_dir) as staging:
            for name in os.listdir(folder):
                if name.endswith(MODEL_FILE_SUFFIXES) and name != "training_args.bin" or name in MODEL_FILE_NAMES:
                    shutil.copy(os.path.join(folder, name), staging.path / name)
            if processing_class is not None:
                processing_class.save_pretrained(staging.path)
            torch.save(args, staging.path / "training_args.bin")
        message = f"Training in progress, step {state.global_step}"
        uploads = [dict(folder_path=args.output_dir, ignore_patterns=["_*", f"{PREFIX_CHECKPOINT_DIR}-*", ".*"])]
        if self.strategy in (HubStrategy.CHECKPOINT, HubStrategy.ALL_CHECKPOINTS):
            name = "last-checkpoint" if self.strategy == HubStrategy.CHECKPOINT else os.path.basename(folder)
            uploads.append(dict(folder_path=folder, path_in_repo=name, commit_message=message + ", checkpoint"))
        complete = CompleteCheckpoints.of(self.trainer)
        api = hub_api()
        for upload in uploads:
            job = api.upload_folder(
                **{"commit_message": message, **upload},
                repo_id=self.trainer.hub_model_id,
                token=args.hub_token,
                revision=args.hub_revision,
                run_as_future=True,
            )
            self.jobs.append((folder, job))
            if complete is not None:
                complete.in_use.add(folder)
            job.add_done_callback(lambda done, folder=folder: self._finished(folder, done))

    def _finished(self, folder: str, job) -> None:
        error = None if job.cancelled() else job.exception()
        if error is not None:
            self._report(folder, error)
        if not any(source == folder and not other.done() for source, other in self.jobs):
            complete = CompleteCheckpoints.of(self.trainer)
            if complete is not None:
                complete.in_use.discard(folder)

    def _report(self, folder: str, error: BaseException) -> None:
        self.failed.append((folder, repr(error)))
        logger.error(
            "Uploading %s to the Hub failed (%r). Training continues; the next checkpoint's upload sends the "
            "latest files again, and `trainer.push_to_hub()` retries at the end.",
            folder,
            error,
        )
