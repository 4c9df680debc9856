"""The Trainers every albert_hf job shares, each one class above `Trainer` or two, with a single base each:

  * [`AlbertTrainer`]`(Trainer)`: `transformers.Trainer` with albert_hf's callbacks attached in its `__init__`
    (complete checkpoints and their uploads, a non-finite loss stop), checked resumption, an atomic final save,
    albert_hf's model card and evaluation in dataset order. A crash must cost minutes, not the run, so every job's
    Trainer is one.
  * Where a task changes the loss or the evaluation, one class above it: `AlbertPretrainingTrainer(AlbertTrainer)`
    (MLM + SOP, LAMB; albert_hf/pretraining/trainer.py) and `SquadTrainer(AlbertTrainer)` (answer extraction and the
    official metrics; albert_hf/tasks/squad.py).

The same features on a plain `transformers.Trainer` (or any subclass), from public callbacks and functions:

    trainer = Trainer(model=..., args=..., train_dataset=..., callbacks=[CompleteCheckpoints(fingerprint_extra)])
    trainer.add_callback(UploadCompleteCheckpoints(trainer))  # --push_to_hub: marked checkpoints only
    trainer.add_callback(StopOnNonFiniteLoss(trainer))  # or guard_divergence(trainer, DivergenceGuardConfig(...))
    trainer.train(resume_from_checkpoint=resume_checkpoint(trainer, "latest"))
    write_trainer_model_card(trainer, card_info)  # albert_hf's model card in args.output_dir

(`CompleteCheckpoints`, `UploadCompleteCheckpoints`, `resume_checkpoint`: training/callbacks.py; `StopOnNonFiniteLoss`,
`guard_divergence`: training/divergence.py.) What only `AlbertTrainer` and its subclasses add: `save_model()` staged and
moved in atomically, weights checked before each checkpoint, `train(resume_from_checkpoint=True)` taking the newest
*complete* checkpoint, and a positionable training stream resumed at its saved position.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase, Trainer, TrainerCallback, TrainerState
from transformers.trainer_pt_utils import safe_globals, set_rng_state_for_device
from transformers.trainer_utils import TrainOutput, has_length

from ..hub import CardInfo, latest_eval_metrics, training_recipe, write_model_card
from ..output_files import destination, naming_the_destination, write_file, write_json
from .callbacks import CompleteCheckpoints, UploadCompleteCheckpoints
from .divergence import DivergenceGuard, RollbackDivergedSteps, StopOnNonFiniteLoss
from .model_files import load_checkpoint_weights, save_full_model
from .reliability import (
    MODEL_STAGING_DIR_NAME,
    STREAM_POSITION_NAME,
    TRAINER_STATE_NAME,
    CheckpointError,
    NonFiniteLossError,
    check_checkpoint_matches_model,
    check_fingerprint,
    checkpoint_problem,
    checkpoint_step,
    fsync_tree,
    hand_hub_token_to_environment,
    latest_checkpoint,
    move_files_in,
    non_finite_message,
    non_finite_parameters,
    own_class,
    run_fingerprint,
)
from .transformers_internals import warn_about_missing_internal_names

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------------------------
# Reliability: complete checkpoints, a non-finite loss stop, checked resumption
# --------------------------------------------------------------------------------------------------------------------


class AlbertTrainer(Trainer):
    """`transformers.Trainer` with atomic checkpoints, a non-finite loss stop, checked resumption, albert_hf's model
    card and evaluation in dataset order. Same arguments (plus `card_info`), same checkpoint layout, same resumption.

    Its `__init__` attaches the public callbacks any Trainer can use: [`CompleteCheckpoints`] marks each checkpoint
    once complete (and rotates after), [`UploadCompleteCheckpoints`] uploads marked checkpoints only (a failed upload
    is logged and never stops training: `failed_pushes`; the next save uploads again), and [`StopOnNonFiniteLoss`]
    stops at a NaN/inf loss before its update (`guard_divergence(trainer, config)` replaces it with a rollback; the
    current guard is `divergence_guard`). Limitation: DeepSpeed's own loss scale is not reported (only
    `GradScaler`'s).

    A job declares what else a resume must not change (data files, tokenizer, objective) in
    `trainer.run_fingerprint_extra`; it is saved in each checkpoint's `run_fingerprint.json` with the model config,
    optimizer and global batch, and a resume that would change any of them is refused ([`CheckpointError`]).

    The README.md that Trainer writes and pushes is albert_hf's model card ([`write_trainer_model_card`]), with the
    metadata of `card_info=CardInfo(...)` (dataset and base model). Evaluation and prediction follow the dataset's
    order: transformers applies `--train_sampling_strategy group_by_length` to evaluation as well, in a random
    length-grouped order; metrics do not mind (labels move with predictions), but per-example outputs do
    (leaderboard files, word-level NER predictions, SQuAD post-processing line predictions up with their examples).
    """

    def __init__(self, *args: Any, card_info: CardInfo | None = None, **kwargs: Any) -> None:
        hand_hub_token_to_environment(kwargs["args"] if "args" in kwargs else (args[1] if len(args) > 1 else None))
        super().__init__(*args, **kwargs)
        self.card_info = card_info
        self.complete_checkpoints = CompleteCheckpoints()
        self.checkpoint_uploads = UploadCompleteCheckpoints(self)
        self.add_callback(self.complete_checkpoints)
        self.add_callback(self.checkpoint_uploads)  # after the marking: it uploads marked checkpoints only
        self.add_callback(StopOnNonFiniteLoss(self))

    def create_model_card(self, **kwargs: Any) -> None:
        write_trainer_model_card(self, self.card_info, **kwargs)

    def save_metrics(self, split: str, metrics: dict[str, float], combined: bool = True) -> None:
        """Trainer's `save_metrics` (`<split>_results.json`, and `all_results.json` updated), through albert_hf's
        writer (`albert_hf.output_files`): atomic, and beside a user's file of the same name, never over it."""
        if not self.is_world_process_zero():
            return
        write_json(Path(self.args.output_dir, f"{split}_results.json"), metrics, indent=4, sort_keys=True)
        if combined:
            path = destination(Path(self.args.output_dir, "all_results.json"))
            combined_metrics = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            write_json(path, {**combined_metrics, **metrics}, indent=4, sort_keys=True)

    def save_state(self) -> None:
        """Trainer's `save_state` (`trainer_state.json` of the output folder) through albert_hf's writer."""
        if self.is_world_process_zero():
            state = json.dumps(dataclasses.asdict(self.state), indent=2, sort_keys=True) + "\n"
            write_file(Path(self.args.output_dir, TRAINER_STATE_NAME), state)

    def get_eval_dataloader(self, eval_dataset=None):
        with self._sampling_in_dataset_order():
            return super().get_eval_dataloader(eval_dataset)

    def get_test_dataloader(self, test_dataset):
        with self._sampling_in_dataset_order():
            return super().get_test_dataloader(test_dataset)

    @contextlib.contextmanager
    def _sampling_in_dataset_order(self) -> Iterator[None]:
        """`train_sampling_strategy` "sequential" while an evaluation or test loader is built.

        Trainer picks the evaluation sampler from the training strategy, and no argument sets the evaluation order
        alone; "sequential" is the one strategy that keeps the dataset's order. Then one process reads in order,
        several get sequential shards from accelerate, whose gather restores the order. The training loader is built
        apart from these two, so it keeps the strategy asked for.
        """
        strategy = self.args.train_sampling_strategy
        self.args.train_sampling_strategy = "sequential"
        try:
            yield
        finally:
            self.args.train_sampling_strategy = strategy

    @property
    def run_fingerprint_extra(self) -> dict[str, Any]:
        """Job options a resume must keep (JSON-serializable values), e.g. {"train_files": [...], "tokenizer": ...}:
        those of the [`CompleteCheckpoints`] callback, which saves them in each checkpoint."""
        return self.complete_checkpoints.fingerprint_extra

    @run_fingerprint_extra.setter
    def run_fingerprint_extra(self, extra: dict[str, Any]) -> None:
        self.complete_checkpoints.fingerprint_extra = dict(extra or {})

    @property
    def failed_pushes(self) -> list[tuple[str, str]]:
        """(checkpoint folder, error) of every checkpoint upload that failed."""
        return self.checkpoint_uploads.failed

    @property
    def divergence_guard(self) -> DivergenceGuard | None:
        """The divergence guard of the current (or last) run, when `guard_divergence` was applied, else None."""
        callback = RollbackDivergedSteps.of(self)
        return None if callback is None else callback.guard

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any):
        """Trainer's `train`, after checking the checkpoint to resume from against the model and the run's options.

        `resume_from_checkpoint=True` means the newest *complete* checkpoint (see [`latest_checkpoint`]). A run that
        already reached `--max_steps` in that checkpoint is not trained further: its weights are loaded (so that a
        following `save_model` writes the trained model) and the call returns.
        """
        warn_about_missing_internal_names()
        if resume_from_checkpoint is True:
            resume_from_checkpoint = latest_checkpoint(self.args.output_dir, marked=True)
            if resume_from_checkpoint is None:
                raise CheckpointError(f"No complete checkpoint in {self.args.output_dir} to resume from.")
        if resume_from_checkpoint:
            resume_from_checkpoint = os.fspath(resume_from_checkpoint)
            step = self._check_resume(resume_from_checkpoint)
            if 0 < self.args.max_steps <= step:
                return self._nothing_left_to_train(resume_from_checkpoint, step)
            logger.info("Resuming from %s (step %d).", resume_from_checkpoint, step)
        with self._stream_resumed(resume_from_checkpoint or None):
            return super().train(resume_from_checkpoint or None, *args, **kwargs)

    def _check_resume(self, checkpoint: str) -> int:
        """Raise [`CheckpointError`] naming the file if `checkpoint` cannot be resumed here; its global step."""
        problem = checkpoint_problem(checkpoint, world_size=self.args.world_size)
        if problem is not None:
            raise CheckpointError(f"Cannot resume from {checkpoint}: {problem}.")
        if not (self.is_fsdp_enabled or self.is_deepspeed_enabled):  # those load (and check) their own shards
            check_checkpoint_matches_model(checkpoint, self.accelerator.unwrap_model(self.model))
        self._check_fingerprint(checkpoint)
        return TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME)).global_step

    def _check_fingerprint(self, checkpoint: str) -> None:
        check_fingerprint(checkpoint, run_fingerprint(self))

    def _nothing_left_to_train(self, checkpoint: str, step: int) -> TrainOutput:
        """A finished run relaunched: its state and weights from `checkpoint`, no training step."""
        logger.info(
            "%s: already trained for %d steps (--max_steps %d): nothing to train.",
            checkpoint,
            step,
            self.args.max_steps,
        )
        if not (self.is_fsdp_enabled or self.is_deepspeed_enabled):
            load_checkpoint_weights(self, checkpoint)
        else:
            logger.warning("Under DeepSpeed/FSDP the model keeps its initial weights: load them from %s.", checkpoint)
        self.state = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))
        return TrainOutput(self.state.global_step, 0.0, {"train_runtime": 0.0, "train_steps": 0})

    # ---- checkpoints ------------------------------------------------------------------------------------------------

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """Trainer's save, atomic: written into a staging folder, fsynced, then moved in, `config.json` last.

        A run killed while saving its final model leaves the folder as it was, or with new weights files but the old
        (or no) config.json: never a config.json beside a half-written model. The files of a checkpoint are already
        complete once marked (training/callbacks.py), so they are not staged. Under FSDP: see `_save_fsdp_model`.
        """
        if _internal_call and output_dir is not None and checkpoint_step(output_dir) is not None:
            return self._save_checkpoint_model(output_dir)
        output_dir = output_dir or self.args.output_dir
        staging_dir = os.path.join(output_dir, MODEL_STAGING_DIR_NAME)
        if self.args.should_save:
            shutil.rmtree(staging_dir, ignore_errors=True)
        self.accelerator.wait_for_everyone()
        try:
            self._save_model_files(staging_dir)
        except (OSError, RuntimeError) as error:  # a full disk names the file of the output folder, not the staging
            named = naming_the_destination(error, {staging_dir: Path(output_dir)})
            if named is None:
                raise
            raise named from error
        self.accelerator.wait_for_everyone()  # every process has written its part
        if self.args.should_save and os.path.isdir(staging_dir):
            fsync_tree(staging_dir)
            move_files_in(staging_dir, output_dir)
        self.accelerator.wait_for_everyone()
        if self.args.push_to_hub and not _internal_call:  # as Trainer's save_model: a user's save is pushed
            self.push_to_hub(commit_message="Model save", revision=self.args.hub_revision)
        return None

    def _save_checkpoint_model(self, checkpoint_dir: str) -> None:
        """The model part of Trainer's checkpoint save, which begins with it: the weights are checked first (a
        checkpoint never holds NaN/inf weights), and the stream's position is written beside them. The checkpoint
        becomes complete once [`CompleteCheckpoints`] marks it, after Trainer wrote the rest, so nothing is staged."""
        self._check_parameters_before_save()
        self._save_model_files(checkpoint_dir, checkpoint=True)
        if self.args.should_save:
            self._save_stream_position(checkpoint_dir)

    def _save_model_files(self, output_dir: str | None, checkpoint: bool = False) -> None:
        """Trainer's save; under FSDP, the gathered full weights saved under the model's own class.

        Under FSDP with a sharded state dict Trainer's `save_model` writes nothing (a checkpoint's shards are written
        apart from it), so a run's final model would not exist for `from_pretrained`; checkpoints keep only their
        shards (gathering at every save would hold the whole model in one process's memory each time). And FSDP2
        swaps the model's class for a subclass `FSDP<name>` defined in torch, so `save_pretrained` would copy torch's
        FSDP source files as the folder's remote code instead of albert_hf's modeling.py.
        """
        if not self.is_fsdp_enabled:
            return super().save_model(output_dir, _internal_call=True)
        full = "FULL_STATE_DICT" in str(self.accelerator.state.fsdp_plugin.state_dict_type)
        if checkpoint and not full:
            return None
        state_dict = self.accelerator.get_state_dict(self.model)  # a collective: every process takes part
        with own_class(self.accelerator.unwrap_model(self.model)):
            save_full_model(self, output_dir or self.args.output_dir, state_dict)
        return None

    def _check_parameters_before_save(self) -> None:
        bad = non_finite_parameters(self.model)
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            raise NonFiniteLossError(non_finite_message(self, f"parameters {shown} hold NaN/inf", saving=True))

    # ---- position in a stream ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _stream_resumed(self, checkpoint: str | None) -> Iterator[None]:
        """For the duration of a resumed `train()`: a positionable training stream (no length) starts itself after
        the batches trained on, in the right pass, and Trainer is told to skip nothing (`ignore_data_skip`, restored
        afterwards), its counters kept right by [`ResumedStreamCounters`].

        A stream has no length, so Trainer counts `max_steps` updates per pass and resumes by skipping `global_step` x
        accumulation batches of the *first* pass: once the run has read the stream more than once, that skip runs off
        the end of the first pass and training restarts at the second pass (data seen again, the rest never).
        Trainer's saved `epoch` is `pass + batches read in this pass / (max_steps x accumulation)`, which gives the pass
        (also the shuffle's epoch) and the batches to skip within it. The stream skips them from the position saved in
        the checkpoint (one window read), or else by reading the pass again up to there (`_position_stream`; always under
        several processes, which save no position). Any other stream is resumed by Trainer's own skip (a warning says
        when that is wrong: past the first pass).
        """
        stream = self._positionable_stream(resuming=True)
        if checkpoint is None or self.args.ignore_data_skip or has_length(self.train_dataset):
            yield
            return
        saved = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))
        passes, batches = self._stream_batches_read(saved.epoch or 0.0, saved.max_steps)
        if stream is None:
            if passes > 0:
                logger.warning(
                    "%s is in pass %d of the training stream, which cannot be positioned here: Trainer resumes a "
                    "stream in its first pass, so this resume does not continue where the run stopped.",
                    checkpoint,
                    passes,
                )
            yield
            return
        # Under several processes accelerate reads the stream in the main process, `world_size` batches per step.
        per_batch = (saved.train_batch_size or self._batch_size()) * self.args.world_size
        self._position_stream(checkpoint, stream, passes, batches * per_batch)
        if stream.finished_resumed_pass():  # the checkpoint was at the end of its pass: the next one, from its start
            passes, batches = passes + 1, 0
        stream.count_passes_from(passes)
        counters = ResumedStreamCounters(checkpoint, passes, batches)
        self.add_callback(counters)
        self.args.ignore_data_skip = True
        try:
            yield
        finally:
            self.args.ignore_data_skip = False
            self.remove_callback(counters)
            stream.count_passes_from(0)

    def _stream_batches_read(self, epoch: float, max_steps: int | None = None) -> tuple[int, int]:
        """(pass, batches read in it) from Trainer's `epoch` (see `_stream_resumed`)."""
        batches_per_epoch = (max_steps or self.state.max_steps) * self.args.gradient_accumulation_steps
        passes = int(epoch)
        return passes, round((epoch - passes) * batches_per_epoch)

    def _positionable_stream(self, resuming: bool = False) -> Any | None:
        """The training set if it is a stream whose position can be saved and restored here, else None.

        Such a stream (e.g. `ResumableInstanceStream`) has `position_state(pass, instances consumed)`,
        `resume_from_state(state, pass, instances consumed)`, `read_again_until(pass, instances consumed)`,
        `finished_resumed_pass()` and `count_passes_from(pass)`, and must be read as `stream_position_obstacle` says. Otherwise Trainer's own skip
        resumes it (`_stream_resumed`). `resuming`: several processes are allowed when accelerate dispatches to each
        its part of `world_size` batches the main process reads (its default for a stream, without `split_batches`):
        every process's stream is then started after the instances trained on, read again (no position is saved).
        """
        from ..data.instance_stream import stream_position_obstacle

        dataset = self.train_dataset
        methods = (
            "position_state",
            "resume_from_state",
            "read_again_until",
            "finished_resumed_pass",
            "count_passes_from",
        )
        if not all(hasattr(dataset, name) for name in methods):
            return None
        world_size = 1 if resuming and self._stream_dispatched() else self.args.world_size
        if stream_position_obstacle(world_size, self.args.dataloader_num_workers) is not None:
            return None
        return dataset

    def _stream_dispatched(self) -> bool:
        """Whether accelerate reads the training stream in the main process alone and sends each process its part
        of the batches (`dispatch_batches`, its default for an IterableDataset)."""
        config = self.args.accelerator_config
        return config.dispatch_batches is not False and not config.split_batches

    def _save_stream_position(self, checkpoint_dir: str) -> None:
        """Write the position of a positionable training stream into the checkpoint being saved."""
        stream = self._positionable_stream()
        if stream is None or self.state.epoch is None:
            return
        passes, batches = self._stream_batches_read(self.state.epoch)
        state = stream.position_state(passes, batches * self._batch_size())
        if state is None:
            logger.warning(
                "The training stream cannot tell its position after %d batches of pass %d: resuming from this "
                "checkpoint reads them again.",
                batches,
                passes,
            )
            return
        with open(os.path.join(checkpoint_dir, STREAM_POSITION_NAME), "w", encoding="utf-8") as handle:
            json.dump(state, handle, indent=1)

    def _position_stream(self, checkpoint: str, stream: Any, passes: int, consumed: int) -> None:
        """Start the training stream after `consumed` instances of pass `passes`: from the checkpoint's saved position
        (one window read), else by reading the pass again up to there (a warning or log line says why)."""
        if consumed == 0:
            return
        path = os.path.join(checkpoint, STREAM_POSITION_NAME)
        if not os.path.isfile(path):
            logger.info(
                "%s holds no stream position: the %d instances trained on are read again.", checkpoint, consumed
            )
            stream.read_again_until(passes, consumed)
            return
        try:
            with open(path, encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            state, problem = None, f"it is unreadable ({error})"
        if state is not None:
            problem = stream.resume_from_state(state, passes, consumed)
        if problem is not None:
            logger.warning(
                "Not resuming the stream from %s: %s. The %d instances are read again.", path, problem, consumed
            )
            stream.read_again_until(passes, consumed)
            return
        logger.info(
            "The training stream resumes at the position saved in %s (pass %d, instance %d).", path, passes, consumed
        )

    def _batch_size(self) -> int:
        """Instances per training batch in this process (Trainer's, as recorded in its state once training runs)."""
        return self.state.train_batch_size or self.args.train_batch_size


class ResumedStreamCounters(TrainerCallback):
    """What Trainer would count had it skipped the trained batches of a stream itself, for a run resumed with
    `ignore_data_skip` in pass `first_pass` after `batches` batches of it, the stream starting after them by itself.

    Trainer then counts the pass it resumes in as its pass 0 and its batches from 0; this writes back, from Trainer's
    public events:

      * the `epoch` of each step (saved in checkpoints and logs): `pass + batches read in the pass / (max_steps x
        accumulation)`, the arithmetic of Trainer's own, so the same float;
      * the RNG states of the checkpoint, once the first new batch is read (as Trainer's skip does): Trainer restores
        them before it makes the pass's iterator, which draws a seed from torch's generator, so dropout would differ.
        A run resumed at the start of a pass (`batches` 0) keeps Trainer's restore: the uninterrupted run drew that
        seed after the checkpoint too.
    """

    def __init__(self, checkpoint: str, first_pass: int, batches: int):
        self.checkpoint, self.first_pass, self.batches = checkpoint, first_pass, batches
        self.trainer_pass = -1  # Trainer's count of passes since the resume
        self.read = 0  # micro-batches read in Trainer's current pass

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.trainer_pass, self.read = self.trainer_pass + 1, 0

    def on_step_begin(self, args, state, control, **kwargs):
        if self.trainer_pass == 0 and self.read == 0 and self.batches > 0:
            restore_rng_states(self.checkpoint, args.process_index if args.world_size > 1 else None)

    def on_substep_end(self, args, state, control, **kwargs):
        self.read += 1

    def on_step_end(self, args, state, control, **kwargs):
        self.read += 1
        before = self.batches if self.trainer_pass == 0 else 0
        state.epoch = (
            self.first_pass
            + self.trainer_pass
            + (before + self.read) / (state.max_steps * args.gradient_accumulation_steps)
        )


def restore_rng_states(checkpoint: str, process_index: int | None = None) -> None:
    """The Python, NumPy, torch and CUDA RNG states Trainer saved in `checkpoint` (`rng_state.pth`, or of process
    `process_index` of several `rng_state_<index>.pth`), as Trainer restores them on resume; nothing if there is no
    such file (Trainer then logs that)."""
    name = "rng_state.pth" if process_index is None else f"rng_state_{process_index}.pth"
    path = os.path.join(checkpoint, name)
    if not os.path.isfile(path):
        return
    with safe_globals():
        states = torch.load(path, weights_only=True)
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.random.set_rng_state(states["cpu"])
    if torch.cuda.is_available() and "cuda" in states:
        set_rng_state_for_device("CUDA", torch.cuda, states, False)


# --------------------------------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------------------------------


def write_trainer_model_card(
    trainer: Trainer,
    card_info: CardInfo | None = None,
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
    """Write albert_hf's model card as the README.md of `trainer.args.output_dir` (on the main process only):
    architecture, recipe from `trainer.args`, results from the eval logs. albert_hf's Trainers call it from their
    `create_model_card` (and so from `push_to_hub` and `--push_to_hub`); a plain Trainer's job calls it itself.

    Trainer's `create_model_card` arguments keep their meaning: `dataset_tags` -> dataset id, `dataset_args` -> dataset
    config, `dataset` -> display name, `finetuned_from` -> base model, `license`, `language`, `tags`. Defaults for all
    of them come from `card_info` (e.g. set once by a task script). `tasks` is not needed: the pipeline tag follows from
    the model's head.
    """
    if not trainer.is_world_process_zero():
        return
    info = _merge_card_info(
        card_info or CardInfo(),
        language=language,
        license=license,
        tags=tags,
        finetuned_from=finetuned_from,
        dataset_tags=dataset_tags,
        dataset=dataset,
        dataset_args=dataset_args,
    )
    model = trainer.accelerator.unwrap_model(trainer.model)
    write_model_card(
        trainer.args.output_dir,
        model,
        # The full repository id, when pushing, so the card's loading snippet works as written.
        model_name=trainer.hub_model_id or model_name or Path(trainer.args.output_dir).resolve().name,
        info=info,
        # Every evaluation the run logged (eval_results.json holds the last); the card's model-index reports them
        # only against a Hub dataset, its text always.
        eval_metrics=latest_eval_metrics(trainer.state.log_history),
        # The run as trained: the optimizer and schedule objects that ran (pretraining builds LAMB itself, so
        # `--optim` need not name it), and the steps taken; before training, what the arguments say.
        recipe=training_recipe(
            trainer.args,
            optimizer=trainer.optimizer,
            lr_scheduler=trainer.lr_scheduler,
            steps_trained=trainer.state.global_step or None,
        ),
        tokenizer=trainer.processing_class if isinstance(trainer.processing_class, PreTrainedTokenizerBase) else None,
    )


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
