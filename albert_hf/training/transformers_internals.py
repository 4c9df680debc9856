"""The private parts of transformers' `Trainer` that albert_hf relies on, all in this one module.

albert_hf builds on public hooks wherever one serves: `train()` (checks before a resume), `TrainerCallback` events
with `control` (divergence rollback, complete checkpoints and their uploads: training/callbacks.py), `save_model`
(atomic final save), `training_step` (loss checks). A few features have no public hook: resuming a stream without
reading the trained batches again, evaluating in dataset order. Those
use private Trainer names, and only here: each name is listed in [`INTERNAL_NAMES`] with what it is used for and why
no public hook serves, every access goes through a function or override of this module, and
tests/test_transformers_internals.py checks each name against the installed transformers (existence, parameters), so
that a transformers release that moves one fails a test naming it instead of silently falling back (a resume that
reads its batches again).

[`TrainerInternalHooks`] is the mixin that overrides the private methods; each override forwards to a public-named
method of the Trainer class that mixes it in (`ReliableTrainerMixin` in training/reliability.py), so that what the
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

import torch
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
    InternalName(
        "Trainer._tr_loss",
        "attribute",
        "forgetting the summed loss of the steps a divergence rollback undoes, so they never reach the next log",
        "the loss sum behind each training log is kept only here",
    ),
    InternalName(
        "Trainer._globalstep_last_logged",
        "attribute",
        "the step of the last training log, moved back with a rollback so the next log averages over the right steps",
        "no public counter of the logging window",
    ),
    InternalName(
        "Trainer._load_from_checkpoint",
        "call",
        "loading a finished run's weights when a relaunch has nothing left to train, so the job saves the trained "
        "model, not a fresh one",
        "Trainer loads checkpoint weights only inside `train()`, which would train a step",
        ("resume_from_checkpoint", "model"),
    ),
    InternalName(
        "Trainer._save",
        "call",
        "writing the gathered full weights, config and tokenizer of an FSDP model (`save_model`)",
        "the public `save_model` writes nothing under FSDP with a sharded state dict",
        ("output_dir", "state_dict"),
    ),
    InternalName(
        "Trainer._get_eval_sampler",
        "override",
        "evaluation in dataset order for the fine-tuning jobs (per-example outputs line up with their examples)",
        "`train_sampling_strategy group_by_length` also reorders evaluation, and no argument sets only the "
        "evaluation order",
        ("eval_dataset",),
    ),
    InternalName(
        "PreTrainedModel._from_config",
        "call",
        "building a fresh model from its config, already partitioned under DeepSpeed ZeRO-3 (`deepspeed.zero.Init`) "
        "and with the config's attention implementation and dtype applied, as `AutoModel.from_config` does",
        "only the Auto classes have a public `from_config`; albert_hf's job builds a given head class",
        ("config",),
    ),
    InternalName(
        "Trainer._created_lr_scheduler",
        "attribute",
        "marking a scheduler a Trainer subclass built in `create_scheduler` as Trainer's own, so a second `train()` "
        "rebuilds it as Trainer does its own",
        "no public flag; `create_scheduler` sets it only for the schedulers it builds itself",
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


def forget_unlogged_loss(trainer: Trainer, last_logged_step: int) -> None:
    """Drop the loss summed since the last training log, and count the next logging window from `last_logged_step`."""
    trainer._tr_loss = torch.zeros_like(trainer._tr_loss)
    trainer._globalstep_last_logged = last_logged_step


def load_checkpoint_weights(trainer: Trainer, checkpoint: str) -> None:
    """Trainer's own loading of a checkpoint's weights into its model."""
    Trainer._load_from_checkpoint(trainer, checkpoint)


def save_full_model(trainer: Trainer, output_dir: str, state_dict: dict[str, Any]) -> None:
    """Trainer's `_save`: weights from `state_dict`, config, tokenizer and training arguments into `output_dir`."""
    Trainer._save(trainer, output_dir, state_dict=state_dict)


def model_from_config(model_class: type[PreTrainedModel], config) -> PreTrainedModel:
    """A fresh `model_class` of `config`, built the way `AutoModel.from_config` builds one (ZeRO-3 partitioned init)."""
    return model_class._from_config(config)


def mark_scheduler_created(trainer: Trainer) -> None:
    """Tell Trainer that the scheduler a subclass built is to be rebuilt by the next `train()`, like its own."""
    trainer._created_lr_scheduler = True


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
      * `evaluation_sampler(eval_dataset)`: the evaluation sampler (default: Trainer's).
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

    # ---- data order -------------------------------------------------------------------------------------------------

    def _get_eval_sampler(self, eval_dataset):
        return self.evaluation_sampler(eval_dataset)

    def evaluation_sampler(self, eval_dataset):
        return super()._get_eval_sampler(eval_dataset)
