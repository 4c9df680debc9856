"""The private names of other libraries that albert_hf relies on, all listed in this one module with what each is for,
and the functions through which the package calls transformers' private Trainer methods.

albert_hf builds on public hooks wherever one serves: `TrainerCallback` events with `control` (complete checkpoints,
their uploads, the loss checks, the divergence rollback, the SIGTERM checkpoint, a resumed stream: the reliability
plugin of training/callbacks.py), torch's public `register_forward_hook` (each training micro-batch's loss) and
`register_load_state_dict_pre_hook`, Trainer's public attributes and arguments, and a scheduler's public
`state_dict`/`load_state_dict`. Where Trainer already does a thing right, the plugin asks Trainer to do it, through the
functions below, rather than keeping a copy of its code that would drift with every release: its RNG restore
([`load_rng_state`]), its weights loading ([`load_checkpoint_weights`]), its upload of a checkpoint
([`push_checkpoint`]), its save of given weights ([`save_weights`]) and its save without an upload
([`save_model_unpushed`]).

Each name is an [`InternalName`] of [`INTERNAL_NAMES`]: what it is used for and why no public hook serves.
tests/test_transformers_internals.py checks each one against the installed libraries (existence, parameters), tests
what each one *does* for albert_hf (so that a release that keeps a name but changes its meaning fails a test naming
it instead of silently falling back), checks that no module but this one calls or overrides a private Trainer method,
and scans the package for any `_name` of an object albert_hf does not own that is not registered here.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from dataclasses import dataclass
from typing import Any

import torch
import transformers
import transformers.trainer
from transformers import PreTrainedConfig, PreTrainedModel, TokenizersBackend, Trainer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalName:
    """One private name of another library that albert_hf touches, what for, and why no public route serves."""

    # "<Class>._foo" (a method or attribute of that class: Trainer, TokenizersBackend, PreTrainedModel,
    # PreTrainedConfig, datasets' Dataset, DeepSpeed's parameters), "transformers.trainer.foo" (a module global) or
    # "torch.<module>.<function>" (a torch function whose private behaviour is relied on)
    name: str
    # "call" (a private method albert_hf calls, through a function of this module), "attribute" (read or written on
    # an instance), "class attribute", "module global", "torch behaviour" (a function whose effect is relied on),
    # "torch state key" (a key of a public state_dict named after a private attribute), "datasets attribute" or
    # "deepspeed attribute"
    kind: str
    used_for: str
    why_no_public_hook: str
    parameters: tuple[str, ...] = ()  # the parameters albert_hf passes, for methods

    @property
    def attribute(self) -> str:
        return self.name.rsplit(".", 1)[1]


INTERNAL_NAMES: tuple[InternalName, ...] = (
    InternalName(
        "Trainer.save_model",
        "call",
        "a job's final save (`save_final_model`, training/callbacks.py) into a staging folder, moved in once "
        "complete: `_internal_call=True` keeps Trainer's save from pushing to the Hub, which it does at every other "
        "call with --push_to_hub, before the job has evaluated (the card would hold no results); the job pushes "
        "once, at its end",
        "the parameter is private; `save_model` is the one save that covers every engine (DeepSpeed's gathered "
        "16-bit weights included), and no public argument turns its upload off",
        ("output_dir", "_internal_call"),
    ),
    InternalName(
        "Trainer._save",
        "call",
        "the final save under FSDP of the full weights gathered from the shards ([`save_weights`]): what Trainer's "
        "own final save writes (weights and config, the tokenizer, the training arguments)",
        "`save_model` writes nothing under FSDP's sharded state dict (the default of FSDP2), so a run's final model "
        "would not exist for `from_pretrained`",
        ("output_dir", "state_dict"),
    ),
    InternalName(
        "Trainer._load_from_checkpoint",
        "call",
        "a finished run relaunched ([`load_checkpoint_weights`]): its checkpoint's weights loaded with no step "
        "trained, so that the job's final save writes the trained model",
        "Trainer loads a checkpoint's weights only inside `train()`, which on a finished run trains one step past "
        "`max_steps` (tests/test_reliability.py shows it)",
        ("resume_from_checkpoint",),
    ),
    InternalName(
        "Trainer._load_rng_state",
        "call",
        "a stream resumed at its saved position ([`load_rng_state`], training/stream_resume.py): the checkpoint's "
        "RNG states once the first new batch is read, where Trainer's own skip of the trained batches restores them",
        "Trainer restores them from a public path only before it makes the pass's iterator, which draws a seed from "
        "torch's generator: dropout would then differ from the uninterrupted run's",
        ("checkpoint",),
    ),
    InternalName(
        "Trainer._push_from_checkpoint",
        "call",
        "`--push_to_hub` uploads of checkpoints once they are marked complete ([`push_checkpoint`], "
        "`UploadCompleteCheckpoints`): Trainer's own upload, asked for from `on_save`",
        "Trainer starts it inside its checkpoint save, before `on_save`, i.e. before the checkpoint is marked: the "
        "upload would read a checkpoint a kill can still leave unmarked, without its marker",
        ("checkpoint_folder",),
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
        "PreTrainedConfig._attn_implementation",
        "class attribute",
        "the attention kernel a forward pass runs (`attention_implementation` in modeling.py), read as every "
        "modeling file of transformers reads it",
        "the config has no public getter of the implementation; it is set publicly (`attn_implementation=` when a "
        "config or model is made, `set_attn_implementation` on a model), and modeling.py never writes it",
    ),
    InternalName(
        "PreTrainedModel._auto_class",
        "class attribute",
        "`save_pretrained` of modeling.py: the `auto_map` of every head is written only when albert_hf registered "
        "its classes (`register_for_auto_class`, `import albert_hf`), which is what sets it",
        "transformers has no public getter of a class's registration; `save_pretrained` itself reads this attribute "
        "to copy the remote code",
    ),
    InternalName(
        "torch.distributed.fsdp.fully_shard",
        "torch behaviour",
        "every save of a model under FSDP2 (`save_pretrained` of modeling.py): `fully_shard` swaps the model's class "
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
    InternalName(
        "Dataset._fingerprint",
        "datasets attribute",
        "the fingerprint of a `map` over tokenized text (`map_fingerprint` in data/caching.py) starts from the "
        "input's, as `map` itself derives it",
        "`datasets` has no public name for a dataset's fingerprint; `map` reads this attribute",
    ),
    InternalName(
        "deepspeed.runtime.zero.stage_1_and_2._hp_mapping",
        "deepspeed attribute",
        "LAMB under ZeRO-1/2 (training/lamb_deepspeed.py): where each tensor's slice lies in the flat fp32 "
        "partition ZeRO gives the optimizer, so that each trust ratio is that of a whole tensor",
        "DeepSpeed has no public API for the layout of its partitions; `deepspeed.utils.safe_get_local_fp32_param` "
        "gives a slice's values, not its place",
    ),
)


def internal_name_problem(entry: InternalName) -> str | None:
    """Why the installed libraries do not provide `entry` as albert_hf uses it (a message naming the version, the
    name and what it is used for), or None. (DeepSpeed's name is checked only where DeepSpeed is installed.)"""
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
    if entry.kind == "datasets attribute":
        import datasets

        if isinstance(getattr(datasets.Dataset.from_dict({"a": [1]}), entry.attribute, None), str):
            return None
        return f"datasets {datasets.__version__}: a Dataset has no {entry.attribute}, used for {entry.used_for}."
    if entry.kind == "deepspeed attribute":
        try:
            module = importlib.import_module(entry.name.rsplit(".", 1)[0])
        except ImportError:
            return None  # not installed: the feature cannot run, and says so itself
        if f"{entry.attribute} =" in inspect.getsource(module):
            return None
        return f"deepspeed no longer sets {entry.attribute}, used for {entry.used_for}."
    owners = {
        "PreTrainedModel": PreTrainedModel,
        "PreTrainedConfig": PreTrainedConfig,
        "TokenizersBackend": TokenizersBackend,
    }
    owner = owners.get(entry.name.split(".", 1)[0], Trainer)
    if entry.kind == "module global":
        found = hasattr(transformers.trainer, entry.attribute)
    elif entry.kind == "attribute":
        # Set in `__init__` or during training, so looked for in the class's source: `self.<name> = ...`.
        found = f"self.{entry.attribute} =" in inspect.getsource(owner)
    elif entry.kind == "class attribute":
        found = hasattr(owner, entry.attribute)
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
    """Log a warning for each name of [`INTERNAL_NAMES`] the installed libraries lack (once per process), so that
    a run on an unsupported transformers says which feature cannot work instead of silently doing without it."""
    problems = tuple(problem for entry in INTERNAL_NAMES if (problem := internal_name_problem(entry)) is not None)
    for problem in problems:
        logger.warning("%s albert_hf supports the transformers versions pyproject.toml names.", problem)
    return problems


# --------------------------------------------------------------------------------------------------------------------
# The private Trainer methods albert_hf calls, one function each (see INTERNAL_NAMES for why)
# --------------------------------------------------------------------------------------------------------------------


def save_model_unpushed(trainer: Trainer, output_dir: str) -> None:
    """Trainer's `save_model(output_dir)` (every engine), without its upload to the Hub."""
    trainer.save_model(output_dir, _internal_call=True)


def save_weights(trainer: Trainer, output_dir: str, state_dict: dict[str, Any]) -> None:
    """What Trainer's final save writes, for the given full weights (gathered from FSDP's shards): weights and config,
    the tokenizer and the training arguments, written by the process that saves."""
    trainer._save(output_dir, state_dict=state_dict)


def load_checkpoint_weights(trainer: Trainer, checkpoint: str) -> None:
    """The weights of a Trainer checkpoint into the trainer's model, as Trainer's resume loads them (every layout:
    whole, sharded, `.bin`, a PEFT adapter)."""
    trainer._load_from_checkpoint(checkpoint)


def load_rng_state(trainer: Trainer, checkpoint: str) -> None:
    """The Python, NumPy, torch and accelerator RNG states Trainer saved in `checkpoint` for this process."""
    trainer._load_rng_state(checkpoint)


def push_checkpoint(trainer: Trainer, checkpoint: str) -> None:
    """Trainer's upload of a checkpoint: its model files copied into the output folder, the output folder uploaded,
    and with `hub_strategy` checkpoint / all_checkpoints the checkpoint itself, in huggingface_hub's background
    thread (the uploads started are in `trainer.push_in_progress.jobs`)."""
    trainer._push_from_checkpoint(checkpoint)
