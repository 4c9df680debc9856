"""Exact resume of a training stream: [`ResumableStream`], a piece of the reliability plugin that saves a
positionable stream's position in each checkpoint and starts the stream of a resumed run after the batches trained on,
in the right pass, so that Trainer skips nothing. A job that trains on such a stream attaches it with the rest of the
plugin: `attach_reliability(trainer, callbacks=[ResumableStream(trainer)])` (the pretraining jobs do).

A stream has no length, so Trainer counts `max_steps` updates per pass and resumes by skipping `global_step` x
accumulation batches of the *first* pass: once the run has read the stream more than once, that skip runs off the end
of the first pass and training restarts at the second pass (data seen again, the rest never). Trainer's saved `epoch`
is `pass + batches read in this pass / (max_steps x accumulation)`, which gives the pass (also the shuffle's epoch) and
the batches to skip within it. The stream skips them from the position saved in the checkpoint (one window read), or
else by reading the pass again up to there (always under several processes, which save no position). Any other stream
is resumed by Trainer's own skip (a warning says when that is wrong: past the first pass). docs/reliability.md
describes the stream and what a resume costs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator
from typing import Any

from transformers import TrainerCallback, TrainerState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, has_length

from .callbacks import CompleteCheckpoints
from .reliability import STREAM_POSITION_NAME, TRAINER_STATE_NAME
from .transformers_internals import load_rng_state

logger = logging.getLogger(__name__)

# What a training stream must offer to be resumed at its position (e.g. `ResumableInstanceStream`).
POSITION_METHODS = (
    "position_state",
    "resume_from_state",
    "read_again_until",
    "finished_resumed_pass",
    "count_passes_from",
)


class ResumableStream(TrainerCallback):
    """Saves the position of a positionable training stream in each checkpoint (`stream_position.json`, written in
    `on_save` before [`CompleteCheckpoints`] marks the checkpoint, so it counts with it), and [`resumed`] starts the
    stream of a resumed run after the batches trained on (`resume_training` enters it around `train()`).

    Such a stream (e.g. `ResumableInstanceStream`) has `position_state(pass, instances consumed)`,
    `resume_from_state(state, pass, instances consumed)`, `read_again_until(pass, instances consumed)`,
    `finished_resumed_pass()` and `count_passes_from(pass)`, and must be read as `stream_position_obstacle` says.
    """

    def __init__(self, trainer):
        self.trainer = trainer

    @staticmethod
    def of(trainer) -> ResumableStream | None:
        return next((c for c in trainer.callback_handler.callbacks if isinstance(c, ResumableStream)), None)

    def attach_to(self, trainer) -> ResumableStream:
        """Register it on `trainer` (what `attach_reliability` asks of each piece it is given), before the callback
        that marks checkpoints complete ([`CompleteCheckpoints`]): the position is part of the checkpoint it marks.
        One already attached stays."""
        existing = ResumableStream.of(trainer)
        if existing is not None:
            return existing
        callbacks = trainer.callback_handler.callbacks
        marking = [i for i, registered in enumerate(callbacks) if isinstance(registered, CompleteCheckpoints)]
        callbacks.insert(marking[0] if marking else len(callbacks), self)
        return self

    # ---- saving the position ----------------------------------------------------------------------------------------

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if not args.should_save or not os.path.isdir(folder):
            return
        stream = self.positionable_stream()
        if stream is None or state.epoch is None:
            return
        passes, batches = self.batches_read(state.epoch)
        position = stream.position_state(passes, batches * self.batch_size())
        if position is None:
            logger.warning(
                "The training stream cannot tell its position after %d batches of pass %d: resuming from this "
                "checkpoint reads them again.",
                batches,
                passes,
            )
            return
        with open(os.path.join(folder, STREAM_POSITION_NAME), "w", encoding="utf-8") as handle:
            json.dump(position, handle, indent=1)

    # ---- resuming ---------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def resumed(self, checkpoint: str | None) -> Iterator[None]:
        """For the duration of a resumed `train()`: a positionable training stream starts itself after the batches
        trained on, in the right pass, and Trainer is told to skip nothing (`ignore_data_skip`, restored afterwards),
        its counters kept right by [`ResumedStreamCounters`]."""
        trainer = self.trainer
        stream = self.positionable_stream(resuming=True)
        if checkpoint is None or trainer.args.ignore_data_skip or has_length(trainer.train_dataset):
            yield
            return
        saved = TrainerState.load_from_json(os.path.join(checkpoint, TRAINER_STATE_NAME))
        passes, batches = self.batches_read(saved.epoch or 0.0, saved.max_steps)
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
        per_batch = (saved.train_batch_size or self.batch_size()) * trainer.args.world_size
        position_stream(checkpoint, stream, passes, batches * per_batch)
        if stream.finished_resumed_pass():  # the checkpoint was at the end of its pass: the next one, from its start
            passes, batches = passes + 1, 0
        stream.count_passes_from(passes)
        counters = ResumedStreamCounters(trainer, checkpoint, passes, batches)
        trainer.add_callback(counters)
        trainer.args.ignore_data_skip = True
        try:
            yield
        finally:
            trainer.args.ignore_data_skip = False
            trainer.remove_callback(counters)
            stream.count_passes_from(0)

    # ---- the stream and its counts ----------------------------------------------------------------------------------

    def positionable_stream(self, resuming: bool = False) -> Any | None:
        """The training set if it is a stream whose position can be saved and restored here, else None.

        `resuming`: several processes are allowed when accelerate dispatches to each its part of `world_size`
        batches the main process reads (its default for a stream, without `split_batches`): every process's stream
        is then started after the instances trained on, read again (no position is saved)."""
        from ..data.instance_stream import stream_position_obstacle

        trainer = self.trainer
        if not all(hasattr(trainer.train_dataset, name) for name in POSITION_METHODS):
            return None
        world_size = 1 if resuming and self.dispatched() else trainer.args.world_size
        if stream_position_obstacle(world_size, trainer.args.dataloader_num_workers) is not None:
            return None
        return trainer.train_dataset

    def dispatched(self) -> bool:
        """Whether accelerate reads the training stream in the main process alone and sends each process its part
        of the batches (`dispatch_batches`, its default for an IterableDataset)."""
        config = self.trainer.args.accelerator_config
        return config.dispatch_batches is not False and not config.split_batches

    def batches_read(self, epoch: float, max_steps: int | None = None) -> tuple[int, int]:
        """(pass, batches read in it) from Trainer's `epoch` (see the module docstring)."""
        trainer = self.trainer
        batches_per_epoch = (max_steps or trainer.state.max_steps) * trainer.args.gradient_accumulation_steps
        passes = int(epoch)
        return passes, round((epoch - passes) * batches_per_epoch)

    def batch_size(self) -> int:
        """Instances per training batch in this process (Trainer's, as recorded in its state once training runs)."""
        return self.trainer.state.train_batch_size or self.trainer.args.train_batch_size


def position_stream(checkpoint: str, stream: Any, passes: int, consumed: int) -> None:
    """Start the training stream after `consumed` instances of pass `passes`: from the checkpoint's saved position
    (one window read), else by reading the pass again up to there (a warning or log line says why)."""
    if consumed == 0:
        return
    path = os.path.join(checkpoint, STREAM_POSITION_NAME)
    if not os.path.isfile(path):
        logger.info("%s holds no stream position: the %d instances trained on are read again.", checkpoint, consumed)
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
        logger.warning("Not resuming the stream from %s: %s. The %d instances are read again.", path, problem, consumed)
        stream.read_again_until(passes, consumed)
        return
    logger.info(
        "The training stream resumes at the position saved in %s (pass %d, instance %d).", path, passes, consumed
    )


class ResumedStreamCounters(TrainerCallback):
    """What Trainer would count had it skipped the trained batches of a stream itself, for a run resumed with
    `ignore_data_skip` in pass `first_pass` after `batches` batches of it, the stream starting after them by itself.

    Trainer then counts the pass it resumes in as its pass 0 and its batches from 0; this writes back, from Trainer's
    public events:

      * the `epoch` of each step (saved in checkpoints and logs): `pass + batches read in the pass / (max_steps x
        accumulation)`, the arithmetic of Trainer's own, so the same float;
      * the RNG states of the checkpoint, once the first new batch is read, as Trainer's skip does (Trainer's own
        restore, `load_rng_state`): Trainer restores them before it makes the pass's iterator, which draws a seed from
        torch's generator, so dropout would differ. A run resumed at the start of a pass (`batches` 0) keeps
        Trainer's restore: the uninterrupted run drew that seed after the checkpoint too.
    """

    def __init__(self, trainer, checkpoint: str, first_pass: int, batches: int):
        self.trainer, self.checkpoint, self.first_pass, self.batches = trainer, checkpoint, first_pass, batches
        self.trainer_pass = -1  # Trainer's count of passes since the resume
        self.read = 0  # micro-batches read in Trainer's current pass

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.trainer_pass, self.read = self.trainer_pass + 1, 0

    def on_step_begin(self, args, state, control, **kwargs):
        if self.trainer_pass == 0 and self.read == 0 and self.batches > 0:
            load_rng_state(self.trainer, self.checkpoint)

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
