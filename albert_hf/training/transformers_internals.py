"""The private parts of transformers' `Trainer` that albert_hf relies on, all in this one module: one parameter,
`save_model`'s `_internal_call`.

albert_hf builds on public hooks wherever one serves: `train()` (checks before a resume, a stream positioned in the
right pass), `TrainerCallback` events with `control` (complete checkpoints and their uploads: training/callbacks.py;
the non-finite loss stop and the divergence rollback: training/divergence.py; the counters of a resumed stream:
`ResumedStreamCounters` in training/trainer.py), torch's public `register_forward_hook` on the model (each training
micro-batch's loss, for those loss checks, with no `training_step` override), Trainer's public attributes
(`current_gradient_accumulation_steps`, `loss_is_scaled_for_ga`, `model_accepts_loss_kwargs`: how Trainer scales
that loss), public arguments (`ignore_data_skip` while a stream that starts after its trained batches by itself is
resumed), `save_model` (atomic final save), and a scheduler's `state_dict`/`load_state_dict` (a rollback's lower
learning rate). A resumed stream knows its own position and pass,
so Trainer's skip of trained batches (`ignore_data_skip`) is turned off through its public argument rather than by
patching the skip or overriding the training loop.

A feature that truly needs a private name lists it in [`INTERNAL_NAMES`], with what it is used for and why no public
hook serves, and reaches it only through a function of this module; tests/test_transformers_internals.py checks each
name against the installed transformers (existence, parameters), so that a transformers release that moves one fails
a test naming it instead of silently falling back, and checks that no class of albert_hf overrides a private Trainer
method without being listed here.
"""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass

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
