"""The private names of transformers and torch that albert_hf relies on, all listed in this one module (the
tokenizers library's are all public): `Trainer.save_model`'s `_internal_call` parameter, `TokenizersBackend`'s
`_tokenizer` attribute (the backend tokenizer transformers encodes with), the class FSDP2's `fully_shard` puts on a
model (`FSDP<name>`, a subclass torch defines), and the `_last_lr` key of a scheduler's state dict.

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
hook serves. tests/test_transformers_internals.py checks each name against the installed libraries (existence,
parameters) and tests what each one *does* for albert_hf (so that a release that keeps a name but changes its meaning
fails a test naming it instead of silently falling back), and checks that no class of albert_hf overrides a private
Trainer method without being listed here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from dataclasses import dataclass

import torch
import transformers
import transformers.trainer
from transformers import PreTrainedModel, TokenizersBackend, Trainer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalName:
    """One private name of transformers or torch that albert_hf touches, what for, and why no public hook serves."""

    # "Trainer._foo" / "TokenizersBackend._foo" (a method or attribute of that class), "transformers.trainer.foo" (a
    # module global) or "torch.<module>.<function>" (a torch function whose private behaviour is relied on)
    name: str
    # "override", "call", "attribute" (read/written on an instance), "module global", "torch behaviour" (a function whose
    # effect is relied on) or "torch state key" (a key of a public state_dict named after a private attribute)
    kind: str
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
        "TokenizersBackend._tokenizer",
        "attribute",
        "`AlbertHFTokenizer`'s backend (`_Backend` in tokenization.py): transformers encodes every input of every "
        "entry point through `self._tokenizer.encode_batch` / `encode`, where the backend picks, per text, the "
        "`tokenizers.Tokenizer` route that gives the original's tokens (the digit-comma and control-piece steps run "
        "in Python only on the texts they can change)",
        "`TokenizersBackend` takes its backend from this attribute only (its `tokenizer_object` argument is stored "
        "there), and `tokenizers.Tokenizer` is a Rust class that cannot be subclassed; one Tokenizer with the Python "
        "steps on every text costs 1.5x the CPU time (docs/performance.md)",
    ),
    InternalName(
        "torch.distributed.fsdp.fully_shard",
        "torch behaviour",
        "the final save under FSDP2 (`own_class` in training/reliability.py): `fully_shard` swaps the model's class "
        "for a subclass `FSDP<name>` that torch defines, so `save_pretrained` would copy torch's source as the "
        "folder's remote code; the model is saved under its own class, set back for the duration",
        "neither torch nor accelerate offers a public way back to the unsharded class; `unwrap_model` returns the "
        "same object, with the swapped class",
    ),
    InternalName(
        "torch.optim.lr_scheduler.LRScheduler._last_lr",
        "torch state key",
        "a divergence rollback's lower learning rate (`scale_learning_rate` in training/divergence.py): the key of "
        "the scheduler's public `state_dict` that `get_last_lr()` returns, set to the lowered rate so that the rate "
        "Trainer logs and the rollback event report is the one the next steps use",
        "`load_state_dict` is the scheduler's public way to change its base rates; no public setter of the last "
        "rate exists, and it is recomputed only at the next `step()`",
    ),
)


def internal_name_problem(entry: InternalName) -> str | None:
    """Why the installed transformers (or torch) does not provide `entry` as albert_hf uses it (a message naming the
    version, the name and what it is used for), or None."""
    version = transformers.__version__
    if entry.kind == "torch state key":
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        if entry.attribute in torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0).state_dict():
            return None
        return (
            f"torch {torch.__version__}: a scheduler's state_dict has no {entry.attribute}, used for {entry.used_for}."
        )
    if entry.kind == "torch behaviour":
        module_name, function = entry.name.rsplit(".", 1)
        if callable(getattr(importlib.import_module(module_name), function, None)):
            return None
        return f"torch {torch.__version__} no longer has {entry.name}, used for {entry.used_for}."
    owners = {"PreTrainedModel": PreTrainedModel, "TokenizersBackend": TokenizersBackend}
    owner = owners.get(entry.name.split(".", 1)[0], Trainer)
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
