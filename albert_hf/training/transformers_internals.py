"""The private parts of transformers' `Trainer` that albert_hf relies on, all in this one module.

albert_hf builds on public hooks wherever one serves: `train()` (checks before a resume), `TrainerCallback` events
with `control` (divergence rollback, complete checkpoints and their uploads: training/callbacks.py), `save_model`
(atomic final save), `training_step` (loss checks). A few features have no public hook: resuming a stream without
reading the trained batches again. It
uses private Trainer names, and only here: each name is listed in [`INTERNAL_NAMES`] with what it is used for and why
no public hook serves, every access goes through a function or override of this module, and
tests/test_transformers_internals.py checks each name against the installed transformers (existence, parameters), so
that a transformers release that moves one fails a test naming it instead of silently falling back (a resume that
reads its batches again).

[`TrainerInternalHooks`] is the mixin that overrides the private methods; each override forwards to a public-named
method of the Trainer class that mixes it in (`ReliableTrainerMixin` in training/trainer.py), so that what the
feature does is written there and only the plumbing is here.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import transformers
import transformers.trainer
from transformers import PreTrainedModel, Trainer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalName:
    """One private transformers name albert_hf touches, what for, and why no public hook serves."""

    name: str  # "Trainer._foo" (a method or attribute of Trainer) or "transformers.trainer.foo" (a module global)
    kind: str  # "override", "call", "attribute" (read/written on a Trainer) or "module global"
    used_for: str
    why_no_public_hook: str
    parameters: tuple[str, ...] = ()  # the parameters albert_hf passes or receives, for methods

    @property
    def attribute(self) -> str:
        return self.name.rsplit(".", 1)[1]


INTERNAL_NAMES: tuple[InternalName, ...] = (
    InternalName(
        "Trainer.save_model",
        "override",
        "telling Trainer's own call of `save_model` inside a checkpoint save (`_internal_call=True`, the output folder "
        "a `checkpoint-N`) from a user's save: the first writes into the checkpoint, whose completeness the callbacks "
        "mark, the second is staged and moved in atomically, and only the second is pushed, as in Trainer",
        "the parameter is private, but Trainer passes it to every override of the public `save_model`; no other "
        "argument says which of the two saves is asked for",
        ("output_dir", "_internal_call"),
    ),
    InternalName(
        "Trainer._init_training_state",
        "override",
        "the pass and batch a resumed stream (no length) continues at, from the saved epoch instead of the step count",
        "`ignore_data_skip` restarts Trainer's epoch counter at 0, so every later checkpoint would save a wrong epoch",
        ("max_steps", "num_update_steps_per_epoch", "num_train_epochs", "resume_from_checkpoint", "trial"),
    ),
    InternalName(
        "Trainer._run_epoch",
        "override",
        "running the pass a positioned stream resumes in without Trainer reading the trained batches again",
        "the skip happens inside the pass, and `ignore_data_skip` also resets the counters it keeps",
        ("epoch",),
    ),
    InternalName(
        "transformers.trainer.skip_first_batches",
        "module global",
        "replaced by the identity during the one pass in which a positioned stream already starts after the batches",
        "Trainer calls accelerate's function through this module global, with no argument to turn the skip off",
    ),
)


def internal_name_problem(entry: InternalName) -> str | None:
    """Why the installed transformers does not provide `entry` as albert_hf uses it (a message naming the version,
    the name and what it is used for), or None."""
    version = transformers.__version__
    owner = PreTrainedModel if entry.name.startswith("PreTrainedModel.") else Trainer
    if entry.kind == "module global":
        found = hasattr(transformers.trainer, entry.attribute)
    elif entry.kind == "attribute":
        # Set in `__init__` or during training, so looked for in Trainer's source: `self.<name> = ...`.
        found = f"self.{entry.attribute} =" in inspect.getsource(owner)
    else:
        found = callable(getattr(owner, entry.attribute, None))
    if not found:
        return f"transformers {version} no longer has {entry.name}, used for {entry.used_for}."
    if entry.parameters:
        parameters = inspect.signature(getattr(owner, entry.attribute)).parameters
        missing = [name for name in entry.parameters if name not in parameters]
        if missing:
            return (
                f"transformers {version}: {entry.name} no longer takes {', '.join(missing)} "
                f"(its parameters: {', '.join(parameters)}), used for {entry.used_for}."
            )
    return None


@functools.cache
def warn_about_missing_internal_names() -> tuple[str, ...]:
    """Log a warning for each name of [`INTERNAL_NAMES`] the installed transformers lacks (once per process), so that
    a run on an unsupported transformers says which feature cannot work instead of silently doing without it."""
    problems = tuple(problem for entry in INTERNAL_NAMES if (problem := internal_name_problem(entry)) is not None)
    for problem in problems:
        logger.warning("%s albert_hf supports the transformers versions pyproject.toml names.", problem)
    return problems


# --------------------------------------------------------------------------------------------------------------------
# Calls and attributes
# --------------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def batches_not_skipped() -> Iterator[None]:
    """Trainer's `skip_first_batches` as the identity for the duration: for a stream that starts after them."""
    original = transformers.trainer.skip_first_batches
    transformers.trainer.skip_first_batches = lambda dataloader, num_batches=0: dataloader
    try:
        yield
    finally:
        transformers.trainer.skip_first_batches = original


# --------------------------------------------------------------------------------------------------------------------
# Overrides
# --------------------------------------------------------------------------------------------------------------------


class TrainerInternalHooks:
    """The private Trainer methods albert_hf overrides, each forwarded to a public-named method of the class.

    Put before `Trainer` among the bases (`ReliableTrainerMixin` derives from it). What the subclass may define:

      * `restored_training_position(resume_from_checkpoint, max_steps, epochs_trained, steps_trained)`: the
        (pass, batches into it) to resume at, from Trainer's.
      * `stream_starts_after_skipped_batches(epoch)`: whether in `epoch` the data already starts after the batches
        Trainer would skip.
    """

    # ---- position in the data ---------------------------------------------------------------------------------------

    def _init_training_state(
        self, max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
    ):
        epochs_trained, steps_trained = super()._init_training_state(
            max_steps, num_update_steps_per_epoch, num_train_epochs, resume_from_checkpoint, trial
        )
        return self.restored_training_position(resume_from_checkpoint, max_steps, epochs_trained, steps_trained)

    def restored_training_position(self, resume_from_checkpoint, max_steps, epochs_trained, steps_trained):
        return epochs_trained, steps_trained

    def _run_epoch(self, *args: Any, **kwargs: Any):
        epoch = kwargs.get("epoch", args[1] if len(args) > 1 else None)
        if not self.stream_starts_after_skipped_batches(epoch):
            return super()._run_epoch(*args, **kwargs)
        with batches_not_skipped():
            return super()._run_epoch(*args, **kwargs)

    def stream_starts_after_skipped_batches(self, epoch: int | None) -> bool:
        return False
