"""The reliability plugin: what a long run needs to survive crashes, preemptions and divergence, attached to any
`transformers.Trainer` (the class itself or any subclass) in one line, and the one function that resumes it.

    trainer = Trainer(model=model, args=args, train_dataset=data)
    attach_reliability(trainer, fingerprint_extra={"train_file": ...})  # the callbacks below, and the folder's lease
    result = resume_training(trainer, args.resume_from_checkpoint)  # "latest": the newest complete checkpoint
    save_final_model(trainer)  # atomic; push with trainer.push_to_hub() once evaluated

[`attach_reliability`] adds what every run needs, in this order:

  * [`CompleteCheckpoints`]: **a checkpoint counts once it is marked.** Trainer writes `checkpoint-N` in place, file
    by file, so a process killed mid-save leaves a folder that `get_last_checkpoint` takes as the latest. Trainer
    calls `on_save` on every process after the whole checkpoint is written; the callback then waits for every process
    (each writes its own RNG state, and its shards under DeepSpeed/FSDP), checks the folder with
    `checkpoint_problem`, fsyncs it, and the main process writes the marker last, atomically (a temporary file
    renamed): `run_fingerprint.json`, the run's options. A folder without it is a killed save: never resumed from by
    "latest". **Rotation never deletes the last complete checkpoint**: Trainer rotates inside its save, before
    `on_save`, so with `save_total_limit` it would delete the last marked checkpoint while the new one is still
    unmarked; the callback takes the limit over while training runs (`args.save_total_limit` is None then) and
    rotates after marking, counting only marked checkpoints (`rotate_checkpoints`). **A resume from an older
    checkpoint unmarks the newer ones** (`on_train_begin`): Trainer writes them again in place, and a kill during that
    rewrite must not leave an old marker beside new, partly written files.
  * [`UploadCompleteCheckpoints`]: `--push_to_hub` uploads of marked checkpoints only; a failed upload never stops
    training.
  * `StopOnNonFiniteLoss` and `RefuseNonFiniteCheckpoints` (training/non_finite.py): a NaN/inf loss stops the run
    before its optimizer step, and no checkpoint ever holds NaN/inf weights.
  * `CheckpointOnSignal` (training/preemption.py): SIGTERM/SIGUSR1 write a complete checkpoint of the step under way
    and stop the job, non-zero.

and the pieces a job passes in (`callbacks=[...]`), each imported by the job that attaches it, each placed where it
belongs by its own `attach_to(trainer)`:

  * `ResumableStream(trainer)` (training/stream_resume.py): the position of a positionable training stream saved in
    each checkpoint, and a resumed stream started after the batches trained on, in the right pass (exact resume);
  * `RollbackDivergedSteps(trainer, DivergenceGuardConfig(...))` (training/divergence.py): a non-finite loss or a
    loss spike rolled back to the last good state instead of stopping the run.

The pretraining jobs attach both (`albert_hf.pretraining.trainer.pretraining_callbacks`); the fine-tuning jobs need
neither, and their scripts import neither.

It also takes the lease on `--output_dir` (training/run_folder.py: one writer per folder, renewed while the process
runs), unless this process holds it already (a job's `start_job` takes it, and checks the folder, before any data or
model work); `resume_training` checks the folder then, if the job has not.

[`resume_training`] is `trainer.train()` resumed from `--resume_from_checkpoint` ([`resume_checkpoint`]: "latest" or
True is the newest marked checkpoint of `output_dir`, or a fresh start when there is none, so one command starts a job
and restarts it; the checkpoint must fit the model and the run's fingerprint), inside the `resumed(checkpoint)` context
of every attached piece that has one (the stream starts at its position), a finished run relaunched left untrained,
and `StoppedBySignal` raised after a SIGTERM's checkpoint. [`save_final_model`] writes the final model atomically and
never uploads it: the job pushes once, after evaluating, so that the card on the Hub holds the results.

Limits: checkpoints written without `on_save` (transformers' `--enable_jit_checkpoint`) are not marked; call
[`mark_checkpoint`] after such a save. Under a hyperparameter search (`run-<trial>` folders) nothing is marked.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from transformers import PreTrainedTokenizerBase, TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, HubStrategy, TrainOutput

from ..errors import OptionError
from ..formats import save_format_line
from ..modeling import AlbertPreTrainedModel
from ..options import OptionValues
from ..output_files import claim_files, folder_state, fsync_path, fsync_tree, naming_the_destination
from .non_finite import RefuseNonFiniteCheckpoints, StopOnNonFiniteLoss
from .preemption import CheckpointOnSignal
from .reliability import (
    FINGERPRINT_NAME,
    MODEL_STAGING_DIR_NAME,
    RESUME_LATEST_VALUES,
    TOKENIZER_KEY,
    TRAINER_STATE_NAME,
    CheckpointError,
    check_checkpoint_matches_model,
    check_fingerprint,
    checkpoint_consistency_problem,
    checkpoint_problem,
    checkpoint_record,
    checkpoint_step,
    fingerprint_of,
    hand_hub_token_to_environment,
    latest_checkpoint,
    marker_problem,
    move_files_in,
    rotate_checkpoints,
)
from .run_folder import guard_output_folder, hold_output_folder, training_ended
from .transformers_internals import (
    load_checkpoint_weights,
    push_checkpoint,
    save_model_unpushed,
    save_weights,
    warn_about_missing_internal_names,
)

logger = logging.getLogger(__name__)

__all__ = [
    "CompleteCheckpoints",
    "UploadCompleteCheckpoints",
    "attach_reliability",
    "find_resume_checkpoint",
    "mark_checkpoint",
    "resume_checkpoint",
    "resume_training",
    "save_final_model",
]


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
        # Checkpoint folders another callback still reads (a running upload): rotation keeps them until a later save.
        self.in_use: set[str] = set()

    def fingerprint(self, args, model: torch.nn.Module | None, tokenizer: Any = None) -> dict[str, Any]:
        if tokenizer is not None and self._tokenizer_key[0] is not tokenizer:  # hashed once: it does not change
            self._tokenizer_key = (tokenizer, fingerprint_of(args, None, tokenizer=tokenizer)[TOKENIZER_KEY])
        fingerprint = fingerprint_of(args, _unwrapped(model), self.fingerprint_extra)
        if tokenizer is not None:
            fingerprint[TOKENIZER_KEY] = self._tokenizer_key[1]
        return fingerprint

    _tokenizer_key: tuple[Any, str | None] = (None, None)

    @staticmethod
    def of(trainer) -> CompleteCheckpoints | None:
        """The trainer's `CompleteCheckpoints` callback, if it has one."""
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, CompleteCheckpoints)), None)

    def on_train_begin(self, args, state, control, model=None, processing_class=None, **kwargs):
        if not self._limit_taken:
            self.save_total_limit, args.save_total_limit = args.save_total_limit, None
            self._limit_taken = True
        if state.global_step > 0:  # a resume: Trainer has loaded the checkpoint's state, no step is trained yet
            checkpoint = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
            if os.path.isfile(os.path.join(checkpoint, FINGERPRINT_NAME)):
                check_fingerprint(checkpoint, self.fingerprint(args, model, processing_class))
        if args.should_save:
            unmark_checkpoints_after(args.output_dir, state.global_step)
        PartialState().wait_for_everyone()  # no process saves before the stale markers are gone

    def on_save(self, args, state, control, model=None, processing_class=None, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        PartialState().wait_for_everyone()  # every process has written its part (RNG state, shards)
        if args.should_save and not os.path.isdir(folder):
            logger.warning("No %s to mark complete (a hyperparameter-search trial's run folder?).", folder)
        elif args.should_save:
            # The run's options, and what the checkpoint's other files must agree with (its step, the steps of the
            # schedule and the optimizer).
            record = checkpoint_record(state, kwargs.get("optimizer"), kwargs.get("lr_scheduler"))
            fingerprint = {**self.fingerprint(args, model, processing_class), **record}
            if mark_checkpoint(folder, fingerprint, world_size=args.world_size):
                rotate_checkpoints(
                    args.output_dir, self.save_total_limit, state.best_model_checkpoint, marked=True, keep=self.in_use
                )
        PartialState().wait_for_everyone()  # no process reads the checkpoint before it is marked

    def on_train_end(self, args, state, control, **kwargs):
        if self._limit_taken:
            args.save_total_limit = self.save_total_limit
            self._limit_taken = False
        training_ended(args.output_dir)


def find_resume_checkpoint(
    resume_from_checkpoint: str | bool | os.PathLike | None,
    output_dir: str | os.PathLike,
    world_size: int | None = None,
    quiet: bool = False,
) -> str | None:
    """The checkpoint a `--resume_from_checkpoint` value names: the one place that reads it.

    None/False: None (a fresh start). True or "latest" (also "last", "true", "auto"): the newest marked checkpoint of
    `output_dir` (unmarked folders skipped with a warning naming the missing file), or None when there is none yet, so
    that one command starts a job and restarts it. A path: that checkpoint, which must be complete
    (`checkpoint_problem`) and marked, except in a folder where no checkpoint is marked (a plain Trainer's or an older
    albert_hf's run, whose options cannot be checked: a warning says so). Beside a marked checkpoint an unmarked one
    is a save killed before its end, or one a resume from an earlier checkpoint abandoned: refused. The checkpoint's
    files must agree about its step (`checkpoint_consistency_problem`: an edited `trainer_state.json`, a file copied
    from another checkpoint): refused, naming them, "latest" included. Each refusal is a [`CheckpointError`] naming
    the file. `quiet`: no log lines (a check before the job's work, which resumption repeats).
    """
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    if resume_from_checkpoint is True or str(resume_from_checkpoint).lower() in RESUME_LATEST_VALUES:
        checkpoint = latest_checkpoint(output_dir, marked=True, warn=not quiet)
        if checkpoint is None:
            if not quiet:
                logger.info("No complete checkpoint in %s yet: training starts from the beginning.", output_dir)
            return None
        problem = checkpoint_consistency_problem(checkpoint)
        if problem is not None:
            raise CheckpointError(f"Cannot resume from {checkpoint} (the newest complete checkpoint): {problem}.")
        return checkpoint
    checkpoint = os.fspath(resume_from_checkpoint)
    if not os.path.isdir(checkpoint):
        raise CheckpointError(f"resume_from_checkpoint: no checkpoint folder at {checkpoint}.")
    problem = checkpoint_problem(checkpoint, world_size=world_size)
    if problem is None and marker_problem(checkpoint) is not None:
        run_dir = os.path.dirname(os.path.abspath(checkpoint))
        if any(marker_problem(os.path.join(run_dir, name)) is None for name in checkpoints_of(run_dir)):
            problem = marker_problem(checkpoint)  # this run marks its checkpoints: a killed save
    if problem is None:
        problem = checkpoint_consistency_problem(checkpoint)
    if problem is not None:
        raise CheckpointError(f"Cannot resume from {checkpoint}: {problem}.")
    return checkpoint


def check_resume_before_work(training_args) -> None:
    """What can be known of a resume before any data or model work, as the one reader of `--resume_from_checkpoint`
    ([`find_resume_checkpoint`]) finds it: the checkpoint it names is there, complete, marked and consistent, and the
    options of the training arguments alone (optimizer, schedule, seed and data order, global batch) are those it was
    trained with. The model, tokenizer and data are checked when `resume_checkpoint` is asked, once they are made."""
    checkpoint = find_resume_checkpoint(
        training_args.resume_from_checkpoint, training_args.output_dir, training_args.world_size, quiet=True
    )
    if checkpoint is not None:
        check_fingerprint(checkpoint, fingerprint_of(training_args, None), only_current_keys=True)


def checkpoints_of(run_dir: str) -> list[str]:
    """The names of the `checkpoint-N` folders of `run_dir`."""
    return [name for name in os.listdir(run_dir) if checkpoint_step(name) is not None]


def resume_checkpoint(trainer, resume_from_checkpoint: str | bool | os.PathLike | None) -> str | None:
    """What to pass to `trainer.train(resume_from_checkpoint=...)`: the checkpoint [`find_resume_checkpoint`] names,
    once it fits the model (type, tensor shapes) and the run's fingerprint (with the `fingerprint_extra` of the
    trainer's [`CompleteCheckpoints`]); each failure is a [`CheckpointError`] naming the file and, for the
    fingerprint, every changed option with both values. Logs `Resuming from <checkpoint> (step N).`"""
    checkpoint = find_resume_checkpoint(resume_from_checkpoint, trainer.args.output_dir, trainer.args.world_size)
    if checkpoint is None:
        return None
    model = trainer.accelerator.unwrap_model(trainer.model)
    if not (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):  # those load (and check) their own shards
        check_checkpoint_matches_model(checkpoint, model)
    callback = CompleteCheckpoints.of(trainer) or CompleteCheckpoints()
    check_fingerprint(checkpoint, callback.fingerprint(trainer.args, model, trainer.processing_class))
    step = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step
    logger.info("Resuming from %s (step %d).", checkpoint, step)
    return checkpoint


class UploadCompleteCheckpoints(TrainerCallback):
    """`--push_to_hub` uploads of marked checkpoints only, in the background; a failed upload never stops training.

    Trainer starts its upload inside the save, before `on_save`, i.e. before [`CompleteCheckpoints`] marks the
    checkpoint. So while training runs this callback takes `hub_strategy` over (`args.hub_strategy` is "end" then,
    which turns Trainer's in-save upload off; restored when training ends) and asks Trainer for the same upload
    (`push_checkpoint`) from `on_save`, once the checkpoint is marked: the model files copied into the run folder and
    the run folder uploaded (`every_save`), and with `checkpoint` / `all_checkpoints` the checkpoint itself as
    `last-checkpoint` / under its name, in huggingface_hub's background thread. A failure to start or to finish an
    upload is logged with the folder and counted in `failed` (Trainer's own upload would lose a failure in the
    background silently; the next save uploads the latest files again, `trainer.push_to_hub()` retries at the end),
    and rotation keeps a folder until its upload is done.

    Put it after `CompleteCheckpoints` (Trainer calls callbacks in their order): a checkpoint found unmarked is not
    uploaded.
    """

    def __init__(self, trainer):
        self.trainer = trainer
        self.strategy: HubStrategy | None = None
        self.jobs: list[tuple[str, Any]] = []  # (checkpoint folder, future) of every upload started
        self.failed: list[tuple[str, str]] = []  # (checkpoint folder, error) of every failed upload

    @staticmethod
    def of(trainer) -> UploadCompleteCheckpoints | None:
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, UploadCompleteCheckpoints)), None)

    def on_train_begin(self, args, state, control, **kwargs):
        if args.push_to_hub and self.strategy is None and args.hub_strategy != HubStrategy.END:
            self.strategy, args.hub_strategy = HubStrategy(args.hub_strategy), HubStrategy.END

    def on_train_end(self, args, state, control, **kwargs):
        for _, job in self.jobs:  # as Trainer waits for its own uploads at the end of training
            if not job.done():
                concurrent.futures.wait([job])
        if self.strategy is not None:
            args.hub_strategy, self.strategy = self.strategy, None

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if self.strategy is None or not state.is_world_process_zero or not os.path.isdir(folder):
            return
        problem = checkpoint_problem(folder, world_size=args.world_size, marked=True)
        if problem is not None:
            logger.warning("Not uploading %s: %s.", folder, problem)
            return
        progress = self.trainer.push_in_progress
        before = set(map(id, progress.jobs)) if progress is not None else set()
        files_before = folder_state(args.output_dir)
        try:
            with self._strategy_restored(args):
                push_checkpoint(self.trainer, folder)
        except Exception as error:  # noqa: BLE001 - network, auth, quota: whatever it is, training goes on
            self._report(folder, error)
        finally:
            # Trainer copied the checkpoint's model and tokenizer files into the output folder (their names, where a
            # user's file is refused before any work): the job's own files from now on, for albert_hf's writer.
            files_after = folder_state(args.output_dir)
            claim_files(args.output_dir, [name for name, seen in files_after.items() if files_before.get(name) != seen])
        progress = self.trainer.push_in_progress
        started = [job for job in (progress.jobs if progress is not None else []) if id(job) not in before]
        complete = CompleteCheckpoints.of(self.trainer)
        for job in started:
            self.jobs.append((folder, job))
            if complete is not None:
                complete.in_use.add(folder)
            job.add_done_callback(lambda done, folder=folder: self._finished(folder, done))

    @contextlib.contextmanager
    def _strategy_restored(self, args):
        """The strategy asked for, while Trainer uploads (it uploads nothing under "end")."""
        args.hub_strategy = self.strategy
        try:
            yield
        finally:
            args.hub_strategy = HubStrategy.END

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


class RefuseUnknownSelectionMetric(TrainerCallback):
    """`--metric_for_best_model` naming a figure the evaluation does not report stops the run at its first evaluation
    with an `OptionError` naming the option, where the value came from and the figures there are; Trainer raises a
    `KeyError` there, after the first checkpoint of the evaluation is written (the figures a job's evaluation
    reports are known only once it has run)."""

    def __init__(self):
        self.training = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.training = True

    def on_train_end(self, args, state, control, **kwargs):
        self.training = False

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        metric = args.metric_for_best_model
        if not self.training or not metric or not metrics or "eval_loss" not in metrics:
            return  # an evaluation of another set (its own prefix), or outside training: nothing is selected by it
        name = metric if metric.startswith("eval_") else f"eval_{metric}"
        if name in metrics:
            return
        reported = sorted(
            key.removeprefix("eval_")
            for key in metrics
            if key.startswith("eval_") and not key.endswith(("_runtime", "_per_second"))
        )
        raise OptionError(
            f"{OptionValues.of(args).named('metric_for_best_model')}: the evaluation reports no {metric!r}; it "
            f"reports {', '.join(reported)}."
        )


# --------------------------------------------------------------------------------------------------------------------
# The plugin: attach, resume, save
# --------------------------------------------------------------------------------------------------------------------


def attach_reliability(
    trainer,
    fingerprint_extra: dict[str, Any] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    lease: bool = True,
):
    """Attach the reliability plugin to `trainer` (any `transformers.Trainer`): the callbacks of the module docstring
    and the lease on `trainer.args.output_dir`. Returns the trainer. Attaching twice changes nothing but the settings.

    `fingerprint_extra`: the job's own options a resume must keep (JSON-serializable values), e.g.
    `{"tokenizer": "spiece.model", **data_files_fingerprint([train_file])}`; saved in each checkpoint's
    `run_fingerprint.json` with the model config, optimizer and global batch. `callbacks`: the optional pieces this
    job attaches too (`ResumableStream(trainer)`, `RollbackDivergedSteps(trainer, config)`), each registered by its
    own `attach_to(trainer)`, else appended. The Hub token of `--hub_token` moves into this process's `HF_TOKEN`
    (`hand_hub_token_to_environment`), so that no saved `training_args.bin` holds it.
    """
    hand_hub_token_to_environment(trainer.args)
    if lease:
        hold_output_folder(trainer.args)
    complete = CompleteCheckpoints.of(trainer)
    if complete is None:
        complete = CompleteCheckpoints()
        trainer.add_callback(complete)
        # The marking before the upload.
        trainer.add_callback(UploadCompleteCheckpoints(trainer))
        trainer.add_callback(StopOnNonFiniteLoss(trainer))
        trainer.add_callback(CheckpointOnSignal())
        trainer.add_callback(RefuseUnknownSelectionMetric())
        # Last: it sees every other callback's decision to save a step (a signal's, a rollback's).
        trainer.add_callback(RefuseNonFiniteCheckpoints(trainer))
    complete.fingerprint_extra = dict(fingerprint_extra or complete.fingerprint_extra)
    for piece in callbacks:
        attach = getattr(piece, "attach_to", None)
        if attach is not None:
            attach(trainer)
        else:
            trainer.add_callback(piece)
    return trainer


def resume_training(trainer, resume_from_checkpoint: str | bool | os.PathLike | None = None, **train_kwargs):
    """`trainer.train()`, resumed from the checkpoint a `--resume_from_checkpoint` value names ([`resume_checkpoint`]:
    checked against the model and the run's fingerprint before anything is loaded), or from the start.

      * The output folder is checked first, unless the job checked it at its start (`guard_output_folder`): a fresh
        start into a folder holding another run's model or checkpoints is refused.
      * A run that already reached `--max_steps` in that checkpoint is not trained further: its weights and state are
        loaded (so that a following save writes the trained model) and its `TrainOutput` returned. Trainer itself
        would train one step past `max_steps` (tests/test_reliability.py shows it).
      * Every attached piece with a `resumed(checkpoint)` context is inside it while `train()` runs: a positionable
        training stream then starts after the batches trained on (`ResumableStream`).
      * A SIGTERM or SIGUSR1 during training writes the checkpoint of the step reached, then [`StoppedBySignal`] is
        raised, before anything final is written (a `CheckpointOnSignal` is added for the call if none is attached).
    """
    warn_about_missing_internal_names()
    guard_output_folder(trainer.args, resume_from_checkpoint)
    checkpoint = resume_checkpoint(trainer, resume_from_checkpoint)
    if checkpoint is not None:
        step = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step
        if 0 < trainer.args.max_steps <= step:
            return nothing_left_to_train(trainer, checkpoint, step)
    stop_on_signal = CheckpointOnSignal.of(trainer)
    added = stop_on_signal is None
    if added:
        stop_on_signal = CheckpointOnSignal()
        trainer.add_callback(stop_on_signal)
    resumable = [piece.resumed for piece in trainer.callback_handler.callbacks if hasattr(piece, "resumed")]
    try:
        with contextlib.ExitStack() as contexts:
            for resumed in resumable:
                contexts.enter_context(resumed(checkpoint))
            result = trainer.train(resume_from_checkpoint=checkpoint, **train_kwargs)
    finally:
        stop_on_signal.restore_handlers()  # also when train() raised, which skips on_train_end
        if added:
            trainer.remove_callback(stop_on_signal)
    stop_on_signal.raise_if_stopped()
    return result


def nothing_left_to_train(trainer, checkpoint: str, step: int) -> TrainOutput:
    """A finished run relaunched: its state and weights from `checkpoint`, no training step."""
    logger.info(
        "%s: already trained for %d steps (--max_steps %d): nothing to train.", checkpoint, step, trainer.args.max_steps
    )
    if not (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):
        load_checkpoint_weights(trainer, checkpoint)
    else:
        logger.warning("Under DeepSpeed/FSDP the model keeps its initial weights: load them from %s.", checkpoint)
    trainer.state = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))
    return TrainOutput(trainer.state.global_step, 0.0, {"train_runtime": 0.0, "train_steps": 0})


def save_final_model(trainer, output_dir: str | None = None) -> None:
    """Trainer's `save_model`, atomic and without an upload: written into a staging folder, fsynced, then moved in,
    weights first and `config.json` last, so that a run killed while saving its final model leaves the folder as it
    was, or with new weights files but the old (or no) config.json: never a config.json beside a half-written model.

    Trainer's own `save_model` uploads the output folder at once under `--push_to_hub`, before the job has evaluated
    (the card on the Hub would hold no results): a job pushes once at its end, `trainer.push_to_hub()`. Under FSDP
    the full weights are gathered from the shards and saved (Trainer's `save_model` writes none under FSDP's sharded
    state dict); checkpoints keep only their shards (gathering at every save would hold the whole model in one
    process's memory each time)."""
    output_dir = output_dir or trainer.args.output_dir
    staging_dir = os.path.join(output_dir, MODEL_STAGING_DIR_NAME)
    if trainer.args.should_save:
        shutil.rmtree(staging_dir, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    try:
        if trainer.is_fsdp_enabled:
            state_dict = trainer.accelerator.get_state_dict(trainer.model)  # a collective: every process takes part
            save_weights(trainer, staging_dir, state_dict)
        else:
            save_model_unpushed(trainer, staging_dir)
    except (OSError, RuntimeError) as error:  # a full disk names the file of the output folder, not the staging
        named = naming_the_destination(error, {staging_dir: Path(output_dir)})
        if named is None:
            raise
        raise named from error
    trainer.accelerator.wait_for_everyone()  # every process has written its part
    if trainer.args.should_save and os.path.isdir(staging_dir):
        fsync_tree(staging_dir)
        move_files_in(staging_dir, output_dir)
        model = trainer.accelerator.unwrap_model(trainer.model)
        if isinstance(model, AlbertPreTrainedModel):
            logger.info("%s: %s", output_dir, save_format_line(model, saved_tokenizer(trainer)))
    trainer.accelerator.wait_for_everyone()


def saved_tokenizer(trainer):
    """The tokenizer Trainer saves beside the model: `processing_class`, else the data collator's."""
    if isinstance(trainer.processing_class, PreTrainedTokenizerBase):
        return trainer.processing_class
    return getattr(trainer.data_collator, "tokenizer", None)


def failed_pushes(trainer) -> list[tuple[str, str]]:
    """(checkpoint folder, error) of every checkpoint upload of the plugin that failed."""
    uploads = UploadCompleteCheckpoints.of(trainer)
    return [] if uploads is None else uploads.failed
